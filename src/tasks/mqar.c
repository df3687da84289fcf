/* Zoology's multi-query associative recall (docs/tasks.md, "MQAR"): the layout, vocabulary split
 * and query-gap law of HazyResearch/zoology's multiquery_ar generator, written anew here.
 *
 * A document of L tokens: the context, num_kv_pairs (key, value) pairs repeated num_passes times
 * (C = 2·pairs·passes tokens), then L − C tokens where every key is asked once: key i sits at
 * position C + 2·gap_i, gap_i drawn without replacement from 0 .. (L − C)/2 − 1 with
 * P(gap = g) ∝ power_a·(g + 1)^(power_a − 1), and its value is the label of that same position.
 * Everything else after the context is 0 (or, with random_non_queries, uniform over the
 * vocabulary). Keys are 1 .. V/2 − 1, values V/2 .. V − 1, distinct within a document. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task_impl.h"

ml_mqar_config ml_mqar_config_default(void) {
    ml_mqar_config c = {.vocab_size = 8192, .input_seq_len = 64, .num_kv_pairs = 4, .power_a = 0.01,
                        .num_passes = 1, .random_non_queries = true, .rng = ML_RNG_PHILOX};
    return c;
}

/* numpy's float64 add.reduce (pairwise summation, 8-way unrolled blocks of at most 128). */
static double np_pairwise_sum(const double *a, int64_t n) {
    if (n < 8) {
        double r = 0.;
        for (int64_t i = 0; i < n; i++) r += a[i];
        return r;
    }
    if (n <= 128) {
        double r[8];
        for (int j = 0; j < 8; j++) r[j] = a[j];
        int64_t i = 8;
        for (; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return np_pairwise_sum(a, n2) + np_pairwise_sum(a + n2, n - n2);
}

ml_status ml_mqar_build(ml_task *t) {
    const ml_mqar_config *c = &t->mqar;
    const char *fn = "mech.task.mqar";
    if (c->input_seq_len < 2 || c->input_seq_len % 2 != 0 || c->input_seq_len > (1 << 20))
        return ml_fail(ML_ERR_ARG, "%s: input_seq_len must be an even number in 2..1048576, got %d", fn,
                       c->input_seq_len);
    if (c->vocab_size <= c->input_seq_len || c->vocab_size > (1 << 24))
        return ml_fail(ML_ERR_ARG, "%s: vocab_size must be > input_seq_len (%d) and <= 16777216, got %d", fn,
                       c->input_seq_len, c->vocab_size);
    if (c->num_kv_pairs < 1)
        return ml_fail(ML_ERR_ARG, "%s: num_kv_pairs must be >= 1, got %d", fn, c->num_kv_pairs);
    if (c->num_passes < 1) return ml_fail(ML_ERR_ARG, "%s: num_passes must be >= 1, got %d", fn, c->num_passes);
    if ((int64_t)c->num_kv_pairs * 2 * c->num_passes + (int64_t)c->num_kv_pairs * 2 > c->input_seq_len)
        return ml_fail(ML_ERR_ARG,
                       "%s: num_kv_pairs * 2 * num_passes + num_kv_pairs * 2 must be <= input_seq_len (%d), got %lld",
                       fn, c->input_seq_len,
                       (long long)c->num_kv_pairs * 2 * c->num_passes + (long long)c->num_kv_pairs * 2);
    if (c->num_kv_pairs > c->vocab_size / 2 - 1)
        return ml_fail(ML_ERR_ARG, "%s: num_kv_pairs must be <= vocab_size / 2 - 1 (%d distinct keys), got %d", fn,
                       c->vocab_size / 2 - 1, c->num_kv_pairs);
    if (!(c->power_a > 0.0 && c->power_a <= 1e6))
        return ml_fail(ML_ERR_ARG, "%s: power_a must be a number > 0, got %g", fn, c->power_a);
    if (c->rng != ML_RNG_PHILOX && c->rng != ML_RNG_NUMPY)
        return ml_fail(ML_ERR_ARG, "%s: unknown rng %d", fn, (int)c->rng);
    t->vocab = c->vocab_size;
    t->mq_context = c->num_kv_pairs * 2 * c->num_passes;
    t->mq_space = (c->input_seq_len - t->mq_context) / 2;
    /* The gap law exactly as the original computes it: p = a·k^(a−1), p /= p.sum(), then the
     * running sum choice() searches (divided by its last entry). */
    int space = t->mq_space;
    t->mq_p = calloc((size_t)space, sizeof(double));
    t->mq_cdf = malloc((size_t)space * sizeof(double));
    if (!t->mq_p || !t->mq_cdf) return ml_fail(ML_ERR_MEM, "%s: out of memory", fn);
    for (int k = 0; k < space; k++) t->mq_p[k] = c->power_a * pow((double)(k + 1), c->power_a - 1.0);
    double sum = np_pairwise_sum(t->mq_p, space);
    for (int k = 0; k < space; k++) t->mq_p[k] /= sum;
    ml_np_cdf(t->mq_p, space, t->mq_cdf);
    return ML_OK;
}

/* Writes a document from its keys, values and gaps (each num_kv_pairs long); fillers from fill
 * (NULL: zeros). */
static ml_status mqar_write(const ml_task *t, const int32_t *keys, const int32_t *vals, const int32_t *gaps,
                            ml_rng *fill, ml_doc *doc) {
    const ml_mqar_config *c = &t->mqar;
    int L = c->input_seq_len, n = c->num_kv_pairs, C = t->mq_context;
    if (ml_doc_reserve(doc, L + 1) != ML_OK) return ML_ERR_MEM;
    int32_t *tok = doc->tokens;
    for (int p = 0; p < C; p += 2) {
        tok[p] = keys[(p / 2) % n];
        tok[p + 1] = vals[(p / 2) % n];
    }
    for (int p = C; p < L; p++) tok[p] = 0;
    int first = 0; /* the query earliest in the document gets the named positions */
    for (int i = 0; i < n; i++) {
        tok[C + 2 * gaps[i]] = keys[i];
        if (gaps[i] < gaps[first]) first = i;
    }
    if (fill && c->random_non_queries)
        for (int p = C; p < L; p++)
            if (tok[p] == 0) tok[p] = (int32_t)ml_rng_below(fill, (uint32_t)c->vocab_size);
    doc->len = L;
    /* readouts in document order: every query predicts its value at its own position */
    int m = 0;
    for (int g = 0; g < t->mq_space && m < n; g++)
        for (int i = 0; i < n; i++)
            if (gaps[i] == g) {
                doc->read_pos[m] = C + 2 * g;
                doc->read_ans[m] = vals[i];
                m++;
            }
    doc->n_reads = n;

    int last_pass = 2 * n * (c->num_passes - 1); /* the nearest occurrence of the pair */
    int qio = last_pass + 2 * first, q = C + 2 * gaps[first];
    for (int i = 0; i < ML_MAX_POS; i++) doc->pos[i] = -1;
    doc->pos[ML_POS_QUERY_ITEM_ORIG] = qio;
    doc->pos[ML_POS_TARGET_ITEM_ORIG] = qio + 1;
    doc->pos[ML_POS_QUERY_ITEM] = q;
    doc->pos[ML_POS_TARGET_ITEM] = q + 1; /* the answer is read at target_item - 1 = the query */
    doc->pos[ML_POS_NEXT_KEY] = qio + 2 < C ? qio + 2 : -1;
    doc->all_targets[0] = qio + 1;
    doc->n_all_targets = 1;
    doc->qtype = ML_QT_KEY;
    doc->n_yield = 0;
    ml_doc_stats *st = &doc->stats;
    memset(st, 0, sizeof *st);
    st->doc_len = L;
    st->yield_len = C;
    st->qt_dist = 1;
    st->query_key_dist = q - qio;
    st->query_target_dist = q - qio - 1;
    st->eligible_pairs = st->eligible_queries = st->eligible_targets = n;
    return ML_OK;
}

/* ---- rng = philox: documents drawn one by one ---- */

ml_status ml_mqar_sample(const ml_task *t, ml_rng *rng, ml_split split, ml_doc *doc) {
    (void)split;
    const ml_mqar_config *c = &t->mqar;
    int n = c->num_kv_pairs, K = c->vocab_size / 2;
    ml_scratch *s = ml_scratch_get(doc);
    if (!s) return ML_ERR_MEM;
    int need = c->vocab_size > t->mq_space ? c->vocab_size : t->mq_space;
    if (ml_scratch_reserve_kv(s, need, n) != ML_OK) return ML_ERR_MEM;
    uint8_t *used = s->used;
    /* distinct keys in 1 .. K-1 and values in K .. V-1 by rejection */
    for (int i = 0; i < n; i++) {
        uint32_t x;
        do x = 1 + ml_rng_below(rng, (uint32_t)(K - 1));
        while (used[x]);
        used[x] = 1;
        s->keys[i] = (int32_t)x;
    }
    for (int i = 0; i < n; i++) {
        uint32_t x;
        do x = (uint32_t)K + ml_rng_below(rng, (uint32_t)(c->vocab_size - K));
        while (used[x]);
        used[x] = 1;
        s->vals[i] = (int32_t)x;
    }
    for (int i = 0; i < n; i++) used[s->keys[i]] = used[s->vals[i]] = 0;
    /* distinct gaps, each drawn from the law renormalised over the gaps not yet taken (what the
     * original's rounds of choice(p=...) amount to): by rejection, or, once the taken gaps hold
     * most of the mass, from the running sum of what is left */
    double *rest = NULL;
    for (int i = 0; i < n; i++) {
        int g = -1;
        for (int tries = 0; tries < 64 && g < 0; tries++) {
            int x = ml_np_search_right(t->mq_cdf, t->mq_space, ml_rng_double(rng));
            if (!used[x]) g = x;
        }
        if (g < 0) {
            if (!rest && !(rest = malloc((size_t)t->mq_space * sizeof(double)))) {
                for (int j = 0; j < i; j++) used[s->elig[j]] = 0;
                return ml_fail(ML_ERR_MEM, "task:dataset: out of memory");
            }
            double acc = 0;
            for (int x = 0; x < t->mq_space; x++) rest[x] = acc += used[x] ? 0.0 : t->mq_p[x];
            double u = ml_rng_double(rng) * acc;
            g = ml_np_search_right(rest, t->mq_space, u);
            while (used[g]) g--; /* a zero-mass step the search may land past; never below an untaken gap */
        }
        used[g] = 1;
        s->elig[i] = g;
    }
    free(rest);
    for (int i = 0; i < n; i++) used[s->elig[i]] = 0;
    return mqar_write(t, s->keys, s->vals, s->elig, rng, doc);
}

/* ---- rng = numpy: the original's draws for a whole dataset ---- */

/* choice(pool, size=n, replace=False) without p: the first n entries of permutation(pool)
 * (a Fisher-Yates shuffle of arange(pool) from the top, j = randint(0, i + 1)). */
static void np_choice_noreplace(ml_np_random *r, int pool, int n, int32_t *perm, int32_t *out) {
    ml_np_permutation(r, pool, perm);
    memcpy(out, perm, (size_t)n * sizeof(int32_t));
}

/* choice(space, size=n, replace=False, p=p): rounds of random_sample(n - found), each searched in
 * the running sum of p with the gaps found so far set to 0, keeping new values in order of first
 * appearance. */
static void np_choice_p(const ml_task *t, ml_np_random *r, int n, double *p, double *cdf, double *u, uint8_t *taken,
                        int32_t *out) {
    int space = t->mq_space, found = 0;
    memcpy(p, t->mq_p, (size_t)space * sizeof(double));
    while (found < n) {
        int k = n - found;
        for (int i = 0; i < k; i++) u[i] = ml_np_double(r);
        if (found > 0) {
            for (int i = 0; i < found; i++) p[out[i]] = 0.0;
            ml_np_cdf(p, space, cdf);
        } else {
            memcpy(cdf, t->mq_cdf, (size_t)space * sizeof(double));
        }
        /* a gap found in an earlier round has p = 0 and cannot come again, so one mark per gap
         * is numpy's per-round unique() */
        for (int i = 0; i < k; i++) {
            int g = ml_np_search_right(cdf, space, u[i]);
            if (!taken[g]) taken[g] = 1, out[found++] = g;
        }
    }
    for (int i = 0; i < n; i++) taken[out[i]] = 0;
}

ml_status ml_mqar_generate_np(const ml_task *t, int64_t n_docs, uint32_t seed, int32_t *keys, int32_t *vals,
                              int32_t *gaps) {
    const ml_mqar_config *c = &t->mqar;
    int n = c->num_kv_pairs, K = c->vocab_size / 2, space = t->mq_space;
    int pool = c->vocab_size - K > K - 1 ? c->vocab_size - K : K - 1;
    int32_t *perm = malloc((size_t)pool * sizeof(int32_t));
    double *p = malloc((size_t)space * sizeof(double)), *cdf = malloc((size_t)space * sizeof(double));
    double *u = malloc((size_t)n * sizeof(double));
    uint8_t *taken = calloc((size_t)space, 1);
    ml_np_random *r = malloc(sizeof *r);
    ml_status st = ML_OK;
    if (!perm || !p || !cdf || !u || !taken || !r) {
        st = ml_fail(ML_ERR_MEM, "task:dataset: out of memory");
        goto done;
    }
    ml_np_seed(r, seed);
    /* every document's keys, then every document's values, then every document's gaps */
    for (int64_t d = 0; d < n_docs; d++) {
        if ((d & 1023) == 1023 && (st = ml_check_interrupt("task:dataset")) != ML_OK) goto done;
        np_choice_noreplace(r, K - 1, n, perm, keys + d * n);
        for (int i = 0; i < n; i++) keys[d * n + i] += 1;
    }
    for (int64_t d = 0; d < n_docs; d++) {
        if ((d & 1023) == 1023 && (st = ml_check_interrupt("task:dataset")) != ML_OK) goto done;
        np_choice_noreplace(r, c->vocab_size - K, n, perm, vals + d * n);
        for (int i = 0; i < n; i++) vals[d * n + i] += K;
    }
    for (int64_t d = 0; d < n_docs; d++) {
        if ((d & 1023) == 1023 && (st = ml_check_interrupt("task:dataset")) != ML_OK) goto done;
        np_choice_p(t, r, n, p, cdf, u, taken, gaps + d * n);
    }
done:
    free(taken);
    free(perm);
    free(p);
    free(cdf);
    free(u);
    free(r);
    return st;
}

ml_status ml_mqar_doc(const ml_task *t, const int32_t *keys, const int32_t *vals, const int32_t *gaps, ml_rng *fill,
                      ml_doc *doc) {
    return mqar_write(t, keys, vals, gaps, fill, doc);
}
