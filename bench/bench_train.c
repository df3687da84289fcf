/* Training-step benchmark on the paper's AR configuration: B = 32, L = 37, V = 8196, 2 layers.
 * Prints ms per step (AdamW update included), the matmul FLOPs of a step and GFLOP/s, for each
 * architecture (argv[1..], default: attention) at D = 64 and 256, on 1 and 2 threads.
 *
 * FLOPs count the matrix products (2 per multiply-add) of the forward pass and take the backward
 * pass as twice the forward (one product for each operand's gradient), so a step is 3x forward.
 * On a shared machine wall time measures the neighbours too: the process CPU time per step is
 * printed beside it (with 2 threads it adds both threads' time). */
#include <stdio.h>
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

/* Forward matmul FLOPs of one batch; N supervised rows get logits: each layer's mixer counts its
 * own (ml_mixer_type.flops), plus the MLP and the tied head. */
static double forward_flops(const ml_model *m, double B, double L, double N) {
    double D = m->cfg.d_model, V = m->cfg.vocab, f = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        f += m->layers[l].mixer->flops(m, l, B, L);
        if (m->p_fc1_w[l] >= 0) f += 2 * 2 * B * L * D * 4 * D;
    }
    return f + 2 * N * D * V;
}

int main(int argc, char **argv) {
    mh_exec_passive(argv); /* workers that sleep when idle (host/process.h) */
    mh_tune_malloc();
    const char *archs_default[] = {"attention"};
    const char **archs = argc > 1 ? (const char **)argv + 1 : archs_default;
    int n_archs = argc > 1 ? argc - 1 : 1;
    ml_task *task = ml_task_preset("ar_32", 42);
    ml_dataset *ds = task ? ml_dataset_new(task, 32 * 64, 42, ML_SPLIT_TRAIN) : NULL;
    if (!ds) {
        fprintf(stderr, "bench_train: %s\n", ml_last_error());
        return 1;
    }
    printf("%-12s %5s %7s %10s %10s %12s %9s\n", "arch", "D", "threads", "ms/step", "cpu ms", "GFLOP/step",
           "GFLOP/s");
    for (int a = 0; a < n_archs; a++)
        for (int di = 0; di < 2; di++)
            for (int threads = 1; threads <= 2; threads++) {
                ml_set_threads(threads);
                ml_model_config cfg;
                ml_model_config_defaults(&cfg, archs[a]);
                cfg.d_model = di ? 256 : 64;
                cfg.vocab = ml_task_vocab_size(task);
                cfg.pos_emb = !strcmp(archs[a], "attention");
                ml_model *m = ml_model_new(&cfg);
                ml_adamw opt;
                if (!m || ml_adamw_init(&opt, m->n_total, 0.9, 0.999, 1e-8, 0)) {
                    fprintf(stderr, "bench_train: %s\n", ml_last_error());
                    return 1;
                }
                ml_batch_stats st;
                ml_tensor *tok[8], *tg[8], *pos[8];
                for (int b = 0; b < 8; b++) ml_dataset_batch_range(ds, 32 * b, 32, &tok[b], &tg[b], &pos[b]);
                for (int i = 0; i < 20; i++) ml_train_step(m, &opt, tok[i % 8], tg[i % 8], 1e-3, ML_NONFINITE_STOP, &st); /* warm up */
                int steps = di ? 20 : 60;
                double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
                for (int i = 0; i < steps; i++)
                    if (ml_train_step(m, &opt, tok[i % 8], tg[i % 8], 1e-3, ML_NONFINITE_STOP, &st)) {
                        fprintf(stderr, "bench_train: %s\n", ml_last_error());
                        return 1;
                    }
                double ms = (clock_s(CLOCK_MONOTONIC) - t0) / steps * 1e3;
                double cpu = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / steps * 1e3;
                double gflop = 3 * forward_flops(m, 32, (double)tok[0]->shape[1], 32) / 1e9;
                printf("%-12s %5d %7d %10.2f %10.2f %12.3f %9.1f\n", archs[a], cfg.d_model, threads, ms, cpu, gflop,
                       gflop / ms * 1e3);
                fflush(stdout);
                for (int b = 0; b < 8; b++) ml_release(tok[b]), ml_release(tg[b]), ml_release(pos[b]);
                ml_adamw_free(&opt);
                ml_model_free(m);
            }
    ml_dataset_free(ds);
    return 0;
}
