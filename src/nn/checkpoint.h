/* Checkpoints (checkpoint.c): the config as JSON and safetensors files with the parameters, the
 * optimiser state and the config. */
#ifndef ML_CHECKPOINT_H
#define ML_CHECKPOINT_H

#include "nn/model.h"
#include "optim/optim.h"

/* Config <-> JSON text (malloc'd) for checkpoints and manifests. */
char *ml_config_to_json(const ml_model_config *cfg);
ml_status ml_config_from_json(const char *text, ml_model_config *cfg);

/* Saves parameters under their state-dict names, the optimiser moments (when opt is not NULL)
 * as optimizer.exp_avg / optimizer.exp_avg_sq, and metadata: mechlab.config (JSON), the
 * optimiser's hyper-parameters and step, plus n_meta caller pairs. Atomic. */
ml_status ml_checkpoint_save(const char *path, const ml_model *m, const ml_adamw *opt, int n_meta,
                             const char *const *keys, const char *const *values);
/* Loads a checkpoint into a new model (and, when opt is not NULL and the file has moments, a new
 * optimiser state). Everything is validated before anything is returned: on error nothing is
 * allocated. *meta receives the open file for reading caller metadata (close it). */
typedef struct ml_safetensors ml_safetensors;
ml_model *ml_checkpoint_load(const char *path, ml_adamw *opt, bool *has_opt, ml_safetensors **meta);

#endif
