/* The model run token by token through every mixer's recurrent form (docs/mixers.md: each
 * mixer's "Recurrent form"). Same blocks as model.c's forward, one position at a time:
 *   r = E[x_t] (+ P[t]);  per layer: r += mixer.step(norm(r)); r += state_mixer(LN2(r));
 *   h_t = LN_f(r).
 * No hooks, no gradients. The result equals ml_model_hidden up to float rounding. */
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "ops/kernels.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"

ml_status ml_lc_history_init(ml_lc_history *h, int64_t B, int64_t D) {
    h->B = B, h->D = D, h->t = 0;
    h->u = malloc(sizeof(float) * (size_t)(B * ML_FILTER_LMAX * D + 1));
    return h->u ? ML_OK : ml_fail(ML_ERR_MEM, "model: out of memory");
}

void ml_lc_history_free(ml_lc_history *h) {
    free(h->u);
    h->u = NULL;
}

ml_status ml_lc_history_step(ml_lc_history *h, const float *u, const float *k, float *y, const char *who) {
    if (h->t >= ML_FILTER_LMAX)
        return ml_fail(ML_ERR_SHAPE, "%s: sequence length exceeds l_max %d", who, ML_FILTER_LMAX);
    for (int64_t b = 0; b < h->B; b++)
        memcpy(h->u + (b * ML_FILTER_LMAX + h->t) * h->D, u + b * h->D, sizeof(float) * (size_t)h->D);
    mlk_longconv_step((int)h->B, ML_FILTER_LMAX, (int)h->D, 1, (int)h->t, h->u, k, NULL, y);
    h->t++;
    return ML_OK;
}

static ml_tensor *swap(ml_tensor *old, ml_tensor *nw) {
    ml_release(old);
    return nw;
}

/* One block on r (B, D); returns the new residual or NULL. */
static ml_tensor *block_step(ml_model *m, int l, void *rec, ml_tensor *r) {
    ml_layer *L = &m->layers[l];
    ml_tensor *a = L->mixer->mamba_block ? ml_rms_norm(r, ml_model_p(m, m->p_norm1_w[l]), 1e-5)
                                         : ml_layer_norm(r, ml_model_p(m, m->p_norm1_w[l]),
                                                         ml_model_p(m, m->p_norm1_b[l]), 1e-5);
    ml_tensor *y = a ? L->mixer->rec_step(m, l, L->state, rec, a) : NULL;
    ml_tensor *out = y ? ml_add(r, y) : NULL;
    ml_release(a), ml_release(y);
    if (!out || L->mixer->mamba_block) return out;
    ml_tensor *c = ml_layer_norm(out, ml_model_p(m, m->p_norm2_w[l]), ml_model_p(m, m->p_norm2_b[l]), 1e-5);
    ml_tensor *z = !c ? NULL : m->p_fc1_w[l] >= 0 ? ml_state_mixer_forward(m, l, c, NULL) : ml_retain(c);
    ml_release(c);
    out = z ? swap(out, ml_add(out, z)) : swap(out, NULL);
    ml_release(z);
    return out;
}

static ml_tensor *hidden_recurrent(ml_model *m, ml_tensor *tokens);

ml_tensor *ml_model_hidden_recurrent(ml_model *m, ml_tensor *tokens) {
    ml_precision saved;
    if (ml_model_precision_enter(m, "forward_recurrent", &saved)) return NULL;
    ml_tensor *h = hidden_recurrent(m, tokens);
    ml_model_precision_leave(saved);
    return h;
}

static ml_tensor *hidden_recurrent(ml_model *m, ml_tensor *tokens) {
    const ml_model_config *c = &m->cfg;
    if (tokens->dtype != ML_I32 || tokens->ndim != 2) {
        char s[ML_SHAPE_STR];
        ml_fail(ML_ERR_SHAPE, "forward_recurrent: argument 1 expected an int32 tensor of shape [B,L], got %s %s",
                ml_dtype_name(tokens->dtype), ml_shape_str(s, tokens->ndim, tokens->shape));
        return NULL;
    }
    int64_t B = tokens->shape[0], L = tokens->shape[1], D = c->d_model;
    if (c->pos_emb && L > c->max_pos) {
        ml_fail(ML_ERR_SHAPE, "forward_recurrent: sequence length %lld exceeds the position table (%d)", (long long)L,
                c->max_pos);
        return NULL;
    }
    for (int l = 0; l < c->n_layers; l++)
        if (!m->layers[l].mixer->rec_step) {
            ml_fail(ML_ERR_ARG, "forward_recurrent: mixer '%s' has no recurrent form", m->layers[l].mixer->name);
            return NULL;
        }
    bool old = ml_set_grad_enabled(false);
    void *recs[ML_MAX_LAYERS] = {0};
    ml_tensor *out = ml_empty(ML_F32, 3, (int64_t[]){B, L, D}), *tc = ml_contiguous(tokens);
    bool ok = out && tc;
    for (int l = 0; ok && l < c->n_layers; l++)
        ok = (recs[l] = m->layers[l].mixer->rec_new(m, l, m->layers[l].state, B)) != NULL;
    ml_tensor *ids = ok ? ml_empty(ML_I32, 1, &B) : NULL;
    ok = ok && ids;
    for (int64_t t = 0; ok && t < L; t++) {
        for (int64_t b = 0; b < B; b++) ml_i32(ids)[b] = ml_i32(tc)[b * L + t];
        ml_tensor *r = ml_embedding(ml_model_p(m, m->p_wte), ids); /* (B, D) */
        if (r && c->pos_emb) {
            ml_tensor *pos = ml_select(ml_model_p(m, m->p_wpe), 0, t);
            r = pos ? swap(r, ml_add(r, pos)) : swap(r, NULL);
            ml_release(pos);
        }
        for (int l = 0; r && l < c->n_layers; l++) r = swap(r, block_step(m, l, recs[l], r));
        ml_tensor *h = r ? ml_model_final_norm(m, r) : NULL;
        ml_tensor *hc = h ? ml_contiguous(h) : NULL;
        if (hc)
            for (int64_t b = 0; b < B; b++)
                memcpy(ml_f32(out) + (b * L + t) * D, ml_f32(hc) + b * D, sizeof(float) * (size_t)D);
        ok = hc != NULL;
        ml_release(r), ml_release(h), ml_release(hc);
    }
    for (int l = 0; l < c->n_layers; l++)
        if (recs[l]) m->layers[l].mixer->rec_free(recs[l]);
    ml_release(ids), ml_release(tc);
    ml_set_grad_enabled(old);
    if (!ok) {
        ml_release(out);
        return NULL;
    }
    return out;
}
