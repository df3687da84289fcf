/* Internals shared by the task files (not part of the public API). */
#ifndef ML_TASK_IMPL_H
#define ML_TASK_IMPL_H

#include "tasks/numpy_random.h"
#include "tasks/task.h"

/* Consecutive rejected draws after which sampling gives up (e.g. a test split whose blacklist
 * holds no pair that ever occurs). Far above anything a working configuration needs. */
enum { ML_MAX_REJECTIONS = 200000 };

struct ml_task {
    int refcount;
    ml_task_kind kind;
    char name[32];
    uint64_t seed;
    ml_ar_config ar;
    ml_atr_config atr;
    ml_mqar_config mqar;
    int vocab;

    /* Split blacklist: bit (a * black_side + b) set = pair (a, b) held out. */
    uint64_t *black;
    int64_t black_side;
    int64_t n_prohibited;

    /* AR */
    int n_keys; /* num_kv / 2 */

    /* ATR grammar. Symbols: >= 0 terminal label, < 0 nonterminal -1 - sym. */
    int n_labels;    /* terminals including transparent ones */
    int query_start; /* id of the first query-type token */
    int n_types;
    ml_qtype types[3];
    bool type_token;
    int32_t *depth_score; /* per NT */
    int32_t *rule_first;  /* per NT (n_nt + 1): first rule index */
    int32_t *sym_first;   /* per rule (n_rules + 1): first symbol index */
    int32_t *syms;
    double *rule_cdf;     /* per rule: cumulative probability within its NT */
    double *head_cdf;     /* n_nt x |Σ| cumulative head distributions (NULL if transparent) */

    /* MQAR: context length, number of gaps, the gap law and its running sum */
    int mq_context, mq_space;
    double *mq_p, *mq_cdf;

    /* CUSTOM: the configuration, its token names copied (NULL: ids) */
    ml_custom_config cu;
    char **cu_names;
    char (*cu_pos)[ML_POS_NAME_MAX]; /* its free position names (cu.n_free_positions) */

    /* rng = numpy only */
    double *start_cdf;           /* the original's uniform start distribution, as choice() sees it */
    ml_np_random *np_start[3];   /* the stream where each split's documents begin (filled lazily) */
};

static inline bool ml_task_black(const ml_task *t, int64_t a, int64_t b) {
    if (!t->black || a >= t->black_side || b >= t->black_side) return false;
    uint64_t bit = (uint64_t)(a * t->black_side + b);
    return (t->black[bit >> 6] >> (bit & 63)) & 1;
}

/* Draws the blacklist: one draw per pair, held out when the draw is < p (docs/tasks.md,
 * "AR" and "Grammar"). */
ml_status ml_task_draw_blacklist(ml_task *t, int64_t side, double p, ml_rng *rng, const char *fn);

/* A task with refcount 1, the kind, seed and name set, everything else zero (NULL on out of memory). */
ml_task *ml_task_alloc(ml_task_kind kind, uint64_t seed, const char *name);

ml_status ml_ar_build(ml_task *t);
ml_status ml_ar_sample(const ml_task *t, ml_rng *rng, ml_split split, ml_doc *doc);
ml_status ml_atr_build(ml_task *t);
ml_status ml_atr_sample(const ml_task *t, ml_rng *rng, ml_split split, ml_doc *doc);
/* rng = numpy: one document drawn from the original's stream. */
ml_status ml_atr_sample_np(const ml_task *t, ml_np_random *np, ml_split split, ml_doc *doc);

ml_status ml_mqar_build(ml_task *t);
ml_status ml_mqar_sample(const ml_task *t, ml_rng *rng, ml_split split, ml_doc *doc);
/* rng = numpy: keys, values and gaps (n_docs x num_kv_pairs each) of the original's
 * multiquery_ar(num_examples = n_docs, seed = seed). */
ml_status ml_mqar_generate_np(const ml_task *t, int64_t n_docs, uint32_t seed, int32_t *keys, int32_t *vals,
                              int32_t *gaps);
/* One document from its keys, values and gaps; fillers drawn from fill when random_non_queries. */
ml_status ml_mqar_doc(const ml_task *t, const int32_t *keys, const int32_t *vals, const int32_t *gaps, ml_rng *fill,
                      ml_doc *doc);

/* Sampler work space, kept in ml_doc.scratch so repeated sampling does not allocate. */
typedef struct {
    int32_t *stk_sym, *stk_id, *stk_head, *stk_depth;
    int stk_cap;
    int32_t *id_pos, *grp_last; /* indexed by node id */
    int id_cap;
    int32_t *rightmost; /* indexed by label */
    int label_cap;
    int32_t *pq[3], *pt[3]; /* eligible (query, target) pairs per query type */
    int pair_cap[3];
    int32_t *label, *flag, *list; /* per yield position */
    int32_t *set_table, *set_keys; /* rng = numpy: the Python set of the target draw, its input */
    int set_cap;
    int n_cap;
    uint8_t *used; /* AR: key/value numbers already drawn */
    int used_cap;
    int32_t *keys, *vals, *elig;
    int ar_cap;
} ml_scratch;

ml_scratch *ml_scratch_get(ml_doc *d);
/* Room for AR's and MQAR's draws: n_used flags in used (the new ones zero) and n in each of keys,
 * vals and elig. */
ml_status ml_scratch_reserve_kv(ml_scratch *s, int n_used, int n);

/* Grows *p (elements of `size` bytes, capacity *cap) to at least n elements. */
ml_status ml_grow(void **p, int *cap, int n, size_t size);

#endif
