/* Human-readable documents for REPL probing. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task_impl.h"

typedef struct {
    char *s;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) ML_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if (b->s && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t c = b->cap ? b->cap : 256;
        while (c <= b->len + (size_t)n) c *= 2;
        char *q = realloc(b->s, c);
        if (!q) {
            b->oom = true;
            return;
        }
        b->s = q;
        b->cap = c;
    }
}

/* " <query_item_orig,next_key>" for the named positions equal to p. */
static void marks(sbuf *b, const ml_task *t, const ml_doc *d, int p) {
    int k = 0;
    for (int i = 0; i < ml_task_npos(t); i++)
        if (d->pos[i] == p) sb_printf(b, "%s%s", k++ ? "," : "  <", ml_task_pos_name(t, i));
    for (int j = 0; j < d->n_all_targets; j++)
        if (d->all_targets[j] == p && p != d->pos[ML_POS_TARGET_ITEM_ORIG])
            sb_printf(b, "%s%s", k++ ? "," : "  <", "all_target_items_orig");
    if (k) sb_printf(b, ">");
}

static void tree(sbuf *b, const ml_task *t, const ml_doc *d, int y, int indent, int budget) {
    char name[32];
    sb_printf(b, "%*s%s @%d", 2 + 2 * indent, "", ml_task_token_name(t, d->tokens[1 + y], name), 1 + y);
    marks(b, t, d, 1 + y);
    sb_printf(b, "\n");
    if (budget <= 0) return; /* a tree is never deeper than its yield; this only guards bad input */
    for (int c = 0; c < d->n_yield; c++)
        if (d->parent_pos[c] == 1 + y) tree(b, t, d, c, indent + 1, budget - 1);
}

char *ml_doc_format(const ml_task *t, const ml_doc *d) {
    sbuf b = {0};
    char name[32];
    sb_printf(&b, "%s document: %d tokens, %s query", t->name, d->len, ml_qtype_name(d->qtype));
    if (t->kind == ML_TASK_ATR)
        sb_printf(&b, ", yield %d, depth %d", d->stats.yield_len, d->stats.depth);
    sb_printf(&b, "\n ");
    /* the key, value, query and answer positions are bracketed in the sequence */
    for (int p = 0; p < d->len; p++) {
        bool mark = p == d->pos[ML_POS_QUERY_ITEM_ORIG] || p == d->pos[ML_POS_TARGET_ITEM_ORIG] ||
                    p == d->pos[ML_POS_QUERY_ITEM] || p == d->pos[ML_POS_TARGET_ITEM];
        if (t->kind == ML_TASK_CUSTOM) /* its named positions and what it predicts */
            for (int j = 0; j < d->n_reads; j++) mark = mark || p == d->read_pos[j] + 1;
        if (t->kind == ML_TASK_MQAR) { /* every query is bracketed */
            mark = false;
            for (int j = 0; j < d->n_reads; j++) mark = mark || p == d->read_pos[j];
        }
        sb_printf(&b, mark ? " [%s]" : " %s", ml_task_token_name(t, d->tokens[p], name));
    }
    sb_printf(&b, "\npositions:");
    for (int i = 0; i < ml_task_npos(t); i++) {
        int p = d->pos[i];
        if (p < 0 || p >= d->len) continue;
        sb_printf(&b, "\n  %-21s %4d  %s", ml_task_pos_name(t, i), p, ml_task_token_name(t, d->tokens[p], name));
    }
    if (d->n_all_targets > 0) {
        sb_printf(&b, "\n  %-21s", "all_target_items_orig");
        for (int j = 0; j < d->n_all_targets; j++) sb_printf(&b, " %d", d->all_targets[j]);
    }
    if ((t->kind == ML_TASK_MQAR || t->kind == ML_TASK_CUSTOM) && d->n_reads > 0) {
        sb_printf(&b, "\n  %-21s", "readouts (answer)");
        for (int j = 0; j < d->n_reads; j++)
            sb_printf(&b, " %d (%s)", d->read_pos[j], ml_task_token_name(t, d->read_ans[j], name));
    }
    sb_printf(&b, "\n");
    if (t->kind == ML_TASK_ATR && d->n_yield > 0) {
        sb_printf(&b, "tree (dependents indented under their head, @position):\n");
        for (int y = 0; y < d->n_yield; y++)
            if (d->parent_pos[y] < 0) tree(&b, t, d, y, 0, d->n_yield);
    }
    if (b.oom) {
        free(b.s);
        ml_fail(ML_ERR_MEM, "task:show: out of memory");
        return NULL;
    }
    return b.s;
}
