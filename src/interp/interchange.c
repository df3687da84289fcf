/* The paper's interchange evaluator (docs/interventions.md, "The interchange evaluator"; interp.h).
 *
 * For every combination (site = component x layer, label_type, patch position) and every
 * document: the clean document o has one token replaced at its label_type position (the draw of
 * docs/interventions.md, "Corruption", fresh per example and per combination) to give the
 * corrupted c; the base run is c, the source run o (swapped with `swap`); the base run is patched
 * at the position with the source's value, and the answer's probability and logit are read at
 * the readout row (target_item − 1 for AR and ATR). The unit is an example, one readout of a
 * document: AR and ATR have one per document, MQAR one per query (with that query's named
 * positions, ml_dataset_readout_positions), a Lua task as many as its document declares.
 *
 * Cost. The clean run is cached once per batch (every swept site). Per combination the
 * corrupted run keeps the activations the resume needs at the patched layer and, in its last
 * block, only the readout rows after the mixer; where every mixer can, it starts at the corrupted
 * row (base_suffix: the rows before are the clean run's); the patched run resumes at the patched layer
 * (interp.c) for the examples whose patched unit differs from the source's (the others are the
 * base run, bit for bit). Sequences are cut after the readout row (a causal model's readout does
 * not see later tokens).
 *
 * Randomness: combination k draws from stream (seed ^ hash(label of k), ML_STREAM_INTERP), one
 * draw per document in dataset order, so a combination's corruptions do not depend on which
 * other combinations or batch sizes were asked for. */
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "interp/interp.h"
#include "core/threads.h"
#include "interp/interp_private.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"
#include "tasks/task.h"

_Static_assert((int)ML_IC_MAX_POS == (int)ML_MAX_POS, "one slot per position of any task");
_Static_assert((int)ML_IC_POS_NAME == (int)ML_POS_NAME_MAX, "a position name fits");

/* ------------------------------------------------------------------ configuration */

void ml_ic_config_paper(ml_ic_config *c, const ml_model *m, const ml_task *t) {
    memset(c, 0, sizeof *c);
    for (int k = 0; k < ML_ENTRY_PAPER; k++) /* the paper's six, component-major, as the original loops */
        for (int l = 0; l < m->cfg.n_layers; l++) {
            int s = ml_site_lookup(m, l, ml_entry_names[k]);
            if (s >= 0 && c->n_sites < ML_IC_MAX_SITES) c->sites[c->n_sites++] = s;
        }
    c->n_label_types = 2;
    c->label_types[0] = ML_POS_QUERY_ITEM_ORIG;
    c->label_types[1] = ML_POS_TARGET_ITEM_ORIG;
    if (ml_task_get_kind(t) == ML_TASK_CUSTOM) { /* a task made outside C: what it declares */
        uint32_t m = ml_task_positions(t);
        c->n_label_types = 0;
        for (int k = ML_POS_QUERY_ITEM_ORIG; k <= ML_POS_TARGET_ITEM_ORIG; k++)
            if (m >> k & 1) c->label_types[c->n_label_types++] = k;
        for (int k = 0; k < ml_task_npos(t); k++)
            if (ml_task_pos_declared(t, k)) c->positions[c->n_positions++] = k;
        c->seed = 42;
        c->batch = 320;
        return;
    }
    static const int ar[] = {ML_POS_QUERY_ITEM_ORIG, ML_POS_TARGET_ITEM_ORIG, ML_POS_QUERY_ITEM, ML_POS_TARGET_ITEM,
                             ML_POS_DIVIDER, ML_POS_NEXT_KEY};
    int n = ml_task_get_kind(t) == ML_TASK_ATR ? 5 : 6; /* next_key: AR and MQAR */
    for (int k = 0; k < n; k++) c->positions[c->n_positions++] = ar[k];
    if (ml_task_get_kind(t) == ML_TASK_ATR) {
        const ml_atr_config *a = ml_task_atr_config(t);
        int types = a->parent + a->child + a->sibling;
        if (a->query_type_token == ML_QTOK_ALWAYS || (a->query_type_token == ML_QTOK_AUTO && types > 1))
            c->positions[c->n_positions++] = ML_POS_QUERY_TYPE;
    }
    c->seed = 42;
    c->batch = 320;
}

int32_t ml_ic_corrupt(ml_rng *rng, int lo, int hi, int32_t orig) {
    int32_t r = lo + (int32_t)ml_rng_below(rng, (uint32_t)(hi - lo)); /* [TS, QS − 2] */
    return r + (r >= orig ? 1 : 0);
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* ------------------------------------------------------------------ metrics of one row */

/* KL(softmax(c) ‖ softmax(x)) as "batchmean" over one vocabulary-length vector; lc, lx: their log-sum-exps. */
static double kl_lse(const float *c, const float *x, int64_t V, double lc, double lx) {
    return ml_kl_div_row(c, x, V, lc, lx) / (double)V;
}

double ml_ic_kl_div(const float *c, const float *x, int64_t V) {
    return kl_lse(c, x, V, ml_logsumexp_row(c, V), ml_logsumexp_row(x, V));
}

int ml_ic_argmax(const double *value, const char *const *names, int n) {
    /* Python's max over (value, name) tuples from (0, "nothing") */
    int best = n;
    double bv = 0;
    const char *bn = "nothing";
    for (int i = 0; i < n; i++)
        if (value[i] > bv || (value[i] == bv && strcmp(names[i], bn) > 0)) best = i, bv = value[i], bn = names[i];
    return best;
}

double ml_ic_attrib(double mean_prob_diff, double mean_original, double mean_corrupted, double threshold,
                    bool *passes) {
    double den = mean_original - mean_corrupted;
    if (passes) *passes = den > threshold;
    return mean_prob_diff / den;
}

/* ------------------------------------------------------------------ the run */

void ml_ic_result_free(ml_ic_result *r) {
    if (!r) return;
    free(r->combo_site), free(r->combo_lt), free(r->combo_pos);
    free(r->restored_prob), free(r->corrupted_prob), free(r->restored_logit), free(r->corrupted_logit);
    free(r->kl_div), free(r->corrupt_token), free(r->changed), free(r->original_prob), free(r->original_logit);
    free(r->qtype);
    free(r->pos_names);
    free(r);
}

const char *ml_ic_pos_name(const ml_ic_result *r, int p) {
    if (p >= 0 && p < r->n_pos_names) return r->pos_names[p];
    return p >= 0 && p < ML_NPOS ? ml_pos_names[p] : "?";
}

static ml_ic_result *result_new(int n_combos, int n_docs) {
    ml_ic_result *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    size_t nc = (size_t)n_combos, nd = (size_t)n_docs, n = nc * nd + 1;
    r->n_docs = n_docs, r->n_combos = n_combos;
    r->combo_site = calloc(nc + 1, sizeof(int)), r->combo_lt = calloc(nc + 1, sizeof(int));
    r->combo_pos = calloc(nc + 1, sizeof(int));
    r->restored_prob = calloc(n, sizeof(float)), r->corrupted_prob = calloc(n, sizeof(float));
    r->restored_logit = calloc(n, sizeof(float)), r->corrupted_logit = calloc(n, sizeof(float));
    r->kl_div = calloc(n, sizeof(float)), r->corrupt_token = calloc(n, sizeof(int32_t)), r->changed = calloc(n, 1);
    r->original_prob = calloc(nd + 1, sizeof(float)), r->original_logit = calloc(nd + 1, sizeof(float));
    r->qtype = calloc(nd + 1, 1);
    if (!r->combo_site || !r->combo_lt || !r->combo_pos || !r->restored_prob || !r->corrupted_prob ||
        !r->restored_logit || !r->corrupted_logit || !r->kl_div || !r->corrupt_token || !r->changed ||
        !r->original_prob || !r->original_logit || !r->qtype) {
        ml_ic_result_free(r);
        return NULL;
    }
    return r;
}

static ml_status check_config(const ml_model *m, const ml_ic_config *c) {
    if (c->n_sites < 1 || c->n_sites > ML_IC_MAX_SITES)
        return ml_fail(ML_ERR_ARG, "interchange: expected 1..%d sites, got %d", ML_IC_MAX_SITES, c->n_sites);
    for (int i = 0; i < c->n_sites; i++) {
        if (c->sites[i] < 0 || c->sites[i] >= m->n_sites)
            return ml_fail(ML_ERR_ARG, "interchange: site index %d out of range", c->sites[i]);
        if (ml_site_pos_dim(m, c->sites[i]) < 0) {
            char name[96];
            ml_site_fullname(m, c->sites[i], name, sizeof name);
            return ml_fail(ML_ERR_ARG, "interchange: site %s has no (batch, position) layout to patch", name);
        }
    }
    if (c->n_label_types < 1 || c->n_label_types > 2)
        return ml_fail(ML_ERR_ARG, "interchange: expected 1 or 2 label types (query_item_orig, target_item_orig: "
                       "positions the task declares), got %d", c->n_label_types);
    for (int i = 0; i < c->n_label_types; i++)
        if (c->label_types[i] != ML_POS_QUERY_ITEM_ORIG && c->label_types[i] != ML_POS_TARGET_ITEM_ORIG)
            return ml_fail(ML_ERR_ARG, "interchange: label type expected query_item_orig or target_item_orig");
    if (c->n_positions < 1 || c->n_positions > ML_IC_MAX_POS)
        return ml_fail(ML_ERR_ARG, "interchange: expected 1..%d patch positions, got %d", ML_IC_MAX_POS, c->n_positions);
    for (int i = 0; i < c->n_positions; i++)
        if (c->positions[i] < 0 || c->positions[i] >= ML_IC_MAX_POS)
            return ml_fail(ML_ERR_ARG, "interchange: patch position %d out of range", c->positions[i]);
    return ML_OK;
}

typedef struct {
    ml_model *m;
    bool *want;
    ml_tensor **acts;
} capture;

static void capture_clear(capture *c) {
    for (int i = 0; i < c->m->n_sites; i++) ml_release(c->acts[i]), c->acts[i] = NULL;
}

/* Full forward of tokens keeping the wanted sites; rows: gather after the last mixer. */
static ml_tensor *run_capture(capture *c, ml_tensor *tokens, ml_tensor *rows) {
    capture_clear(c);
    ml_model *m = c->m;
    ml_tensor *r = ml_model_embed(m, tokens), *hid = NULL;
    if (!r) return NULL;
    if (rows) {
        /* the resume with rows: same blocks, same bits per row */
        ml_resume rs = {.layer = 0, .entry = ML_ENTRY_BLOCK_INPUT, .act = r, .rows = rows};
        bool any = false;
        for (int i = 0; i < m->n_sites; i++) any = any || c->want[i];
        hid = any ? mli_resume_cache(m, &rs, c->want, c->acts) : ml_model_hidden_resume(m, &rs, NULL);
    } else {
        ml_status st = ml_run_cache(m, tokens, c->want, c->acts, &hid);
        if (st) hid = NULL;
    }
    ml_release(r);
    return hid;
}

/* The status of a step that failed (out of memory when the callee set none). */
static ml_status failed(void) {
    return ml_last_status() ? ml_last_status() : ml_fail(ML_ERR_MEM, "interchange: out of memory");
}

/* One evaluation: the model, the configuration, the result, and the caches by site id. */
typedef struct {
    ml_model *m;
    const ml_ic_config *cfg;
    ml_ic_result *res;
    int N, V, batch;
    bool reference; /* full forwards with a patch hook (cfg->reference, or persistent hooks on the model) */
    bool suffix;    /* corrupted runs from the corrupted row on (ml_model_hidden_suffix) where they can */
    int64_t patched; /* examples that went through a patched run (summed over workers) */
    bool *want_clean, *want_base;     /* which sites each cache keeps */
    ml_tensor **clean, **base, **sub; /* activations by site id; sub: the base's rows that change */
    int32_t *map, *ppos;              /* per example of a batch: which change, their patch position */
    capture cc, cb;
    /* per example: its document, named positions (N x npos, the task's slots), readout row and answer */
    int npos;
    int64_t *ex_doc;
    int32_t *ex_pos, *ex_row, *ex_ans;
} ic_run;

/* One batch of documents, cut after the readout row. */
typedef struct {
    int64_t f0; /* its first document, counted from the run's first */
    int B, Lt;
    ml_tensor *tok_full, *tg, *pos; /* the dataset's batch */
    ml_tensor *tok, *rows;          /* tokens (B, Lt); readout rows (B) */
    int32_t *ans;                   /* the answer token per example */
    ml_tensor *clean_logits;        /* (B, V) at the readout rows */
    /* per label type (cfg order): the examples sorted by their first corrupted row, in groups that
     * start their corrupted run at row gt[a][g] (the group's least) */
    int ng[2];
    int32_t *gdoc[2], *gstart[2], *gt[2];
    int32_t *first[2]; /* per example: the first row a corruption there changes */
} ic_batch;

static ml_status check_run(const ml_model *m, const ml_dataset *ds, int64_t first, int64_t count,
                           const ml_ic_config *cfg) {
    if (check_config(m, cfg)) return ml_last_status();
    if (first < 0 || count < 1 || count > ml_dataset_size(ds) - first) /* first + count could overflow */
        return ml_fail(ML_ERR_ARG, "interchange: documents [%lld, %lld + %lld) outside the dataset's %lld", (long long)first,
                       (long long)first, (long long)count, (long long)ml_dataset_size(ds));
    for (int i = 0; i < cfg->n_positions; i++)
        if (cfg->positions[i] >= ml_dataset_npos(ds))
            return ml_fail(ML_ERR_ARG, "interchange: patch position %d is not one of the task's %d", cfg->positions[i],
                           ml_dataset_npos(ds));
    if (ml_task_vocab_size(ml_dataset_task(ds)) > m->cfg.vocab)
        return ml_fail(ML_ERR_ARG, "interchange: the task's vocabulary (%d) is larger than the model's (%d)",
                       ml_task_vocab_size(ml_dataset_task(ds)), m->cfg.vocab);
    return ML_OK;
}

static void ic_run_free(ic_run *r) {
    free(r->want_clean), free(r->want_base), free(r->clean), free(r->base), free(r->sub), free(r->map), free(r->ppos);
    free(r->ex_doc), free(r->ex_pos), free(r->ex_row), free(r->ex_ans);
}

/* The examples of documents [first, first + count): every readout of each, in document order. */
static ml_status list_examples(ic_run *r, const ml_dataset *ds, int64_t first, int64_t count) {
    int64_t n = 0;
    for (int64_t i = first; i < first + count; i++) {
        int nr;
        ml_dataset_readouts(ds, i, &nr, NULL);
        n += nr;
    }
    r->npos = ml_dataset_npos(ds);
    if (n < 1 || n > INT32_MAX / r->npos)
        return ml_fail(ML_ERR_ARG, "interchange: documents [%lld, %lld) have %lld readouts, expected 1..%d",
                       (long long)first, (long long)(first + count), (long long)n, INT32_MAX / r->npos);
    size_t nn = (size_t)n + 1;
    r->ex_doc = malloc(nn * sizeof(int64_t)), r->ex_pos = malloc(nn * (size_t)r->npos * sizeof(int32_t));
    r->ex_row = malloc(nn * sizeof(int32_t)), r->ex_ans = malloc(nn * sizeof(int32_t));
    if (!r->ex_doc || !r->ex_pos || !r->ex_row || !r->ex_ans) return ml_fail(ML_ERR_MEM, "interchange: out of memory");
    int64_t e = 0;
    int32_t pos[ML_MAX_POS];
    for (int64_t i = first; i < first + count; i++) {
        int nr;
        const int32_t *ans, *rp = ml_dataset_readouts(ds, i, &nr, &ans);
        for (int j = 0; j < nr; j++, e++) {
            if (ml_dataset_readout_positions(ds, i, j, pos)) return ml_last_status();
            memcpy(r->ex_pos + e * r->npos, pos, (size_t)r->npos * sizeof(int32_t));
            r->ex_doc[e] = i, r->ex_row[e] = rp[j], r->ex_ans[e] = ans[j];
        }
    }
    r->N = (int)n;
    return ML_OK;
}

static ml_status ic_run_init(ic_run *r, ml_model *m, const ml_ic_config *cfg, const ml_dataset *ds, int64_t first,
                             int64_t count) {
    int ns = m->n_sites;
    *r = (ic_run){.m = m, .cfg = cfg, .V = m->cfg.vocab, .batch = cfg->batch > 0 ? cfg->batch : 320};
    if (list_examples(r, ds, first, count)) {
        ml_status st = ml_last_status();
        ic_run_free(r);
        return st;
    }
    int N = r->N;
    /* The fast path resumes from cached activations that went through m->hooks already (they would
     * fire twice at the resumed site) and shows later sites only the readout rows: with hooks on
     * the model, every run is a whole forward. */
    r->reference = cfg->reference || m->hooks;
    /* the rows before the corrupted token are the clean run's (a causal model): the corrupted run
     * starts there when every mixer can (the clean cache then keeps what the mixers read) */
    r->suffix = !r->reference && !cfg->swap && ml_model_can_suffix(m);
    r->res = result_new(cfg->n_sites * cfg->n_label_types * cfg->n_positions, N);
    const ml_task *t = ml_dataset_task(ds);
    if (r->res && (r->res->pos_names = calloc((size_t)ml_task_npos(t), sizeof *r->res->pos_names))) {
        r->res->n_pos_names = ml_task_npos(t);
        for (int p = 0; p < r->res->n_pos_names; p++)
            snprintf(r->res->pos_names[p], ML_POS_NAME_MAX, "%s", ml_task_pos_name(t, p));
    }
    r->want_clean = calloc((size_t)ns, 1), r->want_base = calloc((size_t)ns, 1);
    r->clean = calloc((size_t)ns, sizeof *r->clean), r->base = calloc((size_t)ns, sizeof *r->base);
    r->sub = calloc((size_t)ns, sizeof *r->sub);
    r->map = malloc(sizeof(int32_t) * (size_t)r->batch + 4), r->ppos = malloc(sizeof(int32_t) * (size_t)r->batch + 4);
    r->cc = (capture){m, r->want_clean, r->clean}, r->cb = (capture){m, r->want_base, r->base};
    if (r->res && r->res->pos_names && r->want_clean && r->want_base && r->clean && r->base && r->sub && r->map &&
        r->ppos)
        return ML_OK;
    ml_ic_result_free(r->res), r->res = NULL;
    ic_run_free(r);
    return ml_fail(ML_ERR_MEM, "interchange: out of memory");
}

/* Combinations, site-major (component, layer), then label type, then position. */
static void lay_out_combos(ml_ic_result *res, const ml_ic_config *cfg) {
    for (int s = 0, k = 0; s < cfg->n_sites; s++)
        for (int a = 0; a < cfg->n_label_types; a++)
            for (int p = 0; p < cfg->n_positions; p++, k++) {
                res->combo_site[k] = cfg->sites[s];
                res->combo_lt[k] = cfg->label_types[a];
                res->combo_pos[k] = cfg->positions[p];
            }
}

/* Every combination's corrupted token per document, drawn up front from its own stream. */
static void draw_corruptions(const ml_model *m, const ml_dataset *ds, const ic_run *r, ml_ic_result *res,
                             uint64_t seed) {
    int lo, hi, N = res->n_docs;
    ml_task_corrupt_range(ml_dataset_task(ds), &lo, &hi);
    for (int k = 0; k < res->n_combos; k++) {
        char label[160];
        snprintf(label, sizeof label, "%d.%s.%s.%s", m->site_layer[res->combo_site[k]],
                 ml_ic_pos_name(res, res->combo_lt[k]), ml_ic_pos_name(res, res->combo_pos[k]),
                 m->sites[res->combo_site[k]].name);
        ml_rng rng;
        ml_rng_init(&rng, seed ^ fnv1a(label), ML_STREAM_INTERP);
        for (int i = 0; i < N; i++) {
            int len;
            const int32_t *tok = ml_dataset_tokens(ds, r->ex_doc[i], &len);
            int pc = r->ex_pos[(int64_t)i * r->npos + res->combo_lt[k]];
            res->corrupt_token[(size_t)k * N + i] = pc >= 0 ? ml_ic_corrupt(&rng, lo, hi, tok[pc]) : -1;
        }
    }
}

static void batch_free(ic_batch *bt) {
    ml_release(bt->tok_full), ml_release(bt->tg), ml_release(bt->pos), ml_release(bt->tok), ml_release(bt->rows);
    ml_release(bt->clean_logits);
    free(bt->ans);
    for (int a = 0; a < 2; a++) free(bt->gdoc[a]), free(bt->gstart[a]), free(bt->gt[a]), free(bt->first[a]);
    *bt = (ic_batch){0};
}

/* Loads examples [f0, f0 + B): their documents, named positions, readout rows and answers, the
 * tokens cut after the last readout row. */
static ml_status batch_load(const ic_run *r, const ml_dataset *ds, int64_t f0, int B, ic_batch *bt) {
    *bt = (ic_batch){.f0 = f0, .B = B};
    if (ml_dataset_batch(ds, r->ex_doc + f0, B, &bt->tok_full, &bt->tg)) return failed();
    int64_t B64 = B, ps[2] = {B, r->npos};
    if (!(bt->rows = ml_empty(ML_I32, 1, &B64)) || !(bt->pos = ml_from_i32(2, ps, r->ex_pos + f0 * r->npos)))
        return failed();
    int32_t *rw = ml_i32(bt->rows);
    for (int b = 0; b < B; b++) {
        rw[b] = r->ex_row[f0 + b];
        bt->Lt = rw[b] + 1 > bt->Lt ? rw[b] + 1 : bt->Lt;
    }
    ml_tensor *nw = ml_narrow(bt->tok_full, 1, 0, bt->Lt);
    bt->tok = nw ? ml_contiguous(nw) : NULL;
    ml_release(nw);
    if (!bt->tok) return failed();
    if (!(bt->ans = malloc(sizeof(int32_t) * (size_t)B + 4))) return ml_fail(ML_ERR_MEM, "interchange: out of memory");
    memcpy(bt->ans, r->ex_ans + f0, sizeof(int32_t) * (size_t)B);
    return ML_OK;
}

/* The corrupted runs from row t go in at most IC_GROUPS groups of at least IC_GROUP_MIN examples:
 * smaller groups recompute fewer rows but make more, smaller calls. Any grouping gives the same
 * bits: a row of a linear layer's product has the same bits however many rows come with it
 * (mlk_gemm_nt), and the per-sequence products of attention keep their shapes. */
enum { IC_GROUPS = 8, IC_GROUP_MIN = 40 };

static int by_key(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Per label type: the first row a corruption there changes in each example (its position, or the
 * readout row when the position is later or absent), the examples sorted by it, in IC_GROUPS
 * groups of equal size. */
static ml_status batch_groups(const ic_run *r, ic_batch *bt) {
    int B = bt->B;
    int64_t *key = malloc(sizeof(int64_t) * (size_t)B + 8); /* first row, then the example */
    if (!key) return ml_fail(ML_ERR_MEM, "interchange: out of memory");
    for (int a = 0; a < r->cfg->n_label_types; a++) {
        int32_t *first = bt->first[a] = malloc(sizeof(int32_t) * (size_t)B + 4);
        int G = B / IC_GROUP_MIN < 1 ? 1 : B / IC_GROUP_MIN > IC_GROUPS ? IC_GROUPS : B / IC_GROUP_MIN;
        bt->gdoc[a] = malloc(sizeof(int32_t) * (size_t)B + 4);
        bt->gstart[a] = malloc(sizeof(int32_t) * (size_t)(G + 1)), bt->gt[a] = malloc(sizeof(int32_t) * (size_t)G);
        if (!first || !bt->gdoc[a] || !bt->gstart[a] || !bt->gt[a]) {
            free(key);
            return ml_fail(ML_ERR_MEM, "interchange: out of memory");
        }
        const int32_t *pp = ml_i32(bt->pos), *rw = ml_i32(bt->rows);
        for (int b = 0; b < B; b++) {
            int pc = pp[b * r->npos + r->cfg->label_types[a]];
            first[b] = pc >= 0 && pc < rw[b] ? pc : rw[b];
            key[b] = (int64_t)first[b] << 32 | b;
        }
        qsort(key, (size_t)B, sizeof(int64_t), by_key);
        for (int b = 0; b < B; b++) bt->gdoc[a][b] = (int32_t)(key[b] & 0xffffffff);
        bt->ng[a] = G;
        for (int g = 0; g <= G; g++) bt->gstart[a][g] = (int32_t)((int64_t)g * B / G);
        for (int g = 0; g < G; g++) bt->gt[a][g] = first[bt->gdoc[a][bt->gstart[a][g]]];
    }
    free(key);
    return ML_OK;
}

/* The clean run: caches every swept site, reads the original probability and logit. */
static ml_status batch_clean_run(ic_run *r, ic_batch *bt) {
    ml_tensor *hid = run_capture(&r->cc, bt->tok, NULL);
    bt->clean_logits = hid ? mli_readout(r->m, hid, ml_i32(bt->rows)) : NULL;
    ml_release(hid);
    if (!bt->clean_logits) return failed();
    for (int b = 0; b < bt->B; b++) {
        const float *x = ml_f32(bt->clean_logits) + (int64_t)b * r->V;
        r->res->original_prob[bt->f0 + b] = (float)exp(x[bt->ans[b]] - ml_logsumexp_row(x, r->V));
        r->res->original_logit[bt->f0 + b] = x[bt->ans[b]];
    }
    return ML_OK;
}

/* The tokens of combination k: one token per document replaced at the label type's position. */
static ml_tensor *corrupt_tokens(const ic_run *r, const ic_batch *bt, int k) {
    ml_tensor *ctok = ml_clone(bt->tok);
    if (!ctok) return NULL;
    size_t row0 = (size_t)k * r->N + (size_t)bt->f0;
    const int32_t *pp = ml_i32(bt->pos);
    for (int b = 0; b < bt->B; b++) {
        int pc = pp[b * r->npos + r->res->combo_lt[k]];
        if (pc >= 0 && pc < bt->Lt) ml_i32(ctok)[(int64_t)b * bt->Lt + pc] = r->res->corrupt_token[row0 + b];
    }
    return ctok;
}

/* The corrupted run's caching hook: wanted sites, contiguous. */
typedef struct {
    const bool *want;
    ml_tensor **acts;
} sfx_cache;

static ml_tensor *sfx_hook(void *ud, int site, ml_tensor *act, ml_status *err) {
    sfx_cache *c = ud;
    if (c->want[site]) {
        ml_release(c->acts[site]);
        if (!(c->acts[site] = ml_contiguous(act))) *err = failed();
    }
    return NULL;
}

static bool sfx_wants(void *ud, int site) { return ((sfx_cache *)ud)->want[site]; }

/* Is site's value in a run with readout rows one row per sequence (after the last mixer)? */
static bool site_gathered(const ml_model *m, int site) {
    return m->site_layer[site] == m->cfg.n_layers - 1 && ml_entry_index(m->sites[site].name) >= ML_ENTRY_MLP_INPUT;
}

/* The corrupted run of combination k group by group, each from its first changed row (the rows
 * before it are the clean cache's): fills r->base with the sites in r->want_base as the whole
 * run with readout rows would (rows before a group's start from the clean cache) and returns the
 * hidden states at the readout rows (B, 1, D). */
static ml_tensor *base_suffix(ic_run *r, const ic_batch *bt, int a, ml_tensor *ctok) {
    ml_model *m = r->m;
    int ns = m->n_sites, B = bt->B, Lt = bt->Lt;
    int64_t D = m->cfg.d_model;
    ml_tensor *hid = ml_empty(ML_F32, 3, (int64_t[]){B, 1, D});
    if (!hid) return NULL;
    for (int i = 0; i < ns; i++) {
        if (!r->want_base[i]) continue;
        ml_tensor *c = r->clean[i];
        if (!c) { /* ic_run_init keeps every site a patch needs: not reached */
            ml_fail(ML_ERR_ARG, "interchange: the clean cache lacks a site the corrupted run needs");
            goto fail;
        }
        int64_t shp[ML_MAX_DIMS];
        memcpy(shp, c->shape, sizeof shp);
        if (site_gathered(m, i)) shp[1] = 1;
        if (!(r->base[i] = ml_empty(ML_F32, c->ndim, shp))) goto fail;
    }
    const int32_t *rw = ml_i32(bt->rows), *tk = ml_i32(ctok);
    /* the last mixer's output at the readout rows only, unless its whole output is wanted */
    int ao = m->layers[m->cfg.n_layers - 1].entry_site[ML_ENTRY_ATTENTION_OUTPUT];
    bool slim = ao < 0 || !r->want_base[ao];
    for (int g = 0; g < bt->ng[a]; g++) {
        const int32_t *docs = bt->gdoc[a] + bt->gstart[a][g];
        int64_t n = bt->gstart[a][g + 1] - bt->gstart[a][g], t = bt->gt[a][g], Ls = Lt - t;
        ml_tensor *tok = ml_empty(ML_I32, 2, (int64_t[]){n, Ls}), *rows = ml_empty(ML_I32, 1, &n), *h = NULL;
        if (tok && rows) {
            for (int64_t i = 0; i < n; i++) {
                memcpy(ml_i32(tok) + i * Ls, tk + (int64_t)docs[i] * Lt + t, sizeof(int32_t) * (size_t)Ls);
                ml_i32(rows)[i] = rw[docs[i]] - (int32_t)t;
            }
            ml_suffix sx = {.t = t, .pre = r->clean, .docs = docs, .rows = slim ? ml_i32(rows) : NULL};
            sfx_cache cache = {r->want_base, r->sub};
            ml_run run = {.hook = sfx_hook, .ud = &cache, .wants = sfx_wants};
            h = ml_model_hidden_suffix(m, tok, &sx, rows, &run);
        }
        ml_release(tok), ml_release(rows);
        if (!h) goto fail;
        for (int64_t i = 0; i < n; i++)
            memcpy(ml_f32(hid) + (int64_t)docs[i] * D, ml_f32(h) + i * D, sizeof(float) * (size_t)D);
        ml_release(h);
        /* the group's rows of each wanted site, after the clean rows before t */
        for (int s = 0; s < ns; s++) {
            if (!r->want_base[s]) continue;
            ml_tensor *v = r->sub[s], *c = r->clean[s], *o = r->base[s];
            if (!v) {
                ml_fail(ML_ERR_ARG, "interchange: the corrupted run did not reach a wanted site");
                goto fail;
            }
            int64_t W = ml_numel(c) / (c->shape[0] * c->shape[1]), Lc = c->shape[1], Lo = o->shape[1];
            int64_t Lv = v->shape[1];
            for (int64_t i = 0; i < n; i++) {
                float *dst = ml_f32(o) + (int64_t)docs[i] * Lo * W;
                if (Lo == 1) memcpy(dst, ml_f32(v) + i * Lv * W, sizeof(float) * (size_t)W);
                else {
                    memcpy(dst, ml_f32(c) + (int64_t)docs[i] * Lc * W, sizeof(float) * (size_t)(t * W));
                    memcpy(dst + t * W, ml_f32(v) + i * Lv * W, sizeof(float) * (size_t)(Lv * W));
                }
            }
            ml_release(r->sub[s]), r->sub[s] = NULL;
        }
    }
    return hid;
fail:
    for (int i = 0; i < ns; i++) ml_release(r->sub[i]), r->sub[i] = NULL;
    ml_release(hid);
    return NULL;
}

/* The base run of combination k (the corrupted run; with swap, the clean one, and the corrupted
 * run is the source). Returns the base logits (B, V); *src, *base: the caches to patch from and into. */
static ml_tensor *base_run(ic_run *r, const ic_batch *bt, int k, ml_tensor *ctok, ml_tensor *const **src,
                           ml_tensor *const **base) {
    int site = r->res->combo_site[k];
    memset(r->want_base, 0, (size_t)r->m->n_sites);
    ml_tensor *hid, *logits;
    if (r->suffix && ml_entry_index(r->m->sites[site].name) >= 0) { /* mixer-internal sites: the whole run */
        ml_patch_needs(r->m, site, r->want_base);
        int a = r->res->combo_lt[k] == r->cfg->label_types[0] ? 0 : 1;
        hid = base_suffix(r, bt, a, ctok);
        logits = hid ? mli_readout(r->m, hid, ml_i32(bt->rows)) : NULL;
        *src = r->clean, *base = r->base;
    } else if (!r->cfg->swap) {
        ml_patch_needs(r->m, site, r->want_base);
        hid = run_capture(&r->cb, ctok, r->reference ? NULL : bt->rows);
        logits = hid ? mli_readout(r->m, hid, ml_i32(bt->rows)) : NULL;
        *src = r->clean, *base = r->base;
    } else {
        r->want_base[site] = true;
        hid = run_capture(&r->cb, ctok, NULL);
        logits = hid ? ml_retain(bt->clean_logits) : NULL;
        *src = r->base, *base = r->clean;
    }
    ml_release(hid);
    return logits;
}

/* Marks which examples the patch of combination k can change (their patched unit differs from
 * the source's; the reference patches every one); fills r->map with them and r->ppos with every
 * example's patch position. Returns how many change. */
static int mark_changed(ic_run *r, const ic_batch *bt, int k, ml_tensor *const *src, ml_tensor *const *base) {
    int site = r->res->combo_site[k], nchg = 0;
    size_t row0 = (size_t)k * r->N + (size_t)bt->f0;
    const int32_t *pp = ml_i32(bt->pos), *rw = r->reference ? NULL : ml_i32(bt->rows);
    for (int b = 0; b < bt->B; b++) {
        int q = pp[b * r->npos + r->res->combo_pos[k]];
        r->ppos[b] = q;
        bool in = q >= 0 && q < bt->Lt;
        bool chg = r->reference ? in : in && mli_unit_differs(r->m, site, base[site], b, src[site], b, q, rw);
        r->res->changed[row0 + b] = chg;
        if (chg) r->map[nchg++] = b;
    }
    return nchg;
}

/* The patched runs of the changed examples (r->map) of combination k from row t_b on, the least of
 * the corrupted row, the patched row and the readout row (the rows before are the clean run's, as
 * neither change has reached them), in groups of at least IC_GROUP_MIN sorted by it: the hidden
 * states at the readout rows (nchg, 1, D) in r->map's order. */
static ml_tensor *patched_from_rows(ic_run *r, const ic_batch *bt, int k, const ml_patch *pt, ml_tensor *const *base,
                                   int nchg) {
    ml_model *m = r->m;
    int ns = m->n_sites, G = nchg / IC_GROUP_MIN > IC_GROUPS ? IC_GROUPS : nchg / IC_GROUP_MIN;
    int64_t D = m->cfg.d_model;
    const int32_t *rw = ml_i32(bt->rows), *first = bt->first[r->res->combo_lt[k] == r->cfg->label_types[0] ? 0 : 1];
    bool *need = calloc((size_t)ns, 1);
    int64_t *key = malloc(sizeof(int64_t) * (size_t)nchg + 8);
    int32_t *docs = malloc(sizeof(int32_t) * (size_t)nchg + 4), *rel = malloc(sizeof(int32_t) * (size_t)nchg + 4);
    ml_tensor *hid = ml_empty(ML_F32, 3, (int64_t[]){nchg, 1, D}), **sub = r->sub;
    bool ok = need && key && docs && rel && hid;
    if (ok) {
        ml_patch_needs(m, pt->site, need);
        for (int j = 0; j < nchg; j++) {
            int b = r->map[j], q = r->ppos[b] < first[b] ? r->ppos[b] : first[b];
            key[j] = (int64_t)(q < rw[b] ? q : rw[b]) << 32 | j;
        }
        qsort(key, (size_t)nchg, sizeof(int64_t), by_key);
    }
    for (int g = 0; ok && g < G; g++) {
        int j0 = (int)((int64_t)g * nchg / G), n = (int)((int64_t)(g + 1) * nchg / G) - j0;
        int64_t n64 = n, t = key[j0] >> 32;
        for (int i = 0; i < n; i++) {
            int b = r->map[key[j0 + i] & 0xffffffff];
            docs[i] = b, rel[i] = rw[b] - (int32_t)t;
        }
        ml_tensor *idx = ml_from_i32(1, &n64, docs), *rows = idx ? ml_index_select(bt->rows, 0, idx) : NULL, *h = NULL;
        for (int i = 0; idx && i < ns; i++)
            if (need[i] && base[i] && !(sub[i] = ml_index_select(base[i], 0, idx))) ok = false;
        ml_suffix sx = {.t = t, .pre = r->clean, .docs = docs, .rows = rel}; /* t = 0: the last mixer's rows only */
        if (ok && rows) h = mli_patch_fast_mapped(m, sub, pt, rows, docs, &sx); /* (n, 1, D) */
        ok = h != NULL;
        for (int i = 0; ok && i < n; i++)
            memcpy(ml_f32(hid) + (int64_t)(key[j0 + i] & 0xffffffff) * D, ml_f32(h) + (int64_t)i * D,
                   sizeof(float) * (size_t)D);
        ml_release(h), ml_release(rows), ml_release(idx);
        for (int i = 0; i < ns; i++) ml_release(sub[i]), sub[i] = NULL;
    }
    free(need), free(key), free(docs), free(rel);
    if (!ok) ml_release(hid), hid = NULL;
    return hid;
}

/* Readout logits of the patched run: (B, V) for the reference (the whole model with a hook), else
 * (nchg, V) for the examples in r->map (resumed at the patched layer from the base cache). */
static ml_tensor *patched_logits(ic_run *r, const ic_batch *bt, int k, ml_tensor *ctok, ml_tensor *const *src,
                                 ml_tensor *const *base, int nchg) {
    int site = r->res->combo_site[k];
    ml_patch pt = {.site = site, .source = src[site], .pos = r->ppos};
    if (r->reference) {
        ml_tensor *h2 = ml_patch_full(r->m, r->cfg->swap ? bt->tok : ctok, &pt);
        ml_tensor *logits = h2 ? mli_readout(r->m, h2, ml_i32(bt->rows)) : NULL;
        ml_release(h2);
        return logits;
    }
    /* the last mixer at the readout rows only, where the site is not inside a mixer (those resume
     * with a hook) */
    bool slim = r->suffix && ml_entry_index(r->m->sites[site].name) >= 0;
    ml_suffix sx = {.t = 0, .rows = ml_i32(bt->rows)};
    if (slim && nchg >= IC_GROUP_MIN && !site_gathered(r->m, site)) { /* from the first changed row */
        int64_t nn = nchg;
        ml_tensor *h2 = patched_from_rows(r, bt, k, &pt, base, nchg), *idx = ml_from_i32(1, &nn, r->map);
        ml_tensor *sub_rows = idx ? ml_index_select(bt->rows, 0, idx) : NULL;
        ml_tensor *logits = h2 && sub_rows ? mli_readout(r->m, h2, ml_i32(sub_rows)) : NULL;
        ml_release(h2), ml_release(idx), ml_release(sub_rows);
        return logits;
    }
    if (nchg == bt->B) { /* every example changes: the whole base cache */
        ml_tensor *h2 = mli_patch_fast_mapped(r->m, base, &pt, bt->rows, NULL, slim ? &sx : NULL);
        ml_tensor *logits = h2 ? mli_readout(r->m, h2, ml_i32(bt->rows)) : NULL;
        ml_release(h2);
        return logits;
    }
    /* only the examples that change; the hook and the entry read source and position through the
     * map, so the source stays whole */
    int64_t nn = nchg;
    ml_tensor *idx = ml_from_i32(1, &nn, r->map), *logits = NULL;
    ml_tensor *sub_rows = idx ? ml_index_select(bt->rows, 0, idx) : NULL;
    for (int i = 0; i < r->m->n_sites; i++) r->sub[i] = base[i] && idx ? ml_index_select(base[i], 0, idx) : NULL;
    if (sub_rows) sx.rows = ml_i32(sub_rows);
    ml_tensor *h2 = sub_rows ? mli_patch_fast_mapped(r->m, r->sub, &pt, sub_rows, r->map, slim ? &sx : NULL) : NULL;
    logits = h2 ? mli_readout(r->m, h2, ml_i32(sub_rows)) : NULL;
    ml_release(h2), ml_release(sub_rows), ml_release(idx);
    for (int i = 0; i < r->m->n_sites; i++) ml_release(r->sub[i]), r->sub[i] = NULL;
    return logits;
}

/* Probabilities, logits and KL of combination k per document: the corrupted run's, and the
 * patched run's where the patch changed the example (else the corrupted run's, KL 0). */
static void score_rows(ic_run *r, const ic_batch *bt, int k, ml_tensor *base_logits, ml_tensor *int_logits, int nchg) {
    ml_ic_result *res = r->res;
    size_t row0 = (size_t)k * r->N + (size_t)bt->f0;
    int V = r->V;
    for (int b = 0, j = 0; b < bt->B; b++) {
        int32_t ans = bt->ans[b];
        const float *xc = ml_f32(base_logits) + (int64_t)b * V;
        double lc = ml_logsumexp_row(xc, V);
        float pc = (float)exp(xc[ans] - lc);
        res->corrupted_prob[row0 + b] = pc, res->corrupted_logit[row0 + b] = xc[ans];
        const float *xi = NULL;
        if (r->reference) xi = int_logits && res->changed[row0 + b] ? ml_f32(int_logits) + (int64_t)b * V : NULL;
        else if (j < nchg && r->map[j] == b) xi = ml_f32(int_logits) + (int64_t)(j++) * V;
        if (xi) {
            double li = ml_logsumexp_row(xi, V);
            res->restored_prob[row0 + b] = (float)exp(xi[ans] - li);
            res->restored_logit[row0 + b] = xi[ans];
            res->kl_div[row0 + b] = (float)kl_lse(xc, xi, V, lc, li);
        } else { /* the patch changes nothing: the base run itself */
            res->restored_prob[row0 + b] = pc, res->restored_logit[row0 + b] = xc[ans];
            res->kl_div[row0 + b] = 0;
        }
    }
}

/* Combination k on one batch: corrupt, run the base (and source), patch, score. */
static ml_status run_combo(ic_run *r, const ic_batch *bt, int k) {
    ml_tensor *const *src, *const *base;
    ml_tensor *ctok = corrupt_tokens(r, bt, k);
    ml_tensor *base_logits = ctok ? base_run(r, bt, k, ctok, &src, &base) : NULL;
    if (!base_logits) {
        ml_release(ctok);
        return failed();
    }
    int nchg = mark_changed(r, bt, k, src, base);
    ml_tensor *int_logits = nchg > 0 ? patched_logits(r, bt, k, ctok, src, base, nchg) : NULL;
    ml_status st = nchg > 0 && !int_logits ? failed() : ML_OK;
    if (!st) {
        score_rows(r, bt, k, base_logits, int_logits, nchg);
        r->patched += r->reference ? bt->B : nchg;
    }
    ml_release(int_logits), ml_release(base_logits), ml_release(ctok);
    capture_clear(&r->cb);
    return st;
}

/* ------------------------------------------------------------------ combinations in parallel
 *
 * With n > 1 workers (config.workers, else ml_threads()) the combinations of a batch run n at a time, each on one
 * thread (BLAS and the kernels' loops at one thread inside), so every combination's result has
 * the bits of the one-thread run whatever n and the schedule. Tensors are reference counted
 * without atomics, so a worker shares none with another: each has its own copy of the model (its
 * parameters copied; checked to give the caller's clean logits bit for bit, else the sweep stays
 * serial), of the clean cache and of the batch's tensors, and its own scratch. Models whose mixer
 * calls back into the host (a Lua mixer) run serially. */

typedef struct {
    ic_run r;   /* shallow copy of the run: own model, scratch, clean cache */
    ic_batch b; /* shallow copy of the batch: own tensors */
    ml_status st;
    char msg[256];
} ic_worker;

/* The number of workers (config.workers, else ml_threads()). */
static int n_workers(const ic_run *r) { return r->cfg->workers > 0 ? r->cfg->workers : ml_threads(); }

/* A mixer that calls back into the host (a Lua mixer): its state runs one thread at a time. */
static bool has_host_mixer(const ml_model *m) {
    for (int l = 0; l < m->cfg.n_layers; l++)
        if (m->layers[l].mixer->user) return true;
    return false;
}

static bool can_parallel(const ic_run *r) {
    return !r->reference && n_workers(r) >= 2 && r->res->n_combos >= 2 && !has_host_mixer(r->m);
}

/* A copy of m with its parameters' values (NULL if it cannot be made), in fp32 as the evaluation
 * runs (a bf16 model's copy is made on a CPU without bf16 too). */
static ml_model *model_copy(const ml_model *m) {
    ml_model_config cfg = m->cfg;
    snprintf(cfg.precision, sizeof cfg.precision, "fp32");
    ml_model *c = ml_model_new(&cfg);
    if (!c) return NULL;
    if (c->n_total != m->n_total || !c->flat || !m->flat) {
        ml_model_free(c);
        return NULL;
    }
    memcpy(ml_f32(c->flat), ml_f32(m->flat), sizeof(float) * (size_t)m->n_total);
    return c;
}

static void worker_free(ic_worker *w, int ns) {
    if (w->r.clean)
        for (int i = 0; i < ns; i++) ml_release(w->r.clean[i]);
    if (w->r.cb.m) capture_clear(&w->r.cb);
    free(w->r.want_base), free(w->r.clean), free(w->r.base), free(w->r.sub), free(w->r.map), free(w->r.ppos);
    ml_release(w->b.tok), ml_release(w->b.rows), ml_release(w->b.pos), ml_release(w->b.clean_logits);
}

/* Worker w's copies for batch bt (model: its model copy). false: it cannot stand in for r. */
static bool worker_init(ic_worker *w, const ic_run *r, const ic_batch *bt, ml_model *model) {
    int ns = r->m->n_sites;
    *w = (ic_worker){.r = *r, .b = {.f0 = bt->f0, .B = bt->B, .Lt = bt->Lt, .ans = bt->ans}};
    for (int a = 0; a < 2; a++) /* read only: shared */
        w->b.ng[a] = bt->ng[a], w->b.gdoc[a] = bt->gdoc[a], w->b.gstart[a] = bt->gstart[a], w->b.gt[a] = bt->gt[a],
        w->b.first[a] = bt->first[a];
    w->r.m = model, w->r.patched = 0, w->r.cb = (capture){0}, w->r.cc = (capture){0};
    w->r.want_base = calloc((size_t)ns, 1), w->r.base = calloc((size_t)ns, sizeof *w->r.base);
    w->r.clean = calloc((size_t)ns, sizeof *w->r.clean), w->r.sub = calloc((size_t)ns, sizeof *w->r.sub);
    w->r.map = malloc(sizeof(int32_t) * (size_t)r->batch + 4), w->r.ppos = malloc(sizeof(int32_t) * (size_t)r->batch + 4);
    if (!w->r.want_base || !w->r.base || !w->r.clean || !w->r.sub || !w->r.map || !w->r.ppos) return false;
    w->r.cb = (capture){model, w->r.want_base, w->r.base};
    for (int i = 0; i < ns; i++)
        if (r->clean[i] && !(w->r.clean[i] = ml_clone(r->clean[i]))) return false;
    w->b.tok = ml_clone(bt->tok), w->b.rows = ml_clone(bt->rows), w->b.pos = ml_clone(bt->pos);
    w->b.clean_logits = ml_clone(bt->clean_logits);
    if (!w->b.tok || !w->b.rows || !w->b.pos || !w->b.clean_logits) return false;
    /* the copy must be the model: the same clean logits, bit for bit */
    ml_tensor *hid = ml_model_hidden(model, w->b.tok, NULL);
    ml_tensor *lg = hid ? mli_readout(model, hid, ml_i32(w->b.rows)) : NULL;
    bool same = lg && ml_numel(lg) == ml_numel(bt->clean_logits) &&
                !memcmp(ml_f32(lg), ml_f32(bt->clean_logits), sizeof(float) * (size_t)ml_numel(lg));
    ml_release(hid), ml_release(lg);
    return same;
}

/* The combinations of batch bt on nw workers (models: theirs). ML_OK, or the first error. */
static ml_status combos_parallel(ic_run *r, const ic_batch *bt, ml_model **models, int nw, bool *fallback) {
    int ns = r->m->n_sites, nc = r->res->n_combos;
    ic_worker *w = calloc((size_t)nw, sizeof *w);
    if (!w) return ml_fail(ML_ERR_MEM, "interchange: out of memory");
    bool ok = true;
    for (int i = 0; i < nw && ok; i++) ok = worker_init(&w[i], r, bt, models[i]);
    ml_status st = ML_OK;
    if (!ok) *fallback = true; /* a copy that is not the model, or no memory: serial */
    else {
        int old = ml_threads();
        ml_set_threads(1);
        int next = 0;
#pragma omp parallel num_threads(nw)
        {
            ic_worker *me = &w[omp_get_thread_num()];
            bool was_forced = ml_model_force_fp32(true); /* fp32 on every worker's thread (ml_ic_run) */
            for (;;) {
                int k;
#pragma omp atomic capture
                k = next++;
                if (k >= nc || me->st) break;
                if ((me->st = run_combo(&me->r, &me->b, k))) snprintf(me->msg, sizeof me->msg, "%s", ml_last_error());
            }
            ml_model_force_fp32(was_forced);
        }
        ml_set_threads(old);
        for (int i = 0; i < nw; i++) r->patched += w[i].r.patched;
        for (int i = 0; i < nw && !st; i++)
            if (w[i].st) st = ml_fail(w[i].st, "%s", w[i].msg);
    }
    for (int i = 0; i < nw; i++) worker_free(&w[i], ns);
    free(w);
    return st;
}

static ml_status run_batch(ic_run *r, const ml_dataset *ds, int64_t f0, int B, ml_model **models, int nw) {
    ic_batch bt;
    ml_status st = batch_load(r, ds, f0, B, &bt);
    if (!st && r->suffix) st = batch_groups(r, &bt);
    if (!st) st = batch_clean_run(r, &bt);
    bool serial = nw < 2;
    if (!st && !serial) st = combos_parallel(r, &bt, models, nw, &serial);
    for (int k = 0; !st && serial && k < r->res->n_combos; k++) st = run_combo(r, &bt, k);
    capture_clear(&r->cc), capture_clear(&r->cb);
    batch_free(&bt);
    return st;
}

static ml_ic_result *ic_run_all(ml_model *m, const ml_dataset *ds, int64_t first, int64_t count,
                                const ml_ic_config *cfg);

/* The evaluation is fp32 whatever the model's precision (docs/kernels.md, "bf16 training"): its
 * probabilities and verdicts compare across models and with the paper's. */
ml_ic_result *ml_ic_run(ml_model *m, const ml_dataset *ds, int64_t first, int64_t count, const ml_ic_config *cfg) {
    bool was_forced = ml_model_force_fp32(true);
    ml_ic_result *res = ic_run_all(m, ds, first, count, cfg);
    ml_model_force_fp32(was_forced);
    return res;
}

static ml_ic_result *ic_run_all(ml_model *m, const ml_dataset *ds, int64_t first, int64_t count,
                                const ml_ic_config *cfg) {
    if (check_run(m, ds, first, count, cfg)) return NULL;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ic_run r;
    if (ic_run_init(&r, m, cfg, ds, first, count)) return NULL;
    lay_out_combos(r.res, cfg);
    draw_corruptions(m, ds, &r, r.res, cfg->seed);
    for (int i = 0; i < r.N; i++) r.res->qtype[i] = (uint8_t)ml_dataset_qtype(ds, r.ex_doc[i]);
    for (int s = 0; s < cfg->n_sites; s++) r.want_clean[cfg->sites[s]] = true;
    if (cfg->swap || r.suffix) /* the clean run is the base, or its rows are the base's first ones */
        for (int s = 0; s < cfg->n_sites; s++) ml_patch_needs(m, cfg->sites[s], r.want_clean);
    if (r.suffix) ml_model_suffix_needs(m, r.want_clean);
    bool old_grad = ml_set_grad_enabled(false);
    /* workers' model copies (none: serial) */
    int nm = can_parallel(&r) ? n_workers(&r) : 0, nw = nm;
    ml_model **models = nm ? calloc((size_t)nm, sizeof *models) : NULL;
    for (int i = 0; models && i < nm; i++)
        if (!(models[i] = model_copy(m))) nw = 0;
    if (models && !nw) ml_clear_error(); /* no copy: serial */
    /* a Lua mixer's combinations run one at a time; its ops and the C layers around it run on the
     * workers' threads instead (ops whose bits do not depend on the thread count) */
    int old_threads = ml_threads();
    if (!nm && !r.reference && has_host_mixer(m) && n_workers(&r) > old_threads) ml_set_threads(n_workers(&r));
    ml_status st = ML_OK;
    for (int64_t f0 = 0; !st && f0 < r.N; f0 += r.batch)
        st = run_batch(&r, ds, f0, (int)(r.N - f0 < r.batch ? r.N - f0 : r.batch), models, models ? nw : 0);
    ml_set_threads(old_threads);
    ml_set_grad_enabled(old_grad);
    for (int i = 0; models && i < nm; i++) ml_model_free(models[i]);
    free(models);
    r.res->patched_forwards = r.patched;
    ic_run_free(&r);
    if (st) {
        ml_ic_result_free(r.res);
        return NULL;
    }
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r.res->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return r.res;
}

ml_tensor *ml_site_mean(ml_model *m, const ml_dataset *ds, int64_t n, int site, int batch) {
    if (site < 0 || site >= m->n_sites || ml_site_pos_dim(m, site) != 1) {
        ml_fail(ML_ERR_ARG, "site_mean: expected a site of shape (B, L, ...), got index %d", site);
        return NULL;
    }
    if (n > ml_dataset_size(ds)) n = ml_dataset_size(ds);
    if (batch < 1) batch = 64;
    ml_tensor *sum = NULL;
    double *acc = NULL, *cnt = NULL;
    int64_t Lmax = 0, inner = 0;
    bool *want = calloc((size_t)m->n_sites, 1);
    ml_tensor **acts = calloc((size_t)m->n_sites, sizeof *acts);
    if (!want || !acts) goto fail;
    want[site] = true;
    for (int64_t first = 0; first < n; first += batch) {
        int cnt_b = (int)(n - first < batch ? n - first : batch);
        ml_tensor *tok = NULL, *tg = NULL, *pos = NULL;
        if (ml_dataset_batch_range(ds, first, cnt_b, &tok, &tg, &pos)) goto fail;
        ml_status st = ml_run_cache(m, tok, want, acts, NULL);
        ml_tensor *a = st ? NULL : ml_contiguous(acts[site]);
        ml_release(acts[site]), acts[site] = NULL;
        if (!a) {
            ml_release(tok), ml_release(tg), ml_release(pos);
            goto fail;
        }
        int64_t L = a->shape[1], in = ml_numel(a) / (a->shape[0] * L);
        if (!acc) {
            Lmax = ml_dataset_max_len(ds), inner = in;
            acc = calloc((size_t)(Lmax * inner), sizeof *acc);
            cnt = calloc((size_t)Lmax, sizeof *cnt);
            if (!acc || !cnt) {
                ml_release(a), ml_release(tok), ml_release(tg), ml_release(pos);
                goto fail;
            }
        }
        for (int64_t b = 0; b < a->shape[0]; b++) {
            int len;
            ml_dataset_tokens(ds, first + b, &len);
            for (int64_t t = 0; t < len && t < L; t++) {
                const float *v = ml_f32(a) + (b * L + t) * inner;
                for (int64_t k = 0; k < inner; k++) acc[t * inner + k] += v[k];
                cnt[t] += 1;
            }
        }
        int64_t shp[ML_MAX_DIMS];
        for (int d = 1; d < a->ndim; d++) shp[d - 1] = a->shape[d];
        shp[0] = Lmax;
        if (!sum) sum = ml_zeros(ML_F32, a->ndim - 1, shp);
        ml_release(a), ml_release(tok), ml_release(tg), ml_release(pos);
        if (!sum) goto fail;
    }
    if (!sum) {
        ml_fail(ML_ERR_ARG, "site_mean: the dataset is empty");
        goto fail;
    }
    for (int64_t t = 0; t < Lmax; t++)
        for (int64_t k = 0; k < inner; k++) ml_f32(sum)[t * inner + k] = cnt[t] > 0 ? (float)(acc[t * inner + k] / cnt[t]) : 0;
    free(want), free(acts), free(acc), free(cnt);
    return sum;
fail:
    if (ml_last_status() == ML_OK) ml_fail(ML_ERR_MEM, "site_mean: out of memory");
    free(want), free(acts), free(acc), free(cnt);
    ml_release(sum);
    return NULL;
}

/* ------------------------------------------------------------------ aggregates */

typedef struct {
    ml_metric *v;
    int n, cap;
    bool oom;
} mlist;

static void put(mlist *l, double value, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(mlist *l, double value, const char *fmt, ...) {
    if (l->oom) return;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        ml_metric *v = realloc(l->v, sizeof *v * (size_t)cap);
        if (!v) {
            l->oom = true;
            return;
        }
        l->v = v, l->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->v[l->n].name, sizeof l->v[l->n].name, fmt, ap);
    va_end(ap);
    l->v[l->n++].value = value;
}

/* Index of the combination (site, lt, pos) or -1. */
static int find_combo(const ml_ic_result *r, int site, int lt, int pos) {
    for (int k = 0; k < r->n_combos; k++)
        if (r->combo_site[k] == site && r->combo_lt[k] == lt && r->combo_pos[k] == pos) return k;
    return -1;
}

static double mean_of(const float *x, const ml_ic_result *r, int k, int type) {
    double s = 0;
    int n = 0;
    for (int i = 0; i < r->n_docs; i++)
        if (r->qtype[i] == type) s += x[(size_t)k * r->n_docs + i], n++;
    return n ? s / n : NAN;
}

/* The five per-example metrics of every combination, means over the examples of `type`. */
static void combo_means(mlist *l, const ml_model *m, const ml_ic_result *r, int type, const char *T) {
    for (int k = 0; k < r->n_combos; k++) {
        int site = r->combo_site[k], layer = m->site_layer[site];
        const char *comp = m->sites[site].name, *lt = ml_ic_pos_name(r, r->combo_lt[k]);
        const char *pn = ml_ic_pos_name(r, r->combo_pos[k]);
        double rp = mean_of(r->restored_prob, r, k, type), cp = mean_of(r->corrupted_prob, r, k, type);
        double rl = mean_of(r->restored_logit, r, k, type), cl = mean_of(r->corrupted_logit, r, k, type);
        put(l, rp, "%d.%s.%s.%s.%s.restored_prob", layer, T, lt, pn, comp);
        put(l, rp - cp, "%d.%s.%s.%s.%s.prob_diff", layer, T, lt, pn, comp);
        put(l, rl, "%d.%s.%s.%s.%s.restored_logit", layer, T, lt, pn, comp);
        put(l, rl - cl, "%d.%s.%s.%s.%s.logit_diff", layer, T, lt, pn, comp);
        put(l, mean_of(r->kl_div, r, k, type), "%d.%s.%s.%s.%s.kl_div", layer, T, lt, pn, comp);
    }
}

/* Is combination j of k's group (the same label type, position and component, any layer)? */
static bool same_group(const ml_model *m, const ml_ic_result *r, int j, int k) {
    return r->combo_lt[j] == r->combo_lt[k] && r->combo_pos[j] == r->combo_pos[k] &&
           !strcmp(m->sites[r->combo_site[j]].name, m->sites[r->combo_site[k]].name);
}

/* The standard error of combination j's attrib R = mean(d) / mean(e) over the n examples of
 * `type` (the delta method for a ratio of means): sqrt(sum (d_i - R e_i)^2 / (n (n - 1))) /
 * |mean(e)|, with d_i the example's prob_diff and e_i its original minus its corrupted
 * probability (cbar: the group's per-example corrupted mean, as the denominator takes it). */
static double attrib_se(const ml_ic_result *r, int j, int type, const double *cbar, double R) {
    int N = r->n_docs, n = 0;
    double ss = 0, sum_e = 0;
    for (int i = 0; i < N; i++) {
        if (r->qtype[i] != type) continue;
        double d = (double)r->restored_prob[(size_t)j * N + i] - r->corrupted_prob[(size_t)j * N + i];
        double e = r->original_prob[i] - cbar[i];
        ss += (d - R * e) * (d - R * e), sum_e += e, n++;
    }
    return n < 2 ? NAN : sqrt(ss / ((double)n * (n - 1))) / fabs(sum_e / n);
}

/* The layer-less corrupted./original. means (averaged over the layers, as the original appends
 * them) and each combination's attrib with that denominator, and its standard error (cbar: N
 * doubles of scratch). */
static void layerless_means(mlist *l, const ml_model *m, const ml_ic_result *r, int type, const char *T,
                            double orig_p, double orig_l, double *cbar) {
    int N = r->n_docs;
    for (int k = 0; k < r->n_combos; k++) {
        int site = r->combo_site[k];
        const char *comp = m->sites[site].name, *lt = ml_ic_pos_name(r, r->combo_lt[k]);
        const char *pn = ml_ic_pos_name(r, r->combo_pos[k]);
        bool first = true;
        for (int j = 0; j < k && first; j++) first = !same_group(m, r, j, k);
        if (!first) continue;
        double cp = 0, cl = 0;
        int nl = 0;
        for (int i = 0; i < N; i++) cbar[i] = 0;
        for (int j = k; j < r->n_combos; j++)
            if (same_group(m, r, j, k)) {
                cp += mean_of(r->corrupted_prob, r, j, type), cl += mean_of(r->corrupted_logit, r, j, type), nl++;
                for (int i = 0; i < N; i++) cbar[i] += r->corrupted_prob[(size_t)j * N + i];
            }
        cp /= nl, cl /= nl;
        for (int i = 0; i < N; i++) cbar[i] /= nl;
        put(l, cp, "corrupted.%s.%s.%s.%s.restored_prob", T, lt, pn, comp);
        put(l, cl, "corrupted.%s.%s.%s.%s.restored_logit", T, lt, pn, comp);
        put(l, orig_p, "original.%s.%s.%s.%s.restored_prob", T, lt, pn, comp);
        put(l, orig_l, "original.%s.%s.%s.%s.restored_logit", T, lt, pn, comp);
        for (int j = k; j < r->n_combos; j++)
            if (same_group(m, r, j, k)) {
                double d = mean_of(r->restored_prob, r, j, type) - mean_of(r->corrupted_prob, r, j, type);
                double a = ml_ic_attrib(d, orig_p, cp, 0.01, NULL);
                int layer = m->site_layer[r->combo_site[j]];
                put(l, a, "%d.%s.%s.%s.%s.attrib", layer, T, lt, pn, comp);
                put(l, attrib_se(r, j, type, cbar, a), "%d.%s.%s.%s.%s.attrib_se", layer, T, lt, pn, comp);
            }
    }
}

/* max_perc: per (site, label type), each example's argmax over positions (vals, names: scratch). */
static void max_perc(mlist *l, const ml_model *m, const ml_ic_result *r, int type, const char *T, int nt,
                     double *vals, const char **names) {
    int N = r->n_docs;
    for (int k = 0; k < r->n_combos; k++) {
        int site = r->combo_site[k], lt = r->combo_lt[k];
        if (find_combo(r, site, lt, r->combo_pos[k]) != k) continue;
        bool first = true;
        for (int j = 0; j < k && first; j++) first = !(r->combo_site[j] == site && r->combo_lt[j] == lt);
        if (!first) continue;
        int np = 0, ks[ML_IC_MAX_POS];
        for (int j = k; j < r->n_combos; j++)
            if (r->combo_site[j] == site && r->combo_lt[j] == lt && np < ML_IC_MAX_POS) ks[np++] = j;
        int counts[ML_IC_MAX_POS + 1] = {0};
        for (int i = 0; i < N; i++) {
            if (r->qtype[i] != type) continue;
            for (int a = 0; a < np; a++) {
                size_t o = (size_t)ks[a] * N + i;
                vals[a] = (double)r->restored_prob[o] - (double)r->corrupted_prob[o];
                names[a] = ml_ic_pos_name(r, r->combo_pos[ks[a]]);
            }
            counts[ml_ic_argmax(vals, names, np)]++;
        }
        int layer = m->site_layer[site];
        const char *comp = m->sites[site].name, *lts = ml_ic_pos_name(r, lt);
        for (int a = 0; a <= np; a++)
            put(l, (double)counts[a] / nt, "%d.%s.%s.%s.%s.max_perc", layer, T, lts,
                a < np ? ml_ic_pos_name(r, r->combo_pos[ks[a]]) : "nothing", comp);
    }
}

/* max_perc_layer: per (component, label type, position), each example's argmax over layers. */
static void max_perc_layer(mlist *l, const ml_model *m, const ml_ic_result *r, int type, const char *T, int nt,
                           double *vals, const char **names) {
    static const char *const layer_names[ML_MAX_LAYERS] = {"0", "1", "2",  "3",  "4",  "5",  "6",  "7",
                                                           "8", "9", "10", "11", "12", "13", "14", "15"};
    int N = r->n_docs;
    for (int k = 0; k < r->n_combos; k++) {
        const char *comp = m->sites[r->combo_site[k]].name;
        int lt = r->combo_lt[k], pk = r->combo_pos[k];
        bool first = true;
        for (int j = 0; j < k && first; j++)
            first = !(r->combo_lt[j] == lt && r->combo_pos[j] == pk && !strcmp(m->sites[r->combo_site[j]].name, comp));
        if (!first) continue;
        int nl = 0, ks[ML_MAX_LAYERS];
        for (int j = k; j < r->n_combos; j++)
            if (r->combo_lt[j] == lt && r->combo_pos[j] == pk && !strcmp(m->sites[r->combo_site[j]].name, comp) &&
                nl < ML_MAX_LAYERS)
                ks[nl++] = j;
        int counts[ML_MAX_LAYERS + 1] = {0};
        for (int i = 0; i < N; i++) {
            if (r->qtype[i] != type) continue;
            for (int a = 0; a < nl; a++) {
                size_t o = (size_t)ks[a] * N + i;
                vals[a] = (double)r->restored_prob[o] - (double)r->corrupted_prob[o];
                names[a] = layer_names[m->site_layer[r->combo_site[ks[a]]]];
            }
            counts[ml_ic_argmax(vals, names, nl)]++;
        }
        for (int a = 0; a <= nl; a++)
            put(l, (double)counts[a] / nt, "%s.%s.%s.%s.%s.max_perc_layer",
                a < nl ? layer_names[m->site_layer[r->combo_site[ks[a]]]] : "nothing", T, ml_ic_pos_name(r, lt),
                ml_ic_pos_name(r, pk), comp);
    }
}

/* Memorisation scores (PARENT documents): the max over layers of a mean. */
static void memo_scores(mlist *l, const ml_model *m, const ml_ic_result *r, int type, const char *T) {
    static const struct {
        const char *name, *comp, *metric;
        int pos;
    } memo[] = {
        {"memo_in", "attention_input", "restored_prob", ML_POS_QUERY_ITEM_ORIG},
        {"memo_out", "attention_output", "restored_prob", ML_POS_QUERY_ITEM_ORIG},
        {"memo_div_in", "attention_input", "restored_prob", ML_POS_DIVIDER},
        {"memo_div_out", "attention_output", "restored_prob", ML_POS_DIVIDER},
        {"memo_in_diff", "attention_input", "prob_diff", ML_POS_QUERY_ITEM_ORIG},
        {"memo_out_diff", "attention_output", "prob_diff", ML_POS_QUERY_ITEM_ORIG},
        {"memo_div_in_diff", "attention_input", "prob_diff", ML_POS_DIVIDER},
        {"memo_div_out_diff", "attention_output", "prob_diff", ML_POS_DIVIDER},
        {"memo_logit_in", "attention_input", "restored_logit", ML_POS_QUERY_ITEM_ORIG},
        {"memo_logit_out", "attention_output", "restored_logit", ML_POS_QUERY_ITEM_ORIG},
        {"memo_logit_div_in", "attention_input", "restored_logit", ML_POS_DIVIDER},
        {"memo_logit_div_out", "attention_output", "restored_logit", ML_POS_DIVIDER},
        {"memo_logit_in_diff", "attention_input", "logit_diff", ML_POS_QUERY_ITEM_ORIG},
        {"memo_logit_out_diff", "attention_output", "logit_diff", ML_POS_QUERY_ITEM_ORIG},
        {"memo_logit_div_in_diff", "attention_input", "logit_diff", ML_POS_DIVIDER},
        {"memo_logit_div_out_diff", "attention_output", "logit_diff", ML_POS_DIVIDER},
    };
    for (size_t q = 0; q < sizeof memo / sizeof memo[0]; q++) {
        double best = -INFINITY;
        for (int k = 0; k < r->n_combos; k++) {
            if (r->combo_lt[k] != ML_POS_TARGET_ITEM_ORIG || r->combo_pos[k] != memo[q].pos ||
                strcmp(m->sites[r->combo_site[k]].name, memo[q].comp))
                continue;
            bool logit = strstr(memo[q].metric, "logit") != NULL, diff = strstr(memo[q].metric, "diff") != NULL;
            double v = mean_of(logit ? r->restored_logit : r->restored_prob, r, k, type);
            if (diff) v -= mean_of(logit ? r->corrupted_logit : r->corrupted_prob, r, k, type);
            best = v > best ? v : best;
        }
        if (best > -INFINITY) put(l, best, "%s.memo_score", memo[q].name);
    }
}

ml_status ml_ic_metrics(const ml_model *m, const ml_ic_result *r, ml_metric **out, int *n_out) {
    *out = NULL, *n_out = 0;
    mlist l = {0};
    int N = r->n_docs;
    double *vals = malloc(sizeof(double) * (ML_IC_MAX_POS + ML_MAX_LAYERS + 2));
    const char **names = malloc(sizeof(char *) * (ML_IC_MAX_POS + ML_MAX_LAYERS + 2));
    double *cbar = malloc(sizeof(double) * (size_t)(N > 0 ? N : 1));
    if (!vals || !names || !cbar) {
        free(vals), free(names), free(cbar);
        return ml_fail(ML_ERR_MEM, "interchange: out of memory");
    }
    for (int type = 0; type <= ML_QT_SIBLING; type++) {
        int nt = 0;
        for (int i = 0; i < N; i++) nt += r->qtype[i] == type;
        if (!nt) continue;
        const char *T = ml_qtype_name((ml_qtype)type);
        double orig_p = 0, orig_l = 0;
        for (int i = 0; i < N; i++)
            if (r->qtype[i] == type) orig_p += r->original_prob[i], orig_l += r->original_logit[i];
        orig_p /= nt, orig_l /= nt;
        combo_means(&l, m, r, type, T);
        layerless_means(&l, m, r, type, T, orig_p, orig_l, cbar);
        max_perc(&l, m, r, type, T, nt, vals, names);
        max_perc_layer(&l, m, r, type, T, nt, vals, names);
        if (type == ML_QT_PARENT) memo_scores(&l, m, r, type, T);
    }
    free(vals), free(names), free(cbar);
    if (l.oom) {
        free(l.v);
        return ml_fail(ML_ERR_MEM, "interchange: out of memory");
    }
    *out = l.v, *n_out = l.n;
    return ML_OK;
}
