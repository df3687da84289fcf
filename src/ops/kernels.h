/* Raw kernels of the sequence mixers and of the linear layers' product (the maths of each mixer:
 * docs/mixers.md; conventions: docs/kernels.md): plain C on contiguous float arrays, no tensors,
 * no autograd. The autograd ops (ops/mixer_ops.h, ml_linear) wrap them.
 *
 * Conventions shared by every kernel:
 *  - Activations are token-major: x[B,L,C] means x[(b*L + t)*C + c].
 *  - Filters of long convolutions are position-major too: k[L,F] means k[s*F + f] (the filter MLPs
 *    produce one row per position, and the inner loops then run over contiguous channels).
 *  - Backward functions OVERWRITE their gradient outputs (never accumulate); any gradient pointer
 *    may be NULL when that gradient is not wanted.
 *  - Parameter gradients that sum over the batch are formed per batch element (or per channel) and
 *    summed in a fixed order, so results are bit-identical for any thread count.
 *  - Loops over independent batch elements run with OpenMP on ml_threads() threads. Scratch memory
 *    (when needed) is allocated once per call, never in an inner loop; functions that allocate
 *    return 0 on success and -1 when out of memory.
 *  - Step functions advance a recurrent state by one token; running them over a sequence equals
 *    the parallel forward (up to float rounding). */
#ifndef ML_KERNELS_H
#define ML_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- causal depthwise short convolution SC_K (docs/kernels.md, "Convolutions"), conv1d.c ----
 * y[b,t,c] = bias[c] + Σ_{j<K} w[c,j]·x[b, t-(K-1)+j, c]   (x = 0 before t = 0)
 * x, y, dx, dy: [B,L,C];  w, dw: [C,K];  bias, dbias: [C] (bias may be NULL). */
void mlk_conv1d_fwd(int B, int L, int C, int K, const float *x, const float *w, const float *bias, float *y);
void mlk_conv1d_bwd(int B, int L, int C, int K, const float *x, const float *w, const float *dy, float *dx,
                    float *dw, float *dbias);
/* The same with input rows ldx ≥ C floats apart (x a column slice of a wider [B,L,ldx] tensor,
 * e.g. Mamba's x-branch of in_proj): no copy. */
void mlk_conv1d_fwd_ld(int B, int L, int C, int K, const float *x, int ldx, const float *w, const float *bias,
                       float *y);
void mlk_conv1d_bwd_ld(int B, int L, int C, int K, const float *x, int ldx, const float *w, const float *dy,
                       float *dx, float *dw, float *dbias);
/* state: [B,C,K-1], the last K-1 inputs, oldest first (zeros at the start of a sequence);
 * x, y: [B,C]. Shifts x into the state and writes the conv output. K = 1 keeps no state. */
void mlk_conv1d_step(int B, int C, int K, float *state, const float *x, const float *w, const float *bias,
                     float *y);

/* ---- direct causal long convolution LC (docs/kernels.md, "Convolutions"), longconv.c ----
 * Channel c of u uses filter column f = c / G (G channels share one filter; G = 1: per channel):
 *   y[b,t,c] = Σ_{s≤t} k[s, c/G]·u[b,t-s,c]  +  dskip[c/G]·u[b,t,c]
 * u, y, du, dy: [B,L,C];  k, dk: [L, C/G];  dskip, ddskip: [C/G] (dskip may be NULL: no skip term).
 * The filter is shared by the batch. O(B·L²·C), exact. */
void mlk_longconv_fwd(int B, int L, int C, int G, const float *u, const float *k, const float *dskip, float *y);
void mlk_longconv_bwd(int B, int L, int C, int G, const float *u, const float *k, const float *dskip,
                      const float *dy, float *du, float *dk, float *ddskip);
/* One step over a history: hist[B,Lmax,C] holds u[0..t] (the caller has written u_t at row t);
 * y[B,C] = output at position t. k holds at least t+1 rows. */
void mlk_longconv_step(int B, int Lmax, int C, int G, int t, const float *hist, const float *k, const float *dskip,
                       float *y);

/* ---- Mamba selective scan (docs/mixers.md, "Mamba"), selective_scan.c ----
 * h_t[e,n] = exp(Δ[t,e]·A[e,n])·h_{t-1}[e,n] + Δ[t,e]·Bm[t,n]·u[t,e],   h_{-1} = h0 (or 0)
 * y[t,e]   = Σ_n Cm[t,n]·h_t[e,n] + D[e]·u[t,e]
 * u, delta, y: [B,L,E] (delta after softplus, ≥ 0);  A: [E,N] (= −exp(A_log), ≤ 0: the decays use an
 * exp specialised to arguments ≤ 0, undefined above 88);  Bm, Cm: [B,L,N];
 * D: [E] or NULL;  h0: [B,E,N] or NULL (zeros);  hs (out, optional): [B,L,E,N] every h_t;
 * hlast (out, optional): [B,E,N] = h_{L-1}. Returns 0, or -1 when scratch allocation fails. */
int mlk_sscan_fwd(int B, int L, int E, int N, const float *u, const float *delta, const float *A, const float *Bm,
                  const float *Cm, const float *D, const float *h0, float *y, float *hs, float *hlast);
/* Exact reverse-scan backward. dy: [B,L,E]; gradients shaped like their inputs (dA [E,N], dD [E],
 * dh0 [B,E,N]). hs may be the states saved by the forward, or NULL to recompute them (per batch
 * element, in L2-sized scratch). Returns 0, or -1 when scratch allocation fails. */
int mlk_sscan_bwd(int B, int L, int E, int N, const float *u, const float *delta, const float *A, const float *Bm,
                  const float *Cm, const float *D, const float *h0, const float *hs, const float *dy, float *du,
                  float *ddelta, float *dA, float *dBm, float *dCm, float *dD, float *dh0);
/* One token: h[B,E,N] updated in place; u, delta, y: [B,E]; Bm, Cm: [B,N]. */
void mlk_sscan_step(int B, int E, int N, float *h, const float *u, const float *delta, const float *A,
                    const float *Bm, const float *Cm, const float *D, float *y);
/* Mamba's implicit attention: alpha[b,e,t,s] = Σ_n Cm[t,n]·(Π_{r=s+1..t} exp(Δ[r,e]A[e,n]))·Δ[s,e]·Bm[s,n]
 * for s ≤ t (0 above the diagonal), plus D[e] on the diagonal when D is not NULL, so that
 * y[b,t,e] = Σ_s alpha[b,e,t,s]·u[b,s,e] (with h0 = 0). alpha: [B,E,L,L]; N ≤ 256. */
void mlk_sscan_attention(int B, int L, int E, int N, const float *delta, const float *A, const float *Bm,
                         const float *Cm, const float *D, float *alpha);

/* ---- Based linear attention with the Taylor feature map (docs/mixers.md, "Based"), linear_attention.c ----
 * Per head: s = q_t·k_s/√F, A[t,s] = φ(q_t)·φ(k_s) = 1 + s + s²/2 (s ≤ t), 0 above the diagonal,
 * y_t = Σ_{s≤t} A[t,s]·v_s / (Σ_{s≤t} A[t,s] + eps),  eps = 1e-12 in the paper.
 * q, k: [B,L,H,F];  v, y: [B,L,H,Dv]. The quadratic form is evaluated with the closed form of the
 * feature-map dot product (equal to the 73-feature product up to rounding). */
enum { MLK_BASED_MAXF = 16 };
void mlk_based_fwd(int B, int L, int H, int F, int Dv, float eps, const float *q, const float *k, const float *v,
                   float *y);
/* den (out, optional): [B,H,L] the normaliser;  pattern (out, optional): [B,H,L,L] = A[t,s]/den_t. */
void mlk_based_fwd_ex(int B, int L, int H, int F, int Dv, float eps, const float *q, const float *k,
                      const float *v, float *y, float *den, float *pattern);
/* Returns 0, or -1 when scratch allocation fails. */
int mlk_based_bwd(int B, int L, int H, int F, int Dv, float eps, const float *q, const float *k, const float *v,
                  const float *dy, float *dq, float *dk, float *dv);
/* Taylor feature map: x[n,F] → phi[n, 1+F+F²] = [1, x/F^{1/4}, vec(x xᵀ)/(√2·√F)] (slot 1+F+m·F+j ↦ x_m x_j). */
static inline int mlk_taylor_dim(int F) { return 1 + F + F * F; }
void mlk_taylor_fwd(int n, int F, const float *x, float *phi);
void mlk_taylor_bwd(int n, int F, const float *x, const float *dphi, float *dx);
/* Recurrent step. S: [B,H,P,Dv] KV state, z: [B,H,P] normaliser state (P = 1+F+F², zeros at start);
 * q, k: [B,H,F]; v, y: [B,H,Dv]. S += φ(k)vᵀ, z += φ(k), y = φ(q)ᵀS / (φ(q)·z + eps). */
void mlk_based_step(int B, int H, int F, int Dv, float eps, float *S, float *z, const float *q, const float *k,
                    const float *v, float *y);

/* ---- DeltaNet delta rule (docs/mixers.md, "DeltaNet"), delta_rule.c ----
 * Per head, S ∈ R^{Dk×Dv} (row-major S[i*Dv + j]), S_{-1} = S0 (or 0):
 *   vold_t = S_{t-1}ᵀ k_t,  u_t = β_t (v_t − vold_t),  S_t = S_{t-1} + k_t u_tᵀ,  o_t = scale·S_tᵀ q_t
 * q and k are used as given (the mixer L2-normalises them first, mlk_l2norm_*).
 * q, k: [B,L,H,Dk];  v, o: [B,L,H,Dv];  beta: [B,L,H];  S0, Slast: [B,H,Dk,Dv];
 * states (out, optional): [B,L,H,Dk,Dv] every S_t;  vold (out, optional): [B,L,H,Dv].
 * Returns 0, or -1 when scratch allocation fails. */
int mlk_delta_fwd(int B, int L, int H, int Dk, int Dv, float scale, const float *q, const float *k, const float *v,
                  const float *beta, const float *S0, float *o, float *states, float *vold, float *Slast);
/* Exact backward through the recurrence (recomputes the states per (b,h) in scratch). vold: the
 * forward's vold output [B,L,H,Dv] (saves a matrix-vector product per step), or NULL.
 * When the L+1 states would exceed mlk_delta_store_limit floats per thread (4 MB by default: D=256),
 * one state is kept and rebuilt backwards, S_{t−1} = S_t − k_t u_tᵀ (rounding ~L ulp of ‖S‖).
 * Returns 0, or -1 when scratch allocation fails. */
extern size_t mlk_delta_store_limit;
int mlk_delta_bwd(int B, int L, int H, int Dk, int Dv, float scale, const float *q, const float *k, const float *v,
                  const float *beta, const float *S0, const float *vold, const float *dout, float *dq, float *dk,
                  float *dv, float *dbeta, float *dS0);
/* The same rule for S0 = 0 in its quadratic form (delta_rule.c has the equations): O(L²(Dk+Dv))
 * per (b,h) instead of O(L·Dk·Dv); the same o (to rounding), vold and gradients. mlk_delta_quad_ok
 * says where it is the faster one. Shapes as above; vold is required by the backward. */
int mlk_delta_quad_ok(int L, int Dk, int Dv);
int mlk_delta_quad_fwd(int B, int L, int H, int Dk, int Dv, float scale, const float *q, const float *k,
                       const float *v, const float *beta, float *o, float *vold);
int mlk_delta_quad_bwd(int B, int L, int H, int Dk, int Dv, float scale, const float *q, const float *k,
                       const float *v, const float *beta, const float *vold, const float *dout, float *dq, float *dk,
                       float *dv, float *dbeta);
/* One token: S [B,H,Dk,Dv] in place; q, k: [B,H,Dk]; v, o: [B,H,Dv]; beta: [B,H]. Returns 0, or
 * -1 when scratch allocation fails (S and o untouched). */
int mlk_delta_step(int B, int H, int Dk, int Dv, float scale, float *S, const float *q, const float *k,
                    const float *v, const float *beta, float *o);
/* Row-wise L2 normalisation y = x/√(‖x‖² + eps) over the last dim: x, y, dx, dy: [n, d]. */
void mlk_l2norm_fwd(int n, int d, float eps, const float *x, float *y);
void mlk_l2norm_bwd(int n, int d, float eps, const float *x, const float *dy, float *dx);

/* ---- H3 (docs/mixers.md, "H3"), h3.c ----
 * Shift-SSM kernel: K[s,c] = Σ_{n=0}^{N-1-s} Bs[c,n]·Cs[c,n+s], s < L ≤ N.
 * Bs, Cs, dBs, dCs: [C,N];  K, dK: [L,C]. */
void mlk_h3_shift_kernel_fwd(int C, int N, int L, const float *Bs, const float *Cs, float *K);
void mlk_h3_shift_kernel_bwd(int C, int N, int L, const float *Bs, const float *Cs, const float *dK, float *dBs,
                             float *dCs);
/* Diagonal S4D kernel, bilinear discretisation, M = N/2 complex modes per head:
 *   dt = exp(log_dt[h]), A_m = −exp(inv_A_real[h,m]) + i·A_imag[h,m], w = A_m·dt,
 *   λ = (1+w/2)/(1−w/2),  C̃ = B_m·C_m·dt/(1−w/2),  K[s,h] = 2·Re Σ_m C̃_m λ_m^s.
 * Cc, Bc: [H,M,2] (re, im);  log_dt: [H];  inv_A_real, A_imag: [H,M];  K, dK: [L,H].
 * Computed in double precision. Both return 0, or -1 when scratch allocation fails. */
int mlk_s4d_kernel_fwd(int H, int M, int L, const float *Cc, const float *log_dt, const float *Bc,
                       const float *inv_A_real, const float *A_imag, float *K);
int mlk_s4d_kernel_bwd(int H, int M, int L, const float *Cc, const float *log_dt, const float *Bc,
                       const float *inv_A_real, const float *A_imag, const float *dK, float *dCc, float *dlog_dt,
                       float *dBc, float *dinv_A_real, float *dA_imag);
/* Recurrent diagonal SSM: x[B,H,P,M,2] complex states (P channels per head share the kernel),
 * uin, y: [B,H,P] (layout h*P + p). x_m ← λ_m x_m + dB_m·u, y = 2·Re Σ_m C_m x_m + Dh[h]·u
 * (Dh may be NULL). Equals mlk_longconv with the kernel above and G = P. */
void mlk_s4d_step(int B, int H, int P, int M, const float *Cc, const float *log_dt, const float *Bc,
                  const float *inv_A_real, const float *A_imag, const float *Dh, float *x, const float *uin,
                  float *y);
/* Head-dim-2 outer product: kv[b,t,h*4 + d1*2 + d2] = kt[b,t,2h+d1]·v[b,t,2h+d2];  kt, v: [B,L,2H], kv: [B,L,4H]. */
void mlk_h3_outer_fwd(int BL, int H, const float *kt, const float *v, float *kv);
void mlk_h3_outer_bwd(int BL, int H, const float *kt, const float *v, const float *dkv, float *dkt, float *dv);
/* Gate and transposed output order: o[b,t, d2*H + h] = Σ_{d1} q[b,t,2h+d1]·yk[b,t,h*4 + d1*2 + d2];
 * q, o: [B,L,2H], yk: [B,L,4H]. */
void mlk_h3_gate_fwd(int BL, int H, const float *q, const float *yk, float *o);
void mlk_h3_gate_bwd(int BL, int H, const float *q, const float *yk, const float *dout, float *dq, float *dyk);

/* ---- the linear layers' product, gemm.c ----
 * y[i,j] = bias[j] + Σ_k x[i,k]·w[j,k], summed in k order: a row's bits do not depend on how many
 * rows come with it, where it sits or the thread count (a BLAS does not promise that).
 * x: [M,K];  w: [N,K];  bias: [N] or NULL;  y: [M,N]. Returns -1 when out of memory. */
int mlk_gemm_nt(int64_t M, int64_t N, int64_t K, const float *x, const float *w, const float *bias, float *y);
/* y = x·w with w: [K,N] (the linear layer's input gradient, dy·W), the same arithmetic. */
int mlk_gemm_nn(int64_t M, int64_t N, int64_t K, const float *x, const float *w, float *y);
/* y[i,j] (+)= Σ_k x[k,i]·w[k,j], x: [K,M], w: [K,N], y: [M,N] (the weight gradient dW = dyᵀ·x):
 * each element summed from zero in k order, then added to y where accumulate. */
int mlk_gemm_tn(int64_t M, int64_t N, int64_t K, const float *x, const float *w, bool accumulate, float *y);
/* The general form: y[i·ldy + j] = alpha·Σ_k x[i·xr + k·xc]·b(k,j) (+ the old y where accumulate),
 * b(k,j) = w[k·ldw + j] where w_kn, else w[j·ldw + k]; the same bits per element as above
 * whatever the strides (attention's per-sequence products, matmul). */
int mlk_gemm(int64_t M, int64_t N, int64_t K, const float *x, int64_t xr, int64_t xc, const float *w, int64_t ldw,
             bool w_kn, float alpha, bool accumulate, float *y, int64_t ldy);
/* The register blocking of the product's and the long convolution's tiles: AVX2's (16 registers
 * of 8 lanes) on an AVX2 machine, AVX-512's elsewhere; both give the same bits. For tests,
 * mlk_force_avx2_blocking(1 or 0) picks AVX2's or AVX-512's on any clone, -1 (the default) the
 * machine's; not thread-safe (set it before the kernels run). */
bool mlk_avx2_blocking(void);
void mlk_force_avx2_blocking(int avx2);
/* The vector unit whose clone of the kernels runs on this CPU: "avx512", "avx2" or "baseline"
 * (x86-64 built with GCC), "native" where the kernels are not cloned. Results' last bits depend on
 * it (docs/kernels.md, "Determinism"). */
const char *mlk_vector_unit(void);

/* ---- the linear layers' product in bf16, gemm_bf16.c (docs/kernels.md, "bf16 products") ----
 * y[i,j] = bias[j] + Σ_k bf(x[i,k])·bf(w[j,k]): x and w rounded to bf16 (to nearest, ties to
 * even; a denormal input counts as a zero of its sign), the products summed in fp32 two k at a
 * time by AVX512_BF16's vdpbf16ps, in k order from zero. A row's bits are its own, as in
 * mlk_gemm_nt (not across CPU makers: how the instruction rounds its two additions is the CPU's).
 * Every function that computes returns 0, -1 when out of memory, or MLK_ENOBF16 where the CPU
 * lacks AVX512_BF16 (mlk_have_bf16() false): the caller reports MLK_BF16_MISSING. */
#define MLK_ENOBF16 (-2)
#define MLK_BF16_MISSING                                                                                     \
    "this CPU has no AVX512_BF16 (Intel Cooper Lake or Sapphire Rapids and later, AMD Zen 4 and later): " \
    "bf16 products cannot run here; use fp32"
/* Does this CPU have AVX512_BF16 (and AVX-512F, BW, VL)? Asked once a process; the environment
 * variable MECHLAB_NO_BF16=1 makes it answer false on any CPU (the tests of that path). */
bool mlk_have_bf16(void);
/* The rounding of the kernels, in plain C (NaN stays a quiet NaN; may round up to infinity). */
uint16_t mlk_bf16_round(float f);
float mlk_bf16_to_float(uint16_t h);
/* w packed once for mlk_gemm_bf16_packed: mlk_bf16_packed_size(N, K) 32-bit words, 64-byte
 * aligned; from w (N, K) (the forward, x·wᵀ) or w (K, N) (the input gradient, dy·W): the same
 * words for the same matrix. */
size_t mlk_bf16_packed_size(int64_t N, int64_t K);
int mlk_bf16_pack_nt(int64_t N, int64_t K, const float *w, uint32_t *packed);
int mlk_bf16_pack_nn(int64_t N, int64_t K, const float *w, uint32_t *packed);
/* x: [M,K] fp32 (rounded to bf16 as it is read);  bias: [N] or NULL (fp32);  y: [M,N] fp32. */
int mlk_gemm_bf16_packed(int64_t M, int64_t N, int64_t K, const float *x, const uint32_t *packed,
                         const float *bias, float *y);
/* The same with w packed in the call: w [N,K] (x·wᵀ + bias), or w [K,N] (x·w). */
int mlk_gemm_nt_bf16(int64_t M, int64_t N, int64_t K, const float *x, const float *w, const float *bias, float *y);
int mlk_gemm_nn_bf16(int64_t M, int64_t N, int64_t K, const float *x, const float *w, float *y);
/* y (+)= aᵀ·b with a: [K,M], b: [K,N], y: [M,N]: the weight gradient dW = dyᵀ·x (a = dy, b = x, K
 * the rows of the batch), summed over k in pairs in k order from zero, then added to y where
 * accumulate (as mlk_gemm_tn): the bits depend on K, not on the threads. */
int mlk_gemm_tn_bf16(int64_t M, int64_t N, int64_t K, const float *a, const float *b, bool accumulate, float *y);
/* The general form, as mlk_gemm: y[i·ldy + j] = alpha·Σ_k bf(x[i·xr + k·xc])·bf(b(k,j)) (+ the old
 * y where accumulate), b(k,j) = w[k·ldw + j] where w_kn, else w[j·ldw + k]; the same arithmetic and
 * bits per element as the functions above whatever the strides (attention's per-sequence products
 * in bf16). The packed operands live in this thread's scratch, kept from call to call. */
int mlk_gemm_bf16(int64_t M, int64_t N, int64_t K, const float *x, int64_t xr, int64_t xc, const float *w,
                  int64_t ldw, bool w_kn, float alpha, bool accumulate, float *y, int64_t ldy);

#endif
