/* Associative treecall: the random right-headed PCFG and its documents (docs/tasks.md, "ATR"). */
#include <stdlib.h>
#include <string.h>

#include "tasks/task_impl.h"

/* ----------------------------------------------------- grammar (docs/tasks.md, "Grammar") ---- */

static ml_status check_int(const char *fn, const char *key, int v, int lo, int hi) {
    if (v < lo || v > hi) return ml_fail(ML_ERR_ARG, "%s: %s must be in %d..%d, got %d", fn, key, lo, hi, v);
    return ML_OK;
}

static ml_status validate(const ml_atr_config *c, const char *fn) {
    if (check_int(fn, "num_terminals", c->num_terminals, 1, 1 << 20) ||
        check_int(fn, "num_nonterminals", c->num_nonterminals, 1, 1 << 16) ||
        check_int(fn, "max_rhs_len", c->max_rhs_len, 2, 1 << 12) ||
        check_int(fn, "max_rules_per_nt", c->max_rules_per_nt, 1, 1 << 12) ||
        check_int(fn, "max_depth", c->max_depth, 0, 1 << 16) ||
        check_int(fn, "min_yield", c->min_yield, 1, 1 << 20) ||
        check_int(fn, "max_yield", c->max_yield, c->min_yield, 1 << 20))
        return ML_ERR_ARG;
    if (c->head_position != ML_HEAD_RIGHT && c->head_position != ML_HEAD_LEFT)
        return ml_fail(ML_ERR_ARG, "%s: head_position must be \"right\" or \"left\", got %d", fn, (int)c->head_position);
    if (c->sample_first != ML_FIRST_TARGET && c->sample_first != ML_FIRST_QUERY)
        return ml_fail(ML_ERR_ARG, "%s: sample_first must be \"target\" or \"query\", got %d", fn, (int)c->sample_first);
    if ((unsigned)c->query_type_token > ML_QTOK_ALWAYS)
        return ml_fail(ML_ERR_ARG, "%s: query_type_token must be auto, never or always, got %d", fn,
                       (int)c->query_type_token);
    if (!(c->terminal_occurrence_factor >= 0.0 && c->terminal_occurrence_factor < 1e9))
        return ml_fail(ML_ERR_ARG, "%s: terminal_occurrence_factor must be >= 0 (0 = default rule), got %g", fn,
                       c->terminal_occurrence_factor);
    if (!(c->train_test_split >= 0.0 && c->train_test_split <= 1.0))
        return ml_fail(ML_ERR_ARG, "%s: train_test_split must be in [0, 1], got %g", fn, c->train_test_split);
    if ((int64_t)c->num_nonterminals * c->num_terminals > ((int64_t)1 << 27))
        return ml_fail(ML_ERR_ARG, "%s: num_nonterminals x num_terminals must be <= 2^27 (head distributions), got %d x %d",
                       fn, c->num_nonterminals, c->num_terminals);
    if ((unsigned)c->rng > ML_RNG_NUMPY)
        return ml_fail(ML_ERR_ARG, "%s: rng must be \"philox\" or \"numpy\", got %d", fn, (int)c->rng);
    if (c->train_test_split > 0.0 && c->num_terminals > 16384)
        return ml_fail(ML_ERR_ARG, "%s: train_test_split needs num_terminals <= 16384 (blacklist size), got %d",
                       fn, c->num_terminals);
    if (!c->parent && !c->child && !c->sibling)
        return ml_fail(ML_ERR_ARG, "%s: at least one query type (parent, child, sibling) must be enabled", fn);
    return ML_OK;
}

/* The source of a task's draws: a Philox stream, or (rng = numpy) the original's RandomState.
 * Both give uniform integers below n and doubles in [0, 1); what a step draws depends on the
 * task's mode (docs/tasks.md, "Random streams"), where it comes from on the source. */
typedef struct {
    ml_rng *philox;
    ml_np_random *np;
} draws;

static uint32_t draw_below(draws *d, uint32_t n) { return d->np ? ml_np_below(d->np, n) : ml_rng_below(d->philox, n); }
static double draw_double(draws *d) { return d->np ? ml_np_double(d->np) : ml_rng_double(d->philox); }

/* Dirichlet(1, ..., 1) as a cumulative distribution. */
static void dirichlet_cdf(ml_rng *rng, int n, double *cdf) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (cdf[i] = ml_rng_gamma(rng, 1.0));
    double acc = 0;
    for (int i = 0; i < n; i++) {
        acc += sum > 0 ? cdf[i] / sum : 1.0 / n;
        cdf[i] = acc;
    }
    cdf[n - 1] = 1.0; /* rounding must never leave u above the last bucket */
}

/* The numpy blacklist: rand(|Σ|, |Σ|) row-major, pair (row, column) held out when < p. */
static ml_status draw_blacklist_np(ml_task *t, int64_t side, double p, ml_np_random *npr, const char *fn) {
    int64_t n = side * side;
    t->black = calloc((size_t)((n + 63) / 64), sizeof(uint64_t));
    if (!t->black) return ml_fail(ML_ERR_MEM, "%s: out of memory for the split blacklist", fn);
    t->black_side = side;
    for (int64_t i = 0; i < n; i++)
        if (ml_np_double(npr) < p) {
            t->black[i >> 6] |= (uint64_t)1 << (i & 63);
            t->n_prohibited++;
        }
    return ML_OK;
}

ml_status ml_atr_build(ml_task *t) {
    const ml_atr_config *c = &t->atr;
    const char *fn = "mech.task.atr";
    if (validate(c, fn) != ML_OK) return ML_ERR_ARG;
    int nt = c->num_nonterminals, nsig = c->num_terminals;
    t->n_labels = nsig + (c->transparent_nonterminals ? nt : 0);
    t->query_start = 3 + t->n_labels;
    t->vocab = t->query_start + 3;
    t->n_types = 0;
    if (c->parent) t->types[t->n_types++] = ML_QT_PARENT;
    if (c->child) t->types[t->n_types++] = ML_QT_CHILD;
    if (c->sibling) t->types[t->n_types++] = ML_QT_SIBLING;
    t->type_token = c->query_type_token == ML_QTOK_ALWAYS ||
                    (c->query_type_token == ML_QTOK_AUTO && t->n_types > 1);

    bool np = c->rng == ML_RNG_NUMPY;
    if (np && t->seed > UINT32_MAX)
        return ml_fail(ML_ERR_ARG, "%s: rng = \"numpy\" needs a seed in 0..2^32-1 (numpy's legacy seeding), got %llu",
                       fn, (unsigned long long)t->seed);
    ml_rng rng;
    ml_rng_init(&rng, t->seed, ML_STREAM_GRAMMAR);
    ml_np_random npr;
    ml_np_seed(&npr, (uint32_t)t->seed);
    draws d = {np ? NULL : &rng, np ? &npr : NULL};
    /* 1. The blacklist comes first, so a split grammar differs from the unsplit one. */
    if (c->train_test_split > 0.0) {
        if (!np && ml_task_draw_blacklist(t, nsig, c->train_test_split, &rng, fn) != ML_OK) return ML_ERR_MEM;
        if (np && draw_blacklist_np(t, nsig, c->train_test_split, &npr, fn) != ML_OK) return ML_ERR_MEM;
    }

    /* 2. Depth scores. */
    t->depth_score = calloc((size_t)nt, sizeof(int32_t));
    t->rule_first = calloc((size_t)nt + 1, sizeof(int32_t));
    int32_t *elig = calloc((size_t)nt, sizeof(int32_t));
    int64_t max_rules = (int64_t)nt * c->max_rules_per_nt;
    int64_t max_syms = max_rules * c->max_rhs_len; /* symbols incl. room for nothing else */
    if (max_syms > (int64_t)1 << 28) {
        free(elig);
        return ml_fail(ML_ERR_ARG, "%s: num_nonterminals x max_rules_per_nt x max_rhs_len is too large (%lld)",
                       fn, (long long)max_syms);
    }
    t->sym_first = calloc((size_t)max_rules + 1, sizeof(int32_t));
    t->syms = malloc((size_t)max_syms * sizeof(int32_t));
    t->rule_cdf = malloc((size_t)max_rules * sizeof(double));
    if (!c->transparent_nonterminals) t->head_cdf = malloc((size_t)nt * (size_t)nsig * sizeof(double));
    if (np) t->start_cdf = malloc((size_t)nt * sizeof(double));
    if (!t->depth_score || !t->rule_first || !elig || !t->sym_first || !t->syms || !t->rule_cdf ||
        (!c->transparent_nonterminals && !t->head_cdf) || (np && !t->start_cdf)) {
        free(elig);
        return ml_fail(ML_ERR_MEM, "%s: out of memory for the grammar", fn);
    }
    if (c->max_depth > 0)
        for (int i = 0; i < nt; i++) t->depth_score[i] = 1 + (int32_t)draw_below(&d, (uint32_t)c->max_depth);

    /* 3. Rules. TERMINAL placeholders (r_Σ) are stored as INT32_MAX until step 4. */
    const int32_t PLACEHOLDER = INT32_MAX;
    double r = c->terminal_occurrence_factor;
    double *weights = NULL; /* numpy with r_Σ: choice(E(a) + [TERMINAL], p = weights / sum) */
    if (np && r > 0 && !(weights = malloc(2 * ((size_t)nt + 1) * sizeof(double)))) {
        free(elig);
        return ml_fail(ML_ERR_MEM, "%s: out of memory for the grammar", fn);
    }
    int nrules = 0, nsyms = 0;
    for (int a = 0; a < nt; a++) {
        t->rule_first[a] = nrules;
        int R = 1 + (int)draw_below(&d, (uint32_t)c->max_rules_per_nt);
        int ne = 0; /* E(a): strictly deeper scores, so no recursion (docs/tasks.md, "Grammar") */
        for (int x = 0; x < nt; x++)
            if (c->max_depth == 0 || t->depth_score[x] > t->depth_score[a]) elig[ne++] = x;
        if (weights) {
            for (int x = 0; x <= ne; x++) weights[x] = (x < ne ? 1.0 : r) / (ne + r);
            ml_np_cdf(weights, ne + 1, weights + ne + 1);
        }
        for (int k = 0; k < R; k++) {
            t->sym_first[nrules] = nsyms;
            int size = 1 + (int)draw_below(&d, (uint32_t)(c->max_rhs_len - 1));
            for (int j = 0; j < size; j++) {
                int32_t sym;
                if (weights) {
                    int x = ml_np_search_right(weights + ne + 1, ne + 1, ml_np_double(&npr));
                    sym = x < ne ? -1 - elig[x] : PLACEHOLDER;
                } else if (r > 0) {
                    double u = ml_rng_double(&rng) * (ne + r);
                    sym = u < ne ? -1 - elig[(int)u] : PLACEHOLDER;
                } else {
                    uint32_t i = draw_below(&d, (uint32_t)(ne + nsig));
                    sym = (int)i < ne ? -1 - elig[i] : (int32_t)(i - (uint32_t)ne);
                }
                t->syms[nsyms++] = sym;
            }
            nrules++;
        }
    }
    t->rule_first[nt] = nrules;
    t->sym_first[nrules] = nsyms;
    free(elig);
    free(weights);
    /* 4. Placeholders become uniform terminals, after all rules, in order. */
    for (int i = 0; i < nsyms; i++)
        if (t->syms[i] == PLACEHOLDER) t->syms[i] = (int32_t)draw_below(&d, (uint32_t)nsig);
    /* 5. Rule probabilities. */
    for (int a = 0; a < nt; a++) {
        int nr = t->rule_first[a + 1] - t->rule_first[a];
        if (np) ml_np_dirichlet_ones_cdf(&npr, nr, t->rule_cdf + t->rule_first[a]);
        else dirichlet_cdf(&rng, nr, t->rule_cdf + t->rule_first[a]);
    }
    /* 6. Head distributions (transparent NTs have a fixed head of their own: no draws). */
    if (!c->transparent_nonterminals)
        for (int a = 0; a < nt; a++) {
            if (np) ml_np_dirichlet_ones_cdf(&npr, nsig, t->head_cdf + (size_t)a * nsig);
            else dirichlet_cdf(&rng, nsig, t->head_cdf + (size_t)a * nsig);
        }
    /* 7. The start symbol is uniform: nothing to draw here. The original still picks it with
     * choice(p = ones / |N|), one double searched in that cumulative distribution. */
    if (np) {
        for (int a = 0; a < nt; a++) t->start_cdf[a] = 1.0 / nt;
        ml_np_cdf(t->start_cdf, nt, t->start_cdf);
        if (!(t->np_start[ML_SPLIT_TRAIN] = malloc(sizeof npr)))
            return ml_fail(ML_ERR_MEM, "%s: out of memory", fn);
        *t->np_start[ML_SPLIT_TRAIN] = npr; /* the training documents follow the grammar */
    }
    return ML_OK;
}

/* ------------------------------------------------------ one yield (docs/tasks.md, "Yields") ---- */

#define GROW(arr, capvar, n)                                                                  \
    do {                                                                                      \
        int _c = (capvar);                                                                    \
        if (ml_grow((void **)&(arr), &_c, (n), sizeof *(arr)) != ML_OK) return ML_ERR_MEM;    \
        grown = _c;                                                                           \
    } while (0)

static ml_status reserve_stack(ml_scratch *s, int n) {
    if (n <= s->stk_cap) return ML_OK;
    int grown = s->stk_cap;
    GROW(s->stk_sym, s->stk_cap, n);
    GROW(s->stk_id, s->stk_cap, n);
    GROW(s->stk_head, s->stk_cap, n);
    GROW(s->stk_depth, s->stk_cap, n);
    s->stk_cap = grown;
    return ML_OK;
}

static ml_status reserve_ids(ml_scratch *s, int n) {
    if (n <= s->id_cap) return ML_OK;
    int grown = s->id_cap;
    GROW(s->id_pos, s->id_cap, n);
    GROW(s->grp_last, s->id_cap, n);
    s->id_cap = grown;
    return ML_OK;
}

/* Draws one yield into doc->head_id / node_id / depth and s->label. Returns 1 if it was kept,
 * 0 if it was rejected for its length, or -1 (ML error set) on failure. */
static int draw_yield(const ml_task *t, draws *d, ml_doc *doc, ml_scratch *s, int *n_out) {
    const ml_atr_config *c = &t->atr;
    int nsig = c->num_terminals, nt = c->num_nonterminals, maxy = c->max_yield;
    bool right = c->head_position == ML_HEAD_RIGHT, np = c->rng == ML_RNG_NUMPY;
    int sp = 0, n = 0, next_id = 1;
    int start = np ? ml_np_search_right(t->start_cdf, nt, draw_double(d)) : (int)draw_below(d, (uint32_t)nt);
    s->stk_sym[0] = -1 - (int32_t)start;
    s->stk_id[0] = 0;
    s->stk_head[0] = -1;
    s->stk_depth[0] = 0;
    sp = 1;
    while (sp > 0) {
        /* Every stacked symbol yields at least one terminal, so n + sp > max_yield already
         * means the yield will be too long: rejecting now accepts exactly the same yields as
         * the original's "abort at 1,024 emitted terminals". The numpy mode must spend the
         * draws the original spends, so it aborts where the original does. */
        if (np ? n >= maxy : n + sp > maxy) return 0;
        sp--;
        int32_t sym = s->stk_sym[sp], id = s->stk_id[sp], head = s->stk_head[sp], dep = s->stk_depth[sp];
        if (sym >= 0) {
            s->label[n] = sym;
            doc->node_id[n] = id;
            doc->head_id[n] = head;
            doc->depth[n] = dep;
            n++;
            continue;
        }
        int a = -1 - sym;
        int this_head = next_id++;
        int r0 = t->rule_first[a], nr = t->rule_first[a + 1] - r0;
        /* The original draws a rule even when there is only one. */
        int rule = r0 + (nr == 1 && !np ? 0 : ml_np_search_right(t->rule_cdf + r0, nr, draw_double(d)));
        int f = t->sym_first[rule], len = t->sym_first[rule + 1] - f;
        int head_label = c->transparent_nonterminals
                             ? nsig + a
                             : ml_np_search_right(t->head_cdf + (size_t)a * nsig, nsig, draw_double(d));
        if (reserve_stack(s, sp + len + 1) != ML_OK || reserve_ids(s, next_id + len + 1) != ML_OK) return -1;
        /* Right heads are pushed first and so emitted after the rest of the rule. */
        if (right) {
            s->stk_sym[sp] = head_label, s->stk_id[sp] = this_head, s->stk_head[sp] = head;
            s->stk_depth[sp++] = dep + 1;
        }
        for (int j = len - 1; j >= 0; j--) {
            s->stk_sym[sp] = t->syms[f + j], s->stk_id[sp] = next_id++, s->stk_head[sp] = this_head;
            s->stk_depth[sp++] = dep + 1;
        }
        if (!right) {
            s->stk_sym[sp] = head_label, s->stk_id[sp] = this_head, s->stk_head[sp] = head;
            s->stk_depth[sp++] = dep + 1;
        }
    }
    *n_out = n;
    return n >= c->min_yield;
}

/* ------------------------------------------- queries (docs/tasks.md, "Queries") and layout ---- */

static bool split_ok(const ml_task *t, ml_split split, int target_label, int query_label) {
    if (!t->black) return true;
    bool held = ml_task_black(t, target_label, query_label);
    return split == ML_SPLIT_TEST ? held : !held;
}

/* Collects the eligible pairs of every enabled type; returns the number of types with pairs. */
static int eligible_pairs(const ml_task *t, ml_split split, const ml_doc *doc, ml_scratch *s, int n,
                          int npairs[3]) {
    const int32_t *lab = s->label, *hid = doc->head_id;
    bool unamb = t->atr.unambiguous_queries;
    int with_pairs = 0;
    for (int k = 0; k < t->n_types; k++) {
        int np = 0;
        int32_t *pq = s->pq[k], *pt = s->pt[k];
        for (int i = 0; i < n; i++) {
            int q, tg;
            if (t->types[k] == ML_QT_SIBLING) {
                /* The rightmost sibling right of q (same head id) that the split allows, else
                 * q itself, a pair the split never rules out (the original's rule). The root
                 * is its own group (head id "none", as None == None in the original): only
                 * this reading gives the original's sibling q-t distance of 0.79 (0.77 over
                 * 100 of our grammars; excluding the root gives 1.11, requiring a real
                 * sibling 1.35). */
                q = tg = i;
                if (hid[i] >= 0)
                    for (int j = s->grp_last[hid[i]]; j > i; j--)
                        if (hid[j] == hid[i] && split_ok(t, split, lab[j], lab[i])) {
                            tg = j;
                            break;
                        }
                if (unamb && s->rightmost[lab[tg]] != tg) continue;
                if (unamb && s->rightmost[lab[q]] != q) continue;
                pq[np] = q, pt[np] = tg, np++;
                continue;
            } else {
                if (hid[i] < 0) continue; /* the root has no parent */
                if (t->types[k] == ML_QT_PARENT) q = i, tg = s->id_pos[hid[i]];
                else q = s->id_pos[hid[i]], tg = i;
            }
            if (unamb && s->rightmost[lab[q]] != q) continue;
            if (!split_ok(t, split, lab[tg], lab[q])) continue;
            pq[np] = q, pt[np] = tg, np++;
        }
        npairs[k] = np;
        with_pairs += np > 0;
    }
    return with_pairs;
}

/* Distinct values of a[0..np) in position order, into s->list; returns their count. */
static int distinct(ml_scratch *s, const int32_t *a, int np) {
    int cnt = 0;
    for (int i = 0; i < np; i++) s->flag[a[i]] = 1;
    for (int i = 0; i < np; i++)
        if (s->flag[a[i]]) s->flag[a[i]] = 0, s->list[cnt++] = a[i];
    /* Position order makes the draw independent of how the pairs were enumerated. */
    for (int i = 1; i < cnt; i++)
        for (int j = i; j > 0 && s->list[j - 1] > s->list[j]; j--) {
            int32_t x = s->list[j];
            s->list[j] = s->list[j - 1], s->list[j - 1] = x;
        }
    return cnt;
}

/* The list the original draws the first of target and query from, into s->list: the distinct
 * values of a[0..np) (0-based yield positions) in the iteration order of a Python set, not in
 * ascending order. The set is filled in the order the original enumerates its pairs: query by
 * query for SIBLING (a's order), target by target (ascending) for the other relations. */
static int distinct_np(ml_scratch *s, const int32_t *a, int np, bool query_order) {
    if (query_order) return ml_py_set_order(a, np, s->set_table, s->list);
    int cnt = distinct(s, a, np);
    memcpy(s->set_keys, s->list, (size_t)cnt * sizeof(int32_t));
    return ml_py_set_order(s->set_keys, cnt, s->set_table, s->list);
}

static ml_status atr_sample(const ml_task *t, draws *d, ml_split split, ml_doc *doc) {
    const ml_atr_config *c = &t->atr;
    ml_scratch *s = ml_scratch_get(doc);
    if (!s) return ML_ERR_MEM;
    int maxy = c->max_yield;
    if (ml_doc_reserve(doc, maxy + 6) != ML_OK || reserve_stack(s, c->max_rhs_len + 2) != ML_OK ||
        reserve_ids(s, 2 * c->max_rhs_len + 4) != ML_OK)
        return ML_ERR_MEM;
    {
        int grown;
        if (s->n_cap < maxy + 6) {
            GROW(s->label, s->n_cap, maxy + 6);
            GROW(s->flag, s->n_cap, maxy + 6);
            GROW(s->list, s->n_cap, maxy + 6);
            GROW(s->set_keys, s->n_cap, maxy + 6);
            memset(s->flag, 0, (size_t)grown * sizeof(int32_t));
            s->n_cap = grown;
        }
        int set_size = ml_py_set_table_size(maxy);
        if (c->rng == ML_RNG_NUMPY && s->set_cap < set_size) {
            GROW(s->set_table, s->set_cap, set_size);
            s->set_cap = grown;
        }
        for (int k = 0; k < 3; k++)
            if (s->pair_cap[k] < maxy) {
                GROW(s->pq[k], s->pair_cap[k], maxy);
                GROW(s->pt[k], s->pair_cap[k], maxy);
                s->pair_cap[k] = grown;
            }
        if (s->label_cap < t->n_labels) {
            GROW(s->rightmost, s->label_cap, t->n_labels);
            s->label_cap = grown;
        }
    }

    int n = 0, npairs[3], rejections = 0;
    for (;; rejections++) {
        if (rejections >= ML_MAX_REJECTIONS)
            return ml_fail(ML_ERR_STATE,
                           "task:sample: %d consecutive %s documents rejected (split %s, %lld held-out pairs)",
                           rejections, t->name, ml_split_name(split), (long long)t->n_prohibited);
        /* Ctrl-C reaches long rejection runs (e.g. a huge max_yield without depth limit). */
        if ((rejections & 1023) == 1023 && ml_check_interrupt("task:sample") != ML_OK) return ML_ERR_INTERRUPT;
        int kept = draw_yield(t, d, doc, s, &n);
        if (kept < 0) return ML_ERR_MEM;
        if (!kept) continue;
        /* Index the yield: id -> position, rightmost occurrence of each label and of each
         * head's group (later entries overwrite earlier ones). */
        for (int i = 0; i < n; i++) {
            s->id_pos[doc->node_id[i]] = i;
            s->rightmost[s->label[i]] = i;
            if (doc->head_id[i] >= 0) s->grp_last[doc->head_id[i]] = i;
        }
        if (eligible_pairs(t, split, doc, s, n, npairs) > 0) break;
    }

    /* Query type uniform among those with pairs; then target then query (or the reverse). */
    int avail[3], na = 0;
    for (int k = 0; k < t->n_types; k++)
        if (npairs[k] > 0) avail[na++] = k;
    int k = avail[na == 1 ? 0 : draw_below(d, (uint32_t)na)];
    int np = npairs[k];
    const int32_t *pq = s->pq[k], *pt = s->pt[k];
    bool tfirst = c->sample_first == ML_FIRST_TARGET;
    const int32_t *firsts = tfirst ? pt : pq;
    int n_first = c->rng == ML_RNG_NUMPY ? distinct_np(s, firsts, np, t->types[k] == ML_QT_SIBLING)
                                         : distinct(s, firsts, np);
    int first = s->list[draw_below(d, (uint32_t)n_first)];
    int n_second = 0;
    for (int i = 0; i < np; i++)
        if ((tfirst ? pt[i] : pq[i]) == first) s->list[n_second++] = tfirst ? pq[i] : pt[i];
    int second = s->list[draw_below(d, (uint32_t)n_second)];
    int qy = tfirst ? second : first, tg = tfirst ? first : second;
    int n_q = distinct(s, pq, np), n_t = distinct(s, pt, np);

    /* Tokens: <bos> yield <eos> query [type] answer <eos>. */
    int32_t *tok = doc->tokens;
    tok[0] = ML_BOS;
    for (int i = 0; i < n; i++) tok[1 + i] = 3 + s->label[i];
    int p = n + 1;
    tok[p++] = ML_EOS;
    int qpos = p;
    tok[p++] = 3 + s->label[qy];
    int typos = -1;
    if (t->type_token) typos = p, tok[p++] = t->query_start + (t->types[k] - ML_QT_PARENT);
    int apos = p;
    tok[p++] = 3 + s->label[tg];
    tok[p++] = ML_EOS;
    doc->len = p;

    for (int i = 0; i < ML_MAX_POS; i++) doc->pos[i] = -1;
    doc->pos[ML_POS_BOS] = 0;
    doc->pos[ML_POS_QUERY_ITEM_ORIG] = 1 + qy;
    doc->pos[ML_POS_TARGET_ITEM_ORIG] = 1 + tg;
    doc->pos[ML_POS_DIVIDER] = n + 1;
    doc->pos[ML_POS_QUERY_ITEM] = qpos;
    doc->pos[ML_POS_QUERY_TYPE] = typos;
    doc->pos[ML_POS_TARGET_ITEM] = apos;
    doc->n_all_targets = 0;
    for (int i = 0; i < np; i++) /* pairs are in query-position order: targets of qy */
        if (pq[i] == qy) doc->all_targets[doc->n_all_targets++] = 1 + pt[i];
    doc->qtype = t->types[k];

    /* The tree: parents as document positions. */
    doc->n_yield = n;
    for (int i = 0; i < n; i++) doc->parent_pos[i] = doc->head_id[i] >= 0 ? 1 + s->id_pos[doc->head_id[i]] : -1;

    ml_doc_stats *st = &doc->stats;
    memset(st, 0, sizeof *st);
    int depth = 0, heads = 0, distinct_labels = 0;
    for (int i = 0; i < n; i++) {
        if (doc->depth[i] > depth) depth = doc->depth[i];
        if (s->rightmost[s->label[i]] == i) distinct_labels++;
        /* a group is counted at its last member */
        if (doc->head_id[i] >= 0 && s->grp_last[doc->head_id[i]] == i) heads++;
    }
    st->doc_len = doc->len;
    st->yield_len = n;
    st->depth = depth;
    st->qt_dist = abs(qy - tg);
    st->query_key_dist = qpos - (1 + qy);
    st->query_target_dist = qpos - (1 + tg);
    st->branching = heads > 0 ? (float)(n - 1) / (float)heads : 0.0f;
    st->percent_non_unique = (float)(n - distinct_labels) / (float)n;
    st->eligible_pairs = np;
    st->eligible_queries = n_q;
    st->eligible_targets = n_t;
    st->rejections = rejections;
    return ML_OK;
}

ml_status ml_atr_sample(const ml_task *t, ml_rng *rng, ml_split split, ml_doc *doc) {
    draws d = {rng, NULL};
    return atr_sample(t, &d, split, doc);
}

ml_status ml_atr_sample_np(const ml_task *t, ml_np_random *np, ml_split split, ml_doc *doc) {
    draws d = {NULL, np};
    return atr_sample(t, &d, split, doc);
}
