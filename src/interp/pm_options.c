/* A patching map's rows and readout from its options (pm_options.h). */
#include <math.h>
#include <string.h>

#include "interp/interp.h"
#include "interp/pm_options.h"

const char *const ml_pm_metric_names[] = {"prob", "logprob", "logit", "function", NULL};
const char *const ml_pm_ablation_names[] = {"zero", "mean", NULL};

void ml_pm_options_init(ml_pm_options *o) { *o = (ml_pm_options){.ablate = -1, .first = 0, .threshold = 0.01, .chance = NAN}; }

bool ml_site_per_head(const ml_model *m, int s) {
    const ml_site_decl *d = &m->sites[s];
    return !strncmp(d->name, "mixer.head_", 11) && d->ndim == 4 && d->shape[2] == (int)ml_mixer_opt(&m->cfg, "n_heads");
}

ml_tensor *ml_with_head(ml_tensor *act, ml_tensor *src, int h) {
    if (h < 0) return ml_copy_contiguous(src, ML_F32);
    ml_tensor *out = ml_copy_contiguous(act, ML_F32);
    ml_tensor *dst = out ? ml_narrow(out, 2, h, 1) : NULL, *from = dst ? ml_narrow(src, 2, h, 1) : NULL;
    if (from) ml_copy_raw(dst, from);
    ml_release(dst);
    if (!from) ml_release(out), out = NULL;
    ml_release(from);
    return out;
}

int ml_pm_rows(const ml_model *m, const int *sites, int n, int *rows, int *heads) {
    int k = 0, H = (int)ml_mixer_opt(&m->cfg, "n_heads");
    for (int r = 0; r < n; r++) {
        if (ml_site_pos_dim(m, sites[r]) < 0)
            return ml_fail(ML_ERR_ARG, "patching_map: component '%s' has no position dimension; it cannot be patched "
                                       "per position", m->sites[sites[r]].name), -1;
        for (int h = 0; h < (ml_site_per_head(m, sites[r]) ? H : 1); h++, k++)
            if (rows) rows[k] = sites[r], heads[k] = ml_site_per_head(m, sites[r]) ? h : -1;
    }
    return k;
}

ml_status ml_pm_dataset_rows(const ml_dataset *ds, int64_t first, const ml_tensor *clean, int32_t *rows) {
    int64_t B = clean->shape[0], Lq = clean->shape[1], n = ml_dataset_size(ds);
    if (first < 0 || first > n - B) /* first + B could overflow */
        return ml_fail(ML_ERR_ARG, "patching_map: option 'first': expected documents [first, first + %d) within the "
                                   "dataset's %d, got %d", (int)B, (int)n, (int)first);
    for (int64_t b = 0; b < B; b++) {
        int len;
        const int32_t *doc = ml_dataset_tokens(ds, first + b, &len);
        int32_t pos[ML_MAX_POS];
        bool same = len <= Lq && ml_dataset_readout_positions(ds, first + b, 0, pos) == ML_OK;
        for (int t = 0; same && t < len; t++) same = (int32_t)ml_get_flat(clean, b * Lq + t) == doc[t];
        if (!same)
            return ml_fail(ML_ERR_ARG, "patching_map: option 'dataset': clean example %d is not document %d of the "
                                       "dataset (option 'first')", (int)b, (int)(first + b));
        rows[b] = pos[ML_POS_TARGET_ITEM] - 1;
        if (rows[b] < 0) return ml_fail(ML_ERR_ARG, "patching_map: document %d has no answer position", (int)(first + b));
    }
    return ML_OK;
}

ml_status ml_pm_check_readout(const ml_tensor *clean, int vocab, const int32_t *rows, int32_t *targets,
                              bool has_targets) {
    int64_t B = clean->shape[0], Lq = clean->shape[1];
    for (int64_t b = 0; b < B; b++) {
        if (rows[b] < 0 || rows[b] >= Lq)
            return ml_fail(ML_ERR_ARG, "patching_map: option 'rows': expected rows in [0, %d), got %d", (int)Lq, (int)rows[b]);
        if (!has_targets && rows[b] + 1 >= Lq)
            return ml_fail(ML_ERR_ARG, "patching_map: row %d is the last position: option 'targets' is needed", (int)rows[b]);
        if (!has_targets) targets[b] = (int32_t)ml_get_flat(clean, b * Lq + rows[b] + 1);
        if (targets[b] < 0 || targets[b] >= vocab)
            return ml_fail(ML_ERR_ARG, "patching_map: option 'targets': expected token ids in [0, %d), got %d", vocab,
                           (int)targets[b]);
    }
    return ML_OK;
}
