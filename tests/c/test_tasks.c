/* AR and ATR: structural invariants, determinism, batches, validation and corpus statistics. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task.h"
#include "tasks/task_impl.h" /* the split blacklist, to check which pairs are held out */
#include "testutil.h"

/* Check's ck_assert_* report every passing assertion to the parent process (fork mode), which
 * dominates the run time over millions of checks: these only call into Check on failure. */
#define EXPECT(c)                                                                             \
    do {                                                                                      \
        if (!(c)) ck_abort_msg("%s:%d: assertion %s failed", __FILE__, __LINE__, #c);         \
    } while (0)
#define EXPECT_MSG(c, ...)                                                                    \
    do {                                                                                      \
        if (!(c)) ck_abort_msg(__VA_ARGS__);                                                  \
    } while (0)
#define EXPECT_OP(a, op, b)                                                                   \
    do {                                                                                      \
        long long _a = (long long)(a), _b = (long long)(b);                                   \
        if (!(_a op _b))                                                                      \
            ck_abort_msg("%s:%d: %s %s %s failed: %lld vs %lld", __FILE__, __LINE__, #a, #op, #b, _a, _b); \
    } while (0)

static ml_task *preset(const char *name, uint64_t seed) {
    ml_task *t = ml_task_preset(name, seed);
    EXPECT_MSG(t != NULL, "preset %s: %s", name, ml_last_error());
    return t;
}

/* ------------------------------------------------------------------ ATR invariants ---- */

/* Recomputes the eligible pairs (docs/tasks.md, "Queries") by brute force from the tree (positions and
 * parents only, O(n^2)), independently of the sampler, and checks the document against them. */
static void check_eligibility(const ml_task *t, const ml_doc *d, ml_split split) {
    const ml_atr_config *c = ml_task_atr_config(t);
    int n = d->n_yield;
    const int32_t *pp = d->parent_pos;
    int qy = d->pos[ML_POS_QUERY_ITEM_ORIG] - 1, tg = d->pos[ML_POS_TARGET_ITEM_ORIG] - 1;
    int *pq = malloc(sizeof(int) * (size_t)n * (size_t)n), *pt = malloc(sizeof(int) * (size_t)n * (size_t)n);
    int np = 0;
#define LAB(y) (d->tokens[1 + (y)] - 3)
    bool *rightmost = malloc((size_t)n);
    for (int q = 0; q < n; q++) {
        rightmost[q] = true;
        for (int j = q + 1; j < n; j++) rightmost[q] &= LAB(j) != LAB(q);
    }
    bool split_held = split == ML_SPLIT_TEST; /* the side of the blacklist this split queries */
    for (int q = 0; q < n; q++) {
        /* SIBLING: the last position right of q sharing its parent whose pair the split allows,
         * else q itself (for the root too), which the split never rules out. */
        int last = q;
        if (d->qtype == ML_QT_SIBLING)
            for (int j = n - 1; j > q && last == q; j--)
                if (pp[j] == pp[q] && (!ml_task_has_split(t) || ml_task_black(t, LAB(j), LAB(q)) == split_held))
                    last = j;
        for (int x = 0; x < n; x++) {
            bool rel;
            if (d->qtype == ML_QT_PARENT) rel = pp[q] == 1 + x;
            else if (d->qtype == ML_QT_CHILD) rel = pp[x] == 1 + q;
            else rel = x == last && (!c->unambiguous_queries || rightmost[x]);
            if (!rel || (c->unambiguous_queries && !rightmost[q])) continue;
            if (ml_task_has_split(t) && d->qtype != ML_QT_SIBLING) {
                bool held = ml_task_black(t, LAB(x), LAB(q));
                if (split == ML_SPLIT_TEST ? !held : held) continue;
            }
            pq[np] = q, pt[np] = x, np++;
        }
    }
    bool found = false;
    int nq = 0, nt = 0, nall = 0;
    for (int i = 0; i < np; i++) {
        found |= pq[i] == qy && pt[i] == tg;
        bool newq = true, newt = true;
        for (int j = 0; j < i; j++) newq &= pq[j] != pq[i], newt &= pt[j] != pt[i];
        nq += newq, nt += newt;
        if (pq[i] == qy) {
            EXPECT_OP(nall, <, d->n_all_targets);
            EXPECT_OP(d->all_targets[nall], ==, 1 + pt[i]);
            nall++;
        }
    }
#undef LAB
    EXPECT_MSG(found, "chosen pair (%d, %d) is not eligible", qy, tg);
    EXPECT_OP(nall, ==, d->n_all_targets);
    EXPECT_OP(d->stats.eligible_pairs, ==, np);
    EXPECT_OP(d->stats.eligible_queries, ==, nq);
    EXPECT_OP(d->stats.eligible_targets, ==, nt);
    free(pq);
    free(pt);
    free(rightmost);
}

/* Layout, tree and query invariants of one ATR document. */
static void check_atr_doc(const ml_task *t, const ml_doc *d, ml_split split, bool brute) {
    const ml_atr_config *c = ml_task_atr_config(t);
    int n = d->n_yield, nlab = c->num_terminals + (c->transparent_nonterminals ? c->num_nonterminals : 0);
    const int32_t *tok = d->tokens, *pos = d->pos;
    bool typed = pos[ML_POS_QUERY_TYPE] >= 0;
    EXPECT_OP(n, >=, c->min_yield);
    EXPECT_OP(n, <=, c->max_yield);
    EXPECT_OP(d->len, ==, n + (typed ? 6 : 5));
    EXPECT_OP(tok[0], ==, ML_BOS);
    for (int y = 0; y < n; y++) EXPECT(tok[1 + y] >= 3 && tok[1 + y] < 3 + nlab);
    EXPECT_OP(pos[ML_POS_BOS], ==, 0);
    EXPECT_OP(pos[ML_POS_DIVIDER], ==, n + 1);
    EXPECT_OP(tok[n + 1], ==, ML_EOS);
    EXPECT_OP(pos[ML_POS_QUERY_ITEM], ==, n + 2);
    EXPECT_OP(pos[ML_POS_TARGET_ITEM], ==, typed ? n + 4 : n + 3);
    EXPECT_OP(tok[d->len - 1], ==, ML_EOS);
    EXPECT_OP(pos[ML_POS_NEXT_KEY], ==, -1);
    if (typed) EXPECT_OP(tok[n + 3], ==, 3 + nlab + (int)(d->qtype - ML_QT_PARENT));
    int qio = pos[ML_POS_QUERY_ITEM_ORIG], tio = pos[ML_POS_TARGET_ITEM_ORIG];
    EXPECT(qio >= 1 && qio <= n && tio >= 1 && tio <= n);
    EXPECT_OP(tok[pos[ML_POS_QUERY_ITEM]], ==, tok[qio]);
    EXPECT_OP(tok[pos[ML_POS_TARGET_ITEM]], ==, tok[tio]);
    /* The tree: one root, parents inside the yield, on the head side of their children. */
    bool right = c->head_position == ML_HEAD_RIGHT;
    int roots = 0;
    for (int y = 0; y < n; y++) {
        int p = d->parent_pos[y];
        EXPECT_OP(d->depth[y], >=, 1);
        if (p < 0) {
            roots++;
            continue;
        }
        EXPECT(p >= 1 && p <= n);
        EXPECT_MSG(right ? p > 1 + y : p < 1 + y, "parent at %d of position %d on the wrong side", p, 1 + y);
    }
    EXPECT_OP(roots, ==, 1);
    /* Unambiguous queries: the query is the rightmost occurrence of its terminal. */
    if (c->unambiguous_queries)
        for (int p = qio + 1; p <= n; p++) EXPECT_OP(tok[p], !=, tok[qio]);
    switch (d->qtype) {
    case ML_QT_PARENT: /* the answer is the query's parent in the tree */
        EXPECT_OP(d->parent_pos[qio - 1], ==, tio);
        EXPECT_OP(d->n_all_targets, ==, 1);
        EXPECT_OP(d->stats.qt_dist, ==, abs(qio - tio));
        if (right) EXPECT_OP(tio, >, qio);
        break;
    case ML_QT_CHILD:
        EXPECT_OP(d->parent_pos[tio - 1], ==, qio);
        break;
    default: /* SIBLING: the last position with the query's parent (without a split) */
        EXPECT_OP(tio, >=, qio);
        if (!ml_task_has_split(t))
            for (int y = tio; y < n; y++) EXPECT_OP(d->parent_pos[y], !=, d->parent_pos[qio - 1]);
        EXPECT(tio == qio || d->parent_pos[tio - 1] == d->parent_pos[qio - 1]);
        break;
    }
    /* Split: test queries only held-out pairs, train and dev only the others; a sibling query
     * answered by itself is exempt (the original never checks that pair). */
    if (ml_task_has_split(t) && !(d->qtype == ML_QT_SIBLING && tio == qio)) {
        bool held = ml_task_black(t, tok[tio] - 3, tok[qio] - 3);
        EXPECT_MSG(split == ML_SPLIT_TEST ? held : !held, "split %s queried a pair of the wrong side",
                      ml_split_name(split));
    }
    if (brute) check_eligibility(t, d, split);
}

static void check_atr_many(ml_task *t, ml_split split, int count, int brute_every) {
    ml_rng rng;
    ml_rng_init(&rng, 11, ml_split_stream(split));
    ml_doc d;
    ml_doc_init(&d);
    for (int i = 0; i < count; i++) {
        EXPECT_MSG(ml_task_sample(t, &rng, split, &d) == ML_OK, "%s", ml_last_error());
        check_atr_doc(t, &d, split, i % brute_every == 0);
    }
    ml_doc_free(&d);
}

START_TEST(test_atr_presets) {
    const char *names[] = {"pcfg_5_20", "pcfg_10_20", "pcfg_easy_8192", "sibling"};
    for (int i = 0; i < 4; i++) {
        ml_task *t = preset(names[i], 42);
        check_atr_many(t, ML_SPLIT_TRAIN, 3000, 3);
        ml_task_release(t);
    }
}
END_TEST

START_TEST(test_atr_split) {
    ml_task *t = preset("pcfg_tts", 42);
    EXPECT(ml_task_has_split(t));
    int lo, hi;
    ml_task_corrupt_range(t, &lo, &hi);
    EXPECT(lo == 3 && hi == 22);
    /* about 20% of the 400 (parent, child) label pairs are held out */
    EXPECT_OP(ml_task_prohibited_pairs(t), >, 40);
    EXPECT_OP(ml_task_prohibited_pairs(t), <, 120);
    for (int s = 0; s < 3; s++) check_atr_many(t, (ml_split)s, 2000, 2);
    ml_task_release(t);
    /* the split grammar is drawn after the blacklist, so it differs from pcfg_5_20 (docs/tasks.md) */
    ml_task *a = preset("pcfg_5_20", 42), *b = preset("pcfg_tts", 42);
    EXPECT(memcmp(a->depth_score, b->depth_score, 40 * sizeof(int32_t)) != 0);
    ml_task_release(a);
    ml_task_release(b);
}
END_TEST

/* SIBLING with a split (no preset has both): each query keeps the rightmost sibling right of
 * it whose pair the split allows, else itself, and that self pair is never held out. The
 * brute-force check recomputes exactly this; the old rule (rightmost sibling, pair dropped when
 * held out) gives other eligible pairs and fails it. */
START_TEST(test_atr_sibling_split) {
    ml_atr_config c = ml_atr_config_default();
    c.parent = false;
    c.sibling = true;
    c.train_test_split = 0.5; /* many held-out pairs, so the rule matters often */
    for (int rng = ML_RNG_PHILOX; rng <= ML_RNG_NUMPY; rng++) {
        c.rng = (ml_task_rng)rng;
        ml_task *t = ml_task_atr(&c, 3);
        EXPECT_MSG(t != NULL, "%s", ml_last_error());
        for (int s = 0; s < 3; s++) check_atr_many(t, (ml_split)s, 1500, 1);
        /* some test document must answer with a sibling that is not the rightmost one */
        ml_rng r;
        ml_rng_init(&r, 4, 0);
        ml_doc d;
        ml_doc_init(&d);
        int skipped = 0;
        for (int i = 0; i < 3000 && !skipped; i++) {
            EXPECT(ml_task_sample(t, &r, ML_SPLIT_TEST, &d) == ML_OK);
            int q = d.pos[ML_POS_QUERY_ITEM_ORIG], tg = d.pos[ML_POS_TARGET_ITEM_ORIG];
            for (int y = tg; y < d.n_yield && tg != q; y++) skipped |= d.parent_pos[y] == d.parent_pos[q - 1];
        }
        EXPECT_MSG(skipped, "no test document skipped a held-out rightmost sibling");
        ml_doc_free(&d);
        ml_task_release(t);
    }
}
END_TEST

START_TEST(test_atr_options) {
    /* left heads, all three query types (so a type token), sample_first = query, no filter */
    ml_atr_config c = ml_atr_config_default();
    c.head_position = ML_HEAD_LEFT;
    c.child = c.sibling = true;
    c.sample_first = ML_FIRST_QUERY;
    ml_task *t = ml_task_atr(&c, 5);
    EXPECT(t);
    EXPECT_OP(ml_task_vocab_size(t), ==, 26);
    check_atr_many(t, ML_SPLIT_TRAIN, 2000, 2);
    ml_task_release(t);
    c.unambiguous_queries = false;
    c.head_position = ML_HEAD_RIGHT;
    c.query_type_token = ML_QTOK_NEVER;
    c.max_rhs_len = 10;
    t = ml_task_atr(&c, 6);
    EXPECT(t);
    check_atr_many(t, ML_SPLIT_TRAIN, 1000, 2);
    ml_task_release(t);
    /* transparent nonterminals: each NT's head is its own terminal |Σ| + nt */
    c = ml_atr_config_default();
    c.transparent_nonterminals = true;
    c.query_type_token = ML_QTOK_ALWAYS;
    t = ml_task_atr(&c, 7);
    EXPECT(t);
    EXPECT_OP(ml_task_vocab_size(t), ==, 20 + 40 + 6);
    int lo, hi;
    ml_task_corrupt_range(t, &lo, &hi);
    EXPECT(lo == 3 && hi == 3 + 20 + 40 - 1);
    check_atr_many(t, ML_SPLIT_TRAIN, 1000, 2);
    ml_rng rng;
    ml_rng_init(&rng, 1, 1);
    ml_doc d;
    ml_doc_init(&d);
    for (int i = 0; i < 200; i++) {
        EXPECT(ml_task_sample(t, &rng, ML_SPLIT_TRAIN, &d) == ML_OK);
        for (int y = 0; y < d.n_yield; y++)
            if (d.parent_pos[y] > 0) EXPECT_OP(d.tokens[d.parent_pos[y]], >=, 3 + 20);
    }
    ml_doc_free(&d);
    ml_task_release(t);
    /* no depth limit (recursion allowed): long yields are rejected, never emitted */
    c = ml_atr_config_default();
    c.max_depth = 0;
    c.max_yield = 200;
    t = ml_task_atr(&c, 8);
    EXPECT(t);
    check_atr_many(t, ML_SPLIT_TRAIN, 300, 10);
    ml_task_release(t);
}
END_TEST

/* ------------------------------------------------------------------- AR invariants ---- */

static void check_ar_doc(const ml_task *t, const ml_doc *d) {
    const ml_ar_config *c = ml_task_ar_config(t);
    int K = c->num_kv / 2, m = (d->len - 5) / 2;
    const int32_t *tok = d->tokens, *pos = d->pos;
    EXPECT(2 * m >= c->min_length && 2 * m <= c->max_length);
    EXPECT_OP(d->len, ==, 2 * m + 5);
    EXPECT_OP(tok[0], ==, ML_BOS);
    for (int i = 0; i < m; i++) {
        EXPECT(tok[2 * i + 1] >= 3 && tok[2 * i + 1] < 3 + K);
        EXPECT(tok[2 * i + 2] >= 3 + K && tok[2 * i + 2] < 3 + 2 * K);
        for (int j = 0; j < i; j++) { /* distinct keys, distinct values */
            EXPECT_OP(tok[2 * i + 1], !=, tok[2 * j + 1]);
            EXPECT_OP(tok[2 * i + 2], !=, tok[2 * j + 2]);
        }
    }
    EXPECT(tok[2 * m + 1] == ML_EOS && tok[2 * m + 4] == ML_EOS);
    int qio = pos[ML_POS_QUERY_ITEM_ORIG], tio = pos[ML_POS_TARGET_ITEM_ORIG];
    int key = c->query_type == ML_QT_KEY ? qio : tio, q = (key - 1) / 2;
    EXPECT_OP(key % 2, ==, 1);
    EXPECT_OP(c->query_type == ML_QT_KEY ? tio : qio, ==, key + 1);
    EXPECT_OP(pos[ML_POS_BOS], ==, 0);
    EXPECT_OP(pos[ML_POS_DIVIDER], ==, 2 * m + 1);
    EXPECT_OP(pos[ML_POS_QUERY_ITEM], ==, 2 * m + 2);
    EXPECT_OP(pos[ML_POS_TARGET_ITEM], ==, 2 * m + 3);
    EXPECT_OP(pos[ML_POS_NEXT_KEY], ==, 2 * q + 3);
    EXPECT_OP(pos[ML_POS_QUERY_TYPE], ==, -1);
    EXPECT_OP(tok[2 * m + 2], ==, tok[qio]);
    EXPECT_OP(tok[2 * m + 3], ==, tok[tio]);
    EXPECT(d->qtype == c->query_type);
    EXPECT_OP(d->n_all_targets, ==, 1);
    EXPECT_OP(d->all_targets[0], ==, tio);
    EXPECT_OP(d->stats.query_key_dist, ==, 2 * m + 2 - qio);
    /* blacklisted pairs are never queried, in any split (the quirk of docs/tasks.md, "AR") */
    EXPECT(!ml_task_black(t, tok[key] - 3, tok[key + 1] - 3 - K));
}

static void check_ar_many(ml_task *t, int count) {
    ml_rng rng;
    ml_rng_init(&rng, 3, ML_STREAM_DATA);
    ml_doc d;
    ml_doc_init(&d);
    for (int i = 0; i < count; i++) {
        EXPECT_MSG(ml_task_sample(t, &rng, (ml_split)(i % 3), &d) == ML_OK, "%s", ml_last_error());
        check_ar_doc(t, &d);
    }
    ml_doc_free(&d);
}

START_TEST(test_ar_presets) {
    ml_task *t = preset("ar_32", 42);
    EXPECT_OP(ml_task_vocab_size(t), ==, 8196);
    check_ar_many(t, 5000);
    int lo, hi;
    ml_task_corrupt_range(t, &lo, &hi);
    EXPECT(lo == 3 && hi == 4098);
    ml_task_release(t);
    t = preset("ar_32_value", 42);
    check_ar_many(t, 3000);
    ml_task_corrupt_range(t, &lo, &hi);
    EXPECT(lo == 4099 && hi == 8194);
    ml_task_release(t);
    t = preset("ar_32_split", 42);
    /* 20% of 4096 x 4096 combinations: 3,355,443 expected, SE about 1,600 */
    EXPECT(llabs(ml_task_prohibited_pairs(t) - 3355443) < 10000);
    check_ar_many(t, 3000);
    ml_task_release(t);
    ml_ar_config c = ml_ar_config_default();
    c.num_kv = 64;
    c.min_length = 8;
    c.max_length = 64; /* every key and value of the vocabulary in the longest documents */
    t = ml_task_ar(&c, 1);
    EXPECT(t);
    EXPECT_OP(ml_task_vocab_size(t), ==, 68);
    check_ar_many(t, 3000);
    ml_task_release(t);
}
END_TEST

START_TEST(test_token_names) {
    char buf[32];
    ml_task *t = preset("ar_32", 1);
    ck_assert_str_eq(ml_task_token_name(t, 0, buf), "<pad>");
    ck_assert_str_eq(ml_task_token_name(t, 1, buf), "<bos>");
    ck_assert_str_eq(ml_task_token_name(t, 2, buf), "<eos>");
    ck_assert_str_eq(ml_task_token_name(t, 3, buf), "k0");
    ck_assert_str_eq(ml_task_token_name(t, 4098, buf), "k4095");
    ck_assert_str_eq(ml_task_token_name(t, 4099, buf), "v0");
    ck_assert_str_eq(ml_task_token_name(t, 8194, buf), "v4095");
    ck_assert_str_eq(ml_task_token_name(t, 8195, buf), "<-100>");
    ck_assert_str_eq(ml_task_token_name(t, 8196, buf), "<8196?>");
    ml_task_release(t);
    ml_atr_config c = ml_atr_config_default();
    c.child = true;
    t = ml_task_atr(&c, 1);
    ck_assert_str_eq(ml_task_token_name(t, 3, buf), "t0");
    ck_assert_str_eq(ml_task_token_name(t, 22, buf), "t19");
    ck_assert_str_eq(ml_task_token_name(t, 23, buf), "qPARENT");
    ck_assert_str_eq(ml_task_token_name(t, 25, buf), "qSIBLING");
    ml_task_release(t);
    EXPECT_OP(ml_pos_index("query_item_orig"), ==, ML_POS_QUERY_ITEM_ORIG);
    EXPECT_OP(ml_pos_index("next_key"), ==, ML_POS_NEXT_KEY);
    EXPECT_OP(ml_pos_index("nope"), ==, -1);
}
END_TEST

/* --------------------------------------------------------------- datasets, batches ---- */

START_TEST(test_batch_layout) {
    const char *names[] = {"pcfg_5_20", "ar_32"};
    for (int k = 0; k < 2; k++) {
        ml_task *t = preset(names[k], 42);
        ml_dataset *ds = ml_dataset_new(t, 64, 42, ML_SPLIT_TRAIN);
        ml_task_release(t); /* the dataset keeps the task alive */
        EXPECT(ds);
        EXPECT_OP(ml_dataset_size(ds), ==, 64);
        const int64_t idx[5] = {3, 0, 63, 3, 17};
        ml_tensor *tk, *tg, *ps, *dist;
        EXPECT_MSG(ml_dataset_batch(ds, idx, 5, &tk, &tg) == ML_OK, "%s", ml_last_error());
        EXPECT(ml_dataset_batch_positions(ds, idx, 5, &ps) == ML_OK);
        EXPECT(ml_dataset_batch_target_dist(ds, idx, 5, &dist) == ML_OK);
        int L = 0;
        for (int b = 0; b < 5; b++) {
            int len;
            ml_dataset_tokens(ds, idx[b], &len);
            L = len > L ? len : L;
        }
        EXPECT(tk->dtype == ML_I32 && tg->dtype == ML_I32 && ps->dtype == ML_I32);
        EXPECT(tk->ndim == 2 && tk->shape[0] == 5 && tk->shape[1] == L);
        EXPECT(ml_same_shape(tk, tg));
        EXPECT(ps->shape[0] == 5 && ps->shape[1] == ML_NPOS);
        EXPECT(dist->shape[0] == 5 && dist->shape[1] == ml_task_vocab_size(ml_dataset_task(ds)));
        for (int b = 0; b < 5; b++) {
            int len;
            const int32_t *src = ml_dataset_tokens(ds, idx[b], &len);
            const int32_t *pos = ml_dataset_positions(ds, idx[b]);
            int ans = pos[ML_POS_TARGET_ITEM], labelled = 0;
            double sum = 0;
            for (int p = 0; p < L; p++) {
                int32_t x = ml_i32(tk)[b * L + p], y = ml_i32(tg)[b * L + p];
                EXPECT_OP(x, ==, p < len ? src[p] : ML_PAD);
                /* the logit at ans - 1 predicts the answer; nothing else is trained */
                if (p == ans - 1) {
                    EXPECT_OP(y, ==, src[ans]);
                    labelled++;
                } else {
                    EXPECT_OP(y, ==, ML_IGNORE);
                }
            }
            EXPECT_OP(labelled, ==, 1);
            for (int j = 0; j < ML_NPOS; j++) EXPECT_OP(ml_i32(ps)[b * ML_NPOS + j], ==, pos[j]);
            for (int v = 0; v < dist->shape[1]; v++) sum += ml_f32(dist)[b * dist->shape[1] + v];
            ck_assert_close(sum, 1.0, 1e-6, 0);
            ck_assert_close(ml_f32(dist)[b * dist->shape[1] + src[ans]], 1.0, 1e-6, 0); /* one-hot */
        }
        ml_release(tk), ml_release(tg), ml_release(ps), ml_release(dist);
        /* the fixed-order range form equals the index form */
        ml_tensor *a, *b2, *c;
        const int64_t seq[4] = {8, 9, 10, 11};
        EXPECT(ml_dataset_batch_range(ds, 8, 4, &a, &b2, &c) == ML_OK);
        EXPECT(ml_dataset_batch(ds, seq, 4, &tk, &tg) == ML_OK);
        EXPECT(ml_equal(a, tk) && ml_equal(b2, tg));
        ml_release(a), ml_release(b2), ml_release(c), ml_release(tk), ml_release(tg);
        /* bad input is refused with a message, never a crash */
        const int64_t bad[2] = {0, 64};
        EXPECT_OP(ml_dataset_batch(ds, bad, 2, &tk, &tg), ==, ML_ERR_INDEX);
        EXPECT(tk == NULL && tg == NULL);
        ck_assert_ptr_nonnull(strstr(ml_last_error(), "64"));
        EXPECT_OP(ml_dataset_batch(ds, bad, 0, &tk, &tg), ==, ML_ERR_ARG);
        EXPECT_OP(ml_dataset_batch_range(ds, 62, 4, &tk, &tg, NULL), ==, ML_ERR_INDEX);
        ml_dataset_free(ds);
    }
}
END_TEST

static uint64_t dataset_hash(const ml_dataset *ds) {
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < ml_dataset_size(ds); i++) {
        int len;
        const int32_t *tok = ml_dataset_tokens(ds, i, &len);
        const int32_t *pos = ml_dataset_positions(ds, i);
        for (int p = 0; p < len; p++) h = (h ^ (uint32_t)tok[p]) * 1099511628211ull;
        for (int p = 0; p < ML_NPOS; p++) h = (h ^ (uint32_t)pos[p]) * 1099511628211ull;
    }
    return h;
}

START_TEST(test_determinism) {
    const char *names[] = {"pcfg_5_20", "pcfg_tts", "ar_32"};
    for (int k = 0; k < 3; k++) {
        ml_task *t1 = preset(names[k], 42), *t2 = preset(names[k], 42), *t3 = preset(names[k], 43);
        ml_dataset *a = ml_dataset_new(t1, 500, 42, ML_SPLIT_TEST);
        ml_dataset *b = ml_dataset_new(t2, 500, 42, ML_SPLIT_TEST);
        ml_dataset *c = ml_dataset_new(t3, 500, 43, ML_SPLIT_TEST);
        ml_dataset *d = ml_dataset_new(t1, 500, 42, ML_SPLIT_TRAIN);
        ml_dataset *e = ml_dataset_new(t1, 320, 42, ML_SPLIT_TEST);
        EXPECT(a && b && c && d && e);
        /* same seed, same bytes (tokens, positions and statistics) */
        EXPECT(dataset_hash(a) == dataset_hash(b));
        EXPECT(memcmp(ml_dataset_stats(a, 0), ml_dataset_stats(b, 0), 500 * sizeof(ml_doc_stats)) == 0);
        /* another seed, another split stream: different documents */
        EXPECT(dataset_hash(a) != dataset_hash(c));
        EXPECT(dataset_hash(a) != dataset_hash(d));
        /* an eval set's first 320 documents do not depend on how many were generated */
        int la, le;
        for (int64_t i = 0; i < 320; i++) {
            const int32_t *x = ml_dataset_tokens(a, i, &la), *y = ml_dataset_tokens(e, i, &le);
            EXPECT(la == le && memcmp(x, y, (size_t)la * sizeof(int32_t)) == 0);
        }
        /* a dataset from an explicit stream equals the one from (seed, split) */
        ml_rng rng;
        ml_rng_init(&rng, 42, ml_split_stream(ML_SPLIT_TEST));
        ml_dataset *f = ml_dataset_from_rng(t1, 500, &rng, ML_SPLIT_TEST);
        EXPECT(dataset_hash(a) == dataset_hash(f));
        ml_dataset_free(a), ml_dataset_free(b), ml_dataset_free(c), ml_dataset_free(d);
        ml_dataset_free(e), ml_dataset_free(f);
        ml_task_release(t1), ml_task_release(t2), ml_task_release(t3);
    }
    /* the grammar itself is a function of the seed */
    ml_task *g1 = preset("pcfg_10_20", 5), *g2 = preset("pcfg_10_20", 5), *g3 = preset("pcfg_10_20", 6);
    int nr = g1->rule_first[40];
    EXPECT(nr == g2->rule_first[40]);
    EXPECT(memcmp(g1->syms, g2->syms, (size_t)g1->sym_first[nr] * sizeof(int32_t)) == 0);
    EXPECT(memcmp(g1->head_cdf, g2->head_cdf, 40 * 20 * sizeof(double)) == 0);
    EXPECT(memcmp(g1->head_cdf, g3->head_cdf, 40 * 20 * sizeof(double)) != 0);
    ml_task_release(g1), ml_task_release(g2), ml_task_release(g3);
}
END_TEST

START_TEST(test_dataset_get_doc_and_show) {
    ml_task *t = preset("pcfg_5_20", 42);
    ml_rng rng;
    ml_rng_init(&rng, 42, ml_split_stream(ML_SPLIT_TRAIN));
    ml_dataset *ds = ml_dataset_new(t, 50, 42, ML_SPLIT_TRAIN);
    ml_doc d, e;
    ml_doc_init(&d);
    ml_doc_init(&e);
    for (int i = 0; i < 50; i++) {
        EXPECT(ml_task_sample(t, &rng, ML_SPLIT_TRAIN, &d) == ML_OK);
        EXPECT(ml_dataset_get_doc(ds, i, &e) == ML_OK);
        EXPECT(d.len == e.len && memcmp(d.tokens, e.tokens, (size_t)d.len * sizeof(int32_t)) == 0);
        EXPECT(memcmp(d.pos, e.pos, sizeof d.pos) == 0);
        EXPECT(memcmp(d.parent_pos, e.parent_pos, (size_t)d.n_yield * sizeof(int32_t)) == 0);
        EXPECT(memcmp(d.depth, e.depth, (size_t)d.n_yield * sizeof(int32_t)) == 0);
        check_atr_doc(t, &e, ML_SPLIT_TRAIN, true);
    }
    char *s = ml_doc_format(t, &e);
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_nonnull(strstr(s, "<query_item_orig"));
    ck_assert_ptr_nonnull(strstr(s, "<target_item_orig"));
    ck_assert_ptr_nonnull(strstr(s, "tree"));
    free(s);
    EXPECT_OP(ml_dataset_get_doc(ds, 50, &e), ==, ML_ERR_INDEX);
    ml_doc_free(&d);
    ml_doc_free(&e);
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

/* ---------------------------------------------------------------------- validation ---- */

static void expect_atr_error(ml_atr_config c, const char *a, const char *b) {
    ml_clear_error();
    ml_task *t = ml_task_atr(&c, 1);
    EXPECT_MSG(t == NULL, "config accepted, expected an error about %s", a);
    EXPECT_MSG(strstr(ml_last_error(), a) && strstr(ml_last_error(), b), "message: %s", ml_last_error());
}

START_TEST(test_validation) {
    ml_atr_config c = ml_atr_config_default();
    ml_atr_config x = c;
    x.max_rhs_len = 1;
    expect_atr_error(x, "max_rhs_len", "got 1");
    x = c, x.num_terminals = 0;
    expect_atr_error(x, "num_terminals", "got 0");
    x = c, x.num_nonterminals = -3;
    expect_atr_error(x, "num_nonterminals", "got -3");
    x = c, x.max_rules_per_nt = 0;
    expect_atr_error(x, "max_rules_per_nt", "1..");
    x = c, x.max_depth = -1;
    expect_atr_error(x, "max_depth", "got -1");
    x = c, x.train_test_split = 1.5;
    expect_atr_error(x, "train_test_split", "got 1.5");
    x = c, x.train_test_split = NAN;
    expect_atr_error(x, "train_test_split", "[0, 1]");
    x = c, x.terminal_occurrence_factor = -2;
    expect_atr_error(x, "terminal_occurrence_factor", "got -2");
    x = c, x.parent = false;
    expect_atr_error(x, "query type", "enabled");
    x = c, x.min_yield = 10, x.max_yield = 5;
    expect_atr_error(x, "max_yield", "got 5");
    x = c, x.head_position = (ml_head_pos)7;
    expect_atr_error(x, "head_position", "got 7");
    ml_ar_config a = ml_ar_config_default();
    ml_ar_config y = a;
    y.num_kv = 7;
    EXPECT(ml_task_ar(&y, 1) == NULL && strstr(ml_last_error(), "num_kv"));
    y = a, y.max_length = 16;
    EXPECT(ml_task_ar(&y, 1) == NULL && strstr(ml_last_error(), "max_length"));
    y = a, y.num_kv = 16;
    EXPECT(ml_task_ar(&y, 1) == NULL && strstr(ml_last_error(), "distinct keys"));
    y = a, y.query_type = ML_QT_PARENT;
    EXPECT(ml_task_ar(&y, 1) == NULL && strstr(ml_last_error(), "query_type"));
    EXPECT(ml_task_preset("pcfg_5_2O", 1) == NULL);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "pcfg_5_20"));
    /* a test split that holds nothing out can never be sampled: an error, not a hang */
    x = c, x.num_terminals = 2, x.train_test_split = 1e-9;
    ml_task *t = ml_task_atr(&x, 1);
    EXPECT(t && ml_task_prohibited_pairs(t) == 0);
    ml_rng rng;
    ml_rng_init(&rng, 1, 1);
    ml_doc d;
    ml_doc_init(&d);
    EXPECT_OP(ml_task_sample(t, &rng, ML_SPLIT_TEST, &d), ==, ML_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "rejected"));
    EXPECT_OP(ml_task_sample(t, &rng, ML_SPLIT_TRAIN, &d), ==, ML_OK);
    ml_doc_free(&d);
    ml_task_release(t);
}
END_TEST

/* ---------------------------------------------------------- corpus statistics (docs/tasks.md) -- */

/* The spec's table describes 1,024 test documents of the one grammar that the original draws
 * at seed 42; our generator draws other grammars, so a single grammar cannot be compared
 * bit for bit: ranges across seeds are (docs/tasks.md, "Corpus statistics"). For each preset we
 * draw K = 16 grammars (seeds 1..16), take the mean of each column over 1,024 test documents of
 * each, and require the spec's value to lie within 4.5 standard deviations (across grammars) of the mean
 * of those 16 means. Why so wide: the spec's value is ONE draw from a right-skewed distribution
 * (a few grammars nest deeply). Measured distances, in those standard deviations:
 *   pcfg_tts dev/test and pcfg_10_20: all columns within 1.6 (close to our median);
 *   pcfg_5_20 (the same grammar as sibling): +1.6..+3.3; pcfg_easy_8192: +0.4..+3.8.
 * Over 400 of our grammars, 0.5% have a mean yield as long as the spec's pcfg_5_20 (15.96;
 * ours 9.8 on average) and 1.5% as long as its pcfg_easy_8192 (14.35). Either those two seed-42
 * grammars are long ones or the original differs somewhere we cannot see; pcfg_tts (same
 * generator, other draws) matching our median argues for the former. Columns that hardly depend
 * on the grammar (pcfg_5_8192) get a floor from their sampling error instead. */
enum { STAT_N, STAT_DEPTH, STAT_QT, STAT_QK, STAT_BRANCH, STAT_EQ, STAT_ET, STAT_NCOL };
static const char *const stat_names[STAT_NCOL] = {"yield", "depth", "q-t dist", "query-key dist",
                                                  "branching", "eligible queries", "eligible targets"};

static void grammar_stats(const char *name, ml_split split, int K, double mu[STAT_NCOL], double sd[STAT_NCOL]) {
    double s[STAT_NCOL] = {0}, s2[STAT_NCOL] = {0};
    for (int k = 1; k <= K; k++) {
        ml_task *t = preset(name, (uint64_t)k);
        ml_dataset *ds = ml_dataset_new(t, ML_EVAL_SPLIT_DOCS, (uint64_t)k, split);
        EXPECT_MSG(ds != NULL, "%s", ml_last_error());
        double m[STAT_NCOL] = {0};
        for (int i = 0; i < ML_EVAL_SPLIT_DOCS; i++) {
            const ml_doc_stats *st = ml_dataset_stats(ds, i);
            double v[STAT_NCOL] = {st->yield_len, st->depth,     st->qt_dist,        st->query_key_dist,
                                   st->branching, st->eligible_queries, st->eligible_targets};
            for (int j = 0; j < STAT_NCOL; j++) m[j] += v[j] / ML_EVAL_SPLIT_DOCS;
        }
        for (int j = 0; j < STAT_NCOL; j++) s[j] += m[j], s2[j] += m[j] * m[j];
        ml_dataset_free(ds);
        ml_task_release(t);
    }
    for (int j = 0; j < STAT_NCOL; j++) {
        mu[j] = s[j] / K;
        sd[j] = sqrt(fmax(0.0, s2[j] / K - mu[j] * mu[j]));
    }
}

static void compare(const char *name, ml_split split, const double ref[STAT_NCOL], int K, double floor_sd) {
    double mu[STAT_NCOL], sd[STAT_NCOL];
    grammar_stats(name, split, K, mu, sd);
    for (int j = 0; j < STAT_NCOL; j++) {
        double tol = 4.5 * fmax(sd[j], floor_sd * fabs(ref[j]));
        EXPECT_MSG(fabs(mu[j] - ref[j]) <= tol, "%s (%s) %s: ours %.3f (sd %.3f over %d grammars), spec %.2f",
                      name, ml_split_name(split), stat_names[j], mu[j], sd[j], K, ref[j]);
    }
}

START_TEST(test_corpus_statistics) {
    /* n, depth, q-t, query->key, branching, eligible queries, eligible targets (docs/tasks.md) */
    const double p5[] = {15.96, 3.02, 2.56, 8.35, 2.83, 8.02, 4.01};
    const double p10[] = {38.39, 2.94, 4.02, 13.50, 4.36, 11.09, 4.27};
    const double e8k[] = {14.35, 2.68, 2.72, 9.25, 2.69, 12.45, 4.69};
    const double p58k[] = {4.12, 1.00, 2.04, 4.04, 3.12, 3.12, 1.00};
    const double dev[] = {9.17, 2.33, 2.11, 5.96, 2.33, 4.42, 2.71};
    const double test[] = {11.29, 2.61, 2.56, 6.99, 2.38, 1.94, 1.61};
    const double sib[] = {14.43, 2.91, 0.79, 5.67, 2.78, 7.34, 3.97};
    compare("pcfg_5_20", ML_SPLIT_TEST, p5, 16, 0.0);
    compare("pcfg_10_20", ML_SPLIT_TEST, p10, 16, 0.0);
    compare("pcfg_easy_8192", ML_SPLIT_TEST, e8k, 16, 0.0);
    /* pcfg_5_8192 hardly depends on its grammar (yields of 3-5 terminals); 1,024 documents
     * then give a standard error of about 1% of each mean: floor the tolerance there. */
    compare("pcfg_5_8192", ML_SPLIT_TEST, p58k, 4, 0.01);
    compare("pcfg_tts", ML_SPLIT_DEV, dev, 16, 0.0);
    compare("pcfg_tts", ML_SPLIT_TEST, test, 16, 0.0);
    compare("sibling", ML_SPLIT_TEST, sib, 16, 0.0);
    /* structural facts of the table that hold for every grammar */
    double mu[STAT_NCOL], sd[STAT_NCOL], mt[STAT_NCOL], st[STAT_NCOL];
    grammar_stats("pcfg_tts", ML_SPLIT_DEV, 8, mu, sd);
    grammar_stats("pcfg_tts", ML_SPLIT_TEST, 8, mt, st);
    EXPECT(mt[STAT_EQ] < 0.6 * mu[STAT_EQ]); /* few held-out pairs per test document */
    ml_task *t = preset("pcfg_5_8192", 42);
    ml_dataset *ds = ml_dataset_new(t, 1024, 42, ML_SPLIT_TEST);
    for (int i = 0; i < 1024; i++) { /* without r_Σ the yields degenerate (docs/tasks.md, "Grammar") */
        EXPECT_OP(ml_dataset_stats(ds, i)->yield_len, <=, 12);
        EXPECT_OP(ml_dataset_stats(ds, i)->yield_len, >=, 3);
    }
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

START_TEST(test_ar_statistics) {
    ml_task *t = preset("ar_32", 42);
    ml_dataset *ds = ml_dataset_new(t, 1024, 42, ML_SPLIT_TEST);
    double qk = 0;
    int lo = 1000, hi = 0;
    for (int i = 0; i < 1024; i++) {
        const ml_doc_stats *st = ml_dataset_stats(ds, i);
        EXPECT_OP(st->doc_len, ==, 37);
        EXPECT_OP(st->qt_dist, ==, 1);
        qk += st->query_key_dist / 1024.0;
        lo = st->query_key_dist < lo ? st->query_key_dist : lo;
        hi = st->query_key_dist > hi ? st->query_key_dist : hi;
    }
    /* spec: mean 18.17, range 3-33. 33 - 2q with q uniform in 0..15 has sd 9.2, so the mean
     * of 1,024 documents has standard error 0.29: allow 4 of them. */
    ck_assert_close(qk, 18.17, 4 * 0.29, 0);
    EXPECT(lo == 3 && hi == 33);
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

/* A task made outside C: documents appended one by one, each checked; the holdout keeps train
 * and test apart by the tokens' hash. */
START_TEST(test_custom) {
    const char *names[] = {"<pad>", "a", "b", "c", "="};
    ml_custom_config c = {.vocab = 5, .token_names = names,
                          .positions = 1u << ML_POS_QUERY_ITEM_ORIG | 1u << ML_POS_DIVIDER,
                          .corrupt_lo = -1, .corrupt_hi = -1};
    ml_task *t = ml_task_custom(&c, "abc", 7);
    EXPECT(t != NULL);
    EXPECT_OP(ml_task_get_kind(t), ==, ML_TASK_CUSTOM);
    char buf[32];
    EXPECT(strcmp(ml_task_token_name(t, 4, buf), "=") == 0);
    int lo, hi;
    ml_task_corrupt_range(t, &lo, &hi);
    EXPECT_OP(lo, ==, 0);
    EXPECT_OP(hi, ==, 4);
    ml_dataset *ds = ml_dataset_open(t, 2, ML_SPLIT_TRAIN);
    EXPECT(ds != NULL);
    ml_doc d;
    ml_doc_init(&d);
    EXPECT_OP(ml_doc_reserve(&d, 4), ==, ML_OK);
    int32_t tok[4] = {1, 2, 4, 2};
    memcpy(d.tokens, tok, sizeof tok);
    d.len = 4;
    d.pos[ML_POS_QUERY_ITEM_ORIG] = 1;
    d.pos[ML_POS_DIVIDER] = 2;
    d.read_pos[0] = 2, d.read_ans[0] = 2, d.n_reads = 1;
    bool rejected;
    EXPECT_OP(ml_dataset_append(ds, &d, &rejected), ==, ML_OK);
    EXPECT(!rejected);
    /* every fault, each refused with its message, nothing appended */
    struct { int what; const char *msg; } bad[] = {{0, "outside the vocabulary"}, {1, "is not one the task declares"},
                                                  {2, "outside the document"},   {3, "has no target"},
                                                  {4, "answer 1 (9)"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ml_doc e = d;
        int32_t tk[4], pos_save = d.pos[ML_POS_DIVIDER];
        memcpy(tk, tok, sizeof tk);
        e.tokens = tk;
        int32_t ra = 2;
        e.read_ans = &ra;
        if (bad[k].what == 0) tk[3] = 5;
        if (bad[k].what == 1) e.pos[ML_POS_BOS] = 0;
        if (bad[k].what == 2) e.pos[ML_POS_DIVIDER] = 4;
        if (bad[k].what == 3) e.n_reads = 0;
        if (bad[k].what == 4) ra = 9;
        EXPECT_OP(ml_dataset_append(ds, &e, &rejected), ==, ML_ERR_ARG);
        EXPECT_MSG(strstr(ml_last_error(), bad[k].msg) != NULL, "%s", ml_last_error());
        EXPECT_OP(d.pos[ML_POS_DIVIDER], ==, pos_save);
    }
    EXPECT_OP(ml_dataset_size(ds), ==, 1);
    int n;
    const int32_t *ans, *rp = ml_dataset_readouts(ds, 0, &n, &ans);
    EXPECT_OP(n, ==, 1);
    EXPECT_OP(rp[0], ==, 2);
    EXPECT_OP(ans[0], ==, 2);
    ml_dataset_free(ds);
    /* documents are drawn in C for built-in tasks only */
    ml_rng rng;
    ml_rng_init(&rng, 1, 1);
    EXPECT_OP(ml_task_sample(t, &rng, ML_SPLIT_TRAIN, &d), ==, ML_ERR_ARG);
    EXPECT(ml_dataset_new(t, 4, 1, ML_SPLIT_TRAIN) == NULL);
    ml_task_release(t);
    /* holdout: about that fraction of all 4-token documents is held out, and a held-out one is
     * refused by train and kept by test */
    c.token_names = NULL, c.holdout = 0.25;
    t = ml_task_custom(&c, "held", 7);
    EXPECT(ml_task_has_split(t));
    int held = 0, total = 0;
    for (int x = 0; x < 625; x++) {
        int32_t tk[4] = {x % 5, x / 5 % 5, x / 25 % 5, x / 125};
        bool h = ml_task_held_out(t, tk, 4);
        held += h, total++;
        if (x < 40) {
            ml_dataset *tr = ml_dataset_open(t, 1, ML_SPLIT_TRAIN), *te = ml_dataset_open(t, 1, ML_SPLIT_TEST);
            ml_doc e = d;
            e.tokens = tk;
            bool r1, r2;
            EXPECT_OP(ml_dataset_append(tr, &e, &r1), ==, ML_OK);
            EXPECT_OP(ml_dataset_append(te, &e, &r2), ==, ML_OK);
            EXPECT(r1 == h && r2 == !h);
            ml_dataset_free(tr), ml_dataset_free(te);
        }
    }
    EXPECT_MSG(held > total / 8 && held < total * 3 / 8, "held out %d of %d", held, total);
    ml_task_release(t);
    ml_doc_free(&d);
    c.vocab = 0;
    EXPECT(ml_task_custom(&c, "x", 1) == NULL);
    c.vocab = 5, c.corrupt_lo = 3, c.corrupt_hi = 9;
    EXPECT(ml_task_custom(&c, "x", 1) == NULL);
}
END_TEST

/* The option tables: every field option names its config field (the preset's value reads back
 * through the offset), enum names index their values, and the keys the constructors read alone
 * have no field. */
START_TEST(test_option_tables) {
    ml_task *t = preset("pcfg_tts", 3);
    const ml_atr_config *c = ml_task_config(t);
    EXPECT(c == ml_task_atr_config(t));
    int fields = 0;
    for (const ml_task_option *o = ml_task_options(ML_TASK_ATR); o->name; o++) {
        if (!strcmp(o->name, "seed")) {
            EXPECT(o->offset == ML_TOPT_NO_FIELD);
            continue;
        }
        fields++;
        const char *p = (const char *)c + o->offset;
        if (!strcmp(o->name, "train_test_split")) EXPECT(o->type == ML_TOPT_NUM && *(const double *)p == 0.2);
        if (!strcmp(o->name, "max_yield")) EXPECT(o->type == ML_TOPT_INT && *(const int *)p == c->max_yield);
        if (!strcmp(o->name, "parent")) EXPECT(o->type == ML_TOPT_BOOL && *(const bool *)p);
        if (!strcmp(o->name, "query_type_token"))
            EXPECT(o->if_true == ML_QTOK_ALWAYS && ml_task_option_enum(o, "never") == ML_QTOK_NEVER &&
                   ml_task_option_enum(o, "sometimes") == -1);
    }
    EXPECT_OP(fields, ==, 18);
    ml_task_release(t);
    const ml_task_option *ar = ml_task_options(ML_TASK_AR);
    EXPECT(!strcmp(ar[1].name, "length") && ar[1].offset == ML_TOPT_NO_FIELD);
    EXPECT(ml_task_options(ML_TASK_CUSTOM) == NULL);
}
END_TEST

/* A custom task's documents in columns: a shared targets list, a per-document position, -1 for no
 * target; the faulty row is named and the documents before it are kept. */
START_TEST(test_append_batch) {
    ml_custom_config c = {.vocab = 5, .positions = 1u << ML_POS_DIVIDER, .corrupt_lo = -1, .corrupt_hi = -1};
    ml_task *t = ml_task_custom(&c, "cols", 1);
    ml_dataset *ds = ml_dataset_open(t, 8, ML_SPLIT_TRAIN);
    int32_t tok[3][4] = {{1, 2, 4, 2}, {3, 3, 4, 1}, {2, 1, 4, 3}}, tg[2] = {3, -1}, div[3] = {2, 2, 1};
    ml_doc_batch b = {.n = 3, .npos = 1, .qtype = ML_QT_VALUE};
    b.tok = (ml_doc_cols){.p = &tok[0][0], .s0 = 4, .s1 = 1, .cols = 4};
    b.tg = (ml_doc_cols){.p = tg, .s0 = 0, .s1 = 1, .cols = 2};
    b.pos[0] = (ml_doc_cols){.p = div, .s0 = 1, .cols = 1};
    b.pos_index[0] = ML_POS_DIVIDER;
    ml_doc d;
    ml_doc_init(&d);
    int64_t kept, rows;
    EXPECT_OP(ml_dataset_append_batch(ds, &b, 2, &d, &kept, &rows), ==, ML_OK);
    EXPECT(kept == 2 && rows == 2 && ml_dataset_size(ds) == 2);
    int nr;
    const int32_t *ans, *rp = ml_dataset_readouts(ds, 1, &nr, &ans);
    EXPECT(nr == 1 && rp[0] == 2 && ans[0] == 1 && ml_dataset_positions(ds, 1)[ML_POS_DIVIDER] == 2);
    EXPECT(ml_dataset_qtype(ds, 0) == ML_QT_VALUE);
    tg[1] = 4; /* not a position that can be predicted */
    EXPECT_OP(ml_dataset_append_batch(ds, &b, 8, &d, &kept, &rows), ==, ML_ERR_ARG);
    EXPECT(kept == 0 && rows == 0 && strstr(ml_last_error(), "targets column 1 (0-based) = 4") != NULL);
    ml_doc_free(&d);
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

/* dataset:stats()'s means, against a direct sum over the documents; the memory estimate. */
START_TEST(test_stat_means) {
    ml_task *t = preset("pcfg_5_20", 5);
    ml_dataset *ds = ml_dataset_new(t, 64, 5, ML_SPLIT_TEST);
    double m[ML_STAT_MEANS], depth = 0;
    int lo, hi, want_lo = 1 << 30, want_hi = 0;
    ml_dataset_stat_means(ds, m, &lo, &hi);
    for (int64_t i = 0; i < 64; i++) {
        const ml_doc_stats *s = ml_dataset_stats(ds, i);
        depth += s->depth;
        want_lo = s->yield_len < want_lo ? s->yield_len : want_lo;
        want_hi = s->yield_len > want_hi ? s->yield_len : want_hi;
    }
    EXPECT(!strcmp(ml_doc_stat_fields[2].name, "depth") && fabs(m[2] - depth / 64) < 1e-12);
    EXPECT(lo == want_lo && hi == want_hi && lo < hi);
    EXPECT(!strcmp(ml_doc_stat_fields[ML_NSTATS - 1].name, "rejections"));
    size_t tokens = 0;
    for (int64_t i = 0; i < 64; i++) tokens += (size_t)ml_dataset_stats(ds, i)->doc_len;
    EXPECT(ml_dataset_bytes(ds) == tokens * 12 + 64 * (sizeof(ml_doc_stats) + 64));
    ml_dataset_free(ds);
    ml_dataset *empty = ml_dataset_open(t, 1, ML_SPLIT_TRAIN);
    ml_dataset_stat_means(empty, m, &lo, &hi);
    EXPECT(m[0] == 0 && lo == 0 && hi == 0 && ml_dataset_bytes(empty) == 0);
    ml_dataset_free(empty);
    ml_task_release(t);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("tasks");
    TCase *tc = tcase_create("structure");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_atr_presets);
    tcase_add_test(tc, test_atr_split);
    tcase_add_test(tc, test_atr_sibling_split);
    tcase_add_test(tc, test_atr_options);
    tcase_add_test(tc, test_ar_presets);
    tcase_add_test(tc, test_token_names);
    tcase_add_test(tc, test_batch_layout);
    tcase_add_test(tc, test_determinism);
    tcase_add_test(tc, test_dataset_get_doc_and_show);
    tcase_add_test(tc, test_validation);
    tcase_add_test(tc, test_custom);
    tcase_add_test(tc, test_option_tables);
    tcase_add_test(tc, test_stat_means);
    tcase_add_test(tc, test_append_batch);
    suite_add_tcase(s, tc);
    tc = tcase_create("statistics");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_corpus_statistics);
    tcase_add_test(tc, test_ar_statistics);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ml_test_run(suite()); }
