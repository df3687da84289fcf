/* Per-head weight views (docs/analysis.md, "Heads"): TransformerLens's W_Q, W_K, W_V (H, D, d_h),
 * W_O (H, d_h, D), b_O (D), W_E (V, D), W_pos (max_pos, D) and W_U (D, V) as views of the fused
 * parameters — attention's Wqkv.weight (3D, D) holds q, k, v's rows [q | k | v], head h being rows
 * h·d_h .. (h+1)·d_h of each; out_proj.weight (D, D) holds head h in columns h·d_h ... The views
 * share the parameters' storage (writes go through) and carry their gradient. */
#include <stdio.h>
#include <string.h>

#include "interp/interp.h"
#include "ops/ops.h"

/* Parameter `suffix` of layer l's sequence mixer, or -1. */
static int mixer_param(const ml_model *m, int l, const char *suffix) {
    char name[160];
    snprintf(name, sizeof name, "backbone.layers.%d.sequence_mixer.%s", l, suffix);
    return ml_model_find_param(m, name);
}

/* perm applied to t viewed as shape (3 dims): a new view. */
static ml_tensor *view_permute(ml_tensor *t, const int64_t *shape, const int *perm) {
    ml_tensor *v = ml_view(t, 3, shape);
    ml_tensor *p = v ? ml_permute(v, perm) : NULL;
    ml_release(v);
    return p;
}

const char *const ml_head_weight_names[] = {"W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O",
                                            "W_E", "W_pos", "W_U", NULL};

ml_tensor *ml_head_weight(ml_model *m, int layer, const char *name) {
    const char *fn = "head_weight";
    int64_t D = m->cfg.d_model, H = ml_mixer_opt(&m->cfg, "n_heads"), dh = H > 0 ? D / H : 0;
    if (!strcmp(name, "W_E")) return ml_retain(ml_model_p(m, m->p_wte));
    if (!strcmp(name, "W_U")) return ml_transpose(ml_model_p(m, m->p_wte), 0, 1); /* the head is tied */
    if (!strcmp(name, "W_pos")) {
        if (!m->cfg.pos_emb) return ml_fail(ML_ERR_ARG, "%s: the model has no position table (pos_emb = false)", fn), NULL;
        return ml_retain(ml_model_p(m, m->p_wpe));
    }
    int k = -1;
    for (int i = 0; i < 8; i++)
        if (!strcmp(name, ml_head_weight_names[i])) k = i;
    if (k < 0)
        return ml_fail(ML_ERR_ARG, "%s: argument 2 expected W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, W_E, W_pos or W_U, got '%.40s'", fn,
                       name), NULL;
    if (layer < 0 || layer >= m->cfg.n_layers)
        return ml_fail(ML_ERR_ARG, "%s: argument 1 expected a layer in [0, %d), got %d", fn, m->cfg.n_layers, layer), NULL;
    int wqkv = mixer_param(m, layer, "Wqkv.weight"), wo = mixer_param(m, layer, "out_proj.weight");
    if (wqkv < 0 || wo < 0 || strcmp(ml_mixer_for_layer(&m->cfg, layer)->name, "attention"))
        return ml_fail(ML_ERR_ARG, "%s: layer %d's mixer is %s: per-head weights are attention's", fn, layer,
                       ml_mixer_for_layer(&m->cfg, layer)->name), NULL;
    if (k >= 4 && k < 7) return ml_fail(ML_ERR_ARG, "%s: attention has no %s (Wqkv has no bias)", fn, name), NULL;
    if (k == 7) return ml_retain(ml_model_p(m, mixer_param(m, layer, "out_proj.bias")));
    if (k == 3) return view_permute(ml_model_p(m, wo), (int64_t[]){D, H, dh}, (int[]){1, 2, 0});
    ml_tensor *rows = ml_narrow(ml_model_p(m, wqkv), 0, k * D, D); /* (D_out, D_in), head-major rows */
    ml_tensor *v = rows ? view_permute(rows, (int64_t[]){H, dh, D}, (int[]){0, 2, 1}) : NULL;
    ml_release(rows);
    return v;
}
