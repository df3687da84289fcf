/* Pre-generated datasets and the batches of the training loop (docs/tasks.md, "Datasets and batches"). */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task_impl.h"

struct ml_dataset {
    ml_task *task;
    ml_split split;
    int64_t n;
    int max_len;
    int32_t *tokens;      /* all documents back to back */
    int64_t *offsets;     /* n + 1 */
    int32_t *positions;   /* n x npos */
    int npos;             /* position slots per document: ml_task_npos of the task */
    ml_doc_stats *stats;  /* n */
    uint8_t *qtype;       /* n */
    int32_t *parent;      /* ATR: per token, document position of its parent (-1: none) */
    int32_t *tdepth;      /* ATR: per token, terminal depth (0 outside the yield) */
    int32_t *all_targets; /* all_target_items_orig of every document back to back */
    int64_t *all_off;     /* n + 1 */
    int32_t *read_pos, *read_ans; /* readouts of every document back to back */
    int64_t *read_off;    /* n + 1 */
    /* while filling: room for `cap` documents; capacities of the growing buffers */
    int64_t cap, tok_cap, tree_cap, depth_cap, at_cap, rp_cap, ra_cap;
};

void ml_dataset_free(ml_dataset *ds) {
    if (!ds) return;
    ml_task_release(ds->task);
    free(ds->tokens);
    free(ds->offsets);
    free(ds->positions);
    free(ds->stats);
    free(ds->qtype);
    free(ds->parent);
    free(ds->tdepth);
    free(ds->all_targets);
    free(ds->all_off);
    free(ds->read_pos);
    free(ds->read_ans);
    free(ds->read_off);
    free(ds);
}

/* memcpy of n int32 values; n = 0 copies nothing (either pointer may then be NULL: a buffer no
 * document has filled yet). */
static void copy_i32(int32_t *dst, const int32_t *src, int64_t n) {
    if (n > 0) memcpy(dst, src, (size_t)n * sizeof(int32_t));
}

/* Appends k int32 values to a growing buffer. */
static ml_status append(int32_t **buf, int64_t *cap, int64_t used, const int32_t *src, int k) {
    if (used + k > *cap) {
        int64_t c = *cap ? *cap : 4096;
        while (c < used + k) c *= 2;
        int32_t *q = realloc(*buf, (size_t)c * sizeof(int32_t));
        if (!q) return ml_fail(ML_ERR_MEM, "task:dataset: out of memory (%lld tokens)", (long long)c);
        *buf = q;
        *cap = c;
    }
    if (src) copy_i32(*buf + used, src, k);
    return ML_OK;
}

/* Where build() takes its documents from: rng, np (ATR, rng = numpy) or the pre-drawn keys,
 * values and gaps of an MQAR dataset in numpy mode (fillers from rng). */
typedef struct {
    ml_rng *rng;
    ml_np_random *np;
    const int32_t *mq_keys, *mq_vals, *mq_gaps;
} doc_source;

static ml_status next_doc(ml_task *t, doc_source *src, int64_t i, ml_split split, ml_doc *doc) {
    if (src->mq_keys) {
        int64_t k = i * t->mqar.num_kv_pairs;
        return ml_mqar_doc(t, src->mq_keys + k, src->mq_vals + k, src->mq_gaps + k, src->rng, doc);
    }
    if (src->np) return ml_atr_sample_np(t, src->np, split, doc);
    return ml_task_sample(t, src->rng, split, doc);
}

ml_dataset *ml_dataset_open(ml_task *t, int64_t n, ml_split split) {
    if (n < 0 || n > ((int64_t)1 << 31)) {
        ml_fail(ML_ERR_ARG, "task:dataset: the number of documents must be in 0..2^31, got %lld", (long long)n);
        return NULL;
    }
    if ((unsigned)split > ML_SPLIT_TEST) {
        ml_fail(ML_ERR_ARG, "task:dataset: unknown split %d", (int)split);
        return NULL;
    }
    ml_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) {
        ml_fail(ML_ERR_MEM, "task:dataset: out of memory");
        return NULL;
    }
    ds->task = ml_task_retain(t);
    ds->split = split;
    ds->cap = n;
    size_t nn = (size_t)n + 1;
    ds->offsets = calloc(nn, sizeof(int64_t));
    ds->all_off = calloc(nn, sizeof(int64_t));
    ds->npos = ml_task_npos(t);
    ds->positions = malloc(nn * (size_t)ds->npos * sizeof(int32_t));
    ds->stats = malloc(nn * sizeof(ml_doc_stats));
    ds->qtype = malloc(nn);
    ds->read_off = calloc(nn, sizeof(int64_t));
    if (!ds->offsets || !ds->all_off || !ds->positions || !ds->stats || !ds->qtype || !ds->read_off) {
        ml_fail(ML_ERR_MEM, "task:dataset: out of memory for %lld documents", (long long)n);
        ml_dataset_free(ds);
        return NULL;
    }
    return ds;
}

/* Appends document doc as document ds->n (no checks). doc's readouts are derived for AR and ATR. */
static ml_status put_doc(ml_dataset *ds, ml_doc *doc) {
    const ml_task *t = ds->task;
    int64_t i = ds->n, used = ds->offsets[i], at_used = ds->all_off[i], r_used = ds->read_off[i];
    if (i >= ds->cap) return ml_fail(ML_ERR_ARG, "task:dataset: the dataset is full (%lld documents)", (long long)ds->cap);
    if (append(&ds->tokens, &ds->tok_cap, used, doc->tokens, doc->len) != ML_OK) return ML_ERR_MEM;
    if (t->kind == ML_TASK_ATR) {
        if (append(&ds->parent, &ds->tree_cap, used, NULL, doc->len) != ML_OK ||
            append(&ds->tdepth, &ds->depth_cap, used, NULL, doc->len) != ML_OK)
            return ML_ERR_MEM;
        int32_t *par = ds->parent + used, *dep = ds->tdepth + used;
        for (int p = 0; p < doc->len; p++) par[p] = -1, dep[p] = 0;
        for (int y = 0; y < doc->n_yield; y++) par[1 + y] = doc->parent_pos[y], dep[1 + y] = doc->depth[y];
    }
    if (append(&ds->all_targets, &ds->at_cap, at_used, doc->all_targets, doc->n_all_targets) != ML_OK)
        return ML_ERR_MEM;
    bool derived = t->kind == ML_TASK_AR || t->kind == ML_TASK_ATR;
    if (derived) { /* AR, ATR: the answer, read one position before it */
        if (ml_doc_reserve(doc, 1) != ML_OK) return ML_ERR_MEM;
        doc->read_pos[0] = doc->pos[ML_POS_TARGET_ITEM] - 1;
        doc->read_ans[0] = doc->tokens[doc->pos[ML_POS_TARGET_ITEM]];
        doc->n_reads = 1;
    }
    ml_status st = ML_OK;
    if (append(&ds->read_pos, &ds->rp_cap, r_used, doc->read_pos, doc->n_reads) != ML_OK ||
        append(&ds->read_ans, &ds->ra_cap, r_used, doc->read_ans, doc->n_reads) != ML_OK)
        st = ML_ERR_MEM;
    int nr = doc->n_reads;
    if (derived) doc->n_reads = 0; /* derived again for the next document */
    if (st != ML_OK) return st;
    ds->offsets[i + 1] = used + doc->len;
    ds->all_off[i + 1] = at_used + doc->n_all_targets;
    ds->read_off[i + 1] = r_used + nr;
    memcpy(ds->positions + i * ds->npos, doc->pos, (size_t)ds->npos * sizeof(int32_t));
    ds->stats[i] = doc->stats;
    ds->qtype[i] = (uint8_t)doc->qtype;
    if (doc->len > ds->max_len) ds->max_len = doc->len;
    ds->n = i + 1;
    return ML_OK;
}

ml_status ml_dataset_append(ml_dataset *ds, const ml_doc *doc, bool *rejected) {
    *rejected = false;
    if (ds->task->kind == ML_TASK_AR || ds->task->kind == ML_TASK_ATR) /* their readouts are derived */
        return ml_fail(ML_ERR_ARG, "task:dataset: documents of %s are drawn in C, not appended", ds->task->name);
    if (ml_doc_check(ds->task, doc, 0) != ML_OK) return ML_ERR_ARG;
    const ml_custom_config *cu = ml_task_custom_config(ds->task);
    if (cu && cu->holdout > 0 && ml_task_held_out(ds->task, doc->tokens, doc->len) != (ds->split != ML_SPLIT_TRAIN)) {
        *rejected = true;
        return ML_OK;
    }
    ml_doc copy = *doc; /* put_doc takes a mutable document (it derives AR/ATR readouts in place) */
    copy.scratch = NULL;
    return put_doc(ds, &copy);
}

/* n documents of `split` from src. */
static ml_dataset *build(ml_task *t, int64_t n, doc_source *src, ml_split split) {
    if (t->kind == ML_TASK_CUSTOM) {
        ml_fail(ML_ERR_ARG, "task:dataset: the documents of task '%s' are made outside C (its sample function or "
                "file)", t->name);
        return NULL;
    }
    ml_dataset *ds = ml_dataset_open(t, n, split);
    if (!ds) return NULL;
    ml_doc doc;
    ml_doc_init(&doc);
    for (int64_t i = 0; i < n; i++) {
        /* Ctrl-C is polled now and then: a paper-size set takes a second or more. */
        if ((i & 4095) == 4095 && ml_check_interrupt("task:dataset") != ML_OK) goto fail;
        if (next_doc(t, src, i, split, &doc) != ML_OK) goto fail;
        if (put_doc(ds, &doc) != ML_OK) goto fail;
    }
    ml_doc_free(&doc);
    return ds;
fail:
    ml_doc_free(&doc);
    ml_dataset_free(ds);
    return NULL;
}

ml_dataset *ml_dataset_from_rng(ml_task *t, int64_t n, ml_rng *rng, ml_split split) {
    if (t->kind == ML_TASK_MQAR && t->mqar.rng == ML_RNG_NUMPY) {
        ml_fail(ML_ERR_ARG, "task:dataset: an MQAR task with rng = \"numpy\" draws its datasets from a seed, not "
                "from a generator");
        return NULL;
    }
    doc_source src = {.rng = rng};
    return build(t, n, &src, split);
}

/* ---- rng = numpy: the original's protocol (docs/tasks.md, "Random streams") ----
 * One stream: the grammar, 100,032 training documents, then 1,024 documents per eval split,
 * dev before test on tasks with a split (no dev split otherwise). */

static int64_t np_split_docs(ml_split s) { return s == ML_SPLIT_TRAIN ? ML_TRAIN_DOCS : ML_EVAL_SPLIT_DOCS; }

/* The split whose documents precede those of s, or -1 for train. */
static int np_split_before(const ml_task *t, ml_split s) {
    if (s == ML_SPLIT_TRAIN) return -1;
    return s == ML_SPLIT_TEST && ml_task_has_split(t) ? ML_SPLIT_DEV : ML_SPLIT_TRAIN;
}

static ml_status np_remember_start(ml_task *t, ml_split s, const ml_np_random *r) {
    if (t->np_start[s]) return ML_OK;
    if (!(t->np_start[s] = malloc(sizeof *r))) return ml_fail(ML_ERR_MEM, "task:dataset: out of memory");
    *t->np_start[s] = *r;
    return ML_OK;
}

/* The stream where the documents of s begin: drawn once by running through those before it
 * (the training set's 100,032 documents for an eval split), then kept in the task. */
static ml_status np_split_start(ml_task *t, ml_split s, ml_np_random *out) {
    if (!t->np_start[s]) {
        ml_split before = (ml_split)np_split_before(t, s);
        ml_np_random r;
        if (np_split_start(t, before, &r) != ML_OK) return ML_ERR_STATE;
        ml_doc doc;
        ml_doc_init(&doc);
        for (int64_t i = 0; i < np_split_docs(before); i++) {
            ml_status st = (i & 4095) == 4095 ? ml_check_interrupt("task:dataset") : ML_OK;
            if (st == ML_OK) st = ml_atr_sample_np(t, &r, before, &doc);
            if (st != ML_OK) {
                ml_doc_free(&doc);
                return st;
            }
        }
        ml_doc_free(&doc);
        if (np_remember_start(t, s, &r) != ML_OK) return ML_ERR_MEM;
    }
    *out = *t->np_start[s];
    return ML_OK;
}

/* The first n documents of split s in the protocol's stream. */
static ml_dataset *np_dataset(ml_task *t, int64_t n, ml_split split) {
    if ((unsigned)split > ML_SPLIT_TEST) {
        ml_fail(ML_ERR_ARG, "task:dataset: unknown split %d", (int)split);
        return NULL;
    }
    if (split == ML_SPLIT_DEV && !ml_task_has_split(t)) {
        ml_fail(ML_ERR_ARG, "task:dataset: %s with rng = \"numpy\" has no dev split (the original draws one only "
                "for tasks with a train/test split); use \"test\"", t->name);
        return NULL;
    }
    if (n > np_split_docs(split)) {
        ml_fail(ML_ERR_ARG, "task:dataset: with rng = \"numpy\" the %s split has %lld documents (the original's "
                "protocol), got n = %lld", ml_split_name(split), (long long)np_split_docs(split), (long long)n);
        return NULL;
    }
    ml_np_random r;
    if (np_split_start(t, split, &r) != ML_OK) return NULL;
    doc_source src = {.np = &r};
    ml_dataset *ds = build(t, n, &src, split);
    /* A whole split ends where the next one begins: keep that for free. */
    if (ds && n == np_split_docs(split))
        for (int s = 0; s < 3; s++)
            if (np_split_before(t, (ml_split)s) == (int)split && !(s == ML_SPLIT_DEV && !ml_task_has_split(t)) &&
                np_remember_start(t, (ml_split)s, &r) != ML_OK) {
                ml_dataset_free(ds);
                return NULL;
            }
    return ds;
}

/* MQAR, rng = numpy: the original's multiquery_ar(num_examples = n, seed = seed + split). */
static ml_dataset *mqar_np_dataset(ml_task *t, int64_t n, uint64_t seed, ml_split split) {
    if ((unsigned)split > ML_SPLIT_TEST) {
        ml_fail(ML_ERR_ARG, "task:dataset: unknown split %d", (int)split);
        return NULL;
    }
    if (seed + (uint64_t)split > UINT32_MAX) {
        ml_fail(ML_ERR_ARG, "task:dataset: with rng = \"numpy\" the seed must be below 2^32 - %d, got %llu",
                (int)split, (unsigned long long)seed);
        return NULL;
    }
    if (n < 0 || n > ((int64_t)1 << 31)) {
        ml_fail(ML_ERR_ARG, "task:dataset: the number of documents must be in 0..2^31, got %lld", (long long)n);
        return NULL;
    }
    size_t k = (size_t)n * (size_t)t->mqar.num_kv_pairs + 1;
    int32_t *keys = malloc(k * sizeof(int32_t)), *vals = malloc(k * sizeof(int32_t)), *gaps = malloc(k * sizeof(int32_t));
    ml_dataset *ds = NULL;
    if (!keys || !vals || !gaps) ml_fail(ML_ERR_MEM, "task:dataset: out of memory for %lld documents", (long long)n);
    else if (ml_mqar_generate_np(t, n, (uint32_t)(seed + (uint64_t)split), keys, vals, gaps) == ML_OK) {
        ml_rng fill;
        ml_rng_init(&fill, seed, ml_split_stream(split));
        doc_source src = {.rng = &fill, .mq_keys = keys, .mq_vals = vals, .mq_gaps = gaps};
        ds = build(t, n, &src, split);
    }
    free(keys);
    free(vals);
    free(gaps);
    return ds;
}

ml_dataset *ml_dataset_new(ml_task *t, int64_t n, uint64_t seed, ml_split split) {
    if (t->kind == ML_TASK_ATR && t->atr.rng == ML_RNG_NUMPY) return np_dataset(t, n, split);
    if (t->kind == ML_TASK_MQAR && t->mqar.rng == ML_RNG_NUMPY) return mqar_np_dataset(t, n, seed, split);
    ml_rng rng;
    ml_rng_init(&rng, seed, ml_split_stream(split));
    return ml_dataset_from_rng(t, n, &rng, split);
}

const int32_t *ml_dataset_readouts(const ml_dataset *ds, int64_t i, int *n, const int32_t **answers) {
    *n = (int)(ds->read_off[i + 1] - ds->read_off[i]);
    if (answers) *answers = ds->read_ans + ds->read_off[i];
    return ds->read_pos + ds->read_off[i];
}

int64_t ml_dataset_size(const ml_dataset *ds) { return ds->n; }
ml_task *ml_dataset_task(const ml_dataset *ds) { return ds->task; }
ml_split ml_dataset_split(const ml_dataset *ds) { return ds->split; }
int ml_dataset_max_len(const ml_dataset *ds) { return ds->max_len; }

const int32_t *ml_dataset_tokens(const ml_dataset *ds, int64_t i, int *len) {
    *len = (int)(ds->offsets[i + 1] - ds->offsets[i]);
    return ds->tokens + ds->offsets[i];
}
const int32_t *ml_dataset_positions(const ml_dataset *ds, int64_t i) { return ds->positions + i * ds->npos; }
int ml_dataset_npos(const ml_dataset *ds) { return ds->npos; }
const ml_doc_stats *ml_dataset_stats(const ml_dataset *ds, int64_t i) { return &ds->stats[i]; }

size_t ml_dataset_bytes(const ml_dataset *ds) {
    /* per token: the token, its parent and its depth; per document: statistics, positions, offsets */
    int64_t tokens = ds->n ? ds->offsets[ds->n] - ds->offsets[0] : 0;
    return (size_t)tokens * 12 + (size_t)ds->n * (sizeof(ml_doc_stats) + 32 + 4 * (size_t)ds->npos);
}

#define STAT(f, fl) {#f, offsetof(ml_doc_stats, f), fl}
const ml_stat_field ml_doc_stat_fields[ML_NSTATS] = {
    STAT(doc_len, false),           STAT(yield_len, false),        STAT(depth, false),
    STAT(qt_dist, false),           STAT(query_key_dist, false),   STAT(query_target_dist, false),
    STAT(branching, true),          STAT(percent_non_unique, true), STAT(eligible_pairs, false),
    STAT(eligible_queries, false),  STAT(eligible_targets, false), STAT(rejections, false),
};

double ml_doc_stat(const ml_doc_stats *s, int field) {
    const char *p = (const char *)s + ml_doc_stat_fields[field].offset;
    return ml_doc_stat_fields[field].is_float ? *(const float *)p : *(const int32_t *)p;
}

void ml_dataset_stat_means(const ml_dataset *ds, double means[ML_STAT_MEANS], int *yield_min, int *yield_max) {
    int64_t n = ml_dataset_size(ds);
    int lo = INT_MAX, hi = 0;
    for (int j = 0; j < ML_STAT_MEANS; j++) means[j] = 0;
    for (int64_t i = 0; i < n; i++) {
        const ml_doc_stats *s = &ds->stats[i];
        for (int j = 0; j < ML_STAT_MEANS; j++) means[j] += ml_doc_stat(s, j);
        lo = s->yield_len < lo ? s->yield_len : lo;
        hi = s->yield_len > hi ? s->yield_len : hi;
    }
    for (int j = 0; j < ML_STAT_MEANS && n; j++) means[j] /= (double)n;
    *yield_min = n ? lo : 0, *yield_max = hi;
}
ml_qtype ml_dataset_qtype(const ml_dataset *ds, int64_t i) { return (ml_qtype)ds->qtype[i]; }
const int32_t *ml_dataset_all_targets(const ml_dataset *ds, int64_t i, int *n) {
    *n = (int)(ds->all_off[i + 1] - ds->all_off[i]);
    return ds->all_targets + ds->all_off[i];
}

ml_status ml_dataset_readout_positions(const ml_dataset *ds, int64_t i, int j, int32_t *pos) {
    if (i < 0 || i >= ds->n)
        return ml_fail(ML_ERR_INDEX, "dataset:readout_positions: document %lld out of range 0..%lld", (long long)i,
                       (long long)ds->n - 1);
    int nr, len;
    const int32_t *rp = ml_dataset_readouts(ds, i, &nr, NULL);
    if (j < 0 || j >= nr)
        return ml_fail(ML_ERR_INDEX, "dataset:readout_positions: readout %d out of range 0..%d", j, nr - 1);
    memcpy(pos, ml_dataset_positions(ds, i), (size_t)ds->npos * sizeof(int32_t));
    const ml_task *t = ds->task;
    if (t->kind != ML_TASK_MQAR) return ML_OK;
    const int32_t *tok = ml_dataset_tokens(ds, i, &len);
    int C = t->mq_context, n2 = 2 * t->mqar.num_kv_pairs, q = rp[j];
    int qio = -1;
    for (int p = C - n2; p < C && qio < 0; p += 2) /* keys are distinct: one match */
        if (tok[p] == tok[q]) qio = p;
    pos[ML_POS_QUERY_ITEM_ORIG] = qio;
    pos[ML_POS_TARGET_ITEM_ORIG] = qio < 0 ? -1 : qio + 1;
    pos[ML_POS_QUERY_ITEM] = q;
    pos[ML_POS_TARGET_ITEM] = q + 1;
    pos[ML_POS_NEXT_KEY] = qio >= 0 && qio + 2 < C ? qio + 2 : -1;
    return ML_OK;
}

ml_status ml_dataset_get_doc(const ml_dataset *ds, int64_t i, ml_doc *doc) {
    if (i < 0 || i >= ds->n)
        return ml_fail(ML_ERR_INDEX, "dataset:doc: document %lld out of range 0..%lld", (long long)i,
                       (long long)ds->n - 1);
    int len, na;
    const int32_t *tok = ml_dataset_tokens(ds, i, &len);
    const int32_t *at = ml_dataset_all_targets(ds, i, &na);
    if (ml_doc_reserve(doc, len) != ML_OK) return ML_ERR_MEM;
    copy_i32(doc->tokens, tok, len);
    doc->len = len;
    memcpy(doc->pos, ml_dataset_positions(ds, i), (size_t)ds->npos * sizeof(int32_t));
    for (int k = ds->npos; k < ML_MAX_POS; k++) doc->pos[k] = -1;
    copy_i32(doc->all_targets, at, na);
    doc->n_all_targets = na;
    doc->qtype = ml_dataset_qtype(ds, i);
    doc->stats = ds->stats[i];
    const int32_t *ans, *rp = ml_dataset_readouts(ds, i, &doc->n_reads, &ans);
    copy_i32(doc->read_pos, rp, doc->n_reads);
    copy_i32(doc->read_ans, ans, doc->n_reads);
    doc->n_yield = 0;
    if (ds->parent) {
        /* node/head ids are not kept; the tree is fully described by parents and depths */
        int n = doc->pos[ML_POS_DIVIDER] - 1;
        const int32_t *par = ds->parent + ds->offsets[i], *dep = ds->tdepth + ds->offsets[i];
        doc->n_yield = n;
        for (int y = 0; y < n; y++) {
            doc->parent_pos[y] = par[1 + y];
            doc->depth[y] = dep[1 + y];
            doc->node_id[y] = 1 + y;
            doc->head_id[y] = par[1 + y];
        }
    }
    return ML_OK;
}

static ml_status check_indices(const ml_dataset *ds, const int64_t *idx, int batch, const char *fn) {
    if (batch < 1) return ml_fail(ML_ERR_ARG, "%s: batch must be >= 1, got %d", fn, batch);
    if (!idx) return ml_fail(ML_ERR_ARG, "%s: no document indices", fn);
    for (int b = 0; b < batch; b++)
        if (idx[b] < 0 || idx[b] >= ds->n)
            return ml_fail(ML_ERR_INDEX, "%s: document index %lld (batch row %d) out of range 0..%lld", fn,
                           (long long)idx[b], b, (long long)ds->n - 1);
    return ML_OK;
}

ml_status ml_dataset_batch(const ml_dataset *ds, const int64_t *doc_indices, int batch, ml_tensor **tokens,
                           ml_tensor **targets) {
    const char *fn = "dataset:batch";
    *tokens = *targets = NULL;
    if (check_indices(ds, doc_indices, batch, fn) != ML_OK) return ml_last_status();
    int L = 0;
    for (int b = 0; b < batch; b++) {
        int len;
        ml_dataset_tokens(ds, doc_indices[b], &len);
        if (len > L) L = len;
    }
    int64_t shape[2] = {batch, L};
    ml_tensor *tk = ml_empty(ML_I32, 2, shape), *tg = ml_empty(ML_I32, 2, shape);
    if (!tk || !tg) {
        ml_release(tk);
        ml_release(tg);
        return ml_last_status() != ML_OK ? ml_last_status() : ml_fail(ML_ERR_MEM, "%s: out of memory", fn);
    }
    int32_t *T = ml_i32(tk), *Y = ml_i32(tg);
    for (int b = 0; b < batch; b++) {
        int len;
        const int32_t *src = ml_dataset_tokens(ds, doc_indices[b], &len);
        int32_t *trow = T + (int64_t)b * L, *yrow = Y + (int64_t)b * L;
        memcpy(trow, src, (size_t)len * sizeof(int32_t));
        for (int p = len; p < L; p++) trow[p] = ML_PAD;
        for (int p = 0; p < L; p++) yrow[p] = ML_IGNORE;
        /* Only the answers are trained, each at its readout (docs/tasks.md, "Datasets and
         * batches"): one position before target_item, or every MQAR query. */
        int nr;
        const int32_t *ans, *rp = ml_dataset_readouts(ds, doc_indices[b], &nr, &ans);
        for (int j = 0; j < nr; j++) yrow[rp[j]] = ans[j];
    }
    *tokens = tk;
    *targets = tg;
    return ML_OK;
}

ml_status ml_dataset_batch_positions(const ml_dataset *ds, const int64_t *doc_indices, int batch,
                                     ml_tensor **positions) {
    *positions = NULL;
    if (check_indices(ds, doc_indices, batch, "dataset:positions") != ML_OK) return ml_last_status();
    int64_t shape[2] = {batch, ds->npos};
    ml_tensor *p = ml_empty(ML_I32, 2, shape);
    if (!p) return ml_last_status() != ML_OK ? ml_last_status() : ML_ERR_MEM;
    for (int b = 0; b < batch; b++)
        memcpy(ml_i32(p) + (int64_t)b * ds->npos, ml_dataset_positions(ds, doc_indices[b]),
               (size_t)ds->npos * sizeof(int32_t));
    *positions = p;
    return ML_OK;
}

ml_status ml_dataset_batch_range(const ml_dataset *ds, int64_t first, int count, ml_tensor **tokens,
                                 ml_tensor **targets, ml_tensor **positions) {
    *tokens = *targets = NULL;
    if (positions) *positions = NULL;
    if (count < 1 || first < 0 || first > ds->n - count)
        return ml_fail(ML_ERR_INDEX, "dataset:batch: documents %lld..%lld out of range 0..%lld", (long long)first,
                       (long long)first + count - 1, (long long)ds->n - 1);
    int64_t *idx = malloc((size_t)count * sizeof(int64_t));
    if (!idx) return ml_fail(ML_ERR_MEM, "dataset:batch: out of memory");
    for (int b = 0; b < count; b++) idx[b] = first + b;
    ml_status st = ml_dataset_batch(ds, idx, count, tokens, targets);
    if (st == ML_OK && positions) st = ml_dataset_batch_positions(ds, idx, count, positions);
    if (st != ML_OK) {
        ml_release(*tokens);
        ml_release(*targets);
        *tokens = *targets = NULL;
    }
    free(idx);
    return st;
}

ml_status ml_dataset_batch_target_dist(const ml_dataset *ds, const int64_t *doc_indices, int batch,
                                       ml_tensor **dist) {
    *dist = NULL;
    if (check_indices(ds, doc_indices, batch, "dataset:target_dist") != ML_OK) return ml_last_status();
    int V = ds->task->vocab;
    int64_t shape[2] = {batch, V};
    ml_tensor *d = ml_zeros(ML_F32, 2, shape);
    if (!d) return ml_last_status() != ML_OK ? ml_last_status() : ML_ERR_MEM;
    for (int b = 0; b < batch; b++) {
        int len, na;
        const int32_t *tok = ml_dataset_tokens(ds, doc_indices[b], &len);
        const int32_t *at = ml_dataset_all_targets(ds, doc_indices[b], &na);
        float *row = ml_f32(d) + (int64_t)b * V;
        for (int j = 0; j < na; j++) row[tok[at[j]]] += 1.0f / (float)na;
    }
    *dist = d;
    return ML_OK;
}
