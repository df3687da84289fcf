#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static int run(Suite *s, enum fork_status mode) {
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, mode);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* CK_FORK from the environment, a process per test where it is unset (Check's default). The
 * sanitizer build sets CK_FORK=no (CMakeLists.txt): each forked test's exit runs LeakSanitizer's
 * scan, about 0.1 s, more than most tests; in one process a single scan at the end sees them all. */
int ml_test_run(Suite *s) { return run(s, CK_FORK_GETENV); }

int ml_test_run_forked(Suite *s) { return run(s, CK_FORK); }

double ml_test_urand(unsigned long long *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (double)(*state >> 11) / 9007199254740992.0;
}

ml_tensor *ml_test_tokens(int B, int L, int vocab, uint64_t seed) {
    ml_rng r;
    ml_rng_init(&r, seed, 0);
    ml_tensor *t = ml_empty(ML_I32, 2, (int64_t[]){B, L});
    for (int i = 0; i < B * L; i++) ml_i32(t)[i] = (int32_t)ml_rng_below(&r, (uint32_t)vocab);
    return t;
}

int ml_test_site_index(const ml_model *m, int layer, const char *name) {
    for (int i = 0; i < m->n_sites; i++)
        if (m->site_layer[i] == layer && !strcmp(m->sites[i].name, name)) return i;
    return -1;
}

ml_tensor *ml_test_loss_fn(void *ud, ml_tensor **params) {
    ml_test_loss *u = ud;
    return ml_model_loss(u->m, u->tokens, u->targets, NULL, NULL, NULL);
}
