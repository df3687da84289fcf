/* Shared helpers for the Check unit tests (each tests/c/test_*.c is its own executable). */
#ifndef ML_TESTUTIL_H
#define ML_TESTUTIL_H

#include <check.h>
#include <stdint.h>

#include "nn/model.h"

/* Runs the suite, prints Check's summary, returns the process exit code: a process per test
 * unless CK_FORK=no (the sanitizer build). _forked: always a process per test, for a suite whose
 * tests change their process (setrlimit, signal handlers). */
int ml_test_run(Suite *s);
int ml_test_run_forked(Suite *s);

/* xorshift64: the next value of *state in [0, 1). */
double ml_test_urand(unsigned long long *state);

/* Asserts |a-b| <= atol + rtol*|b| with a message naming what was compared. */
#define ck_assert_close(a, b, atol, rtol)                                                      \
    do {                                                                                        \
        double _a = (a), _b = (b);                                                              \
        ck_assert_msg(fabs(_a - _b) <= (atol) + (rtol)*fabs(_b), "%s = %.9g, expected %s = %.9g", \
                      #a, _a, #b, _b);                                                          \
    } while (0)

/* Random token ids (B, L) in [0, vocab), from Philox stream (seed, 0). */
ml_tensor *ml_test_tokens(int B, int L, int vocab, uint64_t seed);
/* Index of site `name` of `layer` in m->sites, or -1. */
int ml_test_site_index(const ml_model *m, int layer, const char *name);
/* For ml_gradcheck over a model's parameters: the loss of fixed tokens and targets. */
typedef struct {
    ml_model *m;
    ml_tensor *tokens, *targets;
} ml_test_loss;
ml_tensor *ml_test_loss_fn(void *ud, ml_tensor **params);

#endif
