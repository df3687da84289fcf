/* Tasks whose documents come from outside C: a task written in Lua, a JSON-lines file
 * (docs/tasks.md, "Your own task"). The task holds what the C side needs to check, store, print
 * and evaluate its documents (vocabulary, token names, declared positions, corruption pool,
 * holdout); the documents are appended to datasets one by one (dataset.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task_impl.h"


/* Free position names: identifiers, none a paper name, none twice, ML_MAX_POS slots in all. */
static ml_status check_free_positions(const ml_custom_config *cfg, const char *fn) {
    int n = cfg->n_free_positions;
    if (n < 0 || n > ML_MAX_POS - ML_NPOS)
        return ml_fail(ML_ERR_ARG, "%s: option 'positions' names %d positions beyond the paper's %d, at most %d "
                       "(ML_MAX_POS = %d slots in all)", fn, n, ML_NPOS, ML_MAX_POS - ML_NPOS, ML_MAX_POS);
    for (int i = 0; i < n; i++) {
        const char *s = cfg->free_positions[i];
        bool ident = s && *s && !(*s >= '0' && *s <= '9') && strlen(s) < ML_POS_NAME_MAX;
        for (const char *c = s; ident && *c; c++)
            ident = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_';
        if (!ident)
            return ml_fail(ML_ERR_ARG, "%s: option 'positions' name '%s' expected an identifier (letters, digits, '_', "
                           "not starting with a digit) of 1..%d bytes", fn, s ? s : "", ML_POS_NAME_MAX - 1);
        if (ml_pos_index(s) >= 0)
            return ml_fail(ML_ERR_ARG, "%s: option 'positions' free name '%s' clashes with the paper's position of "
                           "that name", fn, s);
        if (!strcmp(s, "all_target_items_orig"))
            return ml_fail(ML_ERR_ARG, "%s: option 'positions' name 'all_target_items_orig' is a document field, "
                           "not a position name", fn);
        for (int j = 0; j < i; j++)
            if (!strcmp(s, cfg->free_positions[j]))
                return ml_fail(ML_ERR_ARG, "%s: option 'positions' lists '%s' twice", fn, s);
    }
    return ML_OK;
}

ml_task *ml_task_custom(const ml_custom_config *cfg, const char *name, uint64_t seed) {
    const char *fn = "mech.task.new";
    if (cfg->vocab < 1 || cfg->vocab > (1 << 24)) {
        ml_fail(ML_ERR_ARG, "%s: option 'vocab': expected 1 .. 2^24 tokens, got %d", fn, cfg->vocab);
        return NULL;
    }
    if (cfg->positions >> ML_NPOS) {
        ml_fail(ML_ERR_ARG, "%s: positions mask 0x%x names a position beyond the %d known", fn, cfg->positions, ML_NPOS);
        return NULL;
    }
    if (check_free_positions(cfg, fn) != ML_OK) return NULL;
    int lo = cfg->corrupt_lo, hi = cfg->corrupt_hi;
    if (lo == -1 && hi == -1) lo = 0, hi = cfg->vocab - 1;
    if (lo < 0 || hi >= cfg->vocab || hi <= lo) {
        ml_fail(ML_ERR_ARG, "%s: option 'corrupt': expected ids lo < hi in 0..%d, got %d..%d", fn, cfg->vocab - 1,
                cfg->corrupt_lo, cfg->corrupt_hi);
        return NULL;
    }
    if (!(cfg->holdout >= 0.0 && cfg->holdout < 1.0)) {
        ml_fail(ML_ERR_ARG, "%s: option 'holdout': expected a fraction in [0, 1), got %g", fn, cfg->holdout);
        return NULL;
    }
    ml_task *t = ml_task_alloc(ML_TASK_CUSTOM, seed, name && *name ? name : "custom");
    if (!t) return NULL;
    t->cu = *cfg;
    t->cu.corrupt_lo = lo, t->cu.corrupt_hi = hi;
    t->vocab = cfg->vocab;
    if (cfg->token_names) {
        t->cu_names = calloc((size_t)cfg->vocab, sizeof(char *));
        for (int i = 0; t->cu_names && i < cfg->vocab; i++) {
            const char *s = cfg->token_names[i] ? cfg->token_names[i] : "";
            if (!(t->cu_names[i] = malloc(strlen(s) + 1))) break;
            strcpy(t->cu_names[i], s);
        }
        if (!t->cu_names || !t->cu_names[cfg->vocab - 1]) {
            ml_task_release(t);
            ml_fail(ML_ERR_MEM, "%s: out of memory for %d token names", fn, cfg->vocab);
            return NULL;
        }
    }
    t->cu.token_names = (const char *const *)t->cu_names;
    t->cu.free_positions = NULL;
    if (cfg->n_free_positions > 0) {
        if (!(t->cu_pos = calloc((size_t)cfg->n_free_positions, sizeof *t->cu_pos))) {
            ml_task_release(t);
            ml_fail(ML_ERR_MEM, "%s: out of memory", fn);
            return NULL;
        }
        for (int i = 0; i < cfg->n_free_positions; i++)
            snprintf(t->cu_pos[i], ML_POS_NAME_MAX, "%s", cfg->free_positions[i]);
    }
    return t;
}

int ml_task_npos(const ml_task *t) { return ML_NPOS + (t->kind == ML_TASK_CUSTOM ? t->cu.n_free_positions : 0); }

const char *ml_task_pos_name(const ml_task *t, int i) {
    if (i < 0 || i >= ml_task_npos(t)) return NULL;
    return i < ML_NPOS ? ml_pos_names[i] : t->cu_pos[i - ML_NPOS];
}

int ml_task_pos_index(const ml_task *t, const char *name) {
    if (!name) return -1;
    int p = ml_pos_index(name);
    for (int i = ML_NPOS; p < 0 && i < ml_task_npos(t); i++)
        if (!strcmp(name, t->cu_pos[i - ML_NPOS])) p = i;
    return p;
}

bool ml_task_pos_declared(const ml_task *t, int i) {
    if (i < 0 || i >= ml_task_npos(t)) return false;
    return i >= ML_NPOS || (ml_task_positions(t) >> i & 1);
}

const ml_custom_config *ml_task_custom_config(const ml_task *t) { return t->kind == ML_TASK_CUSTOM ? &t->cu : NULL; }

uint32_t ml_task_positions(const ml_task *t) {
    uint32_t all = (1u << ML_NPOS) - 1, b = 1u << ML_POS_BOS, d = 1u << ML_POS_DIVIDER;
    switch (t->kind) {
    case ML_TASK_CUSTOM: return t->cu.positions;
    case ML_TASK_MQAR: return all & ~(b | d | (1u << ML_POS_QUERY_TYPE));
    case ML_TASK_AR: return all & ~(1u << ML_POS_QUERY_TYPE);
    default: return t->type_token ? all & ~(1u << ML_POS_NEXT_KEY) : all & ~(1u << ML_POS_NEXT_KEY | 1u << ML_POS_QUERY_TYPE);
    }
}

/* FNV-1a over the token ids: which side of the holdout a document falls on depends on its
 * tokens only, so no document can be in both train and test. */
bool ml_task_held_out(const ml_task *t, const int32_t *tokens, int len) {
    if (t->kind != ML_TASK_CUSTOM || t->cu.holdout <= 0.0) return false;
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < len; i++) {
        uint32_t v = (uint32_t)tokens[i];
        for (int k = 0; k < 4; k++) h = (h ^ ((v >> (8 * k)) & 0xff)) * 1099511628211ull;
    }
    h ^= h >> 29; /* the low bits of FNV mix poorly; fold the high ones in */
    return (double)(h >> 11) * 0x1p-53 < t->cu.holdout;
}

ml_status ml_doc_check(const ml_task *t, const ml_doc *d, unsigned flags) {
    if (d->len < 1 || d->len > ML_MAX_DOC_LEN)
        return ml_fail(ML_ERR_ARG, "document has %d tokens, expected 1..%d", d->len, ML_MAX_DOC_LEN);
    for (int p = 0; p < d->len; p++)
        if (d->tokens[p] < 0 || d->tokens[p] >= t->vocab)
            return ml_fail(ML_ERR_ARG, "token %d at position %d is outside the vocabulary 0..%d", d->tokens[p], p,
                           t->vocab - 1);
    for (int i = 0; i < ML_MAX_POS; i++) {
        if (d->pos[i] == -1) continue;
        if (!ml_task_pos_declared(t, i))
            return ml_fail(ML_ERR_ARG, "position '%s' is not one the task declares",
                           i < ml_task_npos(t) ? ml_task_pos_name(t, i) : "?");
        if (d->pos[i] < 0 || d->pos[i] >= d->len)
            return ml_fail(ML_ERR_ARG, "position '%s' = %d is outside the document (0..%d)", ml_task_pos_name(t, i),
                           d->pos[i], d->len - 1);
    }
    for (int j = 0; j < d->n_all_targets; j++)
        if (d->all_targets[j] < 0 || d->all_targets[j] >= d->len)
            return ml_fail(ML_ERR_ARG, "all_target_items_orig[%d] = %d is outside the document (0..%d)", j + 1,
                           d->all_targets[j], d->len - 1);
    if (d->n_reads < 1 && !(flags & ML_DOC_PRINTED))
        return ml_fail(ML_ERR_ARG, "document has no target (nothing to predict)");
    if (d->n_yield >= d->len) return ml_fail(ML_ERR_ARG, "tree has %d yield entries, more than the document", d->n_yield);
    for (int y = 0; y < d->n_yield; y++) { /* yield entry y is position y + 1 */
        if (d->parent_pos[y] != -1 && (d->parent_pos[y] < 1 || d->parent_pos[y] > d->n_yield))
            return ml_fail(ML_ERR_ARG, "tree.parent at position %d = %d is neither -1 (a root) nor a position of the "
                           "yield (1..%d)", y + 1, d->parent_pos[y], d->n_yield);
        if (d->depth[y] < 0)
            return ml_fail(ML_ERR_ARG, "tree.depth at position %d = %d is negative", y + 1, d->depth[y]);
    }
    for (int j = 0; j < d->n_reads; j++) {
        if (d->read_pos[j] < 0 || d->read_pos[j] >= d->len)
            return ml_fail(ML_ERR_ARG, "readout %d at position %d is outside the document (0..%d)", j + 1,
                           d->read_pos[j], d->len - 1);
        if (d->read_ans[j] < 0 || d->read_ans[j] >= t->vocab)
            return ml_fail(ML_ERR_ARG, "answer %d (%d) is outside the vocabulary 0..%d", j + 1, d->read_ans[j],
                           t->vocab - 1);
        if (j > 0 && d->read_pos[j] <= d->read_pos[j - 1])
            return ml_fail(ML_ERR_ARG, "readouts must be in increasing positions, got %d after %d", d->read_pos[j],
                           d->read_pos[j - 1]);
    }
    return ML_OK;
}

void ml_doc_start(ml_doc *d, int len) {
    d->len = len;
    for (int i = 0; i < ML_MAX_POS; i++) d->pos[i] = -1;
    d->n_all_targets = 0;
    d->n_reads = 0;
    d->n_yield = 0;
    d->qtype = ML_QT_KEY;
    memset(&d->stats, 0, sizeof d->stats);
    d->stats.doc_len = len;
}

bool ml_doc_add_target(ml_doc *d, int32_t p) {
    if (p < 1 || p >= d->len) return false;
    d->read_pos[d->n_reads] = p - 1, d->read_ans[d->n_reads++] = d->tokens[p];
    return true;
}

/* Insertion sort: a document has few readouts, usually already in order. */
void ml_doc_sort_readouts(ml_doc *d) {
    for (int a = 1; a < d->n_reads; a++)
        for (int b = a; b > 0 && d->read_pos[b] < d->read_pos[b - 1]; b--) {
            int32_t p = d->read_pos[b], v = d->read_ans[b];
            d->read_pos[b] = d->read_pos[b - 1], d->read_ans[b] = d->read_ans[b - 1];
            d->read_pos[b - 1] = p, d->read_ans[b - 1] = v;
        }
}

/* Fills d (reserved for the batch) with document r of b. Returns the 0-based column of a target
 * that cannot be predicted, else -1. */
static int batch_row(const ml_doc_batch *b, int64_t r, ml_doc *d) {
    int len = (int)b->tok.cols;
    ml_doc_start(d, len);
    const int32_t *row = b->tok.p + r * b->tok.s0;
    for (int j = 0; j < len; j++) d->tokens[j] = row[j * b->tok.s1];
    for (int j = 0; j < b->tg.cols; j++) {
        int32_t p = b->tg.p[r * b->tg.s0 + j * b->tg.s1];
        if (p != -1 && !ml_doc_add_target(d, p)) return j;
    }
    for (int j = 0; j < b->rd.cols; j++) {
        int32_t p = b->rd.p[r * b->rd.s0 + j * b->rd.s1], k = d->n_reads;
        if (p == -1) continue;
        d->read_pos[k] = p, d->read_ans[k] = b->an.p[r * b->an.s0 + j * b->an.s1], d->n_reads = k + 1;
    }
    ml_doc_sort_readouts(d);
    for (int i = 0; i < b->npos; i++) d->pos[b->pos_index[i]] = b->pos[i].p[r * b->pos[i].s0];
    d->qtype = b->qtype;
    return -1;
}

ml_status ml_dataset_append_batch(ml_dataset *ds, const ml_doc_batch *b, int64_t max, ml_doc *d, int64_t *kept,
                                  int64_t *rows) {
    int len = (int)b->tok.cols, nreads = (int)(b->tg.cols + b->rd.cols);
    *kept = 0, *rows = -1;
    ml_status st = ml_doc_reserve(d, len > nreads ? len : nreads);
    if (st != ML_OK) return st;
    int64_t r = 0;
    for (; r < b->n && *kept < max; r++) {
        int bad = batch_row(b, r, d);
        bool rejected = false;
        *rows = r;
        if (bad >= 0)
            return ml_fail(ML_ERR_ARG, "targets column %d (0-based) = %d is not a position of the document that can "
                           "be predicted (1..%d: a target is read at the position before it)", bad,
                           (int)b->tg.p[r * b->tg.s0 + bad * b->tg.s1], len - 1);
        if ((st = ml_dataset_append(ds, d, &rejected)) != ML_OK) return st;
        *kept += !rejected;
    }
    *rows = r;
    return ML_OK;
}

int ml_qtype_parse(const char *name) {
    for (int i = 0; name && i <= ML_QT_SIBLING; i++)
        if (!strcmp(name, ml_qtype_name((ml_qtype)i))) return i;
    return -1;
}
