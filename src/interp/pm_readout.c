/* The readout rows and targets of a patching map (pm_readout.h). */
#include "interp/pm_readout.h"

ml_status ml_pm_dataset_rows(const ml_dataset *ds, int64_t first, const ml_tensor *clean, int32_t *rows) {
    int64_t B = clean->shape[0], Lq = clean->shape[1], n = ml_dataset_size(ds);
    if (first < 0 || first + B > n)
        return ml_fail(ML_ERR_ARG, "patching_map: option 'first' expected documents [first, first + %d) within the "
                                   "dataset's %d, got %d", (int)B, (int)n, (int)first);
    for (int64_t b = 0; b < B; b++) {
        int len;
        const int32_t *doc = ml_dataset_tokens(ds, first + b, &len);
        int32_t pos[ML_NPOS];
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
            return ml_fail(ML_ERR_ARG, "patching_map: option 'rows' expected rows in [0, %d), got %d", (int)Lq, (int)rows[b]);
        if (!has_targets && rows[b] + 1 >= Lq)
            return ml_fail(ML_ERR_ARG, "patching_map: row %d is the last position: option 'targets' is needed", (int)rows[b]);
        if (!has_targets) targets[b] = (int32_t)ml_get_flat(clean, b * Lq + rows[b] + 1);
        if (targets[b] < 0 || targets[b] >= vocab)
            return ml_fail(ML_ERR_ARG, "patching_map: option 'targets' expected token ids in [0, %d), got %d", vocab,
                           (int)targets[b]);
    }
    return ML_OK;
}
