/* Thread count shared by OpenBLAS (sgemm) and mechlab's own batch-parallel loops (OpenMP).
 * The two never nest: kernels that run an OpenMP loop call no BLAS inside it, so setting n
 * threads never runs more than n busy threads. Results are bit-identical for a given n. */
#ifndef ML_THREADS_H
#define ML_THREADS_H

int ml_threads(void);
void ml_set_threads(int n); /* n >= 1; also sets OpenBLAS's thread count */

/* Idle workers of both pools spin after their parallel regions (libgomp for a few ms, OpenBLAS
 * for up to 2^28 cycles), and a spinning pool takes the cores the other one needs next: on two
 * cores, two threads ran 2-3x slower than one. Both libraries read their wait settings only when
 * they load, so a program calls this first thing in main: unless the user has set
 * OMP_WAIT_POLICY or OPENBLAS_THREAD_TIMEOUT, it executes the program again (once) with
 * OMP_WAIT_POLICY=passive and OPENBLAS_THREAD_TIMEOUT=4 (not under valgrind, which would not
 * follow the new image). It returns where it did not. */
void ml_threads_exec_passive(char **argv);

#endif
