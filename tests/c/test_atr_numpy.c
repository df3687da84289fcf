/* rng = "numpy": the emulation of numpy's legacy RandomState and of CPython's set order against
 * values printed by numpy 1.24 and CPython 3.11, and the protocol's datasets (lazy split
 * starts, limits, errors). The fixture documents themselves are checked in test_task.lua. */
#include <math.h>
#include <string.h>

#include "tasks/numpy_random.h"
#include "tasks/task.h"
#include "testutil.h"

START_TEST(test_random_sample) {
    /* np.random.RandomState(0).random_sample(3), RandomState(1).random_sample(2) */
    ml_np_random r;
    ml_np_seed(&r, 0);
    ck_assert(ml_np_double(&r) == 0.5488135039273248);
    ck_assert(ml_np_double(&r) == 0.7151893663724195);
    ck_assert(ml_np_double(&r) == 0.6027633760716439);
    ml_np_seed(&r, 1);
    ck_assert(ml_np_double(&r) == 0.417022004702574);
    ck_assert(ml_np_double(&r) == 0.7203244934421581);
    /* RandomState(42).randint(0, 2**32, size=3, dtype=np.uint32): the raw outputs */
    ml_np_seed(&r, 42);
    ck_assert_uint_eq(ml_np_u32(&r), 1608637542u);
    ck_assert_uint_eq(ml_np_u32(&r), 3421126067u);
    ck_assert_uint_eq(ml_np_u32(&r), 4083286876u);
    /* 700 outputs cross the regeneration of the 624-word state without repeating */
    ml_np_seed(&r, 42);
    uint32_t first = ml_np_u32(&r);
    for (int i = 1; i < 700; i++) ck_assert_uint_ne(ml_np_u32(&r), first);
}
END_TEST

START_TEST(test_randint) {
    /* RandomState(1): randint(0, 10, size=12), then randint(1, 11), then randint(0, 1000000) */
    const uint32_t expect[12] = {5, 8, 9, 5, 0, 0, 1, 7, 6, 9, 2, 4};
    ml_np_random r;
    ml_np_seed(&r, 1);
    for (int i = 0; i < 12; i++) ck_assert_uint_eq(ml_np_below(&r, 10), expect[i]);
    ck_assert_uint_eq(1 + ml_np_below(&r, 10), 6);
    ck_assert_uint_eq(ml_np_below(&r, 1000000), 691090);
    /* randint(0, 1) draws nothing: RandomState(9) then gives its first double */
    ml_np_seed(&r, 9);
    ck_assert_uint_eq(ml_np_below(&r, 1), 0);
    ck_assert(ml_np_double(&r) == 0.010374153885699955);
    /* choice([10, 20, 30]) without p is randint(0, 3): RandomState(9) gives 30 10 30 20 30 10 */
    const uint32_t idx[6] = {2, 0, 2, 1, 2, 0};
    ml_np_seed(&r, 9);
    for (int i = 0; i < 6; i++) ck_assert_uint_eq(ml_np_below(&r, 3), idx[i]);
}
END_TEST

START_TEST(test_exponential_dirichlet_choice) {
    ml_np_random r;
    /* RandomState(3).standard_exponential(3) */
    ml_np_seed(&r, 3);
    ck_assert(ml_np_exponential(&r) == 0.8002823868824798);
    ck_assert(ml_np_exponential(&r) == 1.2315078467403449);
    ck_assert(ml_np_exponential(&r) == 0.3437654016911953);
    /* p = RandomState(2).dirichlet(ones(5)); cumsum(p) / cumsum(p)[-1] */
    const double cdf5[5] = {0.22783917374835458, 0.23828970284908313, 0.5556688713687471, 0.7830339517222666, 1.0};
    double cdf[5];
    ml_np_seed(&r, 2);
    ml_np_dirichlet_ones_cdf(&r, 5, cdf);
    for (int i = 0; i < 5; i++) ck_assert_msg(cdf[i] == cdf5[i], "cdf[%d] = %.17g, expected %.17g", i, cdf[i], cdf5[i]);
    /* RandomState(7).choice(5, p=[.1, .2, .3, .15, .25]) twelve times */
    const double p[5] = {.1, .2, .3, .15, .25};
    const int expect[12] = {0, 4, 2, 3, 4, 2, 2, 0, 1, 2, 3, 4};
    ml_np_cdf(p, 5, cdf);
    ml_np_seed(&r, 7);
    for (int i = 0; i < 12; i++) ck_assert_int_eq(ml_np_search_right(cdf, 5, ml_np_double(&r)), expect[i]);
    /* side='right': a value equal to an entry goes past it */
    const double steps[3] = {0.25, 0.5, 1.0};
    ck_assert_int_eq(ml_np_search_right(steps, 3, 0.25), 1);
    ck_assert_int_eq(ml_np_search_right(steps, 3, 0.0), 0);
}
END_TEST

static void check_set(const int32_t *v, int n, const int32_t *expect, int m) {
    int32_t table[4096], out[256];
    ck_assert_int_le(ml_py_set_table_size(n), 4096);
    ck_assert_int_eq(ml_py_set_order(v, n, table, out), m);
    for (int i = 0; i < m; i++) ck_assert_msg(out[i] == expect[i], "entry %d: %d, expected %d", i, out[i], expect[i]);
}

START_TEST(test_python_set_order) {
    /* list(set(v)) in CPython 3.11: collisions, probing and resizes change the order */
    const int32_t a[] = {12, 4, 4, 4, 10, 9, 9, 9, 10, 12, 12}, ea[] = {9, 10, 12, 4};
    check_set(a, 11, ea, 4);
    const int32_t b[] = {4, 9, 10, 12}, eb[] = {9, 10, 4, 12};
    check_set(b, 4, eb, 4);
    const int32_t c[] = {37, 5, 200, 13, 8, 64, 21, 3, 96, 40, 1000, 17, 2, 129, 45};
    const int32_t ec[] = {64, 96, 2, 3, 129, 5, 37, 200, 8, 40, 1000, 13, 45, 17, 21};
    check_set(c, 15, ec, 15);
}
END_TEST

static ml_task *numpy_preset(const char *name, uint64_t seed) {
    ml_task *t = ml_task_preset_rng(name, seed, ML_RNG_NUMPY);
    ck_assert_msg(t != NULL, "%s: %s", name, ml_last_error());
    return t;
}

static void expect_same_docs(const ml_dataset *a, int64_t ia, const ml_dataset *b, int64_t ib, int count) {
    for (int k = 0; k < count; k++) {
        int la, lb;
        const int32_t *ta = ml_dataset_tokens(a, ia + k, &la), *tb = ml_dataset_tokens(b, ib + k, &lb);
        ck_assert_int_eq(la, lb);
        ck_assert(memcmp(ta, tb, (size_t)la * sizeof *ta) == 0);
        ck_assert(memcmp(ml_dataset_positions(a, ia + k), ml_dataset_positions(b, ib + k), ML_NPOS * sizeof(int32_t)) == 0);
    }
}

START_TEST(test_protocol_datasets) {
    /* pcfg_5_20 at seed 1, first training document (the original's, as in the fixture) */
    ml_task *t = numpy_preset("pcfg_5_20", 1);
    ml_dataset *tr = ml_dataset_new(t, 4, 99, ML_SPLIT_TRAIN); /* the seed argument is ignored */
    ck_assert_ptr_nonnull(tr);
    const int32_t doc0[13] = {1, 21, 7, 14, 7, 16, 17, 9, 4, 2, 14, 4, 2};
    int len;
    const int32_t *tok = ml_dataset_tokens(tr, 0, &len);
    ck_assert_int_eq(len, 13);
    ck_assert(memcmp(tok, doc0, sizeof doc0) == 0);
    /* a test set asked first, in a second task, is the one asked after the training set; its
     * first documents do not depend on how many are asked for */
    ml_task *t2 = numpy_preset("pcfg_5_20", 1);
    ml_dataset *te2 = ml_dataset_new(t2, 16, 1, ML_SPLIT_TEST);
    ml_dataset *full = ml_dataset_new(t, ML_TRAIN_DOCS, 1, ML_SPLIT_TRAIN);
    ml_dataset *te = ml_dataset_new(t, ML_EVAL_SPLIT_DOCS, 1, ML_SPLIT_TEST);
    ck_assert(te2 && full && te);
    expect_same_docs(te, 0, te2, 0, 16);
    expect_same_docs(tr, 0, full, 0, 4);
    /* the protocol's limits; no dev split without a train/test split */
    ck_assert_ptr_null(ml_dataset_new(t, ML_TRAIN_DOCS + 1, 1, ML_SPLIT_TRAIN));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "100032"));
    ck_assert_ptr_null(ml_dataset_new(t, ML_EVAL_SPLIT_DOCS + 1, 1, ML_SPLIT_TEST));
    ck_assert_ptr_null(ml_dataset_new(t, 4, 1, ML_SPLIT_DEV));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "no dev split"));
    /* the default stream is Philox: another grammar, other documents */
    ml_task *ph = ml_task_preset("pcfg_5_20", 1);
    ck_assert_int_eq(ml_task_atr_config(ph)->rng, ML_RNG_PHILOX);
    ck_assert_int_eq(ml_task_atr_config(t)->rng, ML_RNG_NUMPY);
    ml_dataset *pd = ml_dataset_new(ph, 4, 1, ML_SPLIT_TRAIN);
    int same = 0;
    for (int i = 0; i < 4; i++) {
        int lp;
        const int32_t *tp = ml_dataset_tokens(pd, i, &lp), *tn = ml_dataset_tokens(tr, i, &len);
        same += lp == len && memcmp(tp, tn, (size_t)lp * sizeof *tp) == 0;
    }
    ck_assert_int_lt(same, 4);
    ml_dataset_free(pd);
    ml_task_release(ph);
    ml_dataset_free(tr);
    ml_dataset_free(full);
    ml_dataset_free(te);
    ml_dataset_free(te2);
    ml_task_release(t);
    ml_task_release(t2);
}
END_TEST

START_TEST(test_protocol_split_order) {
    /* pcfg_tts: dev follows the training set and test follows dev */
    ml_task *t = numpy_preset("pcfg_tts", 1);
    ml_dataset *dev = ml_dataset_new(t, ML_EVAL_SPLIT_DOCS, 1, ML_SPLIT_DEV);
    ml_dataset *te = ml_dataset_new(t, 8, 1, ML_SPLIT_TEST);
    ml_task *u = numpy_preset("pcfg_tts", 1);
    ml_dataset *te_first = ml_dataset_new(u, 8, 1, ML_SPLIT_TEST);
    ck_assert(dev && te && te_first);
    expect_same_docs(te, 0, te_first, 0, 8);
    ml_dataset_free(dev);
    ml_dataset_free(te);
    ml_dataset_free(te_first);
    ml_task_release(t);
    ml_task_release(u);
}
END_TEST

START_TEST(test_numpy_errors) {
    ck_assert_ptr_null(ml_task_preset_rng("ar_32", 1, ML_RNG_NUMPY));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "ATR presets only"));
    ck_assert_ptr_null(ml_task_preset_rng("pcfg_5_20", (uint64_t)1 << 32, ML_RNG_NUMPY));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "0..2^32-1"));
    ml_atr_config c = ml_atr_config_default();
    c.rng = (ml_task_rng)7;
    ck_assert_ptr_null(ml_task_atr(&c, 1));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "rng must be"));
}
END_TEST

START_TEST(test_permutation) {
    /* ml_np_permutation (the MQAR key and value draws) is the plain shuffle: i from n-1 down,
     * swapped with randint(0, i + 1), across sizes whose masks shrink on the way */
    const int sizes[] = {1, 2, 3, 5, 8, 9, 64, 65, 100, 4095, 4096};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int n = sizes[k];
        int32_t fast[4096], slow[4096];
        ml_np_random a, b;
        ml_np_seed(&a, 5 + (uint32_t)k);
        ml_np_seed(&b, 5 + (uint32_t)k);
        ml_np_permutation(&a, n, fast);
        for (int i = 0; i < n; i++) slow[i] = i;
        for (int i = n - 1; i >= 1; i--) {
            int j = (int)ml_np_below(&b, (uint32_t)i + 1u);
            int32_t x = slow[i];
            slow[i] = slow[j];
            slow[j] = x;
        }
        for (int i = 0; i < n; i++) ck_assert_int_eq(fast[i], slow[i]);
        ck_assert_uint_eq(ml_np_u32(&a), ml_np_u32(&b)); /* the same number of draws */
    }
}
END_TEST

START_TEST(test_mqar_numpy) {
    /* the original's first document at seed 1 for (V, L, n) = (64, 32, 4)
     * (tests/fixtures/mqar_reference_seed1.jsonl; the whole sets are compared in test_mqar.lua) */
    ml_mqar_config c = ml_mqar_config_default();
    c.vocab_size = 64;
    c.input_seq_len = 32;
    c.num_kv_pairs = 4;
    c.random_non_queries = false;
    c.rng = ML_RNG_NUMPY;
    ml_task *t = ml_task_mqar(&c, 0);
    ck_assert_ptr_nonnull(t);
    ml_dataset *ds = ml_dataset_new(t, 256, 1, ML_SPLIT_TRAIN);
    ck_assert_ptr_nonnull(ds);
    const int32_t expect[32] = {28, 51, 4, 56, 20, 40, 24, 44, 4, 0, 24, 0, 28, 0, 0, 0,
                                0,  0,  0, 0,  0,  0,  0,  0,  0, 0, 0,  0, 20, 0, 0, 0};
    int len;
    const int32_t *tok = ml_dataset_tokens(ds, 0, &len);
    ck_assert_int_eq(len, 32);
    for (int p = 0; p < 32; p++) ck_assert_int_eq(tok[p], expect[p]);
    int n;
    const int32_t *ans, *rp = ml_dataset_readouts(ds, 0, &n, &ans);
    const int32_t rpos[4] = {8, 10, 12, 28}, rans[4] = {56, 44, 51, 40};
    ck_assert_int_eq(n, 4);
    for (int j = 0; j < 4; j++) {
        ck_assert_int_eq(rp[j], rpos[j]);
        ck_assert_int_eq(ans[j], rans[j]);
    }
    /* a batch's targets: the value at each query, -100 elsewhere */
    int64_t idx[1] = {0};
    ml_tensor *tk, *tg;
    ck_assert_int_eq(ml_dataset_batch(ds, idx, 1, &tk, &tg), ML_OK);
    int labelled = 0;
    for (int p = 0; p < 32; p++) labelled += ml_i32(tg)[p] != ML_IGNORE;
    ck_assert_int_eq(labelled, 4);
    ck_assert_int_eq(ml_i32(tg)[28], 40);
    ml_release(tk);
    ml_release(tg);
    /* the named positions of every query: the pair in the context and the query itself */
    const int32_t qio[4] = {2, 6, 0, 4};
    for (int j = 0; j < 4; j++) {
        int32_t pos[ML_NPOS];
        ck_assert_int_eq(ml_dataset_readout_positions(ds, 0, j, pos), ML_OK);
        ck_assert_int_eq(pos[ML_POS_QUERY_ITEM], rpos[j]);
        ck_assert_int_eq(pos[ML_POS_TARGET_ITEM], rpos[j] + 1);
        ck_assert_int_eq(pos[ML_POS_QUERY_ITEM_ORIG], qio[j]);
        ck_assert_int_eq(tok[pos[ML_POS_TARGET_ITEM_ORIG]], rans[j]);
        ck_assert_int_eq(pos[ML_POS_NEXT_KEY], qio[j] + 2 < 8 ? qio[j] + 2 : -1);
        if (j == 0) ck_assert_int_eq(memcmp(pos, ml_dataset_positions(ds, 0), sizeof pos), 0);
    }
    int32_t pos[ML_NPOS];
    ck_assert_int_ne(ml_dataset_readout_positions(ds, 0, 4, pos), ML_OK);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "readout 4 out of range 0..3"));
    ml_dataset_free(ds);
    /* single documents come from philox only; bad options name themselves */
    ml_rng rng;
    ml_rng_init(&rng, 1, 1);
    ml_doc d;
    ml_doc_init(&d);
    ck_assert_int_ne(ml_task_sample(t, &rng, ML_SPLIT_TRAIN, &d), ML_OK);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "draws whole datasets"));
    ml_doc_free(&d);
    ml_task_release(t);
    c.num_kv_pairs = 9; /* 2*9 + 2*9 > 32 */
    ck_assert_ptr_null(ml_task_mqar(&c, 0));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "num_kv_pairs * 2 * num_passes"));
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("atr_numpy");
    TCase *tc = tcase_create("numpy");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_random_sample);
    tcase_add_test(tc, test_randint);
    tcase_add_test(tc, test_exponential_dirichlet_choice);
    tcase_add_test(tc, test_python_set_order);
    tcase_add_test(tc, test_protocol_datasets);
    tcase_add_test(tc, test_protocol_split_order);
    tcase_add_test(tc, test_numpy_errors);
    tcase_add_test(tc, test_permutation);
    tcase_add_test(tc, test_mqar_numpy);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ml_test_run(suite()); }
