/* A patching map's rows and readout from its options (docs/interventions.md, "Patching maps"):
 * the rows (sites, a per-head site once per head), the row of each clean example where the answer
 * is read and the token it must predict. mech.interp.patching_map reads the options; the rules are
 * here. Errors name the option as a Lua caller sees it, after "patching_map: ". Also the patched
 * value of a per-head site, which path patching shares. */
#ifndef ML_INTERP_PM_OPTIONS_H
#define ML_INTERP_PM_OPTIONS_H

#include <stdbool.h>

#include "nn/model.h"
#include "tasks/task.h"

/* The map's scalar options (mech.interp.patching_map reads them with mlL_options over
 * ml_pm_options_init's defaults). */
typedef struct {
    int ablate;       /* -1: patch clean into corrupted; else ML_PM_ZERO + ablate ('zero', 'mean') */
    int64_t first;    /* the clean tokens are documents [first, first + B) of option 'dataset': 0 */
    double threshold; /* the map passes when its denominator is above it: 0.01 */
    double chance;    /* NAN: the task's chance (ml_task_chance), 1 / vocab without a task */
} ml_pm_options;
void ml_pm_options_init(ml_pm_options *o);

/* Whether site s has a head dimension: a per-head site mixer.head_* (B, L, H, ...). */
bool ml_site_per_head(const ml_model *m, int s);
/* The map's rows of the n sites: each site once, a per-head one once per head (heads[k] its head,
 * else -1). Writes rows and heads unless they are NULL; returns how many, or -1 when a site has no
 * position dimension. */
int ml_pm_rows(const ml_model *m, const int *sites, int n, int *rows, int *heads);
/* A fresh f32 copy of act with head h's slice (dim 2) taken from src, or of all of src when h < 0:
 * the patched value of a per-head site (patching maps and path patching); NULL on failure. */
ml_tensor *ml_with_head(ml_tensor *act, ml_tensor *src, int h);

/* rows[b] for the B clean examples (B, L) = where document first + b of ds answers (its target
 * item's position - 1, the first query for MQAR), after checking the clean tokens are those
 * documents. */
ml_status ml_pm_dataset_rows(const ml_dataset *ds, int64_t first, const ml_tensor *clean, int32_t *rows);
/* Checks the rows against the clean tokens' length and the targets against vocab; without
 * targets (has_targets false) each is set to the clean token after its row. */
ml_status ml_pm_check_readout(const ml_tensor *clean, int vocab, const int32_t *rows, int32_t *targets,
                              bool has_targets);

#endif
