#include "core/threads.h"

#include <cblas.h>

static int n_threads = 1; /* one thread until asked: same bits on every machine by default */
static int initialised = 0;

int ml_threads(void) {
    if (!initialised) ml_set_threads(n_threads);
    return n_threads;
}

void ml_set_threads(int n) {
    if (n < 1) n = 1;
    n_threads = n;
    initialised = 1;
    openblas_set_num_threads(n);
}
