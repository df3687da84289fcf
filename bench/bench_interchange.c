/* The paper's interchange sweep (docs/interventions.md, "The interchange evaluator") on 320 ar_32 test documents (V = 8196, L = 37):
 * 6 components x 2 layers x 2 label types x 6 positions (Mamba: 4 components) for 2-layer D = 64
 * models (untrained: the work does not depend on the weights). Prints the sweep's seconds, the
 * number of patched examples and patched forwards per CPU second (one forward = one combination on
 * the 320 documents, so a sweep is 144 of them for attention), on one thread. The CPU seconds of
 * the process are printed too: on a shared machine they are the honest single-thread time.
 *
 *   bench_interchange [arch ...]   (default: attention mamba)
 *   bench_interchange --reference  also time the reference (two full forwards per combination)
 *   bench_interchange --threads N  N threads (default 1)
 *   bench_interchange --workers W  W combinations at once, each on one thread (default: N; what
 *                                  ic.evaluate does by default: the machine's cores, at N = 1)
 *   bench_interchange --rounds R   R sweeps per path; prints the minimum CPU (and wall) seconds,
 *                                  as the machine is shared and noisy */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host/process.h"
#include "core/threads.h"
#include "interp/interp.h"
#include "tasks/task.h"

int main(int argc, char **argv) {
    mh_exec_passive(argv); /* workers that sleep when idle (host/process.h) */
    mh_tune_malloc();
    const char *archs[16];
    int n = 0;
    bool reference = false;
    int threads = 1, rounds = 1, workers = 0;
    for (int i = 1; i < argc && n < 16; i++) {
        if (!strcmp(argv[i], "--reference")) reference = true;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--workers") && i + 1 < argc) workers = atoi(argv[++i]);
        else archs[n++] = argv[i];
    }
    if (!n) archs[n++] = "attention", archs[n++] = "mamba";
    if (threads < 1 || rounds < 1 || workers < 0) {
        fprintf(stderr, "bench_interchange: --threads, --workers and --rounds expect a positive integer\n");
        return 1;
    }
    ml_set_threads(threads);
    printf("threads %d, workers %d, rounds %d (minimum over the rounds)\n", threads, workers ? workers : threads,
           rounds);
    ml_task *task = ml_task_preset("ar_32", 42);
    ml_dataset *ds = task ? ml_dataset_new(task, 320, 42, ML_SPLIT_TEST) : NULL;
    if (!ds) {
        fprintf(stderr, "bench_interchange: %s\n", ml_last_error());
        return 1;
    }
    printf("%-10s %-9s %6s %8s %8s %10s %12s %14s\n", "arch", "path", "combos", "wall s", "cpu s", "patched ex",
           "forwards/s", "ms/combination");
    for (int a = 0; a < n; a++) {
        ml_model_config cfg;
        ml_model_config_defaults(&cfg, archs[a]);
        ml_model *m = ml_model_new(&cfg);
        if (!m) {
            fprintf(stderr, "bench_interchange: %s\n", ml_last_error());
            return 1;
        }
        for (int ref = 0; ref <= (reference ? 1 : 0); ref++) {
            ml_ic_config c;
            ml_ic_config_paper(&c, m, task);
            c.reference = ref;
            c.workers = workers;
            double cpu = 0, wall = 0;
            ml_ic_result *r = NULL;
            for (int round = 0; round < rounds; round++) {
                ml_ic_result_free(r);
                struct timespec c0, c1;
                clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
                r = ml_ic_run(m, ds, 0, 320, &c);
                clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
                if (!r) {
                    fprintf(stderr, "bench_interchange: %s\n", ml_last_error());
                    return 1;
                }
                double t = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
                cpu = round == 0 || t < cpu ? t : cpu;
                wall = round == 0 || r->seconds < wall ? r->seconds : wall;
            }
            printf("%-10s %-9s %6d %8.2f %8.2f %10lld %12.1f %14.1f\n", archs[a], ref ? "reference" : "fast",
                   r->n_combos, wall, cpu, (long long)r->patched_forwards, r->n_combos / cpu,
                   1000 * cpu / r->n_combos);
            fflush(stdout);
            ml_ic_result_free(r);
        }
        ml_model_free(m);
    }
    ml_dataset_free(ds);
    ml_task_release(task);
    return 0;
}
