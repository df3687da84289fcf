/* Path patching (docs/analysis.md, "Path patching"): the effect of a sender on a receiver through
 * the residual stream only (Wang et al. 2022, the IOI circuit). Three runs of the clean tokens:
 *
 *   1. the clean and corrupted runs cache the sender, the receiver and every writer (each
 *      layer's mixer output attention_output and its mlp_output);
 *   2. the clean run with the sender set to its corrupted value and every other writer frozen to
 *      its clean value: what reaches the receiver differs from the clean run only by the
 *      sender's direct path; the receiver's value is recorded;
 *   3. the clean run with only the receiver set to that recorded value -> hidden states.
 *
 * A head (sender_head / receiver_head >= 0, dim 2 of a per-head site) restricts the patch to that
 * head's slice. The writer of the sender's own component (the mixer output for a mixer-internal
 * sender, the MLP output for an MLP-internal one) is not frozen: it carries the sender. */
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "interp/interp.h"
#include "interp/pm_options.h"
#include "nn/sites.h"

enum { ROLE_NONE, ROLE_SENDER, ROLE_FROZEN, ROLE_RECORD, ROLE_RECEIVER };

typedef struct {
    const ml_model *m;
    const ml_path_patch *p;
    unsigned char *role;   /* [n_sites] */
    ml_tensor **clean;     /* [n_sites]: the clean run's cached values */
    ml_tensor *sender_src; /* the corrupted sender */
    ml_tensor *recorded;   /* pass 2's receiver */
    int pass;
} pp_ud;

static ml_tensor *pp_hook(void *ud, int site, ml_tensor *act, ml_status *err) {
    pp_ud *u = ud;
    const ml_path_patch *p = u->p;
    ml_tensor *out = NULL;
    if (u->pass == 0) { /* caching */
        if (u->role[site] != ROLE_NONE && !u->clean[site]) u->clean[site] = ml_retain(act);
        return NULL;
    }
    if (u->pass == 1) {
        if (site == p->sender) out = ml_with_head(act, u->sender_src, p->sender_head);
        else if (site == p->receiver) return ml_release(u->recorded), u->recorded = ml_retain(act), NULL;
        else if (u->role[site] == ROLE_FROZEN) out = ml_retain(u->clean[site]);
        else return NULL;
    } else {
        if (site != p->receiver) return NULL;
        out = ml_with_head(act, u->recorded, p->receiver_head);
    }
    if (!out) *err = ml_last_status();
    return out;
}

static bool pp_wants(void *ud, int site) { return ((pp_ud *)ud)->role[site] != ROLE_NONE; }

/* Whether site s belongs to the component of layer l named by writer (mixer or MLP). */
static bool inside(const ml_model *m, int s, int l, const char *writer) {
    if (m->site_layer[s] != l) return false;
    const char *n = m->sites[s].name;
    if (!strcmp(writer, "attention_output")) return !strncmp(n, "mixer.", 6) || !strcmp(n, "attention_output");
    return !strncmp(n, "mlp.", 4) || !strcmp(n, "mlp_output");
}

ml_tensor *ml_path_patch_run(ml_model *m, ml_tensor *clean, ml_tensor *corrupted, const ml_path_patch *p) {
    const char *fn = "path_patch";
    int S = p->sender, R = p->receiver;
    if (S < 0 || S >= m->n_sites || R < 0 || R >= m->n_sites || S == R)
        return ml_fail(ML_ERR_ARG, "%s: expected two different sites", fn), NULL;
    int ls = m->site_layer[S], lr = m->site_layer[R];
    bool s_mixer = inside(m, S, ls, "attention_output"), s_mlp = inside(m, S, ls, "mlp_output");
    if (!s_mixer && !s_mlp)
        return ml_fail(ML_ERR_ARG, "%s: the sender must be inside a mixer or an MLP or be its output (attention_output, "
                                   "mlp_output, a head), got %s", fn, m->sites[S].name), NULL;
    bool r_later = lr > ls || (lr == ls && s_mixer && (inside(m, R, lr, "mlp_output") || !strncmp(m->sites[R].name, "mlp_input", 9) ||
                                                       !strcmp(m->sites[R].name, "block_output")));
    if (!r_later) {
        char sn[ML_SITE_NAME_MAX], rn[ML_SITE_NAME_MAX];
        ml_site_fullname(m, S, sn, sizeof sn), ml_site_fullname(m, R, rn, sizeof rn);
        return ml_fail(ML_ERR_ARG, "%s: the receiver must read the residual stream after the sender (%s, then %s): a "
                                   "later layer, or the MLP of the sender's layer", fn, sn, rn), NULL;
    }
    pp_ud u = {.m = m, .p = p};
    u.role = calloc((size_t)m->n_sites, 1);
    u.clean = calloc((size_t)m->n_sites, sizeof *u.clean);
    ml_tensor **corr = calloc((size_t)m->n_sites, sizeof *corr);
    bool *want_corr = calloc((size_t)m->n_sites, 1);
    ml_tensor *hid = NULL;
    if (!u.role || !u.clean || !corr || !want_corr) {
        ml_fail(ML_ERR_MEM, "%s: out of memory", fn);
        goto done;
    }
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int w = 0; w < 2; w++) {
            const char *writer = w ? "mlp_output" : "attention_output";
            int s = ml_site_lookup(m, l, writer);
            if (s < 0 || s == R || (l == ls && ((w == 0 && s_mixer) || (w == 1 && s_mlp)))) continue;
            u.role[s] = ROLE_FROZEN;
        }
    u.role[S] = ROLE_SENDER, u.role[R] = ROLE_RECEIVER;
    want_corr[S] = true;
    ml_status st = ml_run_cache(m, corrupted, want_corr, corr, NULL);
    if (st) goto done;
    u.sender_src = corr[S];
    ml_run run = {.hook = pp_hook, .ud = &u, .wants = pp_wants};
    bool grad = ml_set_grad_enabled(false);
    for (u.pass = 0; u.pass < 3; u.pass++) {
        ml_tensor *h = ml_model_hidden(m, clean, &run);
        if (!h) break;
        if (u.pass == 2) hid = h;
        else ml_release(h);
        if (u.pass == 1 && !u.recorded) {
            ml_fail(ML_ERR_ARG, "%s: the receiver did not run", fn);
            break;
        }
    }
    ml_set_grad_enabled(grad);
done:
    for (int i = 0; u.clean && i < m->n_sites; i++) ml_release(u.clean[i]);
    for (int i = 0; corr && i < m->n_sites; i++) ml_release(corr[i]);
    ml_release(u.recorded);
    free(u.role), free(u.clean), free(corr), free(want_corr);
    return hid;
}
