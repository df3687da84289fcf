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
 * optimiser's hyper-parameters and step, plus n_meta caller pairs. With `torch`, the file is
 * the full PyTorch state dict: the torch keys (lm_head.weight, Hyena's buffers and Sin aliases)
 * are written too, and an optimiser is refused (PyTorch's strict load_state_dict would meet its
 * keys). Atomic. */
ml_status ml_checkpoint_save(const char *path, const ml_model *m, const ml_adamw *opt, bool torch, int n_meta,
                             const char *const *keys, const char *const *values);

/* Model options for a file without mechlab metadata (a PyTorch state dict): cfg, with given[i]
 * set for each option ml_model_option_at(i) the caller chose. For a mechlab checkpoint, the
 * given options must equal the file's config. */
enum { ML_LOAD_MAX_OPTIONS = 32 };
typedef struct {
    ml_model_config cfg;
    bool given[ML_LOAD_MAX_OPTIONS];
} ml_load_options;

/* Loads a checkpoint into a new model (and, when opt is not NULL and the file has moments, a new
 * optimiser state). The config comes from the metadata, else from `options` (NULL: none). Every
 * name, dtype and shape, the metadata and the optimiser state are validated against the config
 * before the model is allocated, so a file cannot make the loader allocate more than its own
 * size; torch keys must equal what they alias or what the model computes. On error nothing is
 * allocated. *meta receives the open file for reading caller metadata (close it). */
typedef struct ml_safetensors ml_safetensors;
ml_model *ml_checkpoint_load(const char *path, const ml_load_options *options, ml_adamw *opt, bool *has_opt,
                             ml_safetensors **meta);

/* The config a mechlab checkpoint at path records (its metadata "mechlab.config"), read without
 * the tensors: false when the file cannot be read or records none (ml_checkpoint_load says why). */
bool ml_checkpoint_config(const char *path, ml_model_config *cfg);

#endif
