/* The readout of a patching map (docs/interventions.md, "Patching maps"): the row of each clean
 * example where the answer is read, and the token it must predict. mech.interp.patching_map takes
 * them from its options (rows / targets, or a dataset); the checks, and the dataset's answers, are
 * here. Errors name the option as a Lua caller sees it, after "patching_map: ". */
#ifndef ML_INTERP_PM_READOUT_H
#define ML_INTERP_PM_READOUT_H

#include <stdbool.h>

#include "core/tensor.h"
#include "tasks/task.h"

/* rows[b] for the B clean examples (B, L) = where document first + b of ds answers (its target
 * item's position - 1, the first query for MQAR), after checking the clean tokens are those
 * documents. */
ml_status ml_pm_dataset_rows(const ml_dataset *ds, int64_t first, const ml_tensor *clean, int32_t *rows);
/* Checks the rows against the clean tokens' length and the targets against vocab; without
 * targets (has_targets false) each is set to the clean token after its row. */
ml_status ml_pm_check_readout(const ml_tensor *clean, int vocab, const int32_t *rows, int32_t *targets,
                              bool has_targets);

#endif
