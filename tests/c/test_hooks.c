/* A model's own hooks (m->hooks, where the Lua binding puts model:add_hook's): every run calls them
 * at each site before its own hook; the fast patch refuses to run with them; the evaluator then
 * takes the reference path. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp/interp.h"
#include "ops/ops.h"
#include "tasks/task.h"
#include "testutil.h"

static ml_model *tiny(void) {
    ml_model_config c;
    ml_model_config_defaults(&c, "attention");
    c.d_model = 16, c.n_layers = 2, c.vocab = 68, c.seed = 7;
    ml_model *m = ml_model_new(&c);
    ck_assert_msg(m != NULL, "%s", ml_last_error());
    return m;
}

/* Scales the activation at one site by `scale` and counts the calls there; records the value
 * seen last at that site. */
typedef struct {
    int site, calls;
    double scale;
    ml_tensor *seen;
} scaler;

static ml_tensor *scale_hook(void *ud, int site, ml_tensor *act, ml_status *err) {
    scaler *s = ud;
    if (site != s->site) return NULL;
    s->calls++;
    ml_release(s->seen);
    s->seen = ml_clone(act);
    return s->scale == 1.0 ? NULL : ml_binary_scalar(ML_MUL, act, s->scale);
}

static bool scale_wants(void *ud, int site) { return site == ((scaler *)ud)->site; }

static bool same_bits(const ml_tensor *a, const ml_tensor *b) {
    return ml_numel(a) == ml_numel(b) && !memcmp(ml_f32(a), ml_f32(b), sizeof(float) * (size_t)ml_numel(a));
}

START_TEST(model_hooks_run_first_at_every_run) {
    ml_model *m = tiny();
    ml_tensor *tok = ml_test_tokens(2, 9, 68, 1);
    int s = ml_test_site_index(m, 1, "mlp_output");
    scaler own = {.site = s, .scale = 2.0}, obs = {.site = s, .scale = 1.0};
    ml_run run_own = {.hook = scale_hook, .ud = &own, .wants = scale_wants};
    ml_run run_obs = {.hook = scale_hook, .ud = &obs, .wants = scale_wants};
    ml_tensor *want = ml_model_hidden(m, tok, &run_own), *plain = ml_model_hidden(m, tok, NULL);
    ml_tensor *before = own.seen; /* the unhooked activation */
    own.seen = NULL;
    m->hooks = &run_own;
    ck_assert(ml_site_wanted(m, NULL, s));
    ck_assert(!ml_site_wanted(m, NULL, ml_test_site_index(m, 0, "mlp_output")));
    ml_tensor *got = ml_model_hidden(m, tok, NULL), *got2 = ml_model_hidden(m, tok, &run_obs);
    ck_assert(same_bits(got, want) && same_bits(got2, want));
    ck_assert(!same_bits(got, plain));
    ml_tensor *twice = ml_binary_scalar(ML_MUL, before, 2.0);
    ck_assert_msg(same_bits(obs.seen, twice), "the run's hook sees the model hook's result");
    ck_assert_int_eq(own.calls, 3); /* want, got, got2; not plain */
    ml_tensor **acts = calloc((size_t)m->n_sites, sizeof *acts);
    ck_assert(ml_run_cache(m, tok, NULL, acts, NULL) == ML_OK);
    ck_assert_msg(same_bits(acts[s], twice), "the cache holds the hooked value");
    for (int i = 0; i < m->n_sites; i++) ml_release(acts[i]);
    free(acts);
    m->hooks = NULL;
    ml_release(want), ml_release(plain), ml_release(before), ml_release(got), ml_release(got2), ml_release(twice);
    ml_release(own.seen), ml_release(obs.seen), ml_release(tok);
    ml_model_free(m);
}
END_TEST

START_TEST(fast_patch_refuses_evaluator_takes_reference) {
    ml_model *m = tiny();
    ml_ar_config c = ml_ar_config_default();
    c.num_kv = 64, c.min_length = c.max_length = 8;
    ml_task *t = ml_task_ar(&c, 42);
    ml_dataset *ds = ml_dataset_new(t, 8, 1, ML_SPLIT_TEST);
    ck_assert_msg(ds != NULL, "%s", ml_last_error());
    ml_ic_config cfg;
    ml_ic_config_paper(&cfg, m, t);
    cfg.batch = 4;
    scaler sc = {.site = ml_test_site_index(m, 1, "mlp_output"), .scale = 0.5};
    ml_run run = {.hook = scale_hook, .ud = &sc, .wants = scale_wants};
    m->hooks = &run;
    ml_tensor **acts = calloc((size_t)m->n_sites, sizeof *acts);
    ml_tensor *tok = ml_test_tokens(2, 9, 68, 1);
    ck_assert(ml_run_cache(m, tok, NULL, acts, NULL) == ML_OK);
    ml_patch p = {.site = ml_test_site_index(m, 1, "block_input"), .source = acts[p.site]};
    ck_assert_ptr_null(ml_patch_fast(m, acts, &p, NULL));
    ck_assert_msg(strstr(ml_last_error(), "persistent hooks") != NULL, "%s", ml_last_error());
    ml_ic_result *fast = ml_ic_run(m, ds, 0, 8, &cfg);
    cfg.reference = true;
    ml_ic_result *ref = ml_ic_run(m, ds, 0, 8, &cfg);
    ck_assert_msg(fast && ref, "%s", ml_last_error());
    size_t n = (size_t)fast->n_combos * 8;
    ck_assert(!memcmp(fast->restored_prob, ref->restored_prob, n * sizeof(float)));
    ck_assert_int_eq(fast->patched_forwards, ref->patched_forwards); /* every example, as the reference */
    m->hooks = NULL;
    ml_ic_result *plain = ml_ic_run(m, ds, 0, 8, &cfg);
    ck_assert(plain && memcmp(plain->original_prob, ref->original_prob, 8 * sizeof(float)));
    ml_ic_result_free(fast), ml_ic_result_free(ref), ml_ic_result_free(plain);
    for (int i = 0; i < m->n_sites; i++) ml_release(acts[i]);
    free(acts);
    ml_release(tok), ml_release(sc.seen);
    ml_dataset_free(ds);
    ml_task_release(t);
    ml_model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("hooks");
    TCase *tc = tcase_create("model hooks");
    tcase_add_test(tc, model_hooks_run_first_at_every_run);
    tcase_add_test(tc, fast_patch_refuses_evaluator_takes_reference);
    suite_add_tcase(s, tc);
    return ml_test_run(s);
}
