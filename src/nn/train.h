/* One training update and one evaluation batch, in C (the hot path of the training loop).
 * Checkpoints are in nn/checkpoint.h (included here for the callers that use both). */
#ifndef ML_TRAIN_H
#define ML_TRAIN_H

#include "nn/checkpoint.h"
#include "nn/model.h"
#include "optim/optim.h"

typedef struct {
    double loss;      /* mean cross-entropy over supervised positions */
    int64_t correct;  /* argmax over the full vocabulary equals the target */
    int64_t n;        /* supervised positions */
    double prob;      /* sum over positions of the probability of the target */
} ml_batch_stats;

/* zero_grad, loss, backward, AdamW update with learning rate lr. */
ml_status ml_train_step(ml_model *m, ml_adamw *opt, ml_tensor *tokens, ml_tensor *targets, double lr,
                        ml_batch_stats *stats);
/* The same statistics without gradients or update. */
ml_status ml_eval_batch(ml_model *m, ml_tensor *tokens, ml_tensor *targets, ml_batch_stats *stats);

#endif
