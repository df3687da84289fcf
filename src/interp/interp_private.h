/* Private to src/interp: what interp.c (patching, caching) lends interchange.c (the evaluator). */
#ifndef ML_INTERP_PRIVATE_H
#define ML_INTERP_PRIVATE_H

#include "interp/interp.h"

/* ml_patch_fast where row b of the base cache stands for example batch_map[b] of the patch's
 * positions and source (NULL: the identity). sx (optional; not with a mixer-internal site): a
 * resume with the mixers' ml_run.suffix: with t = 0 and sx->rows = rows, the last mixer computes
 * the readout rows only; with t > 0 (the patched run's rows before t are those of sx->pre's
 * run, sx->rows the readout rows from t) it computes rows t.. only and returns their readout rows. */
ml_tensor *mli_patch_fast_mapped(ml_model *m, ml_tensor *const *base, const ml_patch *p, ml_tensor *rows,
                                 const int32_t *batch_map, const ml_suffix *sx);
/* Does unit (ba, pos) of a (possibly gathered: rows_a says which position it kept) differ from
 * unit (bb, pos) of b (full length)? A gathered act that did not keep pos cannot change the
 * readout, so it counts as equal. */
bool mli_unit_differs(const ml_model *m, int site, ml_tensor *a, int64_t ba, ml_tensor *b, int64_t bb, int64_t pos,
                      const int32_t *rows_a);
/* The resume (the evaluator's base runs with readout rows) caching the sites in want into acts. */
ml_tensor *mli_resume_cache(ml_model *m, const ml_resume *rs, const bool *want, ml_tensor **acts);
/* Readout logits (B, V) of hidden states at rows (gathered (B, 1, D) or full (B, L, D)). */
ml_tensor *mli_readout(ml_model *m, ml_tensor *hid, const int32_t *rows);

/* Marks the sites ml_mamba_attention reads of layer `layer` (its dt, B and C) in want. */
void mli_mamba_attention_needs(const ml_model *m, int layer, bool *want);

#endif
