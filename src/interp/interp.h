/* Interventions (docs/interventions.md): caching, patching, ablations, model surgery and the
 * paper's interchange evaluator. Pure C on top of the model's hook sites (nn/model.h).
 *
 * A site is addressed by its index into m->sites (layer and name together); "blocks.{l}.{name}"
 * is its full name. The position of a site is its first L dimension (-2 in the declared shape):
 * patching position p of example b overwrites every element whose batch index is b and whose
 * position index is p (a D-vector for the paper's sites; a row of every head's pattern for
 * mixer.pattern; E·N numbers for mixer.ssm_state).
 *
 * The fast path: a patch at layer l resumes the base run at layer l from its cached activations
 * (ml_model_hidden_resume), so the layers below are never recomputed; a patch at one of the six
 * paper sites is written into the entry value and the rest of the model runs without hooks; a
 * patch at a mixer-internal site resumes at attention_input (mlp.* at mlp_input) with a hook. The
 * evaluator also skips examples whose patched unit already holds the source's bits (the patch
 * cannot change them) and, after the last mixer, keeps only the readout row. */
#ifndef ML_INTERP_H
#define ML_INTERP_H

#include <stdio.h>

#include "nn/model.h"

/* (tasks/task.h and ops/ops.h cannot share a translation unit: both name ml_split) */
typedef struct ml_task ml_task;
typedef struct ml_dataset ml_dataset;

/* ---- sites ---- */
/* The dimension that holds the position, or -1 when the site has no batch-and-position layout
 * (filters); such sites cannot be patched per position. */
int ml_site_pos_dim(const ml_model *m, int site);

/* ---- per-head weights (heads.c) ---- */
/* TransformerLens's weight `name` of layer `layer` (ignored for W_E, W_pos, W_U) as a view of the
 * model's parameters: W_Q, W_K, W_V (H, D, d_h), W_O (H, d_h, D), b_O (D), W_E (V, D), W_pos
 * (max_pos, D), W_U (D, V). Writes go through; gradients flow to the parameters. NULL with an
 * error for another mixer than attention, a bias it lacks (b_Q, b_K, b_V) or an unknown name. */
ml_tensor *ml_head_weight(ml_model *m, int layer, const char *name);
extern const char *const ml_head_weight_names[]; /* NULL-terminated */

/* ---- path patching (path_patching.c) ---- */
typedef struct {
    int sender, receiver;            /* site ids: the sender inside a mixer or MLP (or its output) */
    int sender_head, receiver_head;  /* >= 0: only that head (dim 2 of a per-head site); -1: all */
} ml_path_patch;
/* The clean run with the receiver set to what it reads when the sender takes its corrupted value
 * and every other component output (mixer and MLP outputs) is frozen to its clean value: the
 * sender's effect through the residual stream only. -> hidden states (B, L, D). */
ml_tensor *ml_path_patch_run(ml_model *m, ml_tensor *clean, ml_tensor *corrupted, const ml_path_patch *p);

/* ---- implicit attention (implicit_attention.c) ---- */
/* Layer `layer`'s mixer on tokens as an L × L matrix per head or channel (B, heads, L, L) whose
 * product with the values gives the mixer's output: attention's and Based's pattern (values v),
 * DeltaNet's linear attention through the delta rule (values v, output mixer.o), H3's gated
 * convolution (values v, head h's channels 2h, 2h+1, output mixer.o), Hyena's long convolution
 * between its gates (values v = short_conv[2D:3D], output mixer.y), Mamba's ml_mamba_attention. */
ml_tensor *ml_implicit_attention_run(ml_model *m, ml_tensor *tokens, int layer);

/* ---- caching ---- */
/* Runs tokens (B, L) and keeps the activation of every site i with want[i] (want NULL: all) in
 * acts[i] (m->n_sites entries; new references, NULL elsewhere). hidden (may be NULL) receives
 * LN_f of the final residual. No gradients are recorded. */
ml_status ml_run_cache(ml_model *m, ml_tensor *tokens, const bool *want, ml_tensor **acts, ml_tensor **hidden);
/* The same with gradients: grads[i] = d objective / d act_i, objective = Σ_b log p(targets[b] |
 * row rows[b]) (logprob = true) or Σ_b p(targets[b] | row rows[b]). rows, targets: int32 (B).
 * Parameter gradients are not touched. */
ml_status ml_run_cache_grad(ml_model *m, ml_tensor *tokens, ml_tensor *rows, ml_tensor *targets, bool logprob,
                            const bool *want, ml_tensor **acts, ml_tensor **grads, ml_tensor **hidden);

/* ---- patching (interchange interventions, resample/zero/mean ablations) ---- */
typedef struct {
    int site;             /* where */
    ml_tensor *source;    /* values to write: the site's shape (B, ...) or without the batch
                           * dimension (broadcast to every example, e.g. a dataset mean) */
    const int32_t *pos;   /* per example: the position to patch (-1: leave the example alone);
                           * NULL: every position */
} ml_patch;
/* Reference: the full forward of tokens with a hook that applies the patch. -> hidden (B, L, D) */
ml_tensor *ml_patch_full(ml_model *m, ml_tensor *tokens, const ml_patch *p);
/* Fast: resumes from base_acts, the base run's cache (it needs the paper sites of the patched
 * layer: block_input, attention_input, attention_output, mlp_input, mlp_output, block_output as
 * the architecture has them). rows (optional int32 (B)): keep only the readout rows after the last
 * mixer (then the result is (B, 1, D)). Equals ml_patch_full bit for bit when rows is NULL. An
 * error while m->hooks is set (the cache went through them; the resume would run them twice). */
ml_tensor *ml_patch_fast(ml_model *m, ml_tensor *const *base_acts, const ml_patch *p, ml_tensor *rows);
/* Which sites ml_patch_fast needs for a patch at `site` (sets want[i] = true for them). */
void ml_patch_needs(const ml_model *m, int site, bool *want);
/* The patched run of tokens: the fast path (a cache of what ml_patch_needs, then ml_patch_fast)
 * unless `reference` or m->hooks is set (hooks run once, in a full forward). -> hidden (B, L, D) */
ml_tensor *ml_patch_run(ml_model *m, ml_tensor *tokens, const ml_patch *p, bool reference);
/* The mean activation of `site` over documents [0, n) of ds, per position: (L, ...) with the
 * dataset's longest length, the mean over the documents long enough for each position. */
ml_tensor *ml_site_mean(ml_model *m, const ml_dataset *ds, int64_t n, int site, int batch);

/* ---- model surgery: the short convolutions (Mamba conv1d, BaseConv/Based conv.conv, Hyena
 * short_filter, DeltaNet q/k/v_conv1d) ---- */
typedef enum {
    ML_CONV_IDENTITY, /* kernel = delta at the current token, bias 0: the conv is removed */
    ML_CONV_ZERO,     /* kernel and bias 0: the conv outputs zeros */
    ML_CONV_TRUNCATE  /* taps older than `keep` tokens are zeroed (a narrower kernel) */
} ml_conv_edit;
/* Their names, in the enum's order, NULL-terminated (mech.interp.short_conv_edit's kinds). */
extern const char *const ml_conv_edit_names[];
/* Edits every short conv of layer `layer` (-1: all layers). Returns the number of kernels edited
 * (0 when the model has none) or -1 on error. */
int ml_short_conv_edit(ml_model *m, int layer, ml_conv_edit kind, int keep);

/* ---- attention analysis ---- */
/* Mamba's implicit attention α (B, E, L, L) of layer `layer` (y[b,t,e] = Σ_s α[b,e,t,s]·u[b,s,e])
 * from a cache holding that layer's mixer.dt, mixer.B and mixer.C. */
ml_tensor *ml_mamba_attention(ml_model *m, int layer, ml_tensor *const *acts);
/* The same on tokens (B, L): runs the cache it needs. */
ml_tensor *ml_mamba_attention_run(ml_model *m, ml_tensor *tokens, int layer);

/* ---- patching maps (docs/interventions.md, "Patching maps") ---- */
typedef enum { ML_PM_PROB, ML_PM_LOGPROB, ML_PM_LOGIT, ML_PM_FUNCTION } ml_pm_metric;
/* The named metrics' names, in the enum's order up to ML_PM_FUNCTION ("function"), NULL-terminated. */
extern const char *const ml_pm_metric_names[];
/* A caller's metric of hidden states (B, L, D) (e.g. a Lua function of the logits); on failure
 * it sets *err and the core's message. */
typedef double (*ml_pm_metric_fn)(void *ud, ml_model *m, ml_tensor *hidden, ml_status *err);
/* What a cell writes: the clean activation into the corrupted run, or an ablation of the clean
 * run's own activation (zero, or its mean over the batch at each position). */
typedef enum { ML_PM_PATCH, ML_PM_ZERO, ML_PM_MEAN } ml_pm_ablate;
/* The ablations' names from ML_PM_ZERO on ("zero", "mean"), NULL-terminated. */
extern const char *const ml_pm_ablation_names[];
typedef struct {
    const int *sites;          /* map rows: site ids with a position dimension */
    int n_sites;
    const int32_t *positions;  /* map columns: the patched position (the same for every example) */
    int n_positions;
    const int32_t *example_positions; /* NULL, or [n_positions * B]: column j patches example b at
                                       * example_positions[j * B + b] instead (-1: that example is not
                                       * patched), e.g. a named position of each document */
    const int32_t *rows;       /* [B]: the readout row of each example */
    const int32_t *targets;    /* [B]: the token it must predict */
    ml_pm_metric metric;       /* mean over examples of p, log p or the logit of the target */
    ml_pm_metric_fn fn;        /* metric == ML_PM_FUNCTION: called on the full hidden states */
    void *ud;
    const int *heads;          /* [n_sites] or NULL: h >= 0 patches head h only (dim 2 of a per-head
                                * site such as mixer.head_z); -1 the whole site */
    ml_pm_ablate ablate;       /* ML_PM_PATCH: patch clean into corrupted; else ablate the clean run
                                * (corrupted is ignored and may be NULL) */
} ml_pm_config;
typedef struct {
    int n_rows, n_cols;
    float *patched;            /* [n_rows * n_cols]: the metric with the cell's patch */
    float *values;             /* (patched − the site's unpatched resume) / den */
    double clean, corrupted;   /* the metric of the two runs (ablation: both the clean run's) */
    double den;                /* clean − corrupted (ablation: 1, values are the metric's change) */
    double accuracy;           /* share of clean examples whose readout argmax is the target */
} ml_pm_result;
/* Patches each site's clean activation at each position into the corrupted run (B, L tokens), or
 * with c->ablate replaces it in the clean run by zero or its batch mean. */
ml_pm_result *ml_patching_map(ml_model *m, ml_tensor *clean, ml_tensor *corrupted, const ml_pm_config *c);
void ml_pm_result_free(ml_pm_result *r);

/* ---- the interchange evaluator (docs/interventions.md) ---- */
enum { ML_IC_MAX_SITES = 512, ML_IC_MAX_POS = 64 /* ML_MAX_POS */, ML_IC_POS_NAME = 32 /* ML_POS_NAME_MAX */ };
typedef struct {
    int n_sites;
    int sites[ML_IC_MAX_SITES];   /* component x layer, as site indices */
    int n_label_types;
    int label_types[2];           /* ML_POS_QUERY_ITEM_ORIG (key), ML_POS_TARGET_ITEM_ORIG (value) */
    int n_positions;
    int positions[ML_IC_MAX_POS]; /* patch positions (slots of the task's positions, ml_task_pos_name) */
    uint64_t seed;                /* corruption stream (seed, ML_STREAM_INTERP) per combination */
    int batch;                    /* documents per forward */
    bool swap;                    /* base = clean, source = corrupted (the original's option) */
    bool reference;               /* full forwards with a hook instead of the fast path (tests) */
    int workers;                  /* combinations run at once, each on one thread (0: ml_threads());
                                   * the results are the same bits for any number */
} ml_ic_config;
/* The paper's sweep for model m and task t: the six components (four for a MambaBlock), every
 * layer, both label types, the task's patch positions (AR: query_item_orig, target_item_orig,
 * query_item, target_item, divider, next_key; ATR: the first five, plus query_type when the
 * documents carry one). */
void ml_ic_config_paper(ml_ic_config *c, const ml_model *m, const ml_task *t);

typedef struct {
    int n_docs, n_combos;
    int *combo_site, *combo_lt, *combo_pos; /* [n_combos] */
    /* per combination and document: [combo * n_docs + doc] */
    float *restored_prob, *corrupted_prob, *restored_logit, *corrupted_logit, *kl_div;
    int32_t *corrupt_token;                 /* the replacement drawn */
    uint8_t *changed;                       /* 1 when the patch could change the example */
    float *original_prob, *original_logit; /* [n_docs] */
    uint8_t *qtype;                         /* [n_docs] */
    int64_t patched_forwards;               /* examples that went through a patched run */
    double seconds;
    int n_pos_names;                        /* the task's position names by slot (copied: the metrics' names) */
    char (*pos_names)[ML_IC_POS_NAME];
} ml_ic_result;
/* The name of position slot p in r (the task's own names). */
const char *ml_ic_pos_name(const ml_ic_result *r, int p);

/* Runs the sweep on documents [first, first + count) of ds. */
ml_ic_result *ml_ic_run(ml_model *m, const ml_dataset *ds, int64_t first, int64_t count, const ml_ic_config *c);
void ml_ic_result_free(ml_ic_result *r);

/* ---- dataset analyses (docs/interventions.md, "Attention mass", "Attribution patching") ---- */
/* Per layer, the mean over documents [0, n) of the attention weight from named position `query`
 * to named position `key` (ml_pos): summed over heads of mixer.pattern (Attention, Based), or
 * Mamba's implicit attention |α| normalised per row and averaged over channels. has[l]: whether
 * layer l has an attention to read (mass[l] is 0 where not). mass, has: [n_layers]. */
ml_status ml_attention_mass(ml_model *m, const ml_dataset *ds, int64_t n, int query, int key, double *mass,
                            bool *has);

typedef struct {
    const int *sites;             /* site ids with a position dimension */
    int n_sites;
    int n_label_types;
    int label_types[2];           /* the corrupted item (ml_pos), one corrupted run each */
    int n_positions;
    int positions[ML_IC_MAX_POS]; /* where the estimate is read (ml_pos) */
    uint64_t seed;                /* corruption stream (seed, ML_STREAM_INTERP), drawn label type by label type */
} ml_ap_config;
typedef struct {
    int n_label_types, n_sites, n_positions;
    /* [(lt * n_sites + site) * n_positions + pos]: the mean over documents of Σ (clean − corrupted)
     * activation × d p(answer) / d activation at the position (all other dimensions summed) */
    double *estimate;
} ml_ap_result;
/* Gradient attribution patching on documents [0, n) of ds: the clean run and one corrupted run
 * with a backward pass per label type estimate every (site, position)'s prob_diff. */
ml_ap_result *ml_attribution_patching(ml_model *m, const ml_dataset *ds, int64_t n, const ml_ap_config *c);
void ml_ap_result_free(ml_ap_result *r);

/* The corruption draw (docs/interventions.md, "Corruption"): r = lo + U[0, hi - lo), +1 if r >= orig (pool [lo, hi] from
 * ml_task_corrupt_range). */
int32_t ml_ic_corrupt(ml_rng *rng, int lo, int hi, int32_t orig);

/* Aggregate metrics with the paper's names (means per TYPE; corrupted./original. variants;
 * max_perc, max_perc_layer; memo scores; mechlab's `attrib`, the ratio of means of Eq. 3). */
typedef struct {
    char name[192];
    double value;
} ml_metric;
ml_status ml_ic_metrics(const ml_model *m, const ml_ic_result *r, ml_metric **out, int *n_out);
/* Attribution (Eq. 3) as a ratio of means; *passes: the 0.01-style filter (denominator > threshold). */
double ml_ic_attrib(double mean_prob_diff, double mean_original, double mean_corrupted, double threshold,
                    bool *passes);
/* The per-example argmax of max_perc: the winning index in [0, n) or n for "nothing"; ties in the
 * value go to the lexicographically larger name, and (0, "nothing") is the starting point. */
int ml_ic_argmax(const double *value, const char *const *names, int n);
/* Per-example KL(corrupted ‖ intervened) / |V| from two logit rows of length V. */
double ml_ic_kl_div(const float *corrupted_logits, const float *intervened_logits, int64_t V);

#endif
