/* Times the generation of the paper's training sets (100,032 documents, docs/tasks.md):
 * pcfg_5_20 (target <= 5 s) and ar_32, then the ATR presets again with rng = "numpy" (the
 * original's stream; target <= 2 s); MQAR at L = 256 with 16 pairs in both streams (target
 * <= 2 s). Prints one line per task. A task written in Lua: bench/bench_tasks.lua.
 *   build/bench_tasks [n]   (n <= 100032 in numpy mode) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "host/process.h"
#include "tasks/task.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int bench(const char *preset, ml_task_rng rng, int64_t n) {
    double t0 = now();
    ml_task *t = ml_task_preset_rng(preset, 42, rng);
    if (!t) {
        fprintf(stderr, "bench_tasks: %s\n", ml_last_error());
        return 1;
    }
    double t1 = now();
    ml_dataset *ds = ml_dataset_new(t, n, 42, ML_SPLIT_TRAIN);
    double t2 = now();
    if (!ds) {
        fprintf(stderr, "bench_tasks: %s\n", ml_last_error());
        ml_task_release(t);
        return 1;
    }
    int64_t tokens = 0, rejected = 0;
    for (int64_t i = 0; i < n; i++) {
        tokens += ml_dataset_stats(ds, i)->doc_len;
        rejected += ml_dataset_stats(ds, i)->rejections;
    }
    /* One pass over the fixed-order batches of 32, as the training loop takes them. */
    double t3 = now();
    for (int64_t f = 0; f + 32 <= n; f += 32) {
        ml_tensor *tk, *tg;
        if (ml_dataset_batch_range(ds, f, 32, &tk, &tg, NULL) != ML_OK) {
            fprintf(stderr, "bench_tasks: %s\n", ml_last_error());
            return 1;
        }
        ml_release(tk);
        ml_release(tg);
    }
    double t4 = now();
    printf("%-15s %-6s task %7.3f s  generate %lld docs %7.3f s (%.2f us/doc, %lld tokens, %lld rejected draws)"
           "  batches %6.3f s\n",
           preset, ml_task_rng_name(rng), t1 - t0, (long long)n, t2 - t1, 1e6 * (t2 - t1) / (double)n, (long long)tokens,
           (long long)rejected, t4 - t3);
    ml_dataset_free(ds);
    ml_task_release(t);
    return 0;
}

int main(int argc, char **argv) {
    mh_tune_malloc(); /* host/process.h */
    int64_t n = argc > 1 ? atoll(argv[1]) : ML_TRAIN_DOCS;
    const char *presets[] = {"pcfg_5_20", "ar_32", "pcfg_10_20", "pcfg_easy_8192", "pcfg_tts", "sibling", "mqar_256_16"};
    int rc = 0;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) rc |= bench(presets[i], ML_RNG_PHILOX, n);
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (presets[i][0] != 'a') rc |= bench(presets[i], ML_RNG_NUMPY, n);
    return rc;
}
