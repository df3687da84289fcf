/* Internal interface between the model (model.c), the state mixers (mlp.c) and the sequence
 * mixers (mixer_*.c). */
#ifndef ML_NN_H
#define ML_NN_H

#include "nn/model.h"

/* State mixer of a TransformerBlock (architectures.md §3): MLP or GLU with hidden 4D; "none"
 * declares nothing. Sites mlp.hidden_pre / mlp.hidden_post (B, L, 4D). */
ml_status ml_build_state_mixer(ml_model *m, int l);
ml_tensor *ml_state_mixer_forward(ml_model *m, int l, ml_tensor *x, ml_run *run);

/* Helpers for mixers: x = site(x) in place; false on error (x released and set to NULL). */
bool ml_at_site(ml_run *run, int layer, const char *name, ml_tensor **x);

/* The registered sequence mixers. */
extern const ml_mixer_type ml_mixer_attention;

#endif
