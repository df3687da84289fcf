/* Process policy for the programs built on the library (mechlab and the C benchmarks): how the
 * process allocates and how its thread pools wait. The library itself sets neither; a program
 * calls these first thing in main. */
#ifndef MH_PROCESS_H
#define MH_PROCESS_H

/* Idle workers of both pools spin after their parallel regions (libgomp for a few ms, OpenBLAS
 * for up to 2^28 cycles), and a spinning pool takes the cores the other one needs next: on two
 * cores, two threads ran 2-3x slower than one. Both libraries read their wait settings only when
 * they load, so unless the user has set OMP_WAIT_POLICY or OPENBLAS_THREAD_TIMEOUT, this
 * executes the program again (once) with OMP_WAIT_POLICY=passive and OPENBLAS_THREAD_TIMEOUT=4
 * (not under valgrind, which would not follow the new image). It returns where it did not. */
void mh_exec_passive(char **argv);

/* Training allocates and frees the same large buffers every step. glibc would serve each from
 * fresh mmap'd pages (page faults every step); keeping them in the heap reuses warm memory.
 * Call before the first tensor is allocated. No effect without glibc. */
void mh_tune_malloc(void);

#endif
