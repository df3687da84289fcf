/* Learning-rate schedules with the lr_lambda functions of Hugging Face transformers
 * (optimization.py), applied the way torch's LambdaLR does: update `step` uses
 * base_lr * lr_lambda(step), starting at step 0. */
#include "optim/optim.h"

#include <math.h>
#include <string.h>

const char *const ml_schedule_kind_names[] = {"constant", "constant_with_warmup", "linear", "cosine", NULL};
enum { N_KINDS = ML_SCHED_COSINE_WARMUP + 1 };

const char *ml_schedule_kind_name(ml_schedule_kind kind) {
    if ((int)kind < 0 || (int)kind >= N_KINDS) return "?";
    return ml_schedule_kind_names[kind];
}

ml_status ml_schedule_kind_parse(const char *name, ml_schedule_kind *kind) {
    for (int i = 0; name && i < N_KINDS; i++)
        if (strcmp(name, ml_schedule_kind_names[i]) == 0) {
            *kind = (ml_schedule_kind)i;
            return ML_OK;
        }
    return ml_fail(ML_ERR_ARG, "schedule: unknown schedule '%s' (constant, constant_with_warmup, linear, cosine)",
                   name ? name : "(null)");
}

ml_status ml_schedule_init(ml_schedule *s, ml_schedule_kind kind, double base_lr, int64_t total_steps,
                           double warmup_fraction) {
    memset(s, 0, sizeof *s);
    if ((int)kind < 0 || (int)kind > (int)ML_SCHED_COSINE_WARMUP)
        return ml_fail(ML_ERR_ARG, "schedule: unknown kind %d", (int)kind);
    if (!(base_lr >= 0) || isinf(base_lr))
        return ml_fail(ML_ERR_ARG, "schedule: learning rate %g must be finite and >= 0", base_lr);
    if (total_steps < 0) return ml_fail(ML_ERR_ARG, "schedule: total steps %lld is negative", (long long)total_steps);
    if (!(warmup_fraction >= 0 && warmup_fraction <= 1))
        return ml_fail(ML_ERR_ARG, "schedule: warmup fraction %g is not in [0, 1]", warmup_fraction);
    s->kind = kind;
    s->base_lr = base_lr;
    s->total_steps = total_steps;
    /* Python's int(0.1 * T): truncation of the double product (0.1*50016 = 5001.6 -> 5001). */
    s->warmup_steps = kind == ML_SCHED_CONSTANT ? 0 : (int64_t)(warmup_fraction * (double)total_steps);
    s->num_cycles = 0.5;
    return ML_OK;
}

void ml_schedule_config_init(ml_schedule_config *c) {
    *c = (ml_schedule_config){.kind = ML_SCHED_COSINE_WARMUP, .lr = 1e-3, .total = 0, .warmup = 0.1};
}

ml_status ml_schedule_from_config(ml_schedule *s, const ml_schedule_config *c) {
    return ml_schedule_init(s, (ml_schedule_kind)c->kind, c->lr, c->total, c->warmup);
}

/* math.pi; M_PI is not part of strict C11. */
static const double ML_PI = 3.14159265358979323846;

static double max1(int64_t x) { return (double)(x > 1 ? x : 1); }

double ml_schedule_factor(const ml_schedule *s, int64_t step) {
    int64_t W = s->warmup_steps, T = s->total_steps;
    if (s->kind == ML_SCHED_CONSTANT) return 1.0;
    if (step < W) return (double)step / max1(W);
    switch (s->kind) {
    case ML_SCHED_CONSTANT_WARMUP:
        return 1.0;
    case ML_SCHED_LINEAR_WARMUP: {
        double f = (double)(T - step) / max1(T - W);
        return f > 0.0 ? f : 0.0;
    }
    case ML_SCHED_COSINE_WARMUP: {
        double progress = (double)(step - W) / max1(T - W);
        /* HF: 0.5 * (1 + cos(pi * num_cycles * 2 * progress)), in that multiplication order. */
        double f = 0.5 * (1.0 + cos(ML_PI * s->num_cycles * 2.0 * progress));
        return f > 0.0 ? f : 0.0;
    }
    default:
        return 1.0;
    }
}

double ml_schedule_lr(const ml_schedule *s, int64_t step) { return s->base_lr * ml_schedule_factor(s, step); }
