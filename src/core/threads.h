/* Thread count shared by OpenBLAS (sgemm) and mechlab's own batch-parallel loops (OpenMP).
 * The two never nest: kernels that run an OpenMP loop call no BLAS inside it, so setting n
 * threads never runs more than n busy threads. Results are bit-identical for a given n. */
#ifndef ML_THREADS_H
#define ML_THREADS_H

int ml_threads(void);
void ml_set_threads(int n); /* n >= 1; also sets OpenBLAS's thread count */

#endif
