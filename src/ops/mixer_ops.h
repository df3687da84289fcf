/* Differentiable ops of the sequence mixers (docs/mixers.md), wrapping the raw
 * kernels of ops/kernels.h. Activations are token-major (B, L, channels); heads live in the last
 * dim (channel = h·d + i), as in the original code. Every op validates dtypes and shapes (errors
 * name the op and the 1-based argument), reads contiguous copies of its inputs, and records a node
 * with a hand-written backward when an input needs grad.
 *
 * Internal quantities for hooks and interventions:
 *  - ops with a recurrent state take an optional initial state (h0, S0; differentiable) and can
 *    return every state and the last state (detached tensors, for observation);
 *  - REPLACING a state at step p composes from these: run the op on [0, p), then on [p, L) with
 *    the patched state as h0/S0. For the selective scan, "replace h_p" is: run [0, p], then run
 *    [p, L) with h0 = patched h_p and Δ at position p set to 0 (a_p = 1 and Δ_p·B_p·u_p = 0, so
 *    the state after step p is exactly the patched one and y_p = C_p·h_p + D·u_p is recomputed);
 *  - the filters of long convolutions are ordinary tensors (hook the filter, or the conv output).
 *
 * Each op lives beside the kernel it wraps (conv1d.c, longconv.c, selective_scan.c,
 * linear_attention.c, delta_rule.c, h3.c). The Hyena and BaseConv filter MLPs need no op here:
 * they are composed from generic ops in their mixers (ml_hyena_filter in nn/mixer_hyena.c). */
#ifndef ML_MIXER_OPS_H
#define ML_MIXER_OPS_H

#include "autograd/autograd.h"

/* Causal depthwise conv SC_K (docs/mixers.md, "Convolutions"). x (B, L, C), w (C, K) or (C, 1, K) [w[:, K−1] multiplies the
 * current token], bias (C) or NULL -> (B, L, C). */
ml_tensor *ml_causal_conv1d(ml_tensor *x, ml_tensor *w, ml_tensor *bias);

/* SiLU(SC_K(x)) fused (Mamba's conv with activation "silu"; DeltaNet's q/k/v convs). */
ml_tensor *ml_causal_conv1d_silu(ml_tensor *x, ml_tensor *w, ml_tensor *bias);

/* Direct causal long conv (docs/mixers.md, "Convolutions"): y[b,t,c] = Σ_{s≤t} k[s, c/G]·u[b,t−s,c] + dskip[c/G]·u[b,t,c].
 * u (B, L, C); k (Lk, C/G) position-major with Lk ≥ L (rows ≥ L are unused: filters defined on the
 * 1024-grid can be passed whole); dskip (C/G) or NULL; G ≥ 1 channels share a filter. */
ml_tensor *ml_long_conv(ml_tensor *u, ml_tensor *k, ml_tensor *dskip, int G);

/* Mamba's selective scan (docs/mixers.md, "Mamba"). u, delta (B, L, E) (delta after softplus); A (E, N) (= −exp(A_log));
 * Bm, Cm (B, L, N); D (E) or NULL; h0 (B, E, N) or NULL (zeros). Returns y (B, L, E).
 * states (optional out): every h_t (B, L, E, N); hlast (optional out): h_{L−1} (B, E, N); both detached. */
ml_tensor *ml_selective_scan(ml_tensor *u, ml_tensor *delta, ml_tensor *A, ml_tensor *Bm, ml_tensor *Cm,
                             ml_tensor *D, ml_tensor *h0, ml_tensor **states, ml_tensor **hlast);
/* The fused form of mamba's selective_scan_fn: delta is the raw dt_proj output (its bias folded
 * in by ml_linear) and Δ = softplus(delta) (threshold 20) when delta_softplus; when z (B, L, E) is
 * given the output is gated, y ⊙ silu(z). Saves three elementwise ops and their backward passes. */
ml_tensor *ml_selective_scan_ex(ml_tensor *u, ml_tensor *delta, ml_tensor *A, ml_tensor *Bm, ml_tensor *Cm,
                                ml_tensor *D, ml_tensor *z, ml_tensor *h0, bool delta_softplus, ml_tensor **states,
                                ml_tensor **hlast);
/* Mamba's implicit attention α (B, E, L, L): y[b,t,e] = Σ_s α[b,e,t,s]·u[b,s,e] (D on the diagonal
 * when D is given). Not differentiable (an analysis quantity). */
ml_tensor *ml_selective_scan_attention(ml_tensor *delta, ml_tensor *A, ml_tensor *Bm, ml_tensor *Cm, ml_tensor *D);

/* Based linear attention, Taylor feature map, quadratic causal view (docs/mixers.md, "Based"). q, k (B, L, H·F) with
 * F ≤ 16; v (B, L, H·Dv). y_t = Σ_{s≤t} A[t,s] v_s / (Σ_{s≤t} A[t,s] + eps), A = φ(q_t)·φ(k_s).
 * pattern (optional out): A[t,s]/den_t (B, H, L, L), detached. Returns (B, L, H·Dv). */
ml_tensor *ml_based_linear_attention(ml_tensor *q, ml_tensor *k, ml_tensor *v, int n_heads, double eps,
                                     ml_tensor **pattern);
/* The recurrent view's states after every token (the kv_state hook site), detached: returns
 * S (B, L, H, P, Dv) with S_t = Σ_{s≤t} φ(k_s) v_sᵀ, P = 1 + F + F², and, if zsum is not NULL,
 * *zsum = Σ_{s≤t} φ(k_s) (B, L, H, P). k (B, L, H·F), v (B, L, H·Dv). */
ml_tensor *ml_based_kv_state(ml_tensor *k, ml_tensor *v, int n_heads, ml_tensor **zsum);
/* The Taylor feature map φ: x (..., F) -> (..., 1 + F + F²) (the feat_q / feat_k hook sites). */
ml_tensor *ml_taylor_features(ml_tensor *x);

/* DeltaNet's delta rule (docs/mixers.md, "DeltaNet"), per head: vold = S_{t−1}ᵀk_t, u = β(v − vold), S_t = S_{t−1} + k uᵀ,
 * o_t = scale·S_tᵀ q_t. q, k (B, L, H·Dk) (already L2-normalised); v (B, L, H·Dv); beta (B, L, H);
 * S0 (B, H, Dk, Dv) or NULL. Returns o (B, L, H·Dv). states (optional out): (B, L, H, Dk, Dv);
 * Slast (optional out): (B, H, Dk, Dv); both detached. */
ml_tensor *ml_delta_rule(ml_tensor *q, ml_tensor *k, ml_tensor *v, ml_tensor *beta, int n_heads, double scale,
                         ml_tensor *S0, ml_tensor **states, ml_tensor **Slast);
/* x / sqrt(‖x‖² + eps) over the last dim (view (B, L, H, d) to normalise per head). */
ml_tensor *ml_l2_normalize(ml_tensor *x, double eps);

/* H3 (docs/mixers.md, "H3"). Shift-SSM kernel K (L, C) from B (C, N) and C (C, N) or (1, C, N); L ≤ N. */
ml_tensor *ml_h3_shift_kernel(ml_tensor *B, ml_tensor *C, int L);
/* Diagonal S4D kernel K (L, H) from C (H, M, 2) or (1, H, M, 2), log_dt (H), B (H, M, 2),
 * inv_A_real (H, M), A_imag (H, M). */
ml_tensor *ml_s4d_kernel(ml_tensor *C, ml_tensor *log_dt, ml_tensor *B, ml_tensor *inv_A_real, ml_tensor *A_imag,
                         int L);
/* kv[b,t, h·4 + d1·2 + d2] = kt[b,t,2h+d1]·v[b,t,2h+d2]: kt, v (B, L, 2H) -> (B, L, 4H). Then
 * ml_long_conv(kv, K_dg, D, 4) is the diagonal SSM (the 4 channels of head h share K_dg[:, h]). */
ml_tensor *ml_h3_outer(ml_tensor *kt, ml_tensor *v);
/* o[b,t, d2·H + h] = Σ_d1 q[b,t,2h+d1]·yk[b,t,h·4+d1·2+d2]: q (B, L, 2H), yk (B, L, 4H) -> (B, L, 2H)
 * in the original's transposed (d2, h) output channel order. */
ml_tensor *ml_h3_gate(ml_tensor *q, ml_tensor *yk);

#endif
