/* A mixer added the way docs/ARCHITECTURE.md ("Adding a mixer") says, for the tests that prove the
 * count (CMakeLists.txt, "Adding a mixer, proved"): attention's maths under the name "dummy",
 * reached through attention's descriptor, so that every loop over the registry meets one more
 * mixer and its test rows are attention's numbers. It has an option of its own, dummy_gain (the
 * output times it; 1 keeps attention's numbers), declared here and nowhere else. */
#include "nn/nn.h"
#include "ops/ops.h"

extern const ml_mixer_type ml_mixer_attention;

static double dummy_flops(const ml_model *m, int l, double B, double L) { return ml_mixer_attention.flops(m, l, B, L); }

static ml_status dummy_build(ml_model *m, int l, void **state) { return ml_mixer_attention.build(m, l, state); }

/* y times dummy_gain (a new reference; y's is released) */
static ml_tensor *gained(const ml_model *m, ml_tensor *y) {
    int64_t gain = ml_mixer_opt(&m->cfg, "dummy_gain");
    if (!y || gain == 1) return y;
    ml_tensor *z = ml_binary_scalar(ML_MUL, y, (double)gain);
    ml_release(y);
    return z;
}

static ml_tensor *dummy_forward(ml_model *m, int l, void *state, ml_tensor *x, ml_run *run) {
    return gained(m, ml_mixer_attention.forward(m, l, state, x, run));
}

static void dummy_free_state(void *state) { ml_mixer_attention.free_state(state); }

static void *dummy_rec_new(ml_model *m, int l, void *state, int64_t B) {
    return ml_mixer_attention.rec_new(m, l, state, B);
}

static ml_tensor *dummy_rec_step(ml_model *m, int l, void *state, void *rec, ml_tensor *x_t) {
    return gained(m, ml_mixer_attention.rec_step(m, l, state, rec, x_t));
}

static void dummy_rec_free(void *rec) { ml_mixer_attention.rec_free(rec); }

const ml_mixer_type ml_mixer_dummy = {
    .name = "dummy",
    .options = {ML_OPTION_INT("n_heads", 1, 1, 1024, "heads (paper: 1); must divide d_model"),
                ML_OPTION_INT("dummy_gain", 1, 1, 8, "the output times this")},
    .flops = dummy_flops,
    .build = dummy_build,
    .forward = dummy_forward,
    .free_state = dummy_free_state,
    .rec_new = dummy_rec_new,
    .rec_step = dummy_rec_step,
    .rec_free = dummy_rec_free,
};
