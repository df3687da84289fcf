/* The options of the built-in task kinds as tables: mech.task.ar / atr / mqar read them, and
 * task:config() writes them, from these (one generic reader and writer in src/lua/task.c). Each
 * entry names its field of the kind's config struct; an entry without one ("length", "seed") is a
 * key the constructor reads itself. */
#include <stddef.h>
#include <string.h>

#include "tasks/task.h"

/* Enum fields are read and written as int. */
_Static_assert(sizeof(ml_head_pos) == sizeof(int) && sizeof(ml_qtype) == sizeof(int) &&
                   sizeof(ml_sample_first) == sizeof(int) && sizeof(ml_qtok) == sizeof(int) &&
                   sizeof(ml_task_rng) == sizeof(int),
               "task enums are int-sized");

static const char *const rng_names[] = {"philox", "numpy", NULL}; /* ml_task_rng order */
static const char *const qtype_names[] = {"key", "value", NULL};  /* ML_QT_KEY, ML_QT_VALUE */
static const char *const head_names[] = {"right", "left", NULL};
static const char *const first_names[] = {"target", "query", NULL};
static const char *const qtok_names[] = {"auto", "never", "always", NULL};

#define AR(f) offsetof(ml_ar_config, f)
#define ATR(f) offsetof(ml_atr_config, f)
#define MQ(f) offsetof(ml_mqar_config, f)

/* In the order the constructors read them (and name them in "did you mean" suggestions). */
static const ml_task_option ar_options[] = {
    {"num_kv", ML_TOPT_INT, AR(num_kv), .names = NULL},
    {"length", ML_TOPT_INT, ML_TOPT_NO_FIELD, .names = NULL}, /* min_length = max_length = length */
    {"min_length", ML_TOPT_INT, AR(min_length), .names = NULL},
    {"max_length", ML_TOPT_INT, AR(max_length), .names = NULL},
    {"query_type", ML_TOPT_ENUM, AR(query_type), .names = qtype_names},
    {"train_test_split", ML_TOPT_NUM, AR(train_test_split), .names = NULL},
    {"seed", ML_TOPT_INT, ML_TOPT_NO_FIELD, .names = NULL},
    {.name = NULL},
};

static const ml_task_option atr_options[] = {
    {"head_position", ML_TOPT_ENUM, ATR(head_position), .names = head_names},
    {"max_depth", ML_TOPT_INT, ATR(max_depth), .names = NULL},
    {"max_rhs_len", ML_TOPT_INT, ATR(max_rhs_len), .names = NULL},
    {"max_rules_per_nt", ML_TOPT_INT, ATR(max_rules_per_nt), .names = NULL},
    {"num_nonterminals", ML_TOPT_INT, ATR(num_nonterminals), .names = NULL},
    {"num_terminals", ML_TOPT_INT, ATR(num_terminals), .names = NULL},
    {"terminal_occurrence_factor", ML_TOPT_NUM, ATR(terminal_occurrence_factor), .names = NULL},
    {"transparent_nonterminals", ML_TOPT_BOOL, ATR(transparent_nonterminals), .names = NULL},
    {"train_test_split", ML_TOPT_NUM, ATR(train_test_split), .names = NULL},
    {"parent", ML_TOPT_BOOL, ATR(parent), .names = NULL},
    {"child", ML_TOPT_BOOL, ATR(child), .names = NULL},
    {"sibling", ML_TOPT_BOOL, ATR(sibling), .names = NULL},
    {"unambiguous_queries", ML_TOPT_BOOL, ATR(unambiguous_queries), .names = NULL},
    {"sample_first", ML_TOPT_ENUM, ATR(sample_first), .names = first_names},
    /* a boolean means always / never */
    {"query_type_token", ML_TOPT_ENUM, ATR(query_type_token), .names = qtok_names, .if_true = ML_QTOK_ALWAYS,
     .if_false = ML_QTOK_NEVER},
    {"min_yield", ML_TOPT_INT, ATR(min_yield), .names = NULL},
    {"max_yield", ML_TOPT_INT, ATR(max_yield), .names = NULL},
    {"rng", ML_TOPT_ENUM, ATR(rng), .names = rng_names},
    {"seed", ML_TOPT_INT, ML_TOPT_NO_FIELD, .names = NULL},
    {.name = NULL},
};

/* The option names of Zoology's multiquery_ar. */
static const ml_task_option mqar_options[] = {
    {"vocab_size", ML_TOPT_INT, MQ(vocab_size), .names = NULL},
    {"input_seq_len", ML_TOPT_INT, MQ(input_seq_len), .names = NULL},
    {"num_kv_pairs", ML_TOPT_INT, MQ(num_kv_pairs), .names = NULL},
    {"power_a", ML_TOPT_NUM, MQ(power_a), .names = NULL},
    {"num_passes", ML_TOPT_INT, MQ(num_passes), .names = NULL},
    {"random_non_queries", ML_TOPT_BOOL, MQ(random_non_queries), .names = NULL},
    {"rng", ML_TOPT_ENUM, MQ(rng), .names = rng_names},
    {"seed", ML_TOPT_INT, ML_TOPT_NO_FIELD, .names = NULL},
    {.name = NULL},
};

const ml_task_option *ml_task_options(ml_task_kind k) {
    return k == ML_TASK_AR ? ar_options : k == ML_TASK_ATR ? atr_options : k == ML_TASK_MQAR ? mqar_options : NULL;
}

const void *ml_task_config(const ml_task *t) {
    switch (ml_task_get_kind(t)) {
    case ML_TASK_AR: return ml_task_ar_config(t);
    case ML_TASK_ATR: return ml_task_atr_config(t);
    case ML_TASK_MQAR: return ml_task_mqar_config(t);
    default: return NULL;
    }
}

int ml_task_option_enum(const ml_task_option *o, const char *s) {
    for (int i = 0; o->names[i]; i++)
        if (!strcmp(s, o->names[i])) return i;
    return -1;
}
