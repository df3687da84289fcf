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
    int nonfinite;    /* train step with a NaN or infinite loss: the first non-finite parameter, or -1
                         when the parameters are finite; -1 as well when the loss is finite */
} ml_batch_stats;

/* What a training step does when its loss is NaN or infinite. */
typedef enum {
    ML_NONFINITE_STOP,  /* fail with a message naming the step and the first non-finite parameter;
                           no backward, no update: the model stays as it was */
    ML_NONFINITE_KEEP   /* update as usual; stats->nonfinite tells (the caller records it) */
} ml_nonfinite_policy;

/* zero_grad, loss, backward, AdamW update with learning rate lr. The loss is checked once per
 * step (a scalar); parameters are scanned only when it is not finite. */
ml_status ml_train_step(ml_model *m, ml_adamw *opt, ml_tensor *tokens, ml_tensor *targets, double lr,
                        ml_nonfinite_policy policy, ml_batch_stats *stats);
/* The same statistics without gradients or update. */
ml_status ml_eval_batch(ml_model *m, ml_tensor *tokens, ml_tensor *targets, ml_batch_stats *stats);

#endif
