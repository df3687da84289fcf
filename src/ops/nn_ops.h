/* Fused, differentiable ops of the language-model backbone, each with a hand-written backward:
 * LayerNorm, RMSNorm and cross-entropy over chosen rows (docs/kernels.md, "Norms and the loss"),
 * causal multi-head softmax attention over a fused qkv projection (docs/mixers.md, "Attention"). */
#ifndef ML_NN_OPS_H
#define ML_NN_OPS_H

#include "autograd/autograd.h"

/* x (..., D), weight (D), bias (D) or NULL -> (..., D). Biased variance, eps inside the sqrt. */
ml_tensor *ml_layer_norm(ml_tensor *x, ml_tensor *weight, ml_tensor *bias, double eps);
/* LayerNorm of a + b in one pass over the rows; *sum gets a + b (as ml_add: the same bits and graph),
 * which the caller owns. The residual stream's add then norm. */
ml_tensor *ml_add_layer_norm(ml_tensor *a, ml_tensor *b, ml_tensor *weight, ml_tensor *bias, double eps,
                             ml_tensor **sum);
/* x (..., D), weight (D) -> w ⊙ x / sqrt(mean(x²) + eps). */
ml_tensor *ml_rms_norm(ml_tensor *x, ml_tensor *weight, double eps);

/* Causal softmax attention. qkv (B, L, 3D) holds [q | k | v] along the last dim, each split into
 * n_heads heads of D/n_heads channels (channel = h·d_h + d). Scores are scaled by 1/sqrt(d_h);
 * future positions get probability exactly 0 (the −10000 additive mask of the original, which
 * underflows to 0 in float32). Returns ctx (B, L, D). If pattern is not NULL, *pattern receives
 * the probabilities P (B, H, L, L) as a detached tensor (for hooks and attention analysis). */
ml_tensor *ml_causal_attention(ml_tensor *qkv, int n_heads, ml_tensor **pattern);
/* Its three stages (the attention mixer runs them separately so that scores and pattern are
 * hook sites): S = scores(qkv) (B, H, L, L) with −10000 above the diagonal; P = causal_softmax(S)
 * (softmax over s <= t, exact zeros above); ctx = apply(P, qkv) (B, L, D). The products of
 * scores and apply (and of their gradients) run in the thread's linear precision (ops.h; bf16 on
 * mlk_gemm_bf16), the softmax in fp32. */
ml_tensor *ml_attention_scores(ml_tensor *qkv, int n_heads);
ml_tensor *ml_causal_softmax(ml_tensor *S);
ml_tensor *ml_attention_apply(ml_tensor *P, ml_tensor *qkv, int n_heads);

/* Mean cross-entropy of logits (N, V) against int32 targets (N); targets equal to −100 are
 * ignored (and the mean is over the others; with none, the loss is 0). Returns a 0-dim tensor. */
ml_tensor *ml_cross_entropy(ml_tensor *logits, ml_tensor *targets);
/* The same, also filling (when not NULL) per row the probability of the target and the argmax
 * over the classes (first maximum); ignored rows get 0 and -1. */
ml_tensor *ml_cross_entropy_stats(ml_tensor *logits, ml_tensor *targets, float *row_prob, int32_t *row_argmax);

/* Rows of logits for the evaluators (interp), vectorised like the loss (vocabularies are 8196 wide):
 * log Σ_v exp(x[v]) over V logits (x (V)), computed as cross_entropy does; and
 * KL(softmax(c) ‖ softmax(x)) = Σ_v p_c[v]·(log p_c[v] − log p_x[v]) over rows c, x (V), given their
 * log-sum-exps lc and lx (callers need them for probabilities anyway). */
double ml_logsumexp_row(const float *x, int64_t V);
double ml_kl_div_row(const float *c, const float *x, int64_t V, double lc, double lx);

#endif
