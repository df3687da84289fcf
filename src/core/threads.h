/* Thread count shared by OpenBLAS (sgemm) and mechlab's own batch-parallel loops (OpenMP).
 * The two never nest: kernels that run an OpenMP loop call no BLAS inside it, so setting n
 * threads never runs more than n busy threads. Results are bit-identical for a given n. */
#ifndef ML_THREADS_H
#define ML_THREADS_H

#include <stdint.h>

int ml_threads(void);
void ml_set_threads(int n); /* n >= 1; also sets OpenBLAS's thread count */

/* Threads for a loop over `items` independent elements or rows: ml_threads(), or 1 below
 * ML_PARALLEL_MIN (a parallel region costs microseconds). Such a loop computes every item the
 * way one thread does, so its bits do not depend on the count: elementwise maps, norms and
 * running sums along a dim (the ops a Lua mixer is made of). */
enum { ML_PARALLEL_MIN = 1 << 15 };
static inline int ml_threads_for(int64_t items) { return items >= ML_PARALLEL_MIN ? ml_threads() : 1; }

#endif
