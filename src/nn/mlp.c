/* State mixers (docs/mixers.md, "State mixers"). Shapes: x (B, L, D) -> hidden (B, L, 4D) -> y (B, L, D).
 *   MLP: y = W2·gelu(W1·x + b1) + b2
 *   GLU: y = W3·[(W1x + b1) ⊙ gelu(W2x + b2)] + b3 */
#include <string.h>

#include "nn/nn.h"
#include "ops/ops.h"

ml_status ml_build_state_mixer(ml_model *m, int l) {
    const char *kind = m->cfg.state_mixer;
    if (!strcmp(kind, "none")) return ML_OK;
    int64_t D = m->cfg.d_model, H = 4 * D;
    int64_t hBLH[3] = {-1, -2, H};
    m->p_fc1_w[l] = ml_model_add_param(m, l, "state_mixer.fc1.weight", 2, (int64_t[]){H, D}, ML_P_LINEAR_W, D);
    m->p_fc1_b[l] = ml_model_add_param(m, l, "state_mixer.fc1.bias", 1, &H, ML_P_LINEAR_B, D);
    if (!strcmp(kind, "glu")) {
        m->p_fc2_w[l] = ml_model_add_param(m, l, "state_mixer.fc2.weight", 2, (int64_t[]){H, D}, ML_P_LINEAR_W, D);
        m->p_fc2_b[l] = ml_model_add_param(m, l, "state_mixer.fc2.bias", 1, &H, ML_P_LINEAR_B, D);
        m->p_fc3_w[l] = ml_model_add_param(m, l, "state_mixer.fc3.weight", 2, (int64_t[]){D, H}, ML_P_LINEAR_W, H);
        m->p_fc3_b[l] = ml_model_add_param(m, l, "state_mixer.fc3.bias", 1, &D, ML_P_LINEAR_B, H);
    } else {
        m->p_fc2_w[l] = ml_model_add_param(m, l, "state_mixer.fc2.weight", 2, (int64_t[]){D, H}, ML_P_LINEAR_W, H);
        m->p_fc2_b[l] = ml_model_add_param(m, l, "state_mixer.fc2.bias", 1, &D, ML_P_LINEAR_B, H);
    }
    int *site = m->layers[l].mlp_site;
    if ((site[0] = ml_model_add_site(m, l, "mlp.hidden_pre", 3, hBLH)) < 0 ||
        (site[1] = ml_model_add_site(m, l, "mlp.hidden_post", 3, hBLH)) < 0)
        return ml_last_status();
    return ML_OK;
}

/* The MLP's widths where fc1's product is one block of OpenBLAS's inner dimension: its bias-free
 * product plus the bias (ml_bias_gelu) rounds as the product onto the bias (beta = 1) does; checked
 * up to here (docs/kernels.md, "Small widths"). */
#define FUSED_BIAS_GELU_MAX_D 64

ml_tensor *ml_state_mixer_forward(ml_model *m, int l, ml_tensor *x, ml_run *run) {
    if (m->p_fc3_w[l] < 0 && m->cfg.d_model <= FUSED_BIAS_GELU_MAX_D && !ml_model_hooked(m, run)) {
        /* no hook can see mlp.hidden_pre or hidden_post: bias and GELU in one pass */
        ml_tensor *h = ml_linear(x, ml_model_p(m, m->p_fc1_w[l]), NULL);
        ml_tensor *hid = h ? ml_bias_gelu(h, ml_model_p(m, m->p_fc1_b[l])) : NULL;
        ml_release(h);
        ml_tensor *y = hid ? ml_linear(hid, ml_model_p(m, m->p_fc2_w[l]), ml_model_p(m, m->p_fc2_b[l])) : NULL;
        ml_release(hid);
        return y;
    }
    ml_tensor *pre = ml_linear(x, ml_model_p(m, m->p_fc1_w[l]), ml_model_p(m, m->p_fc1_b[l]));
    if (!pre || !ml_at_site(m, run, m->layers[l].mlp_site[0], &pre)) return NULL;
    ml_tensor *hid, *y;
    if (m->p_fc3_w[l] >= 0) { /* GLU: gate on the second projection */
        ml_tensor *g = ml_linear(x, ml_model_p(m, m->p_fc2_w[l]), ml_model_p(m, m->p_fc2_b[l]));
        ml_tensor *ga = g ? ml_unary(ML_GELU, g) : NULL;
        hid = ga ? ml_mul(pre, ga) : NULL;
        ml_release(g), ml_release(ga);
    } else {
        hid = ml_unary(ML_GELU, pre);
    }
    ml_release(pre);
    if (!hid || !ml_at_site(m, run, m->layers[l].mlp_site[1], &hid)) return NULL;
    int w = m->p_fc3_w[l] >= 0 ? m->p_fc3_w[l] : m->p_fc2_w[l];
    int b = m->p_fc3_w[l] >= 0 ? m->p_fc3_b[l] : m->p_fc2_b[l];
    y = ml_linear(hid, ml_model_p(m, w), ml_model_p(m, b));
    ml_release(hid);
    return y;
}
