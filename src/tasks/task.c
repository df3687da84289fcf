/* Task objects: construction, names, documents (common to AR and ATR). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task_impl.h"

const char *const ml_pos_names[ML_NPOS] = {"bos",        "query_item_orig", "target_item_orig",
                                           "divider",    "query_item",      "target_item",
                                           "query_type", "next_key"};

int ml_pos_index(const char *name) {
    for (int i = 0; i < ML_NPOS; i++)
        if (strcmp(name, ml_pos_names[i]) == 0) return i;
    return -1;
}

const char *ml_qtype_name(ml_qtype q) {
    static const char *const names[] = {"KEY", "VALUE", "PARENT", "CHILD", "SIBLING"};
    return (unsigned)q < 5 ? names[q] : "?";
}

const char *ml_task_kind_name(ml_task_kind k) {
    static const char *const names[] = {"ar", "atr", "mqar", "custom"};
    return (unsigned)k < 4 ? names[k] : "?";
}

const char *ml_task_rng_name(ml_task_rng rng) { return rng == ML_RNG_NUMPY ? "numpy" : "philox"; }

const char *ml_split_name(ml_split s) {
    static const char *const names[] = {"train", "dev", "test"};
    return (unsigned)s < 3 ? names[s] : "?";
}

bool ml_split_parse(const char *s, ml_split *out) {
    for (int i = 0; i < 3; i++)
        if (strcmp(s, ml_split_name((ml_split)i)) == 0) {
            *out = (ml_split)i;
            return true;
        }
    return false;
}

/* Train keeps the well-known data stream; eval splits get ids far above ML_STREAM_USER so
 * scripts' own streams never collide with them. */
uint64_t ml_split_stream(ml_split s) {
    switch (s) {
    case ML_SPLIT_TRAIN: return ML_STREAM_DATA;
    case ML_SPLIT_DEV: return ((uint64_t)ML_STREAM_EVAL << 32) | 1u;
    default: return ML_STREAM_EVAL;
    }
}

ml_ar_config ml_ar_config_default(void) {
    ml_ar_config c = {.num_kv = 8192, .min_length = 32, .max_length = 32, .query_type = ML_QT_KEY,
                      .train_test_split = 0.0};
    return c;
}

ml_atr_config ml_atr_config_default(void) {
    ml_atr_config c = {.head_position = ML_HEAD_RIGHT,
                       .max_depth = 10,
                       .max_rhs_len = 5,
                       .max_rules_per_nt = 5,
                       .num_nonterminals = 40,
                       .num_terminals = 20,
                       .terminal_occurrence_factor = 0.0,
                       .transparent_nonterminals = false,
                       .train_test_split = 0.0,
                       .parent = true,
                       .child = false,
                       .sibling = false,
                       .unambiguous_queries = true,
                       .sample_first = ML_FIRST_TARGET,
                       .query_type_token = ML_QTOK_AUTO,
                       .min_yield = 3,
                       .max_yield = 1024};
    return c;
}

ml_status ml_grow(void **p, int *cap, int n, size_t size) {
    if (n <= *cap) return ML_OK;
    int64_t c = *cap > 0 ? *cap : 16;
    while (c < n) c *= 2;
    if (c > INT32_MAX / 2) return ml_fail(ML_ERR_MEM, "task: buffer of %d entries is too large", n);
    void *q = realloc(*p, (size_t)c * size);
    if (!q) return ml_fail(ML_ERR_MEM, "task: out of memory (%lld entries)", (long long)c);
    *p = q;
    *cap = (int)c;
    return ML_OK;
}

void ml_doc_init(ml_doc *d) {
    memset(d, 0, sizeof *d);
    for (int i = 0; i < ML_MAX_POS; i++) d->pos[i] = -1;
}

ml_scratch *ml_scratch_get(ml_doc *d) {
    if (!d->scratch) {
        d->scratch = calloc(1, sizeof(ml_scratch));
        if (!d->scratch) ml_fail(ML_ERR_MEM, "task: out of memory");
    }
    return d->scratch;
}

ml_status ml_scratch_reserve_kv(ml_scratch *s, int n_used, int n) {
    int cap = s->used_cap;
    if (ml_grow((void **)&s->used, &cap, n_used, 1) != ML_OK) return ML_ERR_MEM;
    if (cap > s->used_cap) memset(s->used + s->used_cap, 0, (size_t)(cap - s->used_cap));
    s->used_cap = cap;
    void **arrs[] = {(void **)&s->keys, (void **)&s->vals, (void **)&s->elig};
    for (int i = 0; i < 3; i++) {
        cap = s->ar_cap;
        if (ml_grow(arrs[i], &cap, n, sizeof(int32_t)) != ML_OK) return ML_ERR_MEM;
    }
    s->ar_cap = cap;
    return ML_OK;
}

static void scratch_free(ml_scratch *s) {
    if (!s) return;
    void *ps[] = {s->stk_sym, s->stk_id, s->stk_head, s->stk_depth, s->id_pos, s->grp_last,
                  s->rightmost, s->pq[0], s->pq[1], s->pq[2], s->pt[0], s->pt[1],
                  s->pt[2], s->label, s->flag, s->list, s->set_table, s->set_keys, s->used, s->keys, s->vals, s->elig};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
    free(s);
}

void ml_doc_free(ml_doc *d) {
    if (!d) return;
    free(d->tokens);
    free(d->all_targets);
    free(d->node_id);
    free(d->head_id);
    free(d->depth);
    free(d->parent_pos);
    free(d->read_pos);
    free(d->read_ans);
    scratch_free(d->scratch);
    ml_doc_init(d);
}

ml_status ml_doc_reserve(ml_doc *d, int n) {
    if (n <= d->cap) return ML_OK;
    int cap = d->cap;
    void **arrs[] = {(void **)&d->tokens,   (void **)&d->all_targets, (void **)&d->node_id,
                     (void **)&d->head_id,  (void **)&d->depth,       (void **)&d->parent_pos,
                     (void **)&d->read_pos, (void **)&d->read_ans};
    for (int k = 0; k < 8; k++) {
        int c = cap; /* every array shares the capacity */
        if (ml_grow(arrs[k], &c, n, sizeof(int32_t)) != ML_OK) return ML_ERR_MEM;
        if (k == 7) d->cap = c;
    }
    return ML_OK;
}

ml_task *ml_task_retain(ml_task *t) {
    if (t) t->refcount++;
    return t;
}

void ml_task_release(ml_task *t) {
    if (!t || --t->refcount > 0) return;
    free(t->black);
    free(t->depth_score);
    free(t->rule_first);
    free(t->sym_first);
    free(t->syms);
    free(t->rule_cdf);
    free(t->head_cdf);
    free(t->start_cdf);
    free(t->mq_p);
    free(t->mq_cdf);
    for (int s = 0; s < 3; s++) free(t->np_start[s]);
    if (t->cu_names)
        for (int i = 0; i < t->vocab; i++) free(t->cu_names[i]);
    free(t->cu_names);
    free(t->cu_pos);
    free(t);
}

ml_status ml_task_draw_blacklist(ml_task *t, int64_t side, double p, ml_rng *rng, const char *fn) {
    int64_t n = side * side;
    t->black = calloc((size_t)((n + 63) / 64), sizeof(uint64_t));
    if (!t->black) return ml_fail(ML_ERR_MEM, "%s: out of memory for a %lld x %lld split blacklist",
                                  fn, (long long)side, (long long)side);
    t->black_side = side;
    /* u32 < p * 2^32 is "uniform draw < p" at 32-bit resolution, one output per pair. */
    uint64_t thresh = (uint64_t)(p * 4294967296.0);
    int64_t count = 0;
    for (int64_t i = 0; i < n; i++)
        if ((uint64_t)ml_rng_u32(rng) < thresh) {
            t->black[i >> 6] |= (uint64_t)1 << (i & 63);
            count++;
        }
    t->n_prohibited = count;
    return ML_OK;
}

ml_task *ml_task_alloc(ml_task_kind kind, uint64_t seed, const char *name) {
    ml_task *t = calloc(1, sizeof *t);
    if (!t) {
        ml_fail(ML_ERR_MEM, "task: out of memory");
        return NULL;
    }
    t->refcount = 1;
    t->kind = kind;
    t->seed = seed;
    snprintf(t->name, sizeof t->name, "%s", name);
    return t;
}

/* t once build(t) succeeds; NULL when t is NULL (its allocation failed) or the build fails. */
static ml_task *built(ml_task *t, ml_status (*build)(ml_task *)) {
    if (t && build(t) != ML_OK) ml_task_release(t), t = NULL;
    return t;
}

ml_task *ml_task_ar(const ml_ar_config *cfg, uint64_t seed) {
    ml_task *t = ml_task_alloc(ML_TASK_AR, seed, "ar");
    if (t) t->ar = *cfg;
    return built(t, ml_ar_build);
}

ml_task *ml_task_atr(const ml_atr_config *cfg, uint64_t seed) {
    ml_task *t = ml_task_alloc(ML_TASK_ATR, seed, "atr");
    if (t) t->atr = *cfg;
    return built(t, ml_atr_build);
}

ml_task *ml_task_mqar(const ml_mqar_config *cfg, uint64_t seed) {
    ml_task *t = ml_task_alloc(ML_TASK_MQAR, seed, "mqar");
    if (t) t->mqar = *cfg;
    return built(t, ml_mqar_build);
}

void ml_task_set_name(ml_task *t, const char *name) { snprintf(t->name, sizeof t->name, "%s", name); }

ml_task_kind ml_task_get_kind(const ml_task *t) { return t->kind; }
const char *ml_task_name(const ml_task *t) { return t->name; }
uint64_t ml_task_seed(const ml_task *t) { return t->seed; }
const ml_ar_config *ml_task_ar_config(const ml_task *t) { return t->kind == ML_TASK_AR ? &t->ar : NULL; }
const ml_atr_config *ml_task_atr_config(const ml_task *t) {
    return t->kind == ML_TASK_ATR ? &t->atr : NULL;
}
const ml_mqar_config *ml_task_mqar_config(const ml_task *t) { return t->kind == ML_TASK_MQAR ? &t->mqar : NULL; }
int ml_task_vocab_size(const ml_task *t) { return t->vocab; }
bool ml_task_has_split(const ml_task *t) {
    if (t->kind == ML_TASK_CUSTOM) return t->cu.holdout > 0.0;
    if (t->kind == ML_TASK_MQAR) return false;
    return (t->kind == ML_TASK_AR ? t->ar.train_test_split : t->atr.train_test_split) > 0.0;
}
int64_t ml_task_prohibited_pairs(const ml_task *t) { return t->n_prohibited; }

void ml_task_corrupt_range(const ml_task *t, int *lo, int *hi) {
    if (t->kind == ML_TASK_AR) {
        /* Key queries draw from the keys, value queries from the values (docs/interventions.md). */
        int ks = 3, vs = 3 + t->n_keys;
        *lo = t->ar.query_type == ML_QT_VALUE ? vs : ks;
        *hi = *lo + t->n_keys - 1;
    } else if (t->kind == ML_TASK_CUSTOM) {
        *lo = t->cu.corrupt_lo;
        *hi = t->cu.corrupt_hi;
    } else if (t->kind == ML_TASK_MQAR) {
        *lo = 1; /* the keys */
        *hi = t->mqar.vocab_size / 2 - 1;
    } else {
        *lo = 3;
        *hi = t->query_start - 1; /* every terminal, transparent ones included (docs/interventions.md) */
    }
}

double ml_task_chance(const ml_task *t) {
    int answers;
    if (t->kind == ML_TASK_AR) {
        answers = t->n_keys; /* values for key queries, keys for value queries: n_keys of each */
    } else if (t->kind == ML_TASK_MQAR) {
        answers = t->mqar.vocab_size - t->mqar.vocab_size / 2; /* values K .. V-1 */
    } else { /* ATR: the answer is a terminal, the pool; a custom task declares its pool */
        int lo, hi;
        ml_task_corrupt_range(t, &lo, &hi);
        answers = hi - lo + 1;
    }
    return answers > 0 ? 1.0 / answers : 1.0;
}

const char *ml_task_token_name(const ml_task *t, int id, char buf[32]) {
    if (t->kind == ML_TASK_CUSTOM) {
        if (id < 0 || id >= t->vocab) snprintf(buf, 32, "<%d?>", id);
        else if (t->cu_names) snprintf(buf, 32, "%s", t->cu_names[id]);
        else snprintf(buf, 32, "%d", id);
        return buf;
    }
    if (t->kind == ML_TASK_MQAR) { /* the original's ids: 0 filler, keys, values */
        int K = t->mqar.vocab_size / 2;
        if (id == 0) strcpy(buf, "_");
        else if (id > 0 && id < K) snprintf(buf, 32, "k%d", id);
        else if (id >= K && id < t->vocab) snprintf(buf, 32, "v%d", id - K);
        else snprintf(buf, 32, "<%d?>", id);
        return buf;
    }
    if (id == ML_PAD) return strcpy(buf, "<pad>");
    if (id == ML_BOS) return strcpy(buf, "<bos>");
    if (id == ML_EOS) return strcpy(buf, "<eos>");
    if (id < 0 || id >= t->vocab) {
        snprintf(buf, 32, "<%d?>", id);
        return buf;
    }
    if (t->kind == ML_TASK_AR) {
        if (id < 3 + t->n_keys) snprintf(buf, 32, "k%d", id - 3);
        else if (id < 3 + 2 * t->n_keys) snprintf(buf, 32, "v%d", id - 3 - t->n_keys);
        else snprintf(buf, 32, "<-100>"); /* the extra table entry of the V = num_kv + 4 quirk */
    } else {
        if (id < t->query_start) snprintf(buf, 32, "t%d", id - 3);
        else snprintf(buf, 32, "q%s", ml_qtype_name((ml_qtype)(ML_QT_PARENT + id - t->query_start)));
    }
    return buf;
}

ml_status ml_task_sample(const ml_task *t, ml_rng *rng, ml_split split, ml_doc *doc) {
    if ((unsigned)split > ML_SPLIT_TEST) return ml_fail(ML_ERR_ARG, "task:sample: unknown split %d", (int)split);
    if (t->kind == ML_TASK_CUSTOM)
        return ml_fail(ML_ERR_ARG, "task:sample: the documents of task '%s' are made outside C (its sample "
                       "function or file)", t->name);
    if (t->kind == ML_TASK_MQAR) {
        if (t->mqar.rng == ML_RNG_NUMPY)
            return ml_fail(ML_ERR_ARG, "task:sample: an MQAR task with rng = \"numpy\" draws whole datasets "
                           "(task:dataset); single documents come from the philox stream");
        return ml_mqar_sample(t, rng, split, doc);
    }
    return t->kind == ML_TASK_AR ? ml_ar_sample(t, rng, split, doc) : ml_atr_sample(t, rng, split, doc);
}
