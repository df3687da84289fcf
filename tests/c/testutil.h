/* Shared helpers for the Check unit tests (each tests/c/test_*.c is its own executable). */
#ifndef ML_TESTUTIL_H
#define ML_TESTUTIL_H

#include <check.h>

/* Runs the suite in fork mode, prints Check's summary, returns the process exit code. */
int ml_test_run(Suite *s);

/* Asserts |a-b| <= atol + rtol*|b| with a message naming what was compared. */
#define ck_assert_close(a, b, atol, rtol)                                                      \
    do {                                                                                        \
        double _a = (a), _b = (b);                                                              \
        ck_assert_msg(fabs(_a - _b) <= (atol) + (rtol)*fabs(_b), "%s = %.9g, expected %s = %.9g", \
                      #a, _a, #b, _b);                                                          \
    } while (0)

#endif
