/* Step time of every architecture relative to attention, on one thread, at the paper's AR
 * configuration (B = 32, L = 37, V = 8196, 2 layers; learned positions for attention only, as in
 * the paper's NoPE runs). On a shared machine wall-clock time mostly measures the neighbours, so
 * this reports the process CPU time per step as well, each the best of `rounds` rounds that visit
 * the architectures in turn (so slow phases of the machine hit all of them alike).
 *
 *   bench_mixers [D [steps [rounds [arch ...]]]]     defaults: 64 40 3, every architecture
 *
 * Naming architectures (for a profiler, say) runs just those; the ratio column needs attention
 * among them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host/process.h"
#include "core/threads.h"
#include "nn/train.h"
#include "tasks/task.h"

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    mh_tune_malloc(); /* host/process.h */
    enum { N_MAX = 64 };
    const char *archs[N_MAX];
    int N_ARCHS = 0, attn = -1;
    for (int i = 4; i < argc && N_ARCHS < N_MAX; i++) archs[N_ARCHS++] = argv[i];
    if (!N_ARCHS)
        for (int i = 0; i < ml_mixer_count() && i < N_MAX; i++) archs[N_ARCHS++] = ml_mixer_at(i)->name;
    for (int a = 0; a < N_ARCHS; a++)
        if (!strcmp(archs[a], "attention")) attn = a;
    int D = argc > 1 ? atoi(argv[1]) : 64, steps = argc > 2 ? atoi(argv[2]) : 40, rounds = argc > 3 ? atoi(argv[3]) : 3;
    if (D < 2 || D % 2 || steps < 1 || rounds < 1) {
        fprintf(stderr, "usage: bench_mixers [D (even) [steps [rounds [arch ...]]]]\n");
        return 2;
    }
    ml_set_threads(1);
    ml_task *task = ml_task_preset("ar_32", 42);
    ml_dataset *ds = task ? ml_dataset_new(task, 32 * 8, 42, ML_SPLIT_TRAIN) : NULL;
    if (!ds) {
        fprintf(stderr, "bench_mixers: %s\n", ml_last_error());
        return 1;
    }
    ml_tensor *tok[8], *tg[8], *pos[8];
    for (int b = 0; b < 8; b++)
        if (ml_dataset_batch_range(ds, 32 * b, 32, &tok[b], &tg[b], &pos[b])) {
            fprintf(stderr, "bench_mixers: %s\n", ml_last_error());
            return 1;
        }
    ml_model *models[N_MAX];
    ml_adamw opts[N_MAX];
    double best_cpu[N_MAX], best_wall[N_MAX];
    for (int a = 0; a < N_ARCHS; a++) {
        ml_model_config cfg;
        ml_model_config_defaults(&cfg, archs[a]);
        cfg.d_model = D;
        cfg.vocab = ml_task_vocab_size(task);
        cfg.pos_emb = !strcmp(archs[a], "attention");
        models[a] = ml_model_new(&cfg);
        if (!models[a] || ml_adamw_init(&opts[a], models[a]->n_total, 0.9, 0.999, 1e-8, 0)) {
            fprintf(stderr, "bench_mixers: %s\n", ml_last_error());
            return 1;
        }
        best_cpu[a] = best_wall[a] = 1e30;
    }
    ml_batch_stats st;
    for (int r = 0; r < rounds; r++)
        for (int a = 0; a < N_ARCHS; a++) {
            for (int i = 0; i < 3; i++) ml_train_step(models[a], &opts[a], tok[i], tg[i], 1e-3, ML_NONFINITE_STOP, &st); /* warm */
            double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
            for (int i = 0; i < steps; i++)
                if (ml_train_step(models[a], &opts[a], tok[i % 8], tg[i % 8], 1e-3, ML_NONFINITE_STOP, &st)) {
                    fprintf(stderr, "bench_mixers: %s\n", ml_last_error());
                    return 1;
                }
            double cpu = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / steps * 1e3;
            double wall = (clock_s(CLOCK_MONOTONIC) - w0) / steps * 1e3;
            best_cpu[a] = cpu < best_cpu[a] ? cpu : best_cpu[a];
            best_wall[a] = wall < best_wall[a] ? wall : best_wall[a];
        }
    printf("D=%d, 1 thread, best of %d rounds of %d steps\n", D, rounds, steps);
    printf("%-10s %12s %13s %12s\n", "arch", "cpu ms/step", "wall ms/step", attn >= 0 ? "cpu / attn" : "");
    for (int a = 0; a < N_ARCHS; a++) {
        printf("%-10s %12.2f %13.2f", archs[a], best_cpu[a], best_wall[a]);
        if (attn >= 0) printf(" %12.2f", best_cpu[a] / best_cpu[attn]);
        printf("\n");
    }
    for (int a = 0; a < N_ARCHS; a++) {
        ml_adamw_free(&opts[a]);
        ml_model_free(models[a]);
    }
    for (int b = 0; b < 8; b++) ml_release(tok[b]), ml_release(tg[b]), ml_release(pos[b]);
    ml_dataset_free(ds);
    return 0;
}
