/* Implicit attention matrices (docs/analysis.md, "Implicit attention"): each mixer's output written
 * as an L × L matrix per head (or channel) times its values, from the run's own activations.
 *
 *   attention, Based   the pattern (mixer.pattern): y_h = A_h · v_h
 *   DeltaNet           o = (Q̂K̂ᵀ/√d_k ⊙ causal) · T · V with T = (I + strict_tril(diag(β) K̂K̂ᵀ))⁻¹ diag(β)
 *                      (the delta rule's pseudo-values U = T·V, solved row by row): A_h = (Q̂K̂ᵀ ⊙ M) T
 *   H3                 o[(d2, h)] = Σ_s A_h[t, s] v_s[2h + d2] with
 *                      A_h[t, s] = Σ_d1 q_t[2h+d1] k̃_s[2h+d1] · (K[t−s, h] + D[h]·[t = s])
 *   Hyena              y[c] = Σ_s A_c[t, s] v_s[c] with A_c[t, s] = x2_t[c] · k[t−s, c] · x1_s[c]
 *                      (the long convolution as a causal Toeplitz matrix between the two gates)
 *   Mamba              ml_mamba_attention (interp.c)
 *
 * Sums run in double; the result is float32 (B, heads, L, L) without gradients. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp/interp.h"
#include "nn/sites.h"

/* The cached site `component` of the layer, contiguous (NULL with an error when missing). */
static ml_tensor *site_of(const ml_model *m, ml_tensor **acts, int layer, const char *component) {
    int s = ml_site_lookup(m, layer, component);
    if (s < 0 || !acts[s]) return ml_fail(ML_ERR_ARG, "implicit_attention: no site %s in layer %d", component, layer), NULL;
    return ml_copy_contiguous(acts[s], ML_F32);
}

static ml_tensor *delta_net(const ml_model *m, ml_tensor **acts, int layer) {
    ml_tensor *q = site_of(m, acts, layer, "mixer.q"), *k = site_of(m, acts, layer, "mixer.k"),
              *beta = site_of(m, acts, layer, "mixer.beta"), *A = NULL;
    double *qh = NULL, *kh = NULL, *T = NULL;
    if (!q || !k || !beta) goto done;
    int64_t B = q->shape[0], L = q->shape[1], D = q->shape[2], H = beta->shape[2], dk = D / H;
    A = ml_zeros(ML_F32, 4, (int64_t[]){B, H, L, L});
    qh = malloc(sizeof *qh * (size_t)(L * dk)), kh = malloc(sizeof *kh * (size_t)(L * dk));
    T = malloc(sizeof *T * (size_t)(L * L));
    if (!A || !qh || !kh || !T) {
        ml_release(A), A = NULL;
        ml_fail(ML_ERR_MEM, "implicit_attention: out of memory");
        goto done;
    }
    double scale = 1 / sqrt((double)dk);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            for (int64_t t = 0; t < L; t++) { /* per-head L2 normalisation, as the mixer */
                const float *x = ml_f32(q) + (b * L + t) * D + h * dk, *y = ml_f32(k) + (b * L + t) * D + h * dk;
                double nq = 0, nk = 0;
                for (int64_t e = 0; e < dk; e++) nq += (double)x[e] * x[e], nk += (double)y[e] * y[e];
                for (int64_t e = 0; e < dk; e++) qh[t * dk + e] = x[e] / sqrt(nq + 1e-6), kh[t * dk + e] = y[e] / sqrt(nk + 1e-6);
            }
            /* T[s, :] = β_s e_s − β_s Σ_{r<s} (k̂_s·k̂_r) T[r, :] (lower triangular) */
            for (int64_t s = 0; s < L; s++) {
                double bs = ml_f32(beta)[(b * L + s) * H + h];
                for (int64_t j = 0; j < L; j++) T[s * L + j] = j == s ? bs : 0;
                for (int64_t r = 0; r < s; r++) {
                    double dot = 0;
                    for (int64_t e = 0; e < dk; e++) dot += kh[s * dk + e] * kh[r * dk + e];
                    for (int64_t j = 0; j <= r; j++) T[s * L + j] -= bs * dot * T[r * L + j];
                }
            }
            float *a = ml_f32(A) + (b * H + h) * L * L;
            for (int64_t t = 0; t < L; t++)
                for (int64_t s = 0; s <= t; s++) {
                    double dot = 0;
                    for (int64_t e = 0; e < dk; e++) dot += qh[t * dk + e] * kh[s * dk + e];
                    for (int64_t j = 0; j <= s; j++) a[t * L + j] = (float)(a[t * L + j] + scale * dot * T[s * L + j]);
                }
        }
done:
    ml_release(q), ml_release(k), ml_release(beta);
    free(qh), free(kh), free(T);
    return A;
}

static ml_tensor *h3(ml_model *m, ml_tensor **acts, int layer) {
    ml_tensor *q = site_of(m, acts, layer, "mixer.q"), *kt = site_of(m, acts, layer, "mixer.short_conv"),
              *K = site_of(m, acts, layer, "mixer.filter"), *A = NULL;
    char name[160];
    snprintf(name, sizeof name, "backbone.layers.%d.sequence_mixer.D", layer);
    int pd = ml_model_find_param(m, name);
    ml_tensor *Dp = pd >= 0 ? ml_copy_contiguous(ml_model_p(m, pd), ML_F32) : NULL;
    if (!q || !kt || !K || !Dp) {
        if (pd < 0) ml_fail(ML_ERR_ARG, "implicit_attention: layer %d has no parameter D", layer);
        goto done;
    }
    int64_t B = q->shape[0], L = q->shape[1], D = q->shape[2], H = D / 2;
    A = ml_zeros(ML_F32, 4, (int64_t[]){B, H, L, L});
    if (!A) goto done;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < L; t++)
                for (int64_t s = 0; s <= t; s++) {
                    double qk = 0;
                    for (int d1 = 0; d1 < 2; d1++)
                        qk += (double)ml_f32(q)[(b * L + t) * D + 2 * h + d1] * ml_f32(kt)[(b * L + s) * D + 2 * h + d1];
                    double kern = ml_f32(K)[(t - s) * H + h] + (t == s ? ml_f32(Dp)[h] : 0);
                    ml_f32(A)[((b * H + h) * L + t) * L + s] = (float)(qk * kern);
                }
done:
    ml_release(q), ml_release(kt), ml_release(K), ml_release(Dp);
    return A;
}

static ml_tensor *hyena(const ml_model *m, ml_tensor **acts, int layer) {
    ml_tensor *pc = site_of(m, acts, layer, "mixer.short_conv"), *k = site_of(m, acts, layer, "mixer.filter"), *A = NULL;
    if (!pc || !k) goto done;
    int64_t B = pc->shape[0], L = pc->shape[1], D = pc->shape[2] / 3;
    A = ml_zeros(ML_F32, 4, (int64_t[]){B, D, L, L});
    if (!A) goto done;
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < D; c++)
            for (int64_t t = 0; t < L; t++) {
                double x2 = ml_f32(pc)[(b * L + t) * 3 * D + D + c];
                for (int64_t s = 0; s <= t; s++)
                    ml_f32(A)[((b * D + c) * L + t) * L + s] =
                        (float)(x2 * ml_f32(k)[(t - s) * D + c] * ml_f32(pc)[(b * L + s) * 3 * D + c]);
            }
done:
    ml_release(pc), ml_release(k);
    return A;
}

ml_tensor *ml_implicit_attention_run(ml_model *m, ml_tensor *tokens, int layer) {
    if (layer < 0 || layer >= m->cfg.n_layers)
        return ml_fail(ML_ERR_ARG, "implicit_attention: argument 2 expected a layer in [0, %d), got %d", m->cfg.n_layers, layer), NULL;
    const char *arch = ml_mixer_for_layer(&m->cfg, layer)->name;
    if (!strcmp(arch, "mamba")) return ml_mamba_attention_run(m, tokens, layer);
    static const char *const needs[][4] = {{"attention", "mixer.pattern"}, {"based", "mixer.pattern"},
                                           {"delta_net", "mixer.q", "mixer.k", "mixer.beta"},
                                           {"h3", "mixer.q", "mixer.short_conv", "mixer.filter"},
                                           {"hyena", "mixer.short_conv", "mixer.filter"}};
    int kind = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(arch, needs[i][0])) kind = i;
    if (kind < 0)
        return ml_fail(ML_ERR_ARG, "implicit_attention: layer %d's mixer is %s, which has no implicit attention here "
                                   "(attention, based, delta_net, h3, hyena, mamba)", layer, arch), NULL;
    bool *want = calloc((size_t)m->n_sites + 1, 1);
    ml_tensor **acts = calloc((size_t)m->n_sites + 1, sizeof *acts), *a = NULL;
    if (!want || !acts) {
        free(want), free(acts);
        return ml_fail(ML_ERR_MEM, "implicit_attention: out of memory"), NULL;
    }
    for (int j = 1; j < 4 && needs[kind][j]; j++) {
        int s = ml_site_lookup(m, layer, needs[kind][j]);
        if (s >= 0) want[s] = true;
    }
    if (ml_run_cache(m, tokens, want, acts, NULL) == ML_OK) {
        if (kind <= 1) a = site_of(m, acts, layer, "mixer.pattern");
        else if (kind == 2) a = delta_net(m, acts, layer);
        else if (kind == 3) a = h3(m, acts, layer);
        else a = hyena(m, acts, layer);
    }
    for (int i = 0; i < m->n_sites; i++) ml_release(acts[i]);
    free(want), free(acts);
    return a;
}
