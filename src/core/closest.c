/* "Did you mean" for every unknown name of mechlab (options, sites, positions, tasks, mixers):
 * one scoring and one table of synonyms, so every suggestion is made the same way. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/closest.h"

/* Names are compared by their first KEY_CHARS characters: a suggestion needs no more, and a
 * huge argument must cost no more than a short one. */
enum { KEY_CHARS = 64, KEY_NUMS = 4 };

/* A name as compared for "did you mean": its form with each run of digits written '#' (the
 * component) and the numbers themselves (the layer), both of the name's first KEY_CHARS bytes. */
typedef struct {
    char form[KEY_CHARS + 1];
    long num[KEY_NUMS];
    int n_num;
} name_key;

static void name_key_of(const char *s, name_key *k) {
    int n = 0;
    k->n_num = 0;
    for (int i = 0; s[i] && i < KEY_CHARS; i++) {
        if (s[i] >= '0' && s[i] <= '9') {
            long v = 0;
            while (s[i] >= '0' && s[i] <= '9' && i < KEY_CHARS) v = v < 100000000 ? v * 10 + (s[i] - '0') : v, i++;
            i--;
            if (k->n_num < KEY_NUMS) k->num[k->n_num++] = v;
            k->form[n++] = '#';
        } else {
            k->form[n++] = s[i];
        }
    }
    k->form[n] = 0;
}

static int edit_distance(const char *a, const char *b) {
    int la = (int)strnlen(a, KEY_CHARS), lb = (int)strnlen(b, KEY_CHARS);
    int d[KEY_CHARS + 1][KEY_CHARS + 1];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

/* Lower is closer: the forms first (a substring is likely meant), then the numbers. */
static long name_score(const name_key *a, const name_key *b) {
    long d = edit_distance(a->form, b->form);
    if (strstr(b->form, a->form) || strstr(a->form, b->form)) d /= 2;
    long nd = a->n_num == b->n_num ? 0 : 1;
    for (int i = 0; i < a->n_num && i < b->n_num; i++) nd += labs(a->num[i] - b->num[i]);
    return d * 1024 + (nd < 1023 ? nd : 1023);
}

/* The one table of synonyms that every did-you-mean consults (Lua's util.closest calls it
 * through mech.sys.closest): names users bring from PyTorch, Hugging Face and
 * TransformerLens, each with mechlab's name. A name whose last dot-separated segment begins with
 * an alias is also compared with the alias written as its mechlab name, so that a typo of an alias
 * ("attn_outt") still finds the right name. Longer aliases come first ("attn_out" before "attn"). */
static const char *const synonyms[][2] = {
    {"learning_rate", "lr"},          {"epochs", "steps"},           {"num_epochs", "steps"},
    {"max_steps", "steps"},           {"num_steps", "steps"},        {"num_layers", "n_layers"},
    {"n_layer", "n_layers"},          {"num_hidden_layers", "n_layers"}, {"hidden_size", "d_model"},
    {"width", "d_model"},             {"n_embd", "d_model"},         {"dim", "d_model"},
    {"num_heads", "n_heads"},         {"num_attention_heads", "n_heads"}, {"n_head", "n_heads"},
    {"vocab_size", "vocab"},          {"batch", "batch_size"},       {"bs", "batch_size"},
    {"wd", "weight_decay"},           {"decay", "weight_decay"},     {"warmup_steps", "warmup"},
    {"random_seed", "seed"},          {"clip_grad_norm", "grad_clip"}, {"max_grad_norm", "grad_clip"},
    {"attn_output", "attention_output"}, {"attn_out", "attention_output"},
    {"attn_input", "attention_input"}, {"attn_in", "attention_input"},
    {"mlp_out", "mlp_output"},        {"mlp_in", "mlp_input"},
    {"resid_pre", "block_input"},     {"resid_post", "block_output"},
};

/* s with the alias that begins its last segment written as its mechlab name, into buf; 0 when no
 * alias applies. */
static int with_synonym(const char *s, char *buf, size_t n) {
    const char *seg = strrchr(s, '.');
    seg = seg ? seg + 1 : s;
    for (size_t i = 0; i < sizeof synonyms / sizeof synonyms[0]; i++) {
        size_t la = strlen(synonyms[i][0]);
        if (strncmp(seg, synonyms[i][0], la) != 0) continue;
        int w = snprintf(buf, n, "%.*s%s%s", (int)(seg - s), s, synonyms[i][1], seg + la);
        return w > 0 && (size_t)w < n;
    }
    return 0;
}

/* The lower of d and the scores of ks against name with its last segment written as each alias
 * of it ("lerning_rate" against "learning_rate" for "lr"). */
static long alias_score(const name_key *ks, const char *name, long d) {
    const char *seg = strrchr(name, '.');
    seg = seg ? seg + 1 : name;
    for (size_t i = 0; i < sizeof synonyms / sizeof synonyms[0]; i++) {
        if (strcmp(seg, synonyms[i][1]) != 0) continue;
        char spelled[2 * KEY_CHARS + 1];
        int w = snprintf(spelled, sizeof spelled, "%.*s%s", (int)(seg - name) < KEY_CHARS ? (int)(seg - name) : KEY_CHARS,
                         name, synonyms[i][0]);
        if (w <= 0 || (size_t)w >= sizeof spelled) continue;
        name_key ka;
        name_key_of(spelled, &ka);
        long da = name_score(ks, &ka);
        if (da < d) d = da;
    }
    return d;
}

const char *ml_closest(const char *s, const char *const *names) {
    const char *best = NULL;
    long bd = LONG_MAX;
    name_key ks, kalias, kn;
    char alias[2 * KEY_CHARS + 1];
    int has_alias = with_synonym(s, alias, sizeof alias);
    name_key_of(s, &ks);
    if (has_alias) name_key_of(alias, &kalias);
    for (int i = 0; names[i]; i++) {
        name_key_of(names[i], &kn);
        long d = name_score(&ks, &kn);
        if (has_alias) {
            long da = name_score(&kalias, &kn);
            if (da < d) d = da;
        }
        d = alias_score(&ks, names[i], d);
        if (d < bd) bd = d, best = names[i];
    }
    return best;
}
