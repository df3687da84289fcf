/* Associative recall (docs/tasks.md, "AR"). */
#include <string.h>

#include "tasks/task_impl.h"

ml_status ml_ar_build(ml_task *t) {
    const ml_ar_config *c = &t->ar;
    const char *fn = "mech.task.ar";
    if (c->num_kv < 2 || c->num_kv % 2 != 0 || c->num_kv > (1 << 24))
        return ml_fail(ML_ERR_ARG, "%s: num_kv must be an even number in 2..16777216, got %d", fn, c->num_kv);
    if (c->min_length < 2 || c->min_length % 2 != 0)
        return ml_fail(ML_ERR_ARG, "%s: min_length must be an even number >= 2, got %d", fn, c->min_length);
    if (c->max_length < c->min_length || c->max_length % 2 != 0)
        return ml_fail(ML_ERR_ARG, "%s: max_length must be an even number >= min_length (%d), got %d", fn,
                       c->min_length, c->max_length);
    if (c->max_length / 2 > c->num_kv / 2)
        return ml_fail(ML_ERR_ARG,
                       "%s: max_length must be <= num_kv (%d distinct keys per document), got %d", fn,
                       c->num_kv / 2, c->max_length);
    if (c->max_length > (1 << 20))
        return ml_fail(ML_ERR_ARG, "%s: max_length must be <= 1048576, got %d", fn, c->max_length);
    if (c->query_type != ML_QT_KEY && c->query_type != ML_QT_VALUE)
        return ml_fail(ML_ERR_ARG, "%s: query_type must be \"key\" or \"value\", got %d", fn, (int)c->query_type);
    if (!(c->train_test_split >= 0.0 && c->train_test_split <= 1.0))
        return ml_fail(ML_ERR_ARG, "%s: train_test_split must be in [0, 1], got %g", fn, c->train_test_split);
    if (c->train_test_split > 0.0 && c->num_kv > 16384)
        return ml_fail(ML_ERR_ARG, "%s: train_test_split needs num_kv <= 16384 (blacklist size), got %d", fn,
                       c->num_kv);
    t->n_keys = c->num_kv / 2;
    /* pad, bos, eos, keys, values, plus the table entry of label -100 (docs/tasks.md, "AR"). */
    t->vocab = c->num_kv + 4;
    if (c->train_test_split > 0.0) {
        ml_rng rng;
        ml_rng_init(&rng, t->seed, ML_STREAM_SPLIT);
        return ml_task_draw_blacklist(t, t->n_keys, c->train_test_split, &rng, fn);
    }
    return ML_OK;
}

/* m distinct numbers below k: rejection against a marker array (m <= k). */
static void draw_distinct(ml_rng *rng, int m, int k, int32_t *out, uint8_t *used) {
    for (int i = 0; i < m; i++) {
        uint32_t x;
        do x = ml_rng_below(rng, (uint32_t)k);
        while (used[x]);
        used[x] = 1;
        out[i] = (int32_t)x;
    }
    for (int i = 0; i < m; i++) used[out[i]] = 0;
}

ml_status ml_ar_sample(const ml_task *t, ml_rng *rng, ml_split split, ml_doc *doc) {
    const ml_ar_config *c = &t->ar;
    ml_scratch *s = ml_scratch_get(doc);
    if (!s) return ML_ERR_MEM;
    int mmin = c->min_length / 2, mmax = c->max_length / 2, k = t->n_keys;
    if (ml_scratch_reserve_kv(s, k, mmax) != ML_OK) return ML_ERR_MEM;
    if (ml_doc_reserve(doc, 2 * mmax + 5) != ML_OK) return ML_ERR_MEM;

    /* The split is ignored on purpose: blacklisted pairs are never queried in any split (the
     * original's quirk: docs/tasks.md, "AR", train_test_split). */
    (void)split;
    int rejections = 0, m, n_elig;
    for (;;) {
        m = mmin == mmax ? mmin : mmin + (int)ml_rng_below(rng, (uint32_t)(mmax - mmin + 1));
        draw_distinct(rng, m, k, s->keys, s->used);
        draw_distinct(rng, m, k, s->vals, s->used);
        n_elig = 0;
        for (int i = 0; i < m; i++)
            if (!ml_task_black(t, s->keys[i], s->vals[i])) s->elig[n_elig++] = i;
        if (n_elig > 0) break;
        if (++rejections >= ML_MAX_REJECTIONS)
            return ml_fail(ML_ERR_STATE, "task:sample: %d consecutive AR documents had no queryable pair "
                           "(train_test_split = %g)", rejections, c->train_test_split);
    }
    int q = s->elig[n_elig == 1 ? 0 : ml_rng_below(rng, (uint32_t)n_elig)];

    int32_t *tok = doc->tokens;
    int vs = 3 + k;
    tok[0] = ML_BOS;
    for (int i = 0; i < m; i++) {
        tok[2 * i + 1] = 3 + s->keys[i];
        tok[2 * i + 2] = vs + s->vals[i];
    }
    bool value_q = c->query_type == ML_QT_VALUE;
    int qio = value_q ? 2 * q + 2 : 2 * q + 1, tio = value_q ? 2 * q + 1 : 2 * q + 2;
    tok[2 * m + 1] = ML_EOS;
    tok[2 * m + 2] = tok[qio];
    tok[2 * m + 3] = tok[tio];
    tok[2 * m + 4] = ML_EOS;
    doc->len = 2 * m + 5;

    for (int i = 0; i < ML_MAX_POS; i++) doc->pos[i] = -1;
    doc->pos[ML_POS_BOS] = 0;
    doc->pos[ML_POS_QUERY_ITEM_ORIG] = qio;
    doc->pos[ML_POS_TARGET_ITEM_ORIG] = tio;
    doc->pos[ML_POS_DIVIDER] = 2 * m + 1;
    doc->pos[ML_POS_QUERY_ITEM] = 2 * m + 2;
    doc->pos[ML_POS_TARGET_ITEM] = 2 * m + 3;
    doc->pos[ML_POS_NEXT_KEY] = 2 * q + 3; /* the divider for the last pair (docs/tasks.md, "AR") */
    doc->all_targets[0] = tio;
    doc->n_all_targets = 1;
    doc->qtype = c->query_type;
    doc->n_yield = 0; /* no tree */

    ml_doc_stats *st = &doc->stats;
    memset(st, 0, sizeof *st);
    st->doc_len = doc->len;
    st->yield_len = 2 * m;
    st->qt_dist = 1;
    st->query_key_dist = 2 * m + 2 - qio;
    st->query_target_dist = 2 * m + 2 - tio;
    st->eligible_pairs = st->eligible_queries = st->eligible_targets = n_elig;
    st->rejections = rejections;
    return ML_OK;
}
