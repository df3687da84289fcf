#include "core/threads.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

void ml_threads_exec_passive(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("OPENBLAS_THREAD_TIMEOUT")) return; /* the user's choice, or done */
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload")) return; /* under valgrind the new image would escape it */
    if (setenv("OMP_WAIT_POLICY", "passive", 1) || setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1)) return;
    execv("/proc/self/exe", argv); /* returns only on failure: go on with spinning workers */
}
