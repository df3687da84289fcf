/* Internal interface between the model (model.c), the state mixers (mlp.c) and the sequence
 * mixers (mixer_*.c). */
#ifndef ML_NN_H
#define ML_NN_H

#include "nn/model.h"

/* State mixer of a TransformerBlock (docs/mixers.md, "State mixers"): MLP or GLU with hidden 4D; "none"
 * declares nothing. Sites mlp.hidden_pre / mlp.hidden_post (B, L, 4D). */
ml_status ml_build_state_mixer(ml_model *m, int l);
ml_tensor *ml_state_mixer_forward(ml_model *m, int l, ml_tensor *x, ml_run *run);

/* Helpers for mixers: x = site(x) in place; false on error (x released and set to NULL). */
bool ml_at_site(const ml_model *m, ml_run *run, int site, ml_tensor **x);
/* x (B, L, H·d) at the per-head site `site` seen as (B, L, H, d), back to (B, L, H·d); untouched
 * when the site is not hooked (reshapes: observing it changes no bit). */
bool ml_at_head_site(const ml_model *m, ml_run *run, int site, int64_t H, ml_tensor **x);
/* Whether a hook (the run's or the model's persistent ones) may see the sites of this forward:
 * a fused path that skips sites may run only when none can. */
bool ml_model_hooked(const ml_model *m, const ml_run *run);

/* Positional features of the implicit filters (docs/mixers.md, "Convolutions"), on the l_max grid: z[i] = [t_i, cos ω_i,
 * −sin ω_i] with t = linspace(0, 1, l_max) and ω_i = 2π·10⁻⁴·i/l_max (z: [l_max, 3], t: [l_max]). */
enum { ML_FILTER_LMAX = 1024 };
void ml_implicit_pos_features(int lmax, float *z, float *t);

/* The recurrent form of a causal long convolution (BaseConv, Hyena): the inputs so far, per
 * sequence, in the layout of the kernel's step (B, ML_FILTER_LMAX, D). */
typedef struct {
    int64_t B, D, t;
    float *u;
} ml_lc_history;
ml_status ml_lc_history_init(ml_lc_history *h, int64_t B, int64_t D);
void ml_lc_history_free(ml_lc_history *h);
/* Appends u_t (B, D) and writes y_t = Σ_{s<=t} k[s]·u_{t−s} (B, D) with the filter k (ML_FILTER_LMAX,
 * D); an error naming `who` past ML_FILTER_LMAX positions. */
ml_status ml_lc_history_step(ml_lc_history *h, const float *u, const float *k, float *y, const char *who);
/* torch.linspace(a, b, n) in float32 (the halves are filled from opposite ends, as torch does). */
void ml_linspace_f32(double a, double b, int n, float *out);

/* Hyena's implicit filter (docs/mixers.md, "Hyena"), composed from generic ops: z (L, 3); W1 (W, 3); b1, b2, b3 (W);
 * W2, W3 (W, W); f (W) or (1, W), the shared Sin frequencies; W4 (C, W); decay (L, C) from
 * ml_hyena_decay. Returns k (L, C) = (W4·sin(f⊙(W3·sin(f⊙(W2·sin(f⊙(W1 z + b1)) + b2)) + b3)))⊙decay. */
ml_tensor *ml_hyena_filter(ml_tensor *z, ml_tensor *W1, ml_tensor *b1, ml_tensor *W2, ml_tensor *b2, ml_tensor *W3,
                           ml_tensor *b3, ml_tensor *f, ml_tensor *W4, ml_tensor *decay);
/* decay[i, c] = exp(−t_i·|deltas_c|), i < L: t (≥ L entries, any shape), deltas (C entries, any shape). */
ml_tensor *ml_hyena_decay(ml_tensor *t, ml_tensor *deltas, int L);

#endif
