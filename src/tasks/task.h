/* The paper's two tasks (docs/tasks.md): associative recall (AR) and associative treecall
 * (ATR, documents drawn from a random right-headed PCFG), their datasets and the batches the
 * training loop consumes. Pure C, no Lua.
 *
 * Randomness (docs/tasks.md, "Random streams"). A task is built from a seed: the ATR grammar
 * (and its split blacklist, drawn first) comes from stream (seed, ML_STREAM_GRAMMAR); the AR
 * split blacklist from (seed, ML_STREAM_SPLIT). Documents are drawn from an explicit ml_rng
 * stream; a dataset for split s uses (seed, ml_split_stream(s)), so train, dev and test never
 * share draws and an eval set's first 320 documents do not depend on how many were generated.
 * ATR tasks with rng = ML_RNG_NUMPY instead draw everything from one stream, as the original
 * generator did, and reproduce its grammars and documents exactly.
 *
 * Positions are 0-based document positions. A missing position is -1. */
#ifndef ML_TASK_H
#define ML_TASK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"

enum { ML_PAD = 0, ML_BOS = 1, ML_EOS = 2, ML_IGNORE = -100 };
enum { ML_TRAIN_DOCS = 100032, ML_EVAL_DOCS = 320, ML_EVAL_SPLIT_DOCS = 1024 };
/* The seed of a task (and of its datasets) made without one: mech.task.ar{} as mech.task.preset. */
enum { ML_TASK_DEFAULT_SEED = 42 };

/* CUSTOM: documents made outside C (a task written in Lua, a JSON-lines file) and appended to its
 * datasets one by one (ml_dataset_open, ml_dataset_append). */
typedef enum { ML_TASK_AR = 0, ML_TASK_ATR = 1, ML_TASK_MQAR = 2, ML_TASK_CUSTOM = 3 } ml_task_kind;
typedef enum { ML_SPLIT_TRAIN = 0, ML_SPLIT_DEV = 1, ML_SPLIT_TEST = 2 } ml_split;

/* The query type of one document; its name is the TYPE of the metric labels. */
typedef enum { ML_QT_KEY = 0, ML_QT_VALUE, ML_QT_PARENT, ML_QT_CHILD, ML_QT_SIBLING } ml_qtype;

/* Named positions (the probing schema). `next_key` (AR only, docs/tasks.md "AR") is 2q+3: the key of
 * the next pair, or the divider for the last pair. `query_type` exists only when the document
 * carries a query-type token. The answer is always predicted at target_item - 1. */
typedef enum {
    ML_POS_BOS = 0,
    ML_POS_QUERY_ITEM_ORIG,
    ML_POS_TARGET_ITEM_ORIG,
    ML_POS_DIVIDER,
    ML_POS_QUERY_ITEM,
    ML_POS_TARGET_ITEM,
    ML_POS_QUERY_TYPE,
    ML_POS_NEXT_KEY,
    ML_NPOS
} ml_pos;
extern const char *const ml_pos_names[ML_NPOS];
/* Index of a paper position name, or -1. */
int ml_pos_index(const char *name);
/* Free position names (docs/tasks.md, "Position names"): a task's positions are the paper's eight
 * (slots 0..ML_NPOS-1, the same for every task) followed by the names a custom task declares
 * beyond them (slots ML_NPOS.., in declaration order). At most ML_MAX_POS slots in all; a free name
 * is an identifier of at most ML_POS_NAME_MAX - 1 bytes. */
enum { ML_MAX_POS = 64, ML_POS_NAME_MAX = 32 };

typedef enum { ML_HEAD_RIGHT = 0, ML_HEAD_LEFT = 1 } ml_head_pos;
/* Random stream of an ATR task (docs/tasks.md, "Random streams"). PHILOX: mechlab's own
 * independent streams per split. NUMPY: the original generator's single numpy RandomState
 * stream, so grammar and documents are the original's token for token. */
typedef enum { ML_RNG_PHILOX = 0, ML_RNG_NUMPY = 1 } ml_task_rng;
typedef enum { ML_FIRST_TARGET = 0, ML_FIRST_QUERY = 1 } ml_sample_first;
/* AUTO: a query-type token exactly when several query types are enabled (docs/tasks.md, "ATR"). */
typedef enum { ML_QTOK_AUTO = 0, ML_QTOK_NEVER, ML_QTOK_ALWAYS } ml_qtok;

typedef struct {
    int num_kv;              /* keys + values (8192): num_kv/2 of each */
    int min_length;          /* context tokens; pairs m ~ U[min_length/2, max_length/2] */
    int max_length;
    ml_qtype query_type;     /* ML_QT_KEY or ML_QT_VALUE */
    double train_test_split; /* blacklist probability of a (key, value) combination */
} ml_ar_config;

typedef struct {
    ml_head_pos head_position;
    int max_depth;           /* d_max; 0 = no depth scores (recursion allowed) */
    int max_rhs_len;         /* L_max, including the head */
    int max_rules_per_nt;    /* R_max */
    int num_nonterminals;    /* |N| */
    int num_terminals;       /* |Σ| */
    double terminal_occurrence_factor; /* r_Σ; 0 = default (uniform over E(nt) ∪ Σ) */
    bool transparent_nonterminals;     /* each NT's head is its own extra terminal */
    double train_test_split; /* probability that a (target label, query label) pair is held out */
    bool parent, child, sibling;       /* enabled query types */
    bool unambiguous_queries;          /* queries (and sibling targets) are rightmost occurrences */
    ml_sample_first sample_first;
    ml_qtok query_type_token;
    int min_yield;           /* yields shorter than this are rejected (3) */
    int max_yield;           /* yields longer than this are rejected (1024) */
    ml_task_rng rng;         /* ML_RNG_PHILOX (default) or ML_RNG_NUMPY (seed < 2^32) */
} ml_atr_config;

/* Zoology's multi-query associative recall (docs/tasks.md, "MQAR"); the original's options. */
typedef struct {
    int vocab_size;          /* V: keys 1 .. V/2-1, values V/2 .. V-1, 0 the filler */
    int input_seq_len;       /* L, even, < V */
    int num_kv_pairs;        /* n: pairs per document, each queried once */
    double power_a;          /* gap law P(g) ∝ a·(g+1)^(a-1); 1 = uniform */
    int num_passes;          /* the context repeats the pairs this many times */
    bool random_non_queries; /* fillers uniform over [0, V) instead of 0 */
    ml_task_rng rng;         /* ML_RNG_NUMPY: the original's numpy stream (dataset seed < 2^32) */
} ml_mqar_config;

/* A task whose documents come from outside C (docs/tasks.md, "Your own task"). */
typedef struct {
    int vocab;                      /* V: token ids 0 .. V-1 */
    const char *const *token_names; /* V names (copied), or NULL: a token prints as its id */
    uint32_t positions;             /* the paper's positions its documents may carry: bit (1 << ML_POS_x) */
    const char *const *free_positions; /* n_free_positions more names, slots ML_NPOS.. (copied; NULL in
                                        * ml_task_custom_config's copy: ml_task_pos_name names them) */
    int n_free_positions;
    int corrupt_lo, corrupt_hi;     /* corruption pool, inclusive; both -1: the whole vocabulary */
    double holdout;                 /* 0: none; else the fraction of documents (by a hash of their tokens)
                                     * that only dev and test have, so train and test never share one */
} ml_custom_config;

/* Defaults: ar_32, pcfg_5_20 and Zoology's MQARConfig (V 8192, L 64, 4 pairs, a 0.01, random
 * fillers) respectively. */
ml_ar_config ml_ar_config_default(void);
ml_atr_config ml_atr_config_default(void);
ml_mqar_config ml_mqar_config_default(void);

typedef struct ml_task ml_task;
typedef struct ml_dataset ml_dataset;

/* The options of mech.task.ar / atr / mqar as a table (src/tasks/options.c): key, type and the
 * offset of its field in the kind's config struct (ML_TOPT_NO_FIELD: a key the constructor reads
 * itself, "length" and "seed"). ENUM fields are int-sized; their value is the index in names. */
typedef enum { ML_TOPT_INT, ML_TOPT_NUM, ML_TOPT_BOOL, ML_TOPT_ENUM } ml_task_opt_type;
#define ML_TOPT_NO_FIELD ((size_t)-1)
typedef struct {
    const char *name;
    ml_task_opt_type type;
    size_t offset;
    const char *const *names; /* ENUM: the value names, NULL-terminated */
    int if_true, if_false;    /* ENUM: the values a boolean means (both 0: booleans refused) */
} ml_task_option;
/* The options of kind k (AR, ATR, MQAR; NULL for another), ended by an entry with a NULL name. */
const ml_task_option *ml_task_options(ml_task_kind k);
/* The index of s in o->names, -1 for none. */
int ml_task_option_enum(const ml_task_option *o, const char *s);
/* The config struct of an AR, ATR or MQAR task (what ml_task_options' offsets index), else NULL. */
const void *ml_task_config(const ml_task *t);

/* Constructors validate the configuration (message names the option, the expected and the
 * received value) and return NULL on error. The task is refcounted (datasets retain it). */
ml_task *ml_task_ar(const ml_ar_config *cfg, uint64_t seed);
ml_task *ml_task_atr(const ml_atr_config *cfg, uint64_t seed);
ml_task *ml_task_mqar(const ml_mqar_config *cfg, uint64_t seed);
ml_task *ml_task_custom(const ml_custom_config *cfg, const char *name, uint64_t seed);
const ml_custom_config *ml_task_custom_config(const ml_task *t); /* NULL unless CUSTOM (token_names: the copy) */
/* The named positions a task's documents carry (bit 1 << ML_POS_x): a custom task's declared ones. */
uint32_t ml_task_positions(const ml_task *t);
/* The task's position slots: ML_NPOS plus a custom task's free names (the columns of
 * ml_dataset_batch_positions). */
int ml_task_npos(const ml_task *t);
/* The name of slot i (0 <= i < ml_task_npos), NULL outside. */
const char *ml_task_pos_name(const ml_task *t, int i);
/* The slot of a position name of the task (a paper name or one of its free names), or -1. */
int ml_task_pos_index(const ml_task *t, const char *name);
/* Whether slot i is a position the task's documents may carry (free names always are). */
bool ml_task_pos_declared(const ml_task *t, int i);
/* Named configurations (docs/tasks.md, "Presets"; and ar_32, ar_32_value, ar_32_split). */
ml_task *ml_task_preset(const char *name, uint64_t seed);
/* The same with the random stream chosen (ML_RNG_NUMPY: ATR presets only). */
ml_task *ml_task_preset_rng(const char *name, uint64_t seed, ml_task_rng rng);
const char *ml_task_rng_name(ml_task_rng rng); /* "philox" or "numpy" */
extern const char *const ml_task_preset_names[]; /* NULL-terminated */
ml_task *ml_task_retain(ml_task *t);
void ml_task_release(ml_task *t); /* NULL is fine */

ml_task_kind ml_task_get_kind(const ml_task *t);
const char *ml_task_kind_name(ml_task_kind k); /* "ar", "atr", "mqar" */
const char *ml_task_name(const ml_task *t); /* preset name, or the kind's name */
/* Sets the name (at most 31 bytes are kept), e.g. a preset's when a task is rebuilt from its record. */
void ml_task_set_name(ml_task *t, const char *name);
uint64_t ml_task_seed(const ml_task *t);
const ml_ar_config *ml_task_ar_config(const ml_task *t);   /* NULL unless AR */
const ml_atr_config *ml_task_atr_config(const ml_task *t); /* NULL unless ATR */
const ml_mqar_config *ml_task_mqar_config(const ml_task *t); /* NULL unless MQAR */
int ml_task_vocab_size(const ml_task *t); /* AR: num_kv + 4 (the 8196 quirk); ATR: |Σ| + 6 (+|N|) */
/* Writes the token's name ("<bos>", "k12", "v7", "t3", "qPARENT", ...) into buf; returns buf. */
const char *ml_task_token_name(const ml_task *t, int id, char buf[32]);
/* Whether the task has a held-out split (then dev and test are both evaluated,
 * docs/tasks.md "Datasets and batches"). */
bool ml_task_has_split(const ml_task *t);
/* Number of held-out pairs of the blacklist (0 without a split). */
int64_t ml_task_prohibited_pairs(const ml_task *t);
/* Corruption pool (docs/interventions.md): replacements are drawn from [*lo, *hi] (inclusive). */
void ml_task_corrupt_range(const ml_task *t, int *lo, int *hi);
/* Chance: the accuracy of guessing uniformly among the answers the task can have (AR: the values,
 * or the keys for value queries; ATR: the terminals; MQAR: the values K .. V-1; a custom task: its
 * declared pool). The one definition that the interchange evaluation and patching maps report
 * (docs/interventions.md, "Chance"). */
double ml_task_chance(const ml_task *t);
const char *ml_qtype_name(ml_qtype q);
const char *ml_split_name(ml_split s);
/* Parses "train"/"dev"/"test"; returns false on anything else. */
bool ml_split_parse(const char *s, ml_split *out);
uint64_t ml_split_stream(ml_split s);

/* Per-document statistics (the columns of docs/tasks.md, "Corpus statistics"). */
typedef struct {
    int32_t doc_len;           /* tokens */
    int32_t yield_len;         /* n: terminals (AR: context tokens 2m) */
    int32_t depth;             /* maximum terminal depth (AR: 0) */
    int32_t qt_dist;           /* |query_item_orig - target_item_orig| */
    int32_t query_key_dist;    /* |query_item - query_item_orig| */
    int32_t query_target_dist; /* |query_item - target_item_orig| */
    float branching;           /* (n-1) / distinct non-root head ids (AR: 0) */
    float percent_non_unique;  /* (n - distinct labels) / n */
    int32_t eligible_pairs, eligible_queries, eligible_targets; /* of the chosen query type */
    int32_t rejections;        /* draws rejected before this document */
} ml_doc_stats;

/* The statistics as a table (dataset.c): each field's name, offset and type (float or int32). The
 * first ML_STAT_MEANS (all but rejections) are what dataset:stats() averages. */
enum { ML_NSTATS = 12, ML_STAT_MEANS = 11 };
typedef struct {
    const char *name;
    size_t offset;
    bool is_float;
} ml_stat_field;
extern const ml_stat_field ml_doc_stat_fields[ML_NSTATS];
double ml_doc_stat(const ml_doc_stats *s, int field);
/* Means of the first ML_STAT_MEANS statistics over the dataset (0 when empty) and the range of
 * yield_len (0, 0 when empty). */
void ml_dataset_stat_means(const ml_dataset *ds, double means[ML_STAT_MEANS], int *yield_min, int *yield_max);

/* One document with its tree. Reusable: init once, sample many times, free once. */
typedef struct {
    int32_t *tokens;
    int len;
    int32_t pos[ML_MAX_POS]; /* by slot; a task uses the first ml_task_npos */
    int32_t *all_targets;  /* all_target_items_orig */
    int n_all_targets;
    /* Readouts: the logit at read_pos[j] must predict read_ans[j]. AR and ATR leave n_reads 0
     * (one readout, at target_item - 1); MQAR has one per query. */
    int32_t *read_pos, *read_ans;
    int n_reads;
    ml_qtype qtype;
    ml_doc_stats stats;
    /* ATR tree, indexed by yield index i (document position i + 1); NULL/0 for AR. */
    int n_yield;
    int32_t *node_id, *head_id; /* head_id -1 for the root */
    int32_t *depth;
    int32_t *parent_pos;        /* document position of the parent (head), -1 for the root */
    void *scratch;              /* sampler work space */
    int cap;                    /* capacity of the per-token arrays */
} ml_doc;

void ml_doc_init(ml_doc *d);
void ml_doc_free(ml_doc *d);
/* Grows the per-token arrays to hold n entries (for filling a document by hand). */
ml_status ml_doc_reserve(ml_doc *d, int n);
/* Draws one document of `split` from rng (rejected draws continue the same stream). */
ml_status ml_task_sample(const ml_task *t, ml_rng *rng, ml_split split, ml_doc *doc);
/* A readable rendering: the sequence, the named positions and (ATR) the dependency tree.
 * Returns a malloc'd string (the caller frees it) or NULL on error. */
char *ml_doc_format(const ml_task *t, const ml_doc *doc);

/* ---- datasets ---- */

/* n documents of `split`, drawn from stream (seed, ml_split_stream(split)). An ATR task with
 * rng = numpy ignores seed: the first n documents of the split in the original's stream (n at
 * most ML_TRAIN_DOCS for train, ML_EVAL_SPLIT_DOCS for dev and test; dev only with a split).
 * An MQAR task with rng = numpy gives the original's multiquery_ar(num_examples = n, seed =
 * seed + s), s = 0 for train, 1 for dev, 2 for test (fillers from Philox stream (seed, split)). */
ml_dataset *ml_dataset_new(ml_task *t, int64_t n, uint64_t seed, ml_split split);
/* The same from an explicit Philox stream (advanced by the call; also for rng = numpy tasks). */
ml_dataset *ml_dataset_from_rng(ml_task *t, int64_t n, ml_rng *rng, ml_split split);
void ml_dataset_free(ml_dataset *ds); /* NULL is fine; releases the task */

int64_t ml_dataset_size(const ml_dataset *ds);
ml_task *ml_dataset_task(const ml_dataset *ds);
ml_split ml_dataset_split(const ml_dataset *ds);
int ml_dataset_max_len(const ml_dataset *ds);
/* Document i: tokens (len entries), named positions (ml_dataset_npos entries), statistics, type. */
const int32_t *ml_dataset_tokens(const ml_dataset *ds, int64_t i, int *len);
const int32_t *ml_dataset_positions(const ml_dataset *ds, int64_t i);
int ml_dataset_npos(const ml_dataset *ds); /* ml_task_npos of its task: the stride of the positions */
const ml_doc_stats *ml_dataset_stats(const ml_dataset *ds, int64_t i);
ml_qtype ml_dataset_qtype(const ml_dataset *ds, int64_t i);
const int32_t *ml_dataset_all_targets(const ml_dataset *ds, int64_t i, int *n);
/* Readouts of document i (positions and answers, n of them; in document order). */
const int32_t *ml_dataset_readouts(const ml_dataset *ds, int64_t i, int *n, const int32_t **answers);
/* The named positions of readout j of document i (ml_dataset_npos entries into pos): for AR and ATR
 * (j = 0) the document's; for MQAR those of query j: query_item = the query, target_item = query
 * + 1, query_item_orig / target_item_orig its pair in the context's last pass, next_key the next
 * key there (-1 after the last pair). For an evaluator that reads every query. */
ml_status ml_dataset_readout_positions(const ml_dataset *ds, int64_t i, int j, int32_t *pos);
/* About the memory the dataset holds (for a garbage collector's accounting). */
size_t ml_dataset_bytes(const ml_dataset *ds);
/* A dataset filled from outside C: room for n documents of `split`, none yet (size 0). */
ml_dataset *ml_dataset_open(ml_task *t, int64_t n, ml_split split);
/* Checks a document against its task (ml_doc_check) and appends it. With a holdout (custom tasks), a
 * document on the other side of the split is not appended: *rejected is set, ML_OK returned. */
ml_status ml_dataset_append(ml_dataset *ds, const ml_doc *doc, bool *rejected);
/* Whether doc fits task t: 1 ≤ len ≤ ML_MAX_DOC_LEN, token ids in the vocabulary, named positions
 * inside the document (and, for a custom task, declared), readouts inside it with answers in the
 * vocabulary, at least one readout (not with ML_DOC_PRINTED: a document to print, as AR and ATR keep
 * theirs implicit), a tree's parents inside its yield. ML_ERR_ARG with a message naming the first
 * faulty field; the caller (the Lua binding) adds who asked. */
enum { ML_MAX_DOC_LEN = 1 << 24, ML_DOC_PRINTED = 1 };
ml_status ml_doc_check(const ml_task *t, const ml_doc *doc, unsigned flags);
/* Starts filling doc by hand (after ml_doc_reserve): len tokens, no named position, readout,
 * all_target_items_orig or tree, type KEY, statistics zero but doc_len. */
void ml_doc_start(ml_doc *doc, int len);
/* Adds the readout of target position p (the token at p, read at p - 1); false, adding nothing,
 * when p is no position that can be predicted (outside 1 .. len - 1). Room: ml_doc_reserve. */
bool ml_doc_add_target(ml_doc *doc, int32_t p);
/* Puts doc's readouts in document order (a stable sort; ml_doc_check refuses repeats). */
void ml_doc_sort_readouts(ml_doc *doc);
/* The query type named `name` (as ml_qtype_name writes it), -1 for none. */
int ml_qtype_parse(const char *name);
/* Documents made outside C in columns (what a custom task's sample_batch returns). A column set:
 * entry (r, j) at p[r * s0 + j * s1] for j < cols; s0 = 0 when every document shares it. */
typedef struct {
    const int32_t *p;
    int64_t s0, s1, cols;
    int32_t one; /* the value of a number every document shares (p points here) */
} ml_doc_cols;
/* n documents: tokens (n, L); targets (positions whose token is predicted from the position
 * before) and readouts with their answers, -1 entries meaning none; pos[i] holds the named position
 * pos_index[i] (one entry per document); every document's type qtype. */
typedef struct {
    int64_t n;
    ml_doc_cols tok, tg, rd, an, pos[ML_MAX_POS];
    int pos_index[ML_MAX_POS], npos;
    ml_qtype qtype;
} ml_doc_batch;
/* Appends the documents of b to ds in order (scratch: a document buffer) until max are kept (a
 * holdout may reject some): *kept of them, *rows read. A faulty document stops it with ML_ERR_ARG
 * (or the append's error) and *rows its 0-based row; any other failure leaves *rows = -1. */
ml_status ml_dataset_append_batch(ml_dataset *ds, const ml_doc_batch *b, int64_t max, ml_doc *scratch, int64_t *kept,
                                  int64_t *rows);

/* Whether a custom task's holdout puts these tokens in dev/test (true) or train (false). */
bool ml_task_held_out(const ml_task *t, const int32_t *tokens, int len);
/* Copies document i into doc (tree included) for printing. */
ml_status ml_dataset_get_doc(const ml_dataset *ds, int64_t i, ml_doc *doc);

/* The training batch: int32 tensors (batch, Lmax), Lmax the longest document of the batch.
 * tokens: right-padded with ML_PAD. targets[b,t]: the token the logit at t must predict, already
 * shifted (at every readout: target_item - 1 for AR and ATR, each query for MQAR),
 * ML_IGNORE (-100) everywhere else. */
ml_status ml_dataset_batch(const ml_dataset *ds, const int64_t *doc_indices, int batch,
                           ml_tensor **tokens, ml_tensor **targets);
/* Named positions of the same documents: int32 (batch, ml_dataset_npos), -1 where absent. */
ml_status ml_dataset_batch_positions(const ml_dataset *ds, const int64_t *doc_indices, int batch,
                                     ml_tensor **positions);
/* Documents first .. first+count-1 (the fixed order of docs/tasks.md, "Datasets and batches"). */
ml_status ml_dataset_batch_range(const ml_dataset *ds, int64_t first, int count, ml_tensor **tokens,
                                 ml_tensor **targets, ml_tensor **positions);
/* True answer distribution (docs/tasks.md, "Datasets and batches"; one-hot except CHILD): float32 (batch, V), the
 * normalised counts of the tokens at all_target_items_orig. */
ml_status ml_dataset_batch_target_dist(const ml_dataset *ds, const int64_t *doc_indices, int batch,
                                       ml_tensor **dist);

#endif
