/* Document tables, both ways (core: src/tasks/task.h).
 *
 * A C document becomes a Lua table; every position in it is a 0-based document position, and
 * tokens[p + 1] is the token at position p:
 *   { tokens = {...}, len = L, type = "PARENT", split = "train",
 *     positions = { bos = 0, query_item = ..., ..., all_target_items_orig = {...} },
 *     stats = { yield_len = ..., depth = ..., ... },
 *     readouts = {...}, answers = {...},       -- MQAR: where each answer is read, and what it is
 *     tree = { parent = {...}, depth = {...} }, -- ATR: per position, parent position (-1: none)
 *     task = <the task> }
 *
 * One reader turns tables back into C documents: a custom task's document {tokens, targets,
 * readouts, answers, positions, type} (tokens and answers as ids, or names of the definition's
 * `ids`), or a printed document (the table above, for task:show). It converts types and says which
 * entry is wrong; whether the document fits its task is the core's ml_doc_check. sample_batch's
 * columns (int32 tensors, or lists that every document shares) are read here too. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua/task.h"

/* ------------------------------------------------------------ C -> Lua ---- */

static void set_int(lua_State *L, const char *k, lua_Integer v) {
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

void mlL_push_int_array(lua_State *L, const int32_t *a, int n) {
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, a[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

static void push_stats(lua_State *L, const ml_doc_stats *s) {
    lua_createtable(L, 0, 13);
    for (int j = 0; j < ML_NSTATS; j++) {
        if (ml_doc_stat_fields[j].is_float) lua_pushnumber(L, ml_doc_stat(s, j));
        else lua_pushinteger(L, (lua_Integer)ml_doc_stat(s, j));
        lua_setfield(L, -2, ml_doc_stat_fields[j].name);
    }
}

void mlL_push_doc(lua_State *L, int task_idx, const ml_doc *d, ml_split split) {
    lua_createtable(L, 0, 8);
    mlL_push_int_array(L, d->tokens, d->len);
    lua_setfield(L, -2, "tokens");
    set_int(L, "len", d->len);
    lua_pushstring(L, ml_qtype_name(d->qtype));
    lua_setfield(L, -2, "type");
    lua_pushstring(L, ml_split_name(split));
    lua_setfield(L, -2, "split");
    const ml_task *t = ((mlL_task_box *)lua_touserdata(L, task_idx))->t;
    lua_createtable(L, 0, ml_task_npos(t) + 1);
    for (int i = 0; i < ml_task_npos(t); i++)
        if (d->pos[i] >= 0) set_int(L, ml_task_pos_name(t, i), d->pos[i]);
    mlL_push_int_array(L, d->all_targets, d->n_all_targets);
    lua_setfield(L, -2, "all_target_items_orig");
    lua_setfield(L, -2, "positions");
    push_stats(L, &d->stats);
    lua_setfield(L, -2, "stats");
    if (d->n_reads > 0) { /* where the answers are read (MQAR: every query) and what they are */
        mlL_push_int_array(L, d->read_pos, d->n_reads);
        lua_setfield(L, -2, "readouts");
        mlL_push_int_array(L, d->read_ans, d->n_reads);
        lua_setfield(L, -2, "answers");
    }
    if (d->n_yield > 0) {
        lua_createtable(L, 0, 2);
        for (int k = 0; k < 2; k++) { /* per position: yield entries at 1 .. n_yield, else none */
            lua_createtable(L, d->len, 0);
            for (int p = 0; p < d->len; p++) {
                lua_pushinteger(L, p >= 1 && p <= d->n_yield ? (k ? d->depth : d->parent_pos)[p - 1] : k - 1);
                lua_rawseti(L, -2, p + 1);
            }
            lua_setfield(L, -2, k ? "depth" : "parent");
        }
        lua_setfield(L, -2, "tree");
    }
    lua_pushvalue(L, task_idx);
    lua_setfield(L, -2, "task");
}

static int l_doc_gc(lua_State *L) {
    ml_doc_free(luaL_checkudata(L, 1, MLL_DOC_MT));
    return 0;
}

ml_doc *mlL_push_scratch_doc(lua_State *L) {
    ml_doc *d = lua_newuserdatauv(L, sizeof(ml_doc), 0);
    ml_doc_init(d);
    luaL_setmetatable(L, MLL_DOC_MT);
    return d;
}

int mlL_push_doc_text(lua_State *L, const ml_task *t, const ml_doc *d) {
    char *s = ml_doc_format(t, d);
    if (!s) return mlL_raise(L);
    lua_pushstring(L, s);
    free(s);
    return 1;
}

/* ------------------------------------------------------------ Lua -> C ---- */

/* The names a document's tables use, looked up without strcmp: a table in the registry from each
 * position name to its slot, all_target_items_orig to NAME_ALL_TARGETS and each document field to
 * NAME_FIELD + its index in doc_keys. A custom document has the first F_PRINTED fields; a printed
 * one may have them all. A task's free position names are looked up by ml_task_pos_index. */
static const char *const doc_keys[] = {"tokens", "targets", "readouts", "answers", "positions", "type",
                                       "len",    "split",   "stats",    "tree",    "task",      NULL};
enum { F_TOKENS, F_TARGETS, F_READOUTS, F_ANSWERS, F_POSITIONS, F_TYPE, F_PRINTED };
enum { NAME_ALL_TARGETS = ML_MAX_POS, NAME_FIELD = ML_MAX_POS + 1 };
static const char codes_key = 0, keys_key = 0; /* the registry keys of that table and of doc_keys as a list */

typedef struct {
    lua_State *L;
    const ml_task *t;
    int codes, keys; /* stack indices of the name codes and of doc_keys */
    int ids;        /* stack index of the definition's name -> id table, or 0 */
    bool printed;   /* a table made by task:sample or dataset:doc: its other fields allowed, its tree read */
    const char *fn; /* NULL: messages bare (the Lua caller says which document); else argument arg of fn */
    int arg;
} doc_reader;

/* Raises msg: bare, or as argument r->arg of r->fn. */
static int doc_error(const doc_reader *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *msg = lua_pushvfstring(r->L, fmt, ap);
    va_end(ap);
    if (r->fn) return mlL_argfail(r->L, r->fn, r->arg, "%s", msg);
    return lua_error(r->L);
}

static void start_reader(doc_reader *r, lua_State *L, const ml_task *t) {
    *r = (doc_reader){.L = L, .t = t};
    lua_rawgetp(L, LUA_REGISTRYINDEX, &codes_key);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &keys_key);
    r->codes = lua_gettop(L) - 1, r->keys = lua_gettop(L);
}

/* Pushes t[doc_keys[field]] for the table t at idx, as lua_getfield would but with the key string
 * at hand (a document is read many times); returns its type. */
static int get_field(const doc_reader *r, int idx, int field) {
    idx = lua_absindex(r->L, idx);
    lua_rawgeti(r->L, r->keys, field + 1);
    return lua_gettable(r->L, idx);
}

/* The code of the name at idx (-1: not a string or not a known name). */
static int name_code(const doc_reader *r, int idx) {
    lua_State *L = r->L;
    if (lua_type(L, idx) != LUA_TSTRING) return -1;
    lua_pushvalue(L, idx);
    int code = lua_rawget(L, r->codes) == LUA_TNUMBER ? (int)lua_tointeger(L, -1) : -1;
    lua_pop(L, 1);
    return code;
}

/* The slot of the position name at idx: a paper name by its code, else one of the task's free names. */
static int pos_slot(const doc_reader *r, int idx) {
    int pi = name_code(r, idx);
    if (pi < 0 && lua_type(r->L, idx) == LUA_TSTRING) pi = ml_task_pos_index(r->t, lua_tostring(r->L, idx));
    return pi;
}

/* A token at the top of the stack: an integer id, or a name of the definition's `ids`. */
static int32_t doc_token(const doc_reader *r, const char *what, lua_Integer i) {
    lua_State *L = r->L;
    int ok;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    if (!ok && lua_type(L, -1) == LUA_TSTRING && r->ids) {
        lua_pushvalue(L, -1);
        v = lua_rawget(L, r->ids) == LUA_TNUMBER ? lua_tointeger(L, -1) : -1;
        lua_pop(L, 1);
        if (v < 0) doc_error(r, "%s[%I] is '%s', a token the vocabulary does not have", what, i, lua_tostring(L, -1));
        ok = 1;
    }
    if (!ok || (lua_type(L, -1) != LUA_TNUMBER && lua_type(L, -1) != LUA_TSTRING))
        doc_error(r, "%s[%I] expected an integer token id%s, got %s", what, i, r->ids ? " or a token name" : "",
                  lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
    return v < INT32_MIN || v > INT32_MAX ? -1 : (int32_t)v;
}

/* An integer position at the top of the stack (what: its name for the message), clamped into
 * int32 (ml_doc_check refuses what lies outside the document). */
static int32_t doc_pos(const doc_reader *r, const char *what, int j) {
    int ok;
    lua_Integer p = lua_tointegerx(r->L, -1, &ok);
    if (!ok) doc_error(r, "%s[%d] expected an integer position, got %s", what, j, luaL_typename(r->L, -1));
    return p < INT32_MIN ? INT32_MIN : p > INT32_MAX ? INT32_MAX : (int32_t)p;
}

/* Pushes the list field of the document at idx; returns its length, -1 when absent (nil pushed). */
static int doc_list(const doc_reader *r, int idx, int field) {
    lua_State *L = r->L;
    const char *key = doc_keys[field];
    if (get_field(r, idx, field) == LUA_TNIL) return -1;
    if (!lua_istable(L, -1)) doc_error(r, "document field '%s' expected a list, got %s", key, luaL_typename(L, -1));
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    if (n > ML_MAX_DOC_LEN) doc_error(r, "document field '%s' has %I entries", key, n);
    return (int)n;
}

/* Raises unless every key of the table at idx names a document field (what: "document field" or
 * "sample_batch's field", for the message). */
static void check_doc_fields(const doc_reader *r, int idx, const char *what) {
    lua_State *L = r->L;
    int last = NAME_FIELD + (r->printed ? (int)(sizeof doc_keys / sizeof *doc_keys) - 2 : F_PRINTED - 1);
    for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
        int code = name_code(r, -2);
        if (code < NAME_FIELD || code > last)
            doc_error(r, "%s '%s' is not one of tokens, targets, readouts, answers, positions, type%s", what,
                      lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : luaL_typename(L, -2),
                      r->printed ? " (or a printed document's len, split, stats, tree, task)" : "");
    }
}

/* The query type named by the value at the top of the stack (what: as for check_doc_fields). */
static ml_qtype doc_qtype(const doc_reader *r, const char *what) {
    int q = ml_qtype_parse(lua_tostring(r->L, -1));
    if (q < 0) doc_error(r, "%s 'type' expected KEY, VALUE, PARENT, CHILD or SIBLING", what);
    return (ml_qtype)q;
}

/* Raises: pn is not one of the task's position names (what: where it was found). */
static void unknown_position(const doc_reader *r, const char *pn, const char *what) {
    const char *names[ML_MAX_POS + 1];
    const char *list = mlL_push_pos_names(r->L, r->t, names);
    doc_error(r, "%s: '%s' is not a position name of task '%s' (%s; did you mean '%s'?)", what, pn,
              ml_task_name(r->t), list, ml_closest(pn, names));
}

/* The len tokens of the list at tok into d->tokens. */
static void read_tokens(const doc_reader *r, int tok, int len, ml_doc *d) {
    /* the common case (integer ids) in one pass that pops once per 32 tokens */
    luaL_checkstack(r->L, 40, "document tokens");
    int top = lua_gettop(r->L);
    for (int i = 0; i < len; i++) {
        int ok = 0;
        lua_Integer v = lua_rawgeti(r->L, tok, i + 1) == LUA_TNUMBER ? lua_tointegerx(r->L, -1, &ok) : 0;
        d->tokens[i] = !ok ? doc_token(r, "tokens", i + 1) : v < INT32_MIN || v > INT32_MAX ? -1 : (int32_t)v;
        if ((i & 31) == 31) lua_settop(r->L, top);
    }
    lua_settop(r->L, top);
}

/* The readouts of d from the lists of targets (nt at tg; positions whose token is predicted from
 * the position before) and of readouts with their answers (nr at rd and an: any position). */
static void read_readouts(const doc_reader *r, int tg, int nt, int rd, int an, int nr, ml_doc *d) {
    for (int j = 0; j < nt; j++) {
        lua_rawgeti(r->L, tg, j + 1);
        int32_t p = doc_pos(r, "targets", j + 1);
        if (!ml_doc_add_target(d, p))
            doc_error(r, "targets[%d] = %d is not a position of the document that can be predicted (1..%d: a "
                      "target is read at the position before it)", j + 1, (int)p, d->len - 1);
        lua_pop(r->L, 1);
    }
    for (int j = 0, k = nt; j < nr; j++, k++) {
        lua_rawgeti(r->L, rd, j + 1);
        d->read_pos[k] = doc_pos(r, "readouts", j + 1);
        lua_rawgeti(r->L, an, j + 1);
        d->read_ans[k] = doc_token(r, "answers", j + 1);
        lua_pop(r->L, 2);
    }
    d->n_reads = nt + nr;
    ml_doc_sort_readouts(d);
}

/* positions.all_target_items_orig (the list at the top of the stack) into d. */
static void read_all_targets(const doc_reader *r, ml_doc *d) {
    if (!lua_istable(r->L, -1)) doc_error(r, "positions.all_target_items_orig expected a list of positions");
    lua_Integer m = (lua_Integer)lua_rawlen(r->L, -1);
    if (m > d->len) doc_error(r, "positions.all_target_items_orig has %I entries, more than the %d tokens", m, d->len);
    for (int j = 0; j < (int)m; j++, lua_pop(r->L, 1)) {
        lua_rawgeti(r->L, -1, j + 1);
        d->all_targets[j] = doc_pos(r, "positions.all_target_items_orig", j + 1);
    }
    d->n_all_targets = (int)m;
}

/* The document's field positions (the table at the top of the stack) into d. */
static void read_positions(const doc_reader *r, ml_doc *d) {
    lua_State *L = r->L;
    if (!lua_istable(L, -1)) doc_error(r, "document field 'positions' expected a table, got %s", luaL_typename(L, -1));
    for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
        const char *pn = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        int pi = pos_slot(r, -2);
        if (pi == NAME_ALL_TARGETS) {
            read_all_targets(r, d);
            continue;
        }
        if (pi < 0 || pi >= ml_task_npos(r->t)) unknown_position(r, pn, "positions");
        int isint = 0;
        if (lua_type(L, -1) == LUA_TNUMBER) lua_tointegerx(L, -1, &isint);
        if (!isint)
            doc_error(r, "positions.%s expected an integer position, got %s", pn,
                      lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
        d->pos[pi] = doc_pos(r, "positions", 0); /* -1: absent, as in batches */
    }
}

/* A printed ATR document's tree (the table at the top of the stack): per position, its parent and
 * depth, read for the yield (positions 1 .. divider - 1). */
static void read_tree(const doc_reader *r, ml_doc *d) {
    lua_State *L = r->L;
    int n = d->pos[ML_POS_DIVIDER] - 1, tree = lua_gettop(L);
    if (ml_task_get_kind(r->t) != ML_TASK_ATR || n < 1 || n >= d->len) return;
    if (!lua_istable(L, tree)) doc_error(r, "document field 'tree' expected a table, got %s", luaL_typename(L, tree));
    static const char *const lists[] = {"tree.parent", "tree.depth"};
    for (int k = 0; k < 2; k++) {
        if (lua_getfield(L, tree, lists[k] + 5) != LUA_TTABLE || (lua_Integer)lua_rawlen(L, -1) <= n)
            doc_error(r, "%s expected a list of at least %d entries (one per position to the divider)", lists[k], n + 1);
        for (int p = 1; p <= n; p++, lua_pop(L, 1)) {
            lua_rawgeti(L, -1, p + 1);
            (k ? d->depth : d->parent_pos)[p - 1] = doc_pos(r, lists[k], p + 1);
        }
        lua_pop(L, 1);
    }
    d->n_yield = d->stats.yield_len = n;
    for (int y = 0; y < n; y++) d->stats.depth = d->depth[y] > d->stats.depth ? d->depth[y] : d->stats.depth;
}

/* Converts the document table at idx into d. Leaves the stack as it found it. */
static void read_doc(const doc_reader *r, int idx, ml_doc *d) {
    lua_State *L = r->L;
    int base = lua_gettop(L);
    if (!lua_istable(L, idx))
        doc_error(r, "expected a document table {tokens=, targets=, positions=}, got %s", luaL_typename(L, idx));
    check_doc_fields(r, idx, "document field");
    int len = doc_list(r, idx, F_TOKENS), tok = lua_gettop(L);
    if (len < 1) doc_error(r, "document field 'tokens' expected a non-empty list of tokens");
    int nt = doc_list(r, idx, F_TARGETS), tg = lua_gettop(L);
    int nr = doc_list(r, idx, F_READOUTS), rd = lua_gettop(L);
    int na = doc_list(r, idx, F_ANSWERS), an = lua_gettop(L);
    if (nr != na)
        doc_error(r, "document fields 'readouts' and 'answers' expected lists of the same length, got %d and %d",
                  nr < 0 ? 0 : nr, na < 0 ? 0 : na);
    nt = nt < 0 ? 0 : nt, nr = nr < 0 ? 0 : nr;
    if (ml_doc_reserve(d, len > nt + nr ? len : nt + nr) != ML_OK) mlL_raise(L);
    ml_doc_start(d, len);
    read_tokens(r, tok, len, d);
    read_readouts(r, tg, nt, rd, an, nr, d);
    lua_settop(L, base);
    if (get_field(r, idx, F_POSITIONS) != LUA_TNIL) read_positions(r, d);
    lua_settop(L, base);
    if (get_field(r, idx, F_TYPE) != LUA_TNIL) d->qtype = doc_qtype(r, "document field");
    lua_settop(L, base);
    if (r->printed && lua_getfield(L, idx, "tree") != LUA_TNIL) read_tree(r, d);
    lua_settop(L, base);
}

/* show(task at task_idx, document table at doc_idx): the document read as printed, checked by
 * ml_doc_check, formatted. Errors are argument doc_arg's of fn. */
static int show(lua_State *L, int task_idx, int doc_idx, const char *fn, int doc_arg) {
    const ml_task *t = ((mlL_task_box *)lua_touserdata(L, task_idx))->t;
    doc_reader r;
    start_reader(&r, L, t);
    r.printed = true, r.fn = fn, r.arg = doc_arg;
    ml_doc *d = mlL_push_scratch_doc(L); /* the buffers are freed by the collector even when reading raises */
    read_doc(&r, doc_idx, d);
    if (ml_doc_check(t, d, ML_DOC_PRINTED) != ML_OK) doc_error(&r, "%s", ml_last_error());
    return mlL_push_doc_text(L, t, d);
}

int mlL_task_show(lua_State *L) {
    mlL_checktask(L, 1, "task:show");
    if (!lua_istable(L, 2)) return mlL_argerror(L, "task:show", 2, "a document table");
    return show(L, 1, 2, "task:show", 2);
}

/* mech.task.show(doc): the document knows its task. */
int mlL_doc_show(lua_State *L) {
    const char *fn = "mech.task.show";
    if (!lua_istable(L, 1)) return mlL_argerror(L, fn, 1, "a document table");
    lua_settop(L, 1);
    lua_getfield(L, 1, "task");
    if (!luaL_testudata(L, 2, MLL_TASK_MT) || !((mlL_task_box *)lua_touserdata(L, 2))->t)
        return mlL_argfail(L, fn, 1, "a document with a 'task' field expected, got its 'task' %s",
                                luaL_typename(L, 2));
    return show(L, 2, 1, fn, 1);
}

/* appended = C.append(ds, doc, [scratch]): false when the task's holdout puts doc in the other split;
 * raises (without a function name: the caller says which document) when doc is malformed. */
int mlL_doc_append(lua_State *L) {
    ml_dataset *ds = mlL_checkdataset(L, 1, "task:dataset");
    ml_doc *d = luaL_testudata(L, 3, MLL_DOC_MT); /* reused: no allocation per document */
    lua_settop(L, 3);
    if (!d) d = mlL_push_scratch_doc(L);
    doc_reader r;
    start_reader(&r, L, ml_dataset_task(ds));
    if (lua_getiuservalue(L, 1, 1) == LUA_TTABLE && lua_getfield(L, -1, "ids") == LUA_TTABLE) r.ids = lua_gettop(L);
    read_doc(&r, 2, d);
    bool rejected;
    if (ml_dataset_append(ds, d, &rejected) != ML_OK) return doc_error(&r, "%s", ml_last_error());
    lua_pushboolean(L, !rejected);
    return 1;
}

/* ---- the batched form: sample_batch(gen, split, n) returns n documents as int32 tensors ---- */

static int32_t clamp32(lua_Integer x) { return x < INT32_MIN ? INT32_MIN : x > INT32_MAX ? INT32_MAX : (int32_t)x; }

/* Reads the value at the top of the stack (field `what` of the batch) into c: an int32 tensor
 * with n rows (ndim 2: (n, cols); ndim 1: (n)), or what all rows share — a list of integers
 * (ndim 2) or an integer (ndim 1). A list is copied into a userdata left on the stack. */
static void batch_column(const doc_reader *r, const char *what, int ndim, int64_t n, ml_doc_cols *c) {
    lua_State *L = r->L;
    int top = lua_gettop(L);
    ml_tensor *t = mlL_testtensor(L, top);
    if (t && t->dtype == ML_I32 && t->ndim == ndim && t->shape[0] == n) {
        c->p = ml_i32(t), c->s0 = t->stride[0];
        c->s1 = ndim == 2 ? t->stride[1] : 0, c->cols = ndim == 2 ? t->shape[1] : 1;
        return;
    }
    if (!t && ndim == 1 && lua_isinteger(L, top)) {
        c->one = clamp32(lua_tointeger(L, top));
        c->p = &c->one, c->s0 = 0, c->s1 = 0, c->cols = 1;
        return;
    }
    if (!t && ndim == 2 && lua_istable(L, top)) {
        lua_Integer m = (lua_Integer)lua_rawlen(L, top);
        if (m > ML_MAX_DOC_LEN) doc_error(r, "sample_batch's field '%s' has %I entries", what, m);
        int32_t *v = lua_newuserdatauv(L, sizeof(int32_t) * (size_t)(m ? m : 1), 0);
        for (lua_Integer j = 1; j <= m; j++) {
            int ok;
            lua_rawgeti(L, top, j);
            lua_Integer x = lua_tointegerx(L, -1, &ok);
            if (!ok || lua_type(L, -1) != LUA_TNUMBER)
                doc_error(r, "sample_batch's field '%s' entry %I expected an integer, got %s", what, j,
                          lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
            v[j - 1] = clamp32(x);
            lua_pop(L, 1);
        }
        c->p = v, c->s0 = 0, c->s1 = 1, c->cols = (int64_t)m;
        return;
    }
    char got[160];
    doc_error(r, "sample_batch's field '%s' expected %s, got %s", what,
              ndim == 2 ? "an int32 tensor (n, k) or a list of integers that every document shares"
                        : "an int32 tensor (n) or an integer that every document shares",
              mlL_describe(L, top, got, sizeof got));
}

/* The batch's field tokens: an int32 tensor (n, L) with 1 <= n <= max. Returns n. */
static lua_Integer batch_tokens(const doc_reader *r, lua_Integer max, ml_doc_cols *tok) {
    lua_getfield(r->L, 2, "tokens");
    ml_tensor *tt = mlL_testtensor(r->L, -1);
    char got[160];
    if (!tt || tt->dtype != ML_I32 || tt->ndim != 2 || tt->shape[0] < 1 || tt->shape[0] > max || tt->shape[1] < 1 ||
        tt->shape[1] > ML_MAX_DOC_LEN)
        doc_error(r, "sample_batch's field 'tokens' expected an int32 tensor (n, L) with 1 <= n <= %I (the "
                  "documents asked for) and 1 <= L <= 2^24, got %s", max, mlL_describe(r->L, -1, got, sizeof got));
    lua_Integer n = (lua_Integer)tt->shape[0];
    batch_column(r, "tokens", 2, n, tok);
    return n;
}

/* The batch's fields targets, readouts and answers (each optional; readouts with answers). */
static void batch_readouts(const doc_reader *r, lua_Integer n, ml_doc_batch *v) {
    if (lua_getfield(r->L, 2, "targets") != LUA_TNIL) batch_column(r, "targets", 2, n, &v->tg);
    bool has_rd = lua_getfield(r->L, 2, "readouts") != LUA_TNIL;
    if (has_rd) batch_column(r, "readouts", 2, n, &v->rd);
    bool has_an = lua_getfield(r->L, 2, "answers") != LUA_TNIL;
    if (has_an) batch_column(r, "answers", 2, n, &v->an);
    if (has_rd != has_an || v->rd.cols != v->an.cols)
        doc_error(r, "sample_batch's fields 'readouts' and 'answers' expected the same number of columns, got %I and %I",
                  (lua_Integer)v->rd.cols, (lua_Integer)v->an.cols);
}

/* The batch's field positions (optional): one entry per document for each named position. */
static void batch_positions(const doc_reader *r, lua_Integer n, ml_doc_batch *v) {
    lua_State *L = r->L;
    if (lua_getfield(L, 2, "positions") == LUA_TNIL) return;
    int pt = lua_gettop(L);
    if (!lua_istable(L, pt)) doc_error(r, "sample_batch's field 'positions' expected a table, got %s", luaL_typename(L, pt));
    for (lua_pushnil(L); lua_next(L, pt); lua_pop(L, 1)) {
        const char *pn = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        int pi = pos_slot(r, -2);
        if (pi == NAME_ALL_TARGETS)
            doc_error(r, "sample_batch's positions: all_target_items_orig is a list per document (it needs sample)");
        if (pi < 0 || pi >= ml_task_npos(r->t)) unknown_position(r, pn, "sample_batch's positions");
        if (v->npos == ML_MAX_POS) doc_error(r, "sample_batch's positions: more than %d names", ML_MAX_POS);
        char what[64];
        snprintf(what, sizeof what, "positions.%s", pn);
        batch_column(r, what, 1, n, &v->pos[v->npos]); /* pushes nothing for ndim 1 */
        v->pos_index[v->npos++] = pi;
    }
}

/* kept, rows = C.append_batch(ds, batch, scratch, max): appends the documents of batch (the table
 * sample_batch returned: 1 .. max of them) until max are kept (a holdout may reject some), checking
 * each as C.append does; nil, row, message for the first faulty document (row: 0-based in the
 * batch). A malformed batch raises. */
int mlL_doc_append_batch(lua_State *L) {
    ml_dataset *ds = mlL_checkdataset(L, 1, "task:dataset");
    ml_doc *d = luaL_checkudata(L, 3, MLL_DOC_MT);
    lua_Integer max = luaL_checkinteger(L, 4);
    lua_settop(L, 4);
    luaL_checkstack(L, 32, "sample_batch's fields");
    doc_reader r;
    start_reader(&r, L, ml_dataset_task(ds));
    if (!lua_istable(L, 2))
        return doc_error(&r, "sample_batch expected to return a table {tokens=, targets=, positions=}, got %s",
                         luaL_typename(L, 2));
    check_doc_fields(&r, 2, "sample_batch's field");
    ml_doc_batch v = {0};
    lua_Integer n = batch_tokens(&r, max, &v.tok);
    batch_readouts(&r, n, &v);
    batch_positions(&r, n, &v);
    v.qtype = ML_QT_KEY;
    if (lua_getfield(L, 2, "type") != LUA_TNIL) v.qtype = doc_qtype(&r, "sample_batch's field");
    int64_t kept, rows;
    v.n = n;
    if (ml_dataset_append_batch(ds, &v, max, d, &kept, &rows) == ML_OK) {
        lua_pushinteger(L, (lua_Integer)kept);
        lua_pushinteger(L, (lua_Integer)rows);
        return 2;
    }
    if (rows < 0) return mlL_raise(L);
    lua_pushnil(L);
    lua_pushinteger(L, (lua_Integer)rows);
    lua_pushstring(L, ml_last_error());
    return 3;
}

void mlL_open_doc(lua_State *L) {
    luaL_newmetatable(L, MLL_DOC_MT);
    lua_pushcfunction(L, l_doc_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
    lua_createtable(L, 0, ML_NPOS + 12);
    for (int i = 0; i < ML_NPOS; i++) {
        lua_pushinteger(L, i);
        lua_setfield(L, -2, ml_pos_names[i]);
    }
    lua_pushinteger(L, NAME_ALL_TARGETS);
    lua_setfield(L, -2, "all_target_items_orig");
    for (int i = 0; doc_keys[i]; i++) {
        lua_pushinteger(L, NAME_FIELD + i);
        lua_setfield(L, -2, doc_keys[i]);
    }
    lua_rawsetp(L, LUA_REGISTRYINDEX, &codes_key);
    mlL_push_names(L, doc_keys, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &keys_key);
}
