#include "host/process.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

void mh_exec_passive(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("OPENBLAS_THREAD_TIMEOUT")) return; /* the user's choice, or done */
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload")) return; /* under valgrind the new image would escape it */
    if (setenv("OMP_WAIT_POLICY", "passive", 1) || setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1)) return;
    execv("/proc/self/exe", argv); /* returns only on failure: go on with spinning workers */
}

void mh_tune_malloc(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}
