#include "nn/train.h"

#include <math.h>

/* "nan", "inf" or "-inf" (printf may write "-nan") */
static const char *nonfinite_str(double x) { return isnan(x) ? "nan" : x > 0 ? "inf" : "-inf"; }

static ml_status run_batch(ml_model *m, ml_adamw *opt, ml_tensor *tokens, ml_tensor *targets, double lr,
                           ml_nonfinite_policy policy, ml_batch_stats *st) {
    if (opt) ml_model_zero_grad(m);
    ml_row_stats rs;
    ml_tensor *loss = ml_model_loss_stats(m, tokens, targets, NULL, NULL, NULL, &rs);
    ml_status s = loss ? ML_OK : ml_last_status();
    if (!s) {
        *st = (ml_batch_stats){.loss = ml_f32(loss)[0], .correct = rs.correct, .n = rs.n, .prob = rs.prob_sum,
                               .nonfinite = -1};
        if (opt && !isfinite(st->loss)) {
            st->nonfinite = ml_model_first_nonfinite(m);
            if (policy == ML_NONFINITE_STOP) {
                if (st->nonfinite >= 0)
                    s = ml_fail(ML_ERR_STATE, "train_step: the loss became %s at step %lld; first non-finite parameter: %s",
                                nonfinite_str(st->loss), (long long)opt->step, m->params[st->nonfinite].name);
                else
                    s = ml_fail(ML_ERR_STATE,
                                "train_step: the loss became %s at step %lld; every parameter is finite (the forward "
                                "pass overflowed)", nonfinite_str(st->loss), (long long)opt->step);
            }
        }
    }
    if (!s && opt) s = ml_backward(loss, NULL);
    if (!s && opt) s = ml_adamw_step(opt, ml_f32(m->flat), ml_f32(m->grad_flat), m->n_total, lr);
    if (!s && opt) m->flat->storage->version++;
    ml_release(loss);
    return s;
}

ml_status ml_train_step(ml_model *m, ml_adamw *opt, ml_tensor *tokens, ml_tensor *targets, double lr,
                        ml_nonfinite_policy policy, ml_batch_stats *st) {
    if (!opt || opt->n != m->n_total)
        return ml_fail(ML_ERR_ARG, "train_step: the optimiser covers %lld elements, the model has %lld",
                       opt ? (long long)opt->n : 0LL, (long long)m->n_total);
    return run_batch(m, opt, tokens, targets, lr, policy, st);
}

ml_status ml_eval_batch(ml_model *m, ml_tensor *tokens, ml_tensor *targets, ml_batch_stats *st) {
    bool old = ml_set_grad_enabled(false);
    ml_status s = run_batch(m, NULL, tokens, targets, 0, ML_NONFINITE_KEEP, st);
    ml_set_grad_enabled(old);
    return s;
}
