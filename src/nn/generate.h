/* Text out: sampling continuations from a model (model:generate). */
#ifndef ML_GENERATE_H
#define ML_GENERATE_H

#include <stdint.h>

#include "nn/model.h"

typedef struct {
    int max_new;        /* tokens to append (>= 0) */
    double temperature; /* 0: greedy (argmax); > 0: sample from softmax(logits / temperature) */
    int top_k;          /* > 0: sample among the k most likely tokens only; 0: all */
    uint64_t seed;      /* the draws: Philox stream (seed, ML_STREAM_INTERP), the same on every machine */
} ml_generate_config;

/* tokens (B, L) int32 -> (B, L + max_new): each step runs the whole prefix (no gradients) and
 * appends one token per sequence chosen from the last position's logits. NULL with an error
 * when the result would exceed the position table (max_pos) or memory runs out. */
ml_tensor *ml_generate(ml_model *m, ml_tensor *tokens, const ml_generate_config *c);

#endif
