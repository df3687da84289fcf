/* Optimiser and learning-rate schedules.
 *
 * AdamW reproduces torch.optim.AdamW (single-tensor path, the CPU default) element by element:
 *   step += 1
 *   p  = p * (1 - lr*wd)                       decoupled weight decay, before the Adam update
 *   m  = m + (1-b1) * (g - m)                  exp_avg.lerp_(grad, 1-b1)
 *   v  = v*b2 + ((1-b2)*g)*g                   exp_avg_sq.mul_(b2).addcmul_(grad, grad, 1-b2)
 *   bc1 = 1 - b1^step, bc2 = 1 - b2^step       (double, as Python computes them)
 *   d  = sqrt(v) / sqrt(bc2) + eps
 *   p  = p + (-lr/bc1) * m / d                 param.addcdiv_(exp_avg, denom, value=-step_size)
 * Scalars are computed in double and rounded to float where PyTorch casts them to the tensor's
 * dtype, so results agree with PyTorch to float rounding (PyTorch's SIMD lerp uses an FMA).
 *
 * State layout: the optimiser owns two flat float32 tensors m and v of n elements (shape [n]) and
 * one step count shared by all elements. The model keeps its parameters and gradients in one flat
 * buffer and calls ml_adamw_step once per update; the checkpoint code saves m, v (or views of
 * them per parameter) and `step`. PyTorch keeps one step per parameter tensor and skips tensors
 * whose .grad is None; with one shared count the results are the same as long as a parameter
 * either always or never has a gradient, which is the case in every configuration of the paper. */
#ifndef ML_OPTIM_H
#define ML_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"

typedef struct {
    double beta1, beta2, eps, weight_decay;
    int64_t n;        /* number of parameter elements covered */
    int64_t step;     /* updates done so far (PyTorch's state['step']) */
    ml_tensor *m;     /* exp_avg, float32 [n], zero-initialised */
    ml_tensor *v;     /* exp_avg_sq, float32 [n], zero-initialised */
} ml_adamw;

/* PyTorch's defaults: betas (0.9, 0.999), eps 1e-8, weight_decay 0.01 (the paper uses 0). */
#define ML_ADAMW_BETA1 0.9
#define ML_ADAMW_BETA2 0.999
#define ML_ADAMW_EPS 1e-8

/* Allocates zero moments for n elements. Checks 0 <= beta < 1, eps >= 0, weight_decay >= 0.
 * On failure opt is left zeroed (ml_adamw_free on it is harmless). */
ml_status ml_adamw_init(ml_adamw *opt, int64_t n, double beta1, double beta2, double eps, double weight_decay);
void ml_adamw_free(ml_adamw *opt);
/* Sets the moments to zero and the step to 0 (a fresh optimiser). */
void ml_adamw_reset(ml_adamw *opt);

/* One update of all n = opt->n elements: params -= ... using grads. lr is the learning rate of
 * this update (ml_schedule_lr). Arrays must not overlap the moments. */
ml_status ml_adamw_step(ml_adamw *opt, float *params, const float *grads, int64_t n, double lr);

/* Convenience over a list of parameter tensors laid out consecutively in m and v (the sum of
 * their element counts must equal opt->n). Each must be a contiguous float32 tensor; its .grad
 * (contiguous float32, same shape) is used, and a tensor whose .grad is NULL is skipped (its
 * moments stay as they are). The step count advances once. Bumps each updated storage's version. */
ml_status ml_adamw_step_tensors(ml_adamw *opt, int n_params, ml_tensor *const *params, double lr);

/* Lower level: the update of one stretch [offset, offset+n) of the parameters and moments at step
 * count `step` (already incremented, >= 1). ml_adamw_step = ++step, then this over everything. */
void ml_adamw_update(ml_adamw *opt, int64_t offset, float *params, const float *grads, int64_t n,
                     double lr, int64_t step);

/* The element-wise AdamW update that both optimisers run (the model's flat buffer above and the
 * optimiser object over tensors below): one update at step count `step` (>= 1) of n elements with
 * the hyper-parameters beta1, beta2, eps, weight_decay (validated by the caller). */
void ml_adamw_kernel(double beta1, double beta2, double eps, double weight_decay, float *params, const float *grads,
                     float *m, float *v, int64_t n, double lr, int64_t step);

/* SGD with PyTorch's torch.optim.SGD arithmetic (single-tensor path), one tensor of n elements:
 *   d = g + wd*p                              (when wd != 0)
 *   buf = d (first update), else buf = momentum*buf + (1-dampening)*d   (when momentum != 0)
 *   d = d + momentum*buf (nesterov) or d = buf
 *   p = p - lr*d
 * buf is NULL when momentum is 0; `first` says buf holds nothing yet. */
void ml_sgd_kernel(double momentum, double dampening, bool nesterov, double weight_decay, float *params,
                   const float *grads, float *buf, bool first, int64_t n, double lr);

/* ---- optimisers as objects: AdamW and SGD over a list of leaf tensors, in parameter groups ----
 *
 * Each parameter is a float32 contiguous leaf tensor that requires grad (the optimiser retains it);
 * its .grad is read at each step and a parameter whose .grad is NULL is skipped (PyTorch). Groups
 * carry their own hyper-parameters. State per parameter, allocated at its first update: AdamW's
 * step count, exp_avg and exp_avg_sq; SGD's momentum_buffer. */
typedef enum { ML_OPTIM_ADAMW = 0, ML_OPTIM_SGD } ml_optim_kind;

typedef struct {
    double lr, weight_decay;
    double beta1, beta2, eps;      /* AdamW */
    double momentum, dampening;    /* SGD */
    bool nesterov;                 /* SGD */
} ml_optim_hparams;

typedef struct {
    ml_optim_hparams h;
    int first, count;              /* its parameters: state[first .. first+count) */
} ml_optim_group;

typedef struct {
    ml_tensor *param;              /* retained */
    int64_t step;                  /* updates of this parameter (AdamW's state['step']) */
    ml_tensor *buf1, *buf2;        /* AdamW exp_avg, exp_avg_sq; SGD momentum_buffer (buf2 NULL) */
} ml_optim_state;

typedef struct {
    ml_optim_kind kind;
    int n_groups, n_params;
    ml_optim_group *groups;
    ml_optim_state *state;
} ml_optimizer;

const char *ml_optim_kind_name(ml_optim_kind kind); /* "adamw", "sgd" */
/* PyTorch's defaults: AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2; SGD lr 1e-3,
 * no momentum, dampening or weight decay. */
ml_optim_hparams ml_optim_defaults(ml_optim_kind kind);
/* NULL when h is valid for kind, else what is wrong ("lr -1 must be finite and >= 0"), in buf. */
const char *ml_optim_hparams_problem(ml_optim_kind kind, const ml_optim_hparams *h, char *buf, size_t n);
/* NULL when t can be optimised, else why not ("a non-leaf tensor (made by AddBackward)", ...). */
const char *ml_optim_param_problem(const ml_tensor *t, char *buf, size_t n);

/* A new optimiser over n_groups groups: group g has hparams h[g] and the next counts[g] tensors of
 * params. Checks every hyper-parameter and tensor (and that no tensor appears twice). */
ml_optimizer *ml_optimizer_new(ml_optim_kind kind, int n_groups, const ml_optim_hparams *h, const int *counts,
                               ml_tensor *const *params);
void ml_optimizer_free(ml_optimizer *o);
/* One update of every parameter with a gradient. Every gradient is checked (float32, contiguous,
 * the parameter's shape) before anything changes. */
ml_status ml_optimizer_step(ml_optimizer *o);
/* Drops (set_to_none) or zeroes every parameter's gradient. */
void ml_optimizer_zero_grad(ml_optimizer *o, bool set_to_none);
/* Sets parameter i's state (a resumed optimiser): step, and copies of buf1/buf2 (NULL for none),
 * which must match the parameter's shape; the kind decides which buffers it needs. */
ml_status ml_optimizer_set_state(ml_optimizer *o, int i, int64_t step, const ml_tensor *buf1, const ml_tensor *buf2);

/* Scales the gradients of params (NULL gradients skipped) so that their global L2 norm is at most
 * max_norm, as torch.nn.utils.clip_grad_norm_: coefficient max_norm / (norm + 1e-6), clamped to
 * 1. *total receives the norm before clipping. */
ml_status ml_clip_grad_norm(int n, ml_tensor *const *params, double max_norm, double *total);

/* ---- learning-rate schedules (Hugging Face transformers semantics) ---- */

typedef enum {
    ML_SCHED_CONSTANT = 0,       /* get_constant_schedule */
    ML_SCHED_CONSTANT_WARMUP,    /* get_constant_schedule_with_warmup */
    ML_SCHED_LINEAR_WARMUP,      /* get_linear_schedule_with_warmup */
    ML_SCHED_COSINE_WARMUP       /* get_cosine_schedule_with_warmup, num_cycles 0.5 */
} ml_schedule_kind;

typedef struct {
    ml_schedule_kind kind;
    double base_lr;
    int64_t total_steps;   /* num_training_steps */
    int64_t warmup_steps;  /* num_warmup_steps = int(warmup_fraction * total_steps) */
    double num_cycles;     /* cosine only; 0.5 = half a cosine down to 0 */
} ml_schedule;

/* Fills s. warmup_steps = floor(warmup_fraction * total_steps) computed in double, as Python's
 * int() does. Checks base_lr >= 0, total_steps >= 0, 0 <= warmup_fraction <= 1. */
ml_status ml_schedule_init(ml_schedule *s, ml_schedule_kind kind, double base_lr, int64_t total_steps,
                           double warmup_fraction);
/* A schedule as callers give it (mech.lr_schedule's options, a run's config); the defaults are
 * ml_schedule_config_init's: cosine, lr 1e-3, total 0, warmup 0.1. */
typedef struct {
    int kind;      /* ml_schedule_kind */
    double lr;     /* base_lr */
    int64_t total; /* total_steps */
    double warmup; /* the warmup fraction of total */
} ml_schedule_config;
void ml_schedule_config_init(ml_schedule_config *c);
/* ml_schedule_init with the config's fields (the same checks). */
ml_status ml_schedule_from_config(ml_schedule *s, const ml_schedule_config *c);
/* The kinds' names in ml_schedule_kind order, NULL-terminated. */
extern const char *const ml_schedule_kind_names[];
/* Parses "constant", "constant_with_warmup", "linear", "cosine" (HF's SchedulerType names). */
ml_status ml_schedule_kind_parse(const char *name, ml_schedule_kind *kind);
const char *ml_schedule_kind_name(ml_schedule_kind kind);
/* HF's lr_lambda(step): the multiplier of base_lr. */
double ml_schedule_factor(const ml_schedule *s, int64_t step);
/* The learning rate of the update at 0-based `step`, exactly as LambdaLR applies it:
 * base_lr * lr_lambda(step); the first update (step 0) uses lr_lambda(0). */
double ml_schedule_lr(const ml_schedule *s, int64_t step);

#endif
