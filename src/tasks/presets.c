/* The named configurations (docs/tasks.md, "Presets" for ATR, "AR" for AR). */
#include <string.h>

#include "tasks/task_impl.h"

const char *const ml_task_preset_names[] = {"pcfg_5_20",        "pcfg_10_20", "pcfg_easy_8192",
                                            "pcfg_tts",         "sibling",    "pcfg_medium_8192",
                                            "pcfg_5_8192",      "ar_32",      "ar_32_value",
                                            "ar_32_split",      "mqar_64_4",  "mqar_128_8",
                                            "mqar_256_16",      "mqar_512_64", NULL};

ml_task *ml_task_preset(const char *name, uint64_t seed) { return ml_task_preset_rng(name, seed, ML_RNG_PHILOX); }

ml_task *ml_task_preset_rng(const char *name, uint64_t seed, ml_task_rng rng) {
    ml_task *t = NULL;
    if (strncmp(name, "mqar_", 5) == 0) {
        /* Zoology's Fig. 2 settings: V = 8192, (L, pairs) from (64, 4) to (512, 64) */
        static const struct { const char *name; int L, n; } mq[] = {
            {"mqar_64_4", 64, 4}, {"mqar_128_8", 128, 8}, {"mqar_256_16", 256, 16}, {"mqar_512_64", 512, 64}};
        int k = -1;
        for (int i = 0; i < 4; i++)
            if (strcmp(name, mq[i].name) == 0) k = i;
        if (k < 0) goto unknown;
        ml_mqar_config c = ml_mqar_config_default();
        c.input_seq_len = mq[k].L;
        c.num_kv_pairs = mq[k].n;
        c.rng = rng;
        t = ml_task_mqar(&c, seed);
    } else if (strncmp(name, "ar_", 3) == 0) {
        ml_ar_config c = ml_ar_config_default(); /* ar_32: 16 pairs of 8192 tokens, key queries */
        if (strcmp(name, "ar_32") == 0) {
        } else if (strcmp(name, "ar_32_value") == 0) {
            c.query_type = ML_QT_VALUE;
        } else if (strcmp(name, "ar_32_split") == 0) {
            c.train_test_split = 0.2; /* the AR split suite (docs/tasks.md, "AR") */
        } else {
            goto unknown;
        }
        if (rng != ML_RNG_PHILOX) {
            ml_fail(ML_ERR_ARG, "mech.task.preset: rng = \"%s\" is for ATR presets only; %s has the philox stream",
                    ml_task_rng_name(rng), name);
            return NULL;
        }
        t = ml_task_ar(&c, seed);
    } else {
        /* shared: right heads, d_max 10, R_max 5, |N| 40, unambiguous, sample_first = target */
        ml_atr_config c = ml_atr_config_default();
        if (strcmp(name, "pcfg_5_20") == 0) {
        } else if (strcmp(name, "pcfg_10_20") == 0) {
            c.max_rhs_len = 10;
        } else if (strcmp(name, "pcfg_easy_8192") == 0) {
            c.num_terminals = 8192;
            c.terminal_occurrence_factor = 20;
        } else if (strcmp(name, "pcfg_tts") == 0) {
            c.train_test_split = 0.2;
        } else if (strcmp(name, "sibling") == 0) {
            c.parent = false;
            c.sibling = true;
        } else if (strcmp(name, "pcfg_medium_8192") == 0) {
            c.max_rhs_len = 10;
            c.num_terminals = 8192;
            c.terminal_occurrence_factor = 20;
        } else if (strcmp(name, "pcfg_5_8192") == 0) {
            c.num_terminals = 8192; /* diagnostic: no r_Σ, yields degenerate (docs/tasks.md, "Grammar") */
        } else {
            goto unknown;
        }
        c.rng = rng;
        t = ml_task_atr(&c, seed);
    }
    if (t) ml_task_set_name(t, name);
    return t;
unknown:;
    char list[1024] = "";
    for (int i = 0; ml_task_preset_names[i]; i++) {
        strcat(list, i ? ", " : "");
        strcat(list, ml_task_preset_names[i]);
    }
    ml_fail(ML_ERR_ARG, "mech.task.preset: unknown preset \"%s\" (expected one of %s)", name, list);
    return NULL;
}
