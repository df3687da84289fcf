/* mech.task: the AR and ATR tasks, their documents and datasets (core: src/tasks/task.h).
 *
 * Documents are Lua tables; every position in them is a 0-based document position, and
 * tokens[p + 1] is the token at position p:
 *   { tokens = {...}, len = L, type = "PARENT", split = "train",
 *     positions = { bos = 0, query_item = ..., ..., all_target_items_orig = {...} },
 *     stats = { yield_len = ..., depth = ..., ... },
 *     tree = { parent = {...}, depth = {...} },  -- ATR: per position, parent position (-1: none)
 *     task = <the task> }
 *
 * The options of the built-in kinds come from one table (src/tasks/options.c). Tasks made outside C
 * (a Lua task, a file) and the reading of task records (from_spec, from_checkpoint) live in
 * lua/mech/task_custom.lua; this file gives it its primitives (require "mech.task_c"). */
#define _DEFAULT_SOURCE /* realpath */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "lua/binding.h"
#include "tasks/task.h"

#define TASK_MT "mech.Task"
#define DATASET_MT "mech.Dataset"

typedef struct {
    ml_task *t;
    ml_rng rng; /* task:sample() without a seed draws from here, so calls differ */
} task_box;

typedef struct {
    ml_dataset *ds;
} dataset_box;

static task_box *check_task(lua_State *L, int idx, const char *fn) {
    task_box *b = luaL_testudata(L, idx, TASK_MT);
    if (!b || !b->t) mlL_argerror(L, fn, idx, "a mech.Task");
    return b;
}

ml_dataset *mlL_checkdataset(lua_State *L, int idx, const char *fn) {
    dataset_box *b = luaL_testudata(L, idx, DATASET_MT);
    if (!b || !b->ds) mlL_argerror(L, fn, idx, "a mech.Dataset");
    return b->ds;
}

/* A task or dataset userdata has one user value: for a task made outside C (a Lua task, a file),
 * its Lua definition (lua/mech/task_custom.lua), else nil. */
static void push_task(lua_State *L, ml_task *t) {
    if (!t) mlL_raise(L);
    task_box *b = lua_newuserdatauv(L, sizeof *b, 1);
    b->t = t;
    ml_rng_init(&b->rng, ml_task_seed(t), ML_STREAM_USER - 1); /* a stream no dataset uses */
    luaL_setmetatable(L, TASK_MT);
}

/* The task of the dataset at ds_idx, with the dataset's definition. */
static void push_ds_task(lua_State *L, int ds_idx, ml_dataset *ds) {
    push_task(L, ml_task_retain(ml_dataset_task(ds)));
    lua_getiuservalue(L, ds_idx, 1);
    lua_setiuservalue(L, -2, 1);
}

/* Pushes "a, b, c" (task t's position names) and returns it; names (ML_MAX_POS + 1 entries) gets
 * them NULL-terminated, for mlL_closest. */
static const char *push_pos_names(lua_State *L, const ml_task *t, const char **names) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    int n = ml_task_npos(t);
    for (int i = 0; i < n; i++) {
        names[i] = ml_task_pos_name(t, i);
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, names[i]);
    }
    names[n] = NULL;
    luaL_pushresult(&b);
    return lua_tostring(L, -1);
}

int mlL_task_pos(lua_State *L, const ml_task *t, int idx, const char *fn, const char *what) {
    const char *s = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : NULL;
    int p = ml_task_pos_index(t, s);
    if (p >= 0) return p;
    const char *names[ML_MAX_POS + 1];
    const char *list = push_pos_names(L, t, names);
    char q[96];
    if (!s)
        return luaL_error(L, "%s: %s expected a position name of task '%s' (%s), got %s", fn, what, ml_task_name(t),
                          list, luaL_typename(L, idx));
    return luaL_error(L, "%s: %s expected a position name of task '%s' (%s), got %s (did you mean '%s'?)", fn, what,
                      ml_task_name(t), list, mlL_quote(s, q, sizeof q), mlL_closest(s, names));
}

/* Pushes an empty document buffer that the collector frees (scratch space for one call, or reused). */
static ml_doc *push_scratch_doc(lua_State *L) {
    ml_doc *d = lua_newuserdatauv(L, sizeof(ml_doc), 0);
    ml_doc_init(d);
    luaL_setmetatable(L, "mech.TaskDoc");
    return d;
}

/* Returns 1 with ml_doc_format's text of d, a document of task t, pushed (task:show, ds:show). */
static int push_doc_text(lua_State *L, const ml_task *t, const ml_doc *d) {
    char *s = ml_doc_format(t, d);
    if (!s) return mlL_raise(L);
    lua_pushstring(L, s);
    free(s);
    return 1;
}

/* Calls lua/mech/task_custom.lua's function `name` with this call's arguments; returns its results.
 * The Lua side of tasks made outside C lives there. */
static int call_lib(lua_State *L, const char *name) {
    int n = lua_gettop(L);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "mech.task_custom");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, name);
    lua_remove(L, -2);
    lua_insert(L, 1);
    lua_call(L, n, LUA_MULTRET);
    return lua_gettop(L);
}

static int l_lib_entry(lua_State *L) { return call_lib(L, lua_tostring(L, lua_upvalueindex(1))); }

/* ------------------------------------------------------------------- constructors ---- */

static const char *const rng_names[] = {"philox", "numpy", NULL}; /* ml_task_rng order */

/* Option o (an ENUM) of the table at idx: a name of o->names (its index), a boolean where o says
 * what one means, else def when absent. */
static int opt_enum(lua_State *L, int idx, const ml_task_option *o, int def, const char *fn) {
    lua_getfield(L, idx, o->name);
    int is_bool = lua_isboolean(L, -1), bval = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (is_bool && (o->if_true || o->if_false)) return bval ? o->if_true : o->if_false;
    const char *s = mlL_optstr(L, idx, o->name, NULL, fn);
    int i = s ? ml_task_option_enum(o, s) : def;
    if (i >= 0) return i;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int k = 0; o->names[k]; k++) {
        luaL_addstring(&b, k ? (o->names[k + 1] ? ", \"" : " or \"") : "\"");
        luaL_addstring(&b, o->names[k]);
        luaL_addstring(&b, "\"");
    }
    luaL_pushresult(&b);
    return luaL_error(L, "%s: option '%s' expected %s, got '%s'", fn, o->name, lua_tostring(L, -1), s);
}

/* Checks the options table (argument 1; nil: none) of a task of kind k: its keys are those of
 * src/tasks/options.c. */
static void check_task_options(lua_State *L, ml_task_kind k, const char *fn) {
    lua_settop(L, 1); /* with no argument at all, the table must still land at 1 */
    if (lua_isnil(L, 1)) lua_newtable(L), lua_replace(L, 1);
    mlL_checktable(L, 1, fn, 1);
    const char *keys[32];
    int n = 0;
    for (const ml_task_option *o = ml_task_options(k); o->name; o++) keys[n++] = o->name;
    keys[n] = NULL;
    mlL_checkkeys(L, 1, fn, keys);
}

/* Reads the checked options table into cfg, whose fields hold the defaults; returns the seed. */
static uint64_t read_task_options(lua_State *L, ml_task_kind k, void *cfg, const char *fn) {
    for (const ml_task_option *o = ml_task_options(k); o->name; o++) {
        if (o->offset == ML_TOPT_NO_FIELD) continue;
        char *p = (char *)cfg + o->offset;
        if (o->type == ML_TOPT_INT) *(int *)p = mlL_optint32(L, 1, o->name, *(int *)p, fn);
        else if (o->type == ML_TOPT_NUM) *(double *)p = mlL_optnum(L, 1, o->name, *(double *)p, fn);
        else if (o->type == ML_TOPT_BOOL) *(bool *)p = mlL_optbool(L, 1, o->name, *(bool *)p, fn);
        else *(int *)p = opt_enum(L, 1, o, *(int *)p, fn);
    }
    return (uint64_t)mlL_optint(L, 1, "seed", 42, fn);
}

/* Sets the options of task t (of kind AR, ATR or MQAR) in the table on top, as its constructor
 * takes them. */
static void set_task_options(lua_State *L, const ml_task *t) {
    const char *cfg = ml_task_config(t);
    for (const ml_task_option *o = ml_task_options(ml_task_get_kind(t)); o->name; o++) {
        if (o->offset == ML_TOPT_NO_FIELD) continue;
        const char *p = cfg + o->offset;
        if (o->type == ML_TOPT_INT) lua_pushinteger(L, *(const int *)p);
        else if (o->type == ML_TOPT_NUM) lua_pushnumber(L, *(const double *)p);
        else if (o->type == ML_TOPT_BOOL) lua_pushboolean(L, *(const bool *)p);
        else lua_pushstring(L, o->names[*(const int *)p]);
        lua_setfield(L, -2, o->name);
    }
}

/* mech.task.ar / atr / mqar{...}: the options table read into the kind's defaults cfg (AR's
 * option length sets min_length = max_length first, so that either may still override it). */
static int new_task(lua_State *L, ml_task_kind k, void *cfg, const char *fn) {
    check_task_options(L, k, fn);
    if (k == ML_TASK_AR) {
        ml_ar_config *c = cfg;
        c->min_length = c->max_length = mlL_optint32(L, 1, "length", c->max_length, fn);
    }
    uint64_t seed = read_task_options(L, k, cfg, fn);
    push_task(L, k == ML_TASK_AR    ? ml_task_ar(cfg, seed)
                 : k == ML_TASK_ATR ? ml_task_atr(cfg, seed)
                                    : ml_task_mqar(cfg, seed));
    return 1;
}

static int l_ar(lua_State *L) {
    ml_ar_config c = ml_ar_config_default();
    return new_task(L, ML_TASK_AR, &c, "mech.task.ar");
}
static int l_atr(lua_State *L) {
    ml_atr_config c = ml_atr_config_default();
    return new_task(L, ML_TASK_ATR, &c, "mech.task.atr");
}
static int l_mqar(lua_State *L) {
    ml_mqar_config c = ml_mqar_config_default();
    return new_task(L, ML_TASK_MQAR, &c, "mech.task.mqar");
}

static const char *const preset_keys[] = {"rng", NULL};

/* mech.task.preset(name, [seed = 42], [{rng = "philox" | "numpy"}]) */
static int l_preset(lua_State *L) {
    const char *fn = "mech.task.preset";
    if (lua_type(L, 1) != LUA_TSTRING) return mlL_argerror(L, fn, 1, "a preset name");
    lua_Integer seed = 42;
    if (!lua_isnoneornil(L, 2)) {
        int ok;
        seed = lua_tointegerx(L, 2, &ok);
        if (!ok) return mlL_argerror(L, fn, 2, "an integer seed");
    }
    ml_task_rng rng = ML_RNG_PHILOX;
    if (!lua_isnoneornil(L, 3)) {
        mlL_checktable(L, 3, fn, 3);
        mlL_checkkeys(L, 3, fn, preset_keys);
        static const ml_task_option rng_option = {"rng", ML_TOPT_ENUM, 0, .names = rng_names};
        rng = (ml_task_rng)opt_enum(L, 3, &rng_option, rng, fn);
    }
    const char *name = lua_tostring(L, 1);
    ml_task *t = ml_task_preset_rng(name, (uint64_t)seed, rng);
    bool known = false;
    for (int i = 0; ml_task_preset_names[i]; i++) known = known || strcmp(name, ml_task_preset_names[i]) == 0;
    if (!t && known) return mlL_raise(L); /* e.g. rng = "numpy" with an AR preset or a seed >= 2^32 */
    if (!t) {
        const char *near = mlL_closest(name, ml_task_preset_names);
        return luaL_error(L, "%s: unknown preset '%s' (did you mean '%s'?)", fn, name, near ? near : "?");
    }
    push_task(L, t);
    return 1;
}

/* Pushes the list of the first n names (n < 0: up to a NULL). */
static void push_names(lua_State *L, const char *const *names, int n) {
    lua_newtable(L);
    for (int i = 0; n < 0 ? names[i] != NULL : i < n; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

static int l_presets(lua_State *L) {
    push_names(L, ml_task_preset_names, -1);
    return 1;
}

/* ------------------------------------------------------------------ documents ---- */

static void set_int(lua_State *L, const char *k, lua_Integer v) {
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}

static void set_num(lua_State *L, const char *k, lua_Number v) {
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
}

static void push_int_array(lua_State *L, const int32_t *a, int n) {
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

/* Pushes the document table; task_idx is the stack index of the task userdata. */
static void push_doc(lua_State *L, int task_idx, const ml_doc *d, ml_split split) {
    lua_createtable(L, 0, 8);
    push_int_array(L, d->tokens, d->len);
    lua_setfield(L, -2, "tokens");
    set_int(L, "len", d->len);
    lua_pushstring(L, ml_qtype_name(d->qtype));
    lua_setfield(L, -2, "type");
    lua_pushstring(L, ml_split_name(split));
    lua_setfield(L, -2, "split");
    const ml_task *t = ((task_box *)lua_touserdata(L, task_idx))->t;
    lua_createtable(L, 0, ml_task_npos(t) + 1);
    for (int i = 0; i < ml_task_npos(t); i++)
        if (d->pos[i] >= 0) set_int(L, ml_task_pos_name(t, i), d->pos[i]);
    push_int_array(L, d->all_targets, d->n_all_targets);
    lua_setfield(L, -2, "all_target_items_orig");
    lua_setfield(L, -2, "positions");
    push_stats(L, &d->stats);
    lua_setfield(L, -2, "stats");
    if (d->n_reads > 0) { /* where the answers are read (MQAR: every query) and what they are */
        push_int_array(L, d->read_pos, d->n_reads);
        lua_setfield(L, -2, "readouts");
        push_int_array(L, d->read_ans, d->n_reads);
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

/* Reads an integer array field of the table at idx into a (n entries); false if absent. */
static bool read_int_array(lua_State *L, int idx, const char *key, int32_t *a, int n, const char *fn) {
    lua_getfield(L, idx, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return false;
    }
    if (!lua_istable(L, -1)) luaL_error(L, "%s: doc.%s expected a table, got %s", fn, key, luaL_typename(L, -1));
    for (int i = 0; i < n; i++) {
        lua_geti(L, -1, i + 1);
        int ok;
        lua_Integer v = lua_tointegerx(L, -1, &ok);
        if (!ok || v < INT32_MIN || v > INT32_MAX)
            luaL_error(L, "%s: doc.%s[%d] expected an integer, got %s", fn, key, i + 1, luaL_typename(L, -1));
        a[i] = (int32_t)v;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return true;
}

/* Rebuilds a C document from a document table (for printing). */
static void read_doc(lua_State *L, int idx, const ml_task *t, ml_doc *d, const char *fn) {
    idx = lua_absindex(L, idx);
    lua_getfield(L, idx, "tokens");
    if (!lua_istable(L, -1)) luaL_error(L, "%s: doc.tokens expected a table, got %s", fn, luaL_typename(L, -1));
    lua_Integer len = luaL_len(L, -1);
    lua_pop(L, 1);
    if (len < 1 || len > (1 << 24)) luaL_error(L, "%s: doc.tokens has %I entries", fn, len);
    if (ml_doc_reserve(d, (int)len) != ML_OK) mlL_raise(L);
    read_int_array(L, idx, "tokens", d->tokens, (int)len, fn);
    d->len = (int)len;
    lua_getfield(L, idx, "positions");
    if (!lua_istable(L, -1)) luaL_error(L, "%s: doc.positions expected a table, got %s", fn, luaL_typename(L, -1));
    for (int i = 0; i < ML_MAX_POS; i++) {
        d->pos[i] = -1;
        if (i >= ml_task_npos(t)) continue;
        lua_getfield(L, -1, ml_task_pos_name(t, i));
        int ok;
        lua_Integer v = lua_tointegerx(L, -1, &ok);
        d->pos[i] = ok && v >= 0 && v < len ? (int32_t)v : -1;
        lua_pop(L, 1);
    }
    lua_getfield(L, -1, "all_target_items_orig");
    int na = lua_istable(L, -1) ? (int)luaL_len(L, -1) : 0;
    lua_pop(L, 1);
    if (na < 0 || na > len) na = 0;
    d->n_all_targets = na && read_int_array(L, lua_gettop(L), "all_target_items_orig", d->all_targets, na, fn) ? na : 0;
    lua_pop(L, 1);
    lua_getfield(L, idx, "type");
    int q = ml_qtype_parse(lua_tostring(L, -1));
    d->qtype = q < 0 ? ML_QT_KEY : (ml_qtype)q;
    lua_pop(L, 1);
    /* readouts and their answers (MQAR's queries), when the table has both, equally long */
    d->n_reads = 0;
    lua_getfield(L, idx, "readouts");
    lua_getfield(L, idx, "answers");
    int nr = lua_istable(L, -2) && lua_istable(L, -1) ? (int)luaL_len(L, -2) : 0;
    if (nr > 0 && nr <= len && luaL_len(L, -1) == nr) {
        read_int_array(L, idx, "readouts", d->read_pos, nr, fn);
        read_int_array(L, idx, "answers", d->read_ans, nr, fn);
        bool ok = true;
        for (int j = 0; j < nr; j++) ok = ok && d->read_pos[j] >= 0 && d->read_pos[j] < len;
        d->n_reads = ok ? nr : 0;
    }
    lua_pop(L, 2);
    memset(&d->stats, 0, sizeof d->stats);
    d->n_yield = 0;
    lua_getfield(L, idx, "tree");
    bool tree = lua_istable(L, -1) && ml_task_get_kind(t) == ML_TASK_ATR && d->pos[ML_POS_DIVIDER] > 1;
    if (tree) {
        /* Entries that are out of range or not numbers print as roots: never trusted. */
        int n = d->pos[ML_POS_DIVIDER] - 1, tr = lua_gettop(L), depth = 0;
        bool okp = lua_getfield(L, tr, "parent") == LUA_TTABLE && luaL_len(L, -1) > n;
        bool okd = lua_getfield(L, tr, "depth") == LUA_TTABLE && luaL_len(L, -1) > n;
        if (okp && okd) {
            for (int p = 1; p <= n; p++) {
                lua_geti(L, -2, p + 1);
                lua_Integer v = lua_tointeger(L, -1);
                d->parent_pos[p - 1] = v >= 1 && v <= n ? (int32_t)v : -1;
                lua_geti(L, -2, p + 1);
                v = lua_tointeger(L, -1);
                d->depth[p - 1] = v >= 0 && v <= INT32_MAX ? (int32_t)v : 0;
                depth = d->depth[p - 1] > depth ? d->depth[p - 1] : depth;
                lua_pop(L, 2);
            }
            d->n_yield = n;
            d->stats.yield_len = n;
            d->stats.depth = depth;
        }
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
}

static int l_task_show(lua_State *L) {
    const char *fn = "task:show";
    task_box *b = check_task(L, 1, fn);
    mlL_checktable(L, 2, fn, 2);
    /* the buffers would leak if read_doc raised: keep them in a userdata whose __gc frees */
    ml_doc *box = push_scratch_doc(L);
    read_doc(L, 2, b->t, box, fn);
    return push_doc_text(L, b->t, box);
}

static int l_doc_gc(lua_State *L) {
    ml_doc *d = luaL_checkudata(L, 1, "mech.TaskDoc");
    ml_doc_free(d);
    return 0;
}

/* mech.task.show(doc): the document knows its task. */
static int l_show(lua_State *L) {
    mlL_checktable(L, 1, "mech.task.show", 1);
    lua_settop(L, 1);
    lua_getfield(L, 1, "task");
    if (!luaL_testudata(L, 2, TASK_MT))
        return luaL_error(L, "mech.task.show: argument 1 expected a document with a 'task' field, got %s",
                          luaL_typename(L, 2));
    lua_insert(L, 1); /* (task, doc) */
    return l_task_show(L);
}

/* ------------------------------------------------------------------ task methods ---- */

static ml_split opt_split(lua_State *L, int idx, const char *fn, int arg) {
    if (lua_isnoneornil(L, idx)) return ML_SPLIT_TRAIN;
    const char *s = lua_tostring(L, idx);
    ml_split sp;
    if (lua_type(L, idx) != LUA_TSTRING || !ml_split_parse(s, &sp))
        mlL_argerror(L, fn, arg, "\"train\", \"dev\" or \"test\"");
    return sp;
}

/* task:sample([seed | generator], [split]) */
static int l_sample(lua_State *L) {
    const char *fn = "task:sample";
    task_box *b = check_task(L, 1, fn);
    ml_split split = opt_split(L, 3, fn, 3);
    if (ml_task_get_kind(b->t) == ML_TASK_CUSTOM) {
        if (!lua_isnoneornil(L, 2) && !lua_isinteger(L, 2) && !luaL_testudata(L, 2, MLL_RNG_MT))
            return mlL_argerror(L, fn, 2, "an integer seed, a mech.Generator or nil");
        lua_settop(L, 2);
        lua_pushstring(L, ml_split_name(split));
        return call_lib(L, "sample");
    }
    ml_rng local, *rng = &b->rng;
    if (lua_type(L, 2) == LUA_TNUMBER) {
        int ok;
        lua_Integer seed = lua_tointegerx(L, 2, &ok);
        if (!ok) return mlL_argerror(L, fn, 2, "an integer seed, a mech.Generator or nil");
        /* the first document of task:dataset(n, {seed = seed, split = split}) */
        ml_rng_init(&local, (uint64_t)seed, ml_split_stream(split));
        rng = &local;
    } else if (!lua_isnoneornil(L, 2)) {
        rng = luaL_testudata(L, 2, MLL_RNG_MT);
        if (!rng) return mlL_argerror(L, fn, 2, "an integer seed, a mech.Generator or nil");
    }
    ml_doc *d = push_scratch_doc(L);
    if (ml_task_sample(b->t, rng, split, d) != ML_OK) return mlL_raise(L);
    push_doc(L, 1, d, split);
    return 1;
}

static const char *const dataset_keys[] = {"seed", "split", NULL};

/* task:dataset([n], [{seed = task seed, split = "train"}]); n defaults to the paper's sizes:
 * 100,032 training documents, 320 for an eval split (docs/tasks.md, "Datasets and batches"). */
static int l_dataset(lua_State *L) {
    const char *fn = "task:dataset";
    task_box *b = check_task(L, 1, fn);
    if (lua_istable(L, 2)) lua_settop(L, 2), lua_pushnil(L), lua_insert(L, 2); /* (task, nil, opts) */
    lua_Integer n = -1;
    if (!lua_isnoneornil(L, 2)) {
        int ok;
        n = lua_tointegerx(L, 2, &ok);
        if (!ok || n < 0) return mlL_argerror(L, fn, 2, "a number of documents >= 0");
    }
    uint64_t seed = ml_task_seed(b->t);
    ml_split split = ML_SPLIT_TRAIN;
    if (!lua_isnoneornil(L, 3)) {
        mlL_checktable(L, 3, fn, 3);
        mlL_checkkeys(L, 3, fn, dataset_keys);
        seed = (uint64_t)mlL_optint(L, 3, "seed", (lua_Integer)seed, fn);
        const char *s = mlL_optstr(L, 3, "split", "train", fn);
        if (!ml_split_parse(s, &split))
            return luaL_error(L, "%s: option 'split' expected \"train\", \"dev\" or \"test\", got '%s'", fn, s);
    }
    if (ml_task_get_kind(b->t) == ML_TASK_CUSTOM) { /* its documents come from Lua (n nil: its default) */
        lua_settop(L, 1);
        if (n < 0) lua_pushnil(L);
        else lua_pushinteger(L, n);
        lua_pushinteger(L, (lua_Integer)seed), lua_pushstring(L, ml_split_name(split));
        return call_lib(L, "dataset");
    }
    if (n < 0) n = split == ML_SPLIT_TRAIN ? ML_TRAIN_DOCS : ML_EVAL_DOCS;
    dataset_box *db = lua_newuserdatauv(L, sizeof *db, 1);
    db->ds = NULL;
    luaL_setmetatable(L, DATASET_MT);
    db->ds = ml_dataset_new(b->t, n, seed, split);
    if (!db->ds) return mlL_raise(L);
    mlL_account(L, ml_dataset_bytes(db->ds)); /* memory the collector cannot see */
    return 1;
}

static int l_vocab_size(lua_State *L) {
    lua_pushinteger(L, ml_task_vocab_size(check_task(L, 1, "task:vocab_size")->t));
    return 1;
}

static int l_token_name(lua_State *L) {
    task_box *b = check_task(L, 1, "task:token_name");
    int ok;
    lua_Integer id = lua_tointegerx(L, 2, &ok);
    if (!ok) return mlL_argerror(L, "task:token_name", 2, "an integer token id");
    char buf[32];
    lua_pushstring(L, ml_task_token_name(b->t, id < INT_MIN || id > INT_MAX ? -1 : (int)id, buf));
    return 1;
}

/* Pushes the name of token id (an integer) or raises naming the function. */
static void push_token_name(lua_State *L, task_box *b, lua_Integer id, const char *fn) {
    int v = ml_task_vocab_size(b->t);
    if (id < 0 || id >= v) luaL_error(L, "%s: token id %I out of range for vocabulary size %d", fn, id, v);
    char buf[32];
    lua_pushstring(L, ml_task_token_name(b->t, (int)id, buf));
}

/* task:to_str_tokens(tokens) -> the names of token ids: a list for one sequence (a table or a 1-D
 * tensor), a list of lists for a batch (B, L) */
static int l_to_str_tokens(lua_State *L) {
    const char *fn = "task:to_str_tokens";
    task_box *b = check_task(L, 1, fn);
    ml_tensor *t = mlL_testtensor(L, 2);
    if (t) {
        if (t->dtype != ML_I32 || t->ndim < 1 || t->ndim > 2) return mlL_argerror(L, fn, 1, "int32 token ids of shape (L) or (B, L)");
        int64_t rows = t->ndim == 2 ? t->shape[0] : 1, cols = t->shape[t->ndim - 1];
        if (t->ndim == 2) lua_createtable(L, (int)rows, 0);
        for (int64_t r = 0; r < rows; r++) {
            lua_createtable(L, (int)cols, 0);
            for (int64_t c = 0; c < cols; c++) {
                push_token_name(L, b, (lua_Integer)ml_get_flat(t, r * cols + c), fn);
                lua_rawseti(L, -2, c + 1);
            }
            if (t->ndim == 2) lua_rawseti(L, -2, r + 1);
        }
        return 1;
    }
    if (!lua_istable(L, 2)) return mlL_argerror(L, fn, 1, "token ids (an int32 tensor or a list of integers)");
    lua_Integer n = (lua_Integer)lua_rawlen(L, 2);
    lua_createtable(L, (int)n, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 2, i);
        int ok;
        lua_Integer id = lua_tointegerx(L, -1, &ok);
        if (!ok) return luaL_error(L, "%s: argument 1 expected integer token ids, got %s at index %I", fn, luaL_typename(L, -1), i);
        lua_pop(L, 1);
        push_token_name(L, b, id, fn);
        lua_rawseti(L, -2, i);
    }
    return 1;
}

static int l_name(lua_State *L) {
    lua_pushstring(L, ml_task_name(check_task(L, 1, "task:name")->t));
    return 1;
}

static int l_kind(lua_State *L) {
    if (ml_task_get_kind(check_task(L, 1, "task:kind")->t) == ML_TASK_CUSTOM) return call_lib(L, "kind");
    lua_pushstring(L, ml_task_kind_name(ml_task_get_kind(check_task(L, 1, "task:kind")->t)));
    return 1;
}

static int l_has_split(lua_State *L) {
    lua_pushboolean(L, ml_task_has_split(check_task(L, 1, "task:has_split")->t));
    return 1;
}

static int l_chance(lua_State *L) {
    lua_pushnumber(L, ml_task_chance(check_task(L, 1, "task:chance")->t));
    return 1;
}

static int l_corrupt_range(lua_State *L) {
    int lo, hi;
    ml_task_corrupt_range(check_task(L, 1, "task:corrupt_range")->t, &lo, &hi);
    lua_pushinteger(L, lo);
    lua_pushinteger(L, hi);
    return 2;
}

/* task:config(): the options as a table (those that mech.task.ar / atr / mqar accept). */
static int l_config(lua_State *L) {
    task_box *b = check_task(L, 1, "task:config");
    if (ml_task_get_kind(b->t) == ML_TASK_CUSTOM) return call_lib(L, "config");
    lua_newtable(L);
    set_int(L, "seed", (lua_Integer)ml_task_seed(b->t));
    set_task_options(L, b->t);
    return 1;
}

/* task:spec(): the task's whole record {kind, name, seed, options}; mech.task.from_spec rebuilds
 * the same task from it (what checkpoints and manifests keep). A task of another origin (a Lua
 * module, later) records {kind, module, options} in the same shape. */
static int l_spec(lua_State *L) {
    task_box *b = check_task(L, 1, "task:spec");
    lua_settop(L, 1);
    if (ml_task_get_kind(b->t) == ML_TASK_CUSTOM) return call_lib(L, "spec");
    lua_createtable(L, 0, 4);
    lua_pushstring(L, ml_task_kind_name(ml_task_get_kind(b->t)));
    lua_setfield(L, -2, "kind");
    lua_pushstring(L, ml_task_name(b->t));
    lua_setfield(L, -2, "name");
    set_int(L, "seed", (lua_Integer)ml_task_seed(b->t));
    lua_newtable(L); /* the seed is kept once, at the top */
    set_task_options(L, b->t);
    lua_setfield(L, -2, "options");
    return 1;
}

static const char *const spec_keys[] = {"kind", "name", "seed", "options", "module", "path", NULL};

/* mech.task.from_spec(spec): the task of a record made by task:spec() (lua/mech/task_custom.lua). */
static int l_from_spec(lua_State *L) {
    static const char *const option_keys[] = {"modules", "dir", NULL};
    mlL_checktable(L, 1, "mech.task.from_spec", 1);
    mlL_checkkeys(L, 1, "mech.task.from_spec", spec_keys);
    mlL_opttable(L, 2, "mech.task.from_spec", 2, option_keys);
    lua_settop(L, 2);
    return call_lib(L, "from_spec");
}

/* mech.task.from_checkpoint(path | meta) -> task, or nil and why (lua/mech/task_custom.lua). */
static int l_from_checkpoint(lua_State *L) {
    if (lua_type(L, 1) != LUA_TSTRING && !lua_istable(L, 1))
        return mlL_argerror(L, "mech.task.from_checkpoint", 1, "a checkpoint path or mech.load's metadata table");
    static const char *const option_keys[] = {"modules", "dir", NULL};
    mlL_opttable(L, 2, "mech.task.from_checkpoint", 2, option_keys);
    lua_settop(L, 2);
    return call_lib(L, "from_checkpoint");
}

static int l_task_tostring(lua_State *L) {
    task_box *b = check_task(L, 1, "tostring");
    lua_pushfstring(L, "mech.Task(%s, seed=%I, vocab=%d)", ml_task_name(b->t), (lua_Integer)ml_task_seed(b->t),
                    ml_task_vocab_size(b->t));
    return 1;
}

static int l_task_gc(lua_State *L) {
    task_box *b = luaL_checkudata(L, 1, TASK_MT);
    ml_task_release(b->t);
    b->t = NULL;
    return 0;
}

/* ------------------------------------------------------------------ datasets ---- */

static int64_t check_index(lua_State *L, const ml_dataset *ds, int idx, const char *fn) {
    int ok;
    lua_Integer i = lua_tointegerx(L, idx, &ok);
    if (!ok || i < 0 || i >= ml_dataset_size(ds)) {
        char want[96];
        snprintf(want, sizeof want, "a document index in 0..%lld", (long long)ml_dataset_size(ds) - 1);
        mlL_argerror(L, fn, idx, want);
    }
    return i;
}

/* Positions of a batch as {name = {row 1, row 2, ...}} (0-based; -1 where absent). */
static void push_batch_positions(lua_State *L, const ml_dataset *ds, const int64_t *idx, int n) {
    const ml_task *t = ml_dataset_task(ds);
    lua_createtable(L, 0, ml_dataset_npos(ds) + 1);
    for (int k = 0; k < ml_dataset_npos(ds); k++) {
        lua_createtable(L, n, 0);
        for (int b = 0; b < n; b++) {
            lua_pushinteger(L, ml_dataset_positions(ds, idx[b])[k]);
            lua_rawseti(L, -2, b + 1);
        }
        lua_setfield(L, -2, ml_task_pos_name(t, k));
    }
    lua_createtable(L, n, 0);
    for (int b = 0; b < n; b++) {
        int na;
        const int32_t *at = ml_dataset_all_targets(ds, idx[b], &na);
        push_int_array(L, at, na);
        lua_rawseti(L, -2, b + 1);
    }
    lua_setfield(L, -2, "all_target_items_orig");
}

static int push_batch(lua_State *L, const ml_dataset *ds, const int64_t *idx, int n) {
    ml_tensor *tk, *tg;
    if (ml_dataset_batch(ds, idx, n, &tk, &tg) != ML_OK) return mlL_raise(L);
    mlL_pushtensor(L, tk);
    mlL_pushtensor(L, tg);
    push_batch_positions(L, ds, idx, n);
    return 3;
}

/* Reads (first, count) at idx, idx+1 into a temporary index array (a userdata). */
static int64_t *range_indices(lua_State *L, const ml_dataset *ds, int idx, const char *fn, int *count) {
    int64_t first = check_index(L, ds, idx, fn);
    int ok;
    lua_Integer c = lua_tointegerx(L, idx + 1, &ok);
    if (!ok || c < 1 || c > ml_dataset_size(ds) - first) {
        char want[96];
        snprintf(want, sizeof want, "a count in 1..%lld", (long long)(ml_dataset_size(ds) - first));
        mlL_argerror(L, fn, idx + 1, want);
    }
    int64_t *a = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)c, 0);
    for (lua_Integer i = 0; i < c; i++) a[i] = first + i;
    *count = (int)c;
    return a;
}

/* ds:batch(first, count) -> tokens, targets, positions */
static int l_ds_batch(lua_State *L) {
    const char *fn = "dataset:batch";
    ml_dataset *ds = mlL_checkdataset(L, 1, fn);
    int n;
    int64_t *idx = range_indices(L, ds, 2, fn, &n);
    return push_batch(L, ds, idx, n);
}

/* ds:batch_at({i, j, ...}) -> tokens, targets, positions (0-based indices) */
static int l_ds_batch_at(lua_State *L) {
    const char *fn = "dataset:batch_at";
    ml_dataset *ds = mlL_checkdataset(L, 1, fn);
    mlL_checktable(L, 2, fn, 2);
    lua_Integer n = luaL_len(L, 2);
    if (n < 1 || n > INT_MAX) return mlL_argerror(L, fn, 2, "a non-empty list of document indices");
    int64_t *idx = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)n, 0);
    for (lua_Integer i = 0; i < n; i++) {
        lua_geti(L, 2, i + 1);
        int ok;
        lua_Integer v = lua_tointegerx(L, -1, &ok);
        if (!ok || v < 0 || v >= ml_dataset_size(ds))
            return luaL_error(L, "%s: argument 2 entry %I expected a document index in 0..%I, got %s", fn, i + 1,
                              (lua_Integer)ml_dataset_size(ds) - 1, luaL_tolstring(L, -1, NULL));
        idx[i] = v;
        lua_pop(L, 1);
    }
    return push_batch(L, ds, idx, (int)n);
}

/* A tensor of documents first .. first + count - 1 (arguments 2, 3) that the core function f makes. */
static int range_tensor(lua_State *L, const char *fn,
                        ml_status (*f)(const ml_dataset *, const int64_t *, int, ml_tensor **)) {
    ml_dataset *ds = mlL_checkdataset(L, 1, fn);
    int n;
    int64_t *idx = range_indices(L, ds, 2, fn, &n);
    ml_tensor *t;
    if (f(ds, idx, n, &t) != ML_OK) return mlL_raise(L);
    mlL_pushtensor(L, t);
    return 1;
}

/* The position names of task t by slot: the columns of dataset:positions(). */
static int push_task_positions(lua_State *L, const ml_task *t) {
    lua_createtable(L, ml_task_npos(t), 0);
    for (int i = 0; i < ml_task_npos(t); i++) lua_pushstring(L, ml_task_pos_name(t, i)), lua_rawseti(L, -2, i + 1);
    return 1;
}

/* task:positions() -> {names}: mech.task.positions, then the task's free names */
static int l_task_positions(lua_State *L) { return push_task_positions(L, check_task(L, 1, "task:positions")->t); }

/* ds:position_names() -> its task's positions() */
static int l_ds_position_names(lua_State *L) {
    return push_task_positions(L, ml_dataset_task(mlL_checkdataset(L, 1, "dataset:position_names")));
}

/* ds:positions(first, count) -> int32 tensor (count, #ds:position_names()) */
static int l_ds_positions(lua_State *L) { return range_tensor(L, "dataset:positions", ml_dataset_batch_positions); }

/* ds:target_dist(first, count) -> float32 tensor (count, V) */
static int l_ds_target_dist(lua_State *L) {
    return range_tensor(L, "dataset:target_dist", ml_dataset_batch_target_dist);
}

/* ds:doc(i) -> document table (0-based i) */
static int l_ds_doc(lua_State *L) {
    const char *fn = "dataset:doc";
    ml_dataset *ds = mlL_checkdataset(L, 1, fn);
    int64_t i = check_index(L, ds, 2, fn);
    push_ds_task(L, 1, ds);
    int task_idx = lua_gettop(L);
    ml_doc *d = push_scratch_doc(L);
    if (ml_dataset_get_doc(ds, i, d) != ML_OK) return mlL_raise(L);
    push_doc(L, task_idx, d, ml_dataset_split(ds));
    return 1;
}

/* ds:show(i) -> string */
static int l_ds_show(lua_State *L) {
    const char *fn = "dataset:show";
    ml_dataset *ds = mlL_checkdataset(L, 1, fn);
    int64_t i = check_index(L, ds, 2, fn);
    ml_doc *d = push_scratch_doc(L);
    if (ml_dataset_get_doc(ds, i, d) != ML_OK) return mlL_raise(L);
    return push_doc_text(L, ml_dataset_task(ds), d);
}

/* ds:stats() -> means of the per-document statistics, plus min/max of the lengths */
static int l_ds_stats(lua_State *L) {
    ml_dataset *ds = mlL_checkdataset(L, 1, "dataset:stats");
    double m[ML_STAT_MEANS];
    int lo, hi;
    ml_dataset_stat_means(ds, m, &lo, &hi);
    lua_createtable(L, 0, 14);
    for (int j = 0; j < ML_STAT_MEANS; j++) set_num(L, ml_doc_stat_fields[j].name, m[j]);
    set_int(L, "yield_len_min", lo);
    set_int(L, "yield_len_max", hi);
    set_int(L, "documents", ml_dataset_size(ds));
    return 1;
}

static int l_ds_len(lua_State *L) {
    lua_pushinteger(L, ml_dataset_size(mlL_checkdataset(L, 1, "#dataset")));
    return 1;
}

static int l_ds_task(lua_State *L) {
    push_ds_task(L, 1, mlL_checkdataset(L, 1, "dataset:task"));
    return 1;
}

static int l_ds_split(lua_State *L) {
    lua_pushstring(L, ml_split_name(ml_dataset_split(mlL_checkdataset(L, 1, "dataset:split"))));
    return 1;
}

static int l_ds_max_len(lua_State *L) {
    lua_pushinteger(L, ml_dataset_max_len(mlL_checkdataset(L, 1, "dataset:max_len")));
    return 1;
}

static int l_ds_tostring(lua_State *L) {
    ml_dataset *ds = mlL_checkdataset(L, 1, "tostring");
    lua_pushfstring(L, "mech.Dataset(%s, %s, %I documents)", ml_task_name(ml_dataset_task(ds)),
                    ml_split_name(ml_dataset_split(ds)), (lua_Integer)ml_dataset_size(ds));
    return 1;
}

static int l_ds_gc(lua_State *L) {
    dataset_box *b = luaL_checkudata(L, 1, DATASET_MT);
    ml_dataset_free(b->ds);
    b->ds = NULL;
    return 0;
}

/* ------------------------------------------- tasks made outside C: the conversions ---- */
/* The primitives of lua/mech/task_custom.lua (require "mech.task_c"); that file holds the
 * loop, the defaults and the messages' context, src/tasks/custom.c the checks. */

/* task = C.custom(name, seed, vocab (V or a list of names), positions (list of names), lo, hi,
 * holdout, definition) */
static int c_custom(lua_State *L) {
    const char *fn = "mech.task.new";
    const char *name = luaL_checkstring(L, 1);
    lua_Integer seed = luaL_checkinteger(L, 2);
    ml_custom_config c = {0};
    const char **names = NULL;
    if (lua_istable(L, 3)) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, 3);
        if (n < 1 || n > (1 << 24)) return luaL_error(L, "%s: option 'vocab' expected 1 .. 2^24 names, got %I", fn, n);
        names = lua_newuserdatauv(L, sizeof(char *) * (size_t)n, 0); /* collected with the call */
        for (lua_Integer i = 1; i <= n; i++) {
            if (lua_rawgeti(L, 3, i) != LUA_TSTRING)
                return luaL_error(L, "%s: option 'vocab' entry %I expected a token name (a string), got %s", fn, i,
                                  luaL_typename(L, -1));
            names[i - 1] = lua_tostring(L, -1);
            lua_pop(L, 1); /* the string stays alive in the table */
        }
        c.vocab = (int)n;
    } else {
        lua_Integer v = luaL_checkinteger(L, 3);
        c.vocab = v < 1 || v > (1 << 24) ? 0 : (int)v;
    }
    c.token_names = names;
    luaL_checktype(L, 4, LUA_TTABLE);
    /* the paper's names are bits of the mask; the others are the task's free names, in order */
    const char **free_names = lua_newuserdatauv(L, sizeof(char *) * (lua_rawlen(L, 4) + 1), 0);
    for (lua_Integer i = 1; lua_rawgeti(L, 4, i) != LUA_TNIL; i++) {
        if (lua_type(L, -1) != LUA_TSTRING)
            return luaL_error(L, "%s: option 'positions' entry %I expected a position name, got %s", fn, i,
                              luaL_typename(L, -1));
        const char *pn = lua_tostring(L, -1);
        int k = ml_pos_index(pn);
        if (k >= 0 && (c.positions >> k & 1))
            return luaL_error(L, "%s: option 'positions' lists '%s' twice", fn, pn);
        if (k >= 0) c.positions |= 1u << k;
        else free_names[c.n_free_positions++] = pn; /* alive in the table */
        lua_pop(L, 1);
    }
    c.free_positions = free_names;
    c.corrupt_lo = (int)luaL_checkinteger(L, 5);
    c.corrupt_hi = (int)luaL_checkinteger(L, 6);
    c.holdout = luaL_checknumber(L, 7);
    luaL_checktype(L, 8, LUA_TTABLE);
    push_task(L, ml_task_custom(&c, name, (uint64_t)seed));
    lua_pushvalue(L, 8);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

/* ds, gen, scratch = C.open(task, n, seed, split): an empty dataset with room for n documents, the
 * generator of (seed, split) the sample function draws from, and a document buffer for C.append. */
static int c_open(lua_State *L) {
    task_box *b = check_task(L, 1, "task:dataset");
    lua_Integer n = luaL_checkinteger(L, 2), seed = luaL_checkinteger(L, 3);
    ml_split split = opt_split(L, 4, "task:dataset", 4);
    dataset_box *db = lua_newuserdatauv(L, sizeof *db, 1);
    db->ds = NULL;
    luaL_setmetatable(L, DATASET_MT);
    if (!(db->ds = ml_dataset_open(b->t, n, split))) return mlL_raise(L);
    lua_getiuservalue(L, 1, 1);
    lua_setiuservalue(L, -2, 1);
    ml_rng *g = lua_newuserdatauv(L, sizeof *g, 0);
    ml_rng_init(g, (uint64_t)seed, ml_split_stream(split));
    luaL_setmetatable(L, MLL_RNG_MT);
    push_scratch_doc(L);
    return 3;
}

/* Raises msg without a source position: the Lua side says which document of which task. */
static int doc_error(lua_State *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    return lua_error(L);
}

static const char *const doc_keys[] = {"tokens", "targets", "readouts", "answers", "positions", "type", NULL};

/* The names a document's tables use, looked up without strcmp: a table (the upvalue of C.append
 * and C.append_batch) from each position name to its index, all_target_items_orig to
 * NAME_ALL_TARGETS and each document field to NAME_FIELD + its index in doc_keys. */
enum { NAME_ALL_TARGETS = ML_MAX_POS, NAME_FIELD = ML_MAX_POS + 1 }; /* a task's free names: by strcmp */
enum { F_TOKENS, F_TARGETS, F_READOUTS, F_ANSWERS, F_POSITIONS, F_TYPE }; /* doc_keys' order */

static void push_name_codes(lua_State *L) {
    lua_createtable(L, 0, ML_NPOS + 8);
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
}

/* Pushes t[doc_keys[field]] for the table t at idx (as lua_getfield); returns its type. */
static int get_field(lua_State *L, int idx, int field) {
    idx = lua_absindex(L, idx);
    lua_rawgeti(L, lua_upvalueindex(2), field + 1);
    return lua_gettable(L, idx);
}

/* The code of the name at idx (-1: not a string or not a known name). */
static int name_code(lua_State *L, int idx) {
    if (lua_type(L, idx) != LUA_TSTRING) return -1;
    lua_pushvalue(L, idx);
    int code = lua_rawget(L, lua_upvalueindex(1)) == LUA_TNUMBER ? (int)lua_tointeger(L, -1) : -1;
    lua_pop(L, 1);
    return code;
}

/* A token of a document: an integer id, or a name of the definition's `ids` (at ids_idx). */
static int32_t doc_token(lua_State *L, int ids_idx, const char *what, lua_Integer i) {
    int ok;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    if (!ok && lua_type(L, -1) == LUA_TSTRING && ids_idx) {
        lua_pushvalue(L, -1);
        v = lua_rawget(L, ids_idx) == LUA_TNUMBER ? lua_tointeger(L, -1) : -1;
        lua_pop(L, 1);
        if (v < 0) doc_error(L, "%s[%I] is '%s', a token the vocabulary does not have", what, i, lua_tostring(L, -1));
        ok = 1;
    }
    if (!ok || (lua_type(L, -1) != LUA_TNUMBER && lua_type(L, -1) != LUA_TSTRING))
        doc_error(L, "%s[%I] expected an integer token id%s, got %s", what, i, ids_idx ? " or a token name" : "",
                   lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
    return v < INT32_MIN || v > INT32_MAX ? -1 : (int32_t)v;
}

/* Pushes the list field `key` of the document at idx (nil when absent); returns its length, -1
 * when absent. */
static int doc_list(lua_State *L, int idx, int field) {
    const char *key = doc_keys[field];
    if (get_field(L, idx, field) == LUA_TNIL) return -1;
    if (!lua_istable(L, -1)) doc_error(L, "document field '%s' expected a list, got %s", key, luaL_typename(L, -1));
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    if (n > (1 << 24)) doc_error(L, "document field '%s' has %I entries", key, n);
    return (int)n;
}

/* An integer position at the top of the stack (what: its name for the message), clamped into
 * int32 (ml_doc_check refuses what lies outside the document). */
static int32_t doc_pos(lua_State *L, const char *what, int j) {
    int ok;
    lua_Integer p = lua_tointegerx(L, -1, &ok);
    if (!ok) doc_error(L, "%s[%d] expected an integer position, got %s", what, j, luaL_typename(L, -1));
    return p < INT32_MIN ? INT32_MIN : p > INT32_MAX ? INT32_MAX : (int32_t)p;
}

/* Raises unless every key of the table at idx names a document field (what: "document field" or
 * "sample_batch's field", for the message). */
static void check_doc_fields(lua_State *L, int idx, const char *what) {
    for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1))
        if (name_code(L, -2) < NAME_FIELD)
            doc_error(L, "%s '%s' is not one of tokens, targets, readouts, answers, positions, type", what,
                      lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : luaL_typename(L, -2));
}

/* The query type named by the value at the top of the stack (what: as for check_doc_fields). */
static ml_qtype doc_qtype(lua_State *L, const char *what) {
    int q = ml_qtype_parse(lua_tostring(L, -1));
    if (q < 0) doc_error(L, "%s 'type' expected KEY, VALUE, PARENT, CHILD or SIBLING", what);
    return (ml_qtype)q;
}

/* The len tokens of the list at tok into d->tokens. */
static void read_doc_tokens(lua_State *L, int tok, int len, int ids_idx, ml_doc *d) {
    /* the common case (integer ids) in one pass that pops once per 32 tokens */
    luaL_checkstack(L, 40, "document tokens");
    int top = lua_gettop(L);
    for (int i = 0; i < len; i++) {
        int ok = 0;
        lua_Integer v = lua_rawgeti(L, tok, i + 1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &ok) : 0;
        if (ok)
            d->tokens[i] = v < INT32_MIN || v > INT32_MAX ? -1 : (int32_t)v;
        else
            d->tokens[i] = doc_token(L, ids_idx, "tokens", i + 1);
        if ((i & 31) == 31) lua_settop(L, top);
    }
    lua_settop(L, top);
}

/* The readouts of d from the lists of targets (nt at tg; positions whose token is predicted from
 * the position before) and of readouts with their answers (nr at rd and an: any position). */
static void read_doc_readouts(lua_State *L, int tg, int nt, int rd, int an, int nr, int ids_idx, ml_doc *d) {
    int k = 0;
    for (int j = 0; j < nt; j++, k++) {
        lua_rawgeti(L, tg, j + 1);
        int32_t p = doc_pos(L, "targets", j + 1);
        if (p < 1 || p >= d->len)
            doc_error(L, "targets[%d] = %d is not a position of the document that can be predicted (1..%d: a "
                       "target is read at the position before it)", j + 1, (int)p, d->len - 1);
        lua_pop(L, 1);
        d->read_pos[k] = p - 1, d->read_ans[k] = d->tokens[p];
    }
    for (int j = 0; j < nr; j++, k++) {
        lua_rawgeti(L, rd, j + 1);
        d->read_pos[k] = doc_pos(L, "readouts", j + 1);
        lua_rawgeti(L, an, j + 1);
        d->read_ans[k] = doc_token(L, ids_idx, "answers", j + 1);
        lua_pop(L, 2);
    }
    d->n_reads = k;
    ml_doc_sort_readouts(d);
}

/* positions.all_target_items_orig (the list at the top of the stack) into d. */
static void read_doc_all_targets(lua_State *L, ml_doc *d) {
    if (!lua_istable(L, -1)) doc_error(L, "positions.all_target_items_orig expected a list of positions");
    lua_Integer m = (lua_Integer)lua_rawlen(L, -1);
    if (m > d->len) doc_error(L, "positions.all_target_items_orig has %I entries, more than the %d tokens", m, d->len);
    for (int j = 0; j < (int)m; j++, lua_pop(L, 1)) {
        lua_rawgeti(L, -1, j + 1);
        d->all_targets[j] = doc_pos(L, "positions.all_target_items_orig", j + 1);
    }
    d->n_all_targets = (int)m;
}

/* Raises doc_error: pn is not one of t's position names (what: where it was found). */
static void unknown_position(lua_State *L, const ml_task *t, const char *pn, const char *what) {
    const char *names[ML_MAX_POS + 1];
    const char *list = push_pos_names(L, t, names);
    doc_error(L, "%s: '%s' is not a position name of task '%s' (%s; did you mean '%s'?)", what, pn, ml_task_name(t),
              list, mlL_closest(pn, names));
}

/* The slot of the position name at idx: a paper name by its code, else one of t's free names. */
static int doc_pos_slot(lua_State *L, const ml_task *t, int idx) {
    int pi = name_code(L, idx);
    if (pi < 0 && lua_type(L, idx) == LUA_TSTRING) pi = ml_task_pos_index(t, lua_tostring(L, idx));
    return pi;
}

/* The document's field positions (the table at the top of the stack) into d. */
static void read_doc_positions(lua_State *L, const ml_task *t, ml_doc *d) {
    if (!lua_istable(L, -1)) doc_error(L, "document field 'positions' expected a table, got %s", luaL_typename(L, -1));
    for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
        const char *pn = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        int pi = doc_pos_slot(L, t, -2);
        if (pi == NAME_ALL_TARGETS) {
            read_doc_all_targets(L, d);
            continue;
        }
        if (pi < 0 || pi >= ml_task_npos(t)) unknown_position(L, t, pn, "positions");
        int isint = 0;
        if (lua_type(L, -1) == LUA_TNUMBER) lua_tointegerx(L, -1, &isint);
        if (!isint)
            doc_error(L, "positions.%s expected an integer position, got %s", pn,
                       lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
        d->pos[pi] = doc_pos(L, "positions", 0); /* -1: absent, as in batches */
    }
}

/* Converts the document table at idx into d (the definition's name -> id table at ids_idx, or 0).
 * Leaves the stack as it found it. */
static void read_custom_doc(lua_State *L, int idx, int ids_idx, const ml_task *t, ml_doc *d) {
    int base = lua_gettop(L);
    if (!lua_istable(L, idx))
        doc_error(L, "expected a document table {tokens=, targets=, positions=}, got %s", luaL_typename(L, idx));
    check_doc_fields(L, idx, "document field");
    int len = doc_list(L, idx, F_TOKENS), tok = lua_gettop(L);
    if (len < 1) doc_error(L, "document field 'tokens' expected a non-empty list of tokens");
    int nt = doc_list(L, idx, F_TARGETS), tg = lua_gettop(L);
    int nr = doc_list(L, idx, F_READOUTS), rd = lua_gettop(L);
    int na = doc_list(L, idx, F_ANSWERS), an = lua_gettop(L);
    if (nr != na)
        doc_error(L, "document fields 'readouts' and 'answers' expected lists of the same length, got %d and %d",
                   nr < 0 ? 0 : nr, na < 0 ? 0 : na);
    nt = nt < 0 ? 0 : nt, nr = nr < 0 ? 0 : nr;
    int cap = len > nt + nr ? len : nt + nr;
    if (ml_doc_reserve(d, cap) != ML_OK) mlL_raise(L);
    ml_doc_start(d, len);
    read_doc_tokens(L, tok, len, ids_idx, d);
    read_doc_readouts(L, tg, nt, rd, an, nr, ids_idx, d);
    lua_settop(L, base);
    if (get_field(L, idx, F_POSITIONS) != LUA_TNIL) read_doc_positions(L, t, d);
    lua_settop(L, base);
    if (get_field(L, idx, F_TYPE) != LUA_TNIL) d->qtype = doc_qtype(L, "document field");
    lua_settop(L, base);
}

/* appended = C.append(ds, doc, [scratch]): false when the task's holdout puts doc in the other split;
 * raises (without a function name: the caller says which document) when doc is malformed. */
static int c_append(lua_State *L) {
    ml_dataset *ds = mlL_checkdataset(L, 1, "task:dataset");
    ml_doc *d = luaL_testudata(L, 3, "mech.TaskDoc"); /* reused: no allocation per document */
    lua_settop(L, 3);
    if (!d) d = push_scratch_doc(L);
    int ids = 0;
    if (lua_getiuservalue(L, 1, 1) == LUA_TTABLE && lua_getfield(L, -1, "ids") == LUA_TTABLE) ids = lua_gettop(L);
    read_custom_doc(L, 2, ids, ml_dataset_task(ds), d);
    bool rejected;
    if (ml_dataset_append(ds, d, &rejected) != ML_OK) return doc_error(L, "%s", ml_last_error());
    lua_pushboolean(L, !rejected);
    return 1;
}

/* ---- the batched form: sample_batch(gen, split, n) returns n documents as int32 tensors ---- */

/* What a batch field is, for messages: "int64 tensor of shape [4,2]" (left on the stack until the
 * error unwinds it) or the type's name. */
static const char *describe_value(lua_State *L, int idx) {
    ml_tensor *t = mlL_testtensor(L, idx);
    char shape[ML_SHAPE_STR];
    if (!t) return luaL_typename(L, idx);
    return lua_pushfstring(L, "%s tensor of shape %s", ml_dtype_name(t->dtype), ml_shape_str(shape, t->ndim, t->shape));
}

/* Reads the value at the top of the stack (field `what` of the batch) into c: an int32 tensor
 * with n rows (ndim 2: (n, cols); ndim 1: (n)), or what all rows share — a list of integers
 * (ndim 2) or an integer (ndim 1). A list is copied into a userdata left on the stack. */
static void batch_column(lua_State *L, const char *what, int ndim, int64_t n, ml_doc_cols *c) {
    int top = lua_gettop(L);
    ml_tensor *t = mlL_testtensor(L, top);
    if (t && t->dtype == ML_I32 && t->ndim == ndim && t->shape[0] == n) {
        c->p = ml_i32(t), c->s0 = t->stride[0];
        c->s1 = ndim == 2 ? t->stride[1] : 0, c->cols = ndim == 2 ? t->shape[1] : 1;
        return;
    }
    if (!t && ndim == 1 && lua_isinteger(L, top)) {
        lua_Integer x = lua_tointeger(L, top);
        c->one = x < INT32_MIN ? INT32_MIN : x > INT32_MAX ? INT32_MAX : (int32_t)x;
        c->p = &c->one, c->s0 = 0, c->s1 = 0, c->cols = 1;
        return;
    }
    if (!t && ndim == 2 && lua_istable(L, top)) {
        lua_Integer m = (lua_Integer)lua_rawlen(L, top);
        if (m > (1 << 24)) doc_error(L, "sample_batch's field '%s' has %I entries", what, m);
        int32_t *v = lua_newuserdatauv(L, sizeof(int32_t) * (size_t)(m ? m : 1), 0);
        for (lua_Integer j = 1; j <= m; j++) {
            int ok;
            lua_rawgeti(L, top, j);
            lua_Integer x = lua_tointegerx(L, -1, &ok);
            if (!ok || lua_type(L, -1) != LUA_TNUMBER)
                doc_error(L, "sample_batch's field '%s' entry %I expected an integer, got %s", what, j,
                          lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
            v[j - 1] = x < INT32_MIN ? INT32_MIN : x > INT32_MAX ? INT32_MAX : (int32_t)x;
            lua_pop(L, 1);
        }
        c->p = v, c->s0 = 0, c->s1 = 1, c->cols = (int64_t)m;
        return;
    }
    doc_error(L, "sample_batch's field '%s' expected %s, got %s", what,
              ndim == 2 ? "an int32 tensor (n, k) or a list of integers that every document shares"
                        : "an int32 tensor (n) or an integer that every document shares",
              describe_value(L, top));
}

/* The batch's field tokens: an int32 tensor (n, L) with 1 <= n <= max. Returns n. */
static lua_Integer batch_tokens(lua_State *L, lua_Integer max, ml_doc_cols *tok) {
    lua_getfield(L, 2, "tokens");
    ml_tensor *tt = mlL_testtensor(L, -1);
    if (!tt || tt->dtype != ML_I32 || tt->ndim != 2 || tt->shape[0] < 1 || tt->shape[0] > max || tt->shape[1] < 1 ||
        tt->shape[1] > (1 << 24))
        doc_error(L, "sample_batch's field 'tokens' expected an int32 tensor (n, L) with 1 <= n <= %I (the "
                  "documents asked for) and 1 <= L <= 2^24, got %s", max, describe_value(L, -1));
    lua_Integer n = (lua_Integer)tt->shape[0];
    batch_column(L, "tokens", 2, n, tok);
    return n;
}

/* The batch's fields targets, readouts and answers (each optional; readouts with answers). */
static void batch_readouts(lua_State *L, lua_Integer n, ml_doc_batch *v) {
    if (lua_getfield(L, 2, "targets") != LUA_TNIL) batch_column(L, "targets", 2, n, &v->tg);
    bool has_rd = lua_getfield(L, 2, "readouts") != LUA_TNIL;
    if (has_rd) batch_column(L, "readouts", 2, n, &v->rd);
    bool has_an = lua_getfield(L, 2, "answers") != LUA_TNIL;
    if (has_an) batch_column(L, "answers", 2, n, &v->an);
    if (has_rd != has_an || v->rd.cols != v->an.cols)
        doc_error(L, "sample_batch's fields 'readouts' and 'answers' expected the same number of columns, got %I and %I",
                  (lua_Integer)v->rd.cols, (lua_Integer)v->an.cols);
}

/* The batch's field positions (optional): one entry per document for each named position. */
static void batch_positions(lua_State *L, const ml_task *t, lua_Integer n, ml_doc_batch *v) {
    if (lua_getfield(L, 2, "positions") == LUA_TNIL) return;
    int pt = lua_gettop(L);
    if (!lua_istable(L, pt))
        doc_error(L, "sample_batch's field 'positions' expected a table, got %s", luaL_typename(L, pt));
    for (lua_pushnil(L); lua_next(L, pt); lua_pop(L, 1)) {
        const char *pn = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        int pi = doc_pos_slot(L, t, -2);
        if (pi == NAME_ALL_TARGETS)
            doc_error(L, "sample_batch's positions: all_target_items_orig is a list per document (it needs sample)");
        if (pi < 0 || pi >= ml_task_npos(t)) unknown_position(L, t, pn, "sample_batch's positions");
        if (v->npos == ML_MAX_POS) doc_error(L, "sample_batch's positions: more than %d names", ML_MAX_POS);
        char what[64];
        snprintf(what, sizeof what, "positions.%s", pn);
        batch_column(L, what, 1, n, &v->pos[v->npos]); /* pushes nothing for ndim 1 */
        v->pos_index[v->npos++] = pi;
    }
}

/* kept, rows = C.append_batch(ds, batch, scratch, max): appends the documents of batch (the table
 * sample_batch returned: 1 .. max of them) until max are kept (a holdout may reject some), checking
 * each as C.append does; nil, row, message for the first faulty document (row: 0-based in the
 * batch). A malformed batch raises. */
static int c_append_batch(lua_State *L) {
    ml_dataset *ds = mlL_checkdataset(L, 1, "task:dataset");
    ml_doc *d = luaL_checkudata(L, 3, "mech.TaskDoc");
    lua_Integer max = luaL_checkinteger(L, 4);
    lua_settop(L, 4);
    luaL_checkstack(L, 32, "sample_batch's fields");
    if (!lua_istable(L, 2))
        return doc_error(L, "sample_batch expected to return a table {tokens=, targets=, positions=}, got %s",
                         luaL_typename(L, 2));
    check_doc_fields(L, 2, "sample_batch's field");
    ml_doc_batch v = {0};
    lua_Integer n = batch_tokens(L, max, &v.tok);
    batch_readouts(L, n, &v);
    batch_positions(L, ml_dataset_task(ds), n, &v);
    v.qtype = ML_QT_KEY;
    if (lua_getfield(L, 2, "type") != LUA_TNIL) v.qtype = doc_qtype(L, "sample_batch's field");
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

/* ... = C.call(f, ...): f(...) called from C, so that the messages of a C function f carry no Lua
 * source position (as when the binding called it). */
static int c_call(lua_State *L) {
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* C.set_name(task, name): a preset's name on the task rebuilt from its record. */
static int c_set_name(lua_State *L) {
    ml_task_set_name(check_task(L, 1, "mech.task.from_spec")->t, luaL_checkstring(L, 2));
    return 0;
}

/* meta = C.meta(path): the metadata of the safetensors file at path, {key = value}. */
static int c_meta(lua_State *L) {
    ml_safetensors *st = ml_safetensors_open(luaL_checkstring(L, 1));
    if (!st) return mlL_raise(L);
    lua_newtable(L); /* only running out of memory raises before the close */
    for (int i = 0; i < ml_safetensors_meta_count(st); i++) {
        lua_pushstring(L, ml_safetensors_meta_value(st, i));
        lua_setfield(L, -2, ml_safetensors_meta_key(st, i));
    }
    ml_safetensors_close(st);
    return 1;
}

/* text = C.read_data(path, base, max_bytes), or nil and why: a data file a record names
 * (docs/security.md). With base (a directory, or nil), a relative path is taken from base and the
 * file's real path (symlinks resolved) must lie below base's; with or without it, the file must be
 * a regular file (never a FIFO, device or directory: opened without blocking, checked on the open
 * descriptor) of at most max_bytes. */
static int c_read_data(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    const char *base = luaL_optstring(L, 2, NULL);
    lua_Integer max = luaL_checkinteger(L, 3);
    char full[PATH_MAX], real[PATH_MAX], real_base[PATH_MAX];
    if (base && path[0] != '/') {
        if (snprintf(full, sizeof full, "%s/%s", base, path) >= (int)sizeof full)
            return luaL_pushfail(L), lua_pushfstring(L, "the path '%s' is too long", path), 2;
    } else {
        snprintf(full, sizeof full, "%s", path);
    }
    if (!realpath(full, real))
        return luaL_pushfail(L), lua_pushfstring(L, "cannot read %s: %s", full, strerror(errno)), 2;
    if (base) {
        if (!realpath(base, real_base))
            return luaL_pushfail(L), lua_pushfstring(L, "cannot read the directory %s: %s", base, strerror(errno)), 2;
        size_t n = strlen(real_base);
        bool below = !strncmp(real, real_base, n) && (real[n] == '/' || (n == 1 && real_base[0] == '/'));
        if (!below)
            return luaL_pushfail(L),
                   lua_pushfstring(L, "'%s' is not a file below %s (it is %s; a record may only name a file in its "
                                      "own directory)", path, base, real), 2;
    }
    int fd = open(real, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return luaL_pushfail(L), lua_pushfstring(L, "cannot read %s: %s", full, strerror(errno)), 2;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return luaL_pushfail(L), lua_pushfstring(L, "%s is not a regular file (a FIFO, device or directory is "
                                                    "never read as data)", full), 2;
    }
    if (st.st_size > max) {
        close(fd);
        return luaL_pushfail(L), lua_pushfstring(L, "%s holds %I bytes, more than the %I a data file may hold", full,
                                                 (lua_Integer)st.st_size, max), 2;
    }
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, (size_t)st.st_size + 1);
    size_t got = 0;
    for (;;) { /* a file that grows while read stops at the bound */
        ssize_t r = read(fd, out + got, (size_t)st.st_size + 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
        if (got > (size_t)st.st_size) break;
    }
    close(fd);
    if (got != (size_t)st.st_size)
        return luaL_pushfail(L), lua_pushfstring(L, "%s changed while it was read", full), 2;
    luaL_pushresultsize(&b, got);
    return 1;
}

/* C.done(ds): a filled dataset, its memory accounted; returns ds */
static int c_done(lua_State *L) {
    mlL_account(L, ml_dataset_bytes(mlL_checkdataset(L, 1, "task:dataset")));
    lua_settop(L, 1);
    return 1;
}

static int open_task_c(lua_State *L) {
    static const luaL_Reg f[] = {{"custom", c_custom}, {"open", c_open}, {"done", c_done},
                                 {"meta", c_meta}, {"call", c_call}, {"set_name", c_set_name},
                                 {"read_data", c_read_data}, {NULL, NULL}};
    static const luaL_Reg with_names[] = {{"append", c_append}, {"append_batch", c_append_batch}, {NULL, NULL}};
    luaL_newlib(L, f);
    push_name_codes(L);
    push_names(L, doc_keys, -1); /* the second upvalue: fields are read by these, without lua_getfield's lookup */
    luaL_setfuncs(L, with_names, 2);
    return 1;
}

/* ------------------------------------------------------------------ module ---- */

static const luaL_Reg task_methods[] = {{"sample", l_sample},
                                        {"dataset", l_dataset},
                                        {"vocab_size", l_vocab_size},
                                        {"token_name", l_token_name},
                                        {"to_str_tokens", l_to_str_tokens},
                                        {"show", l_task_show},
                                        {"name", l_name},
                                        {"kind", l_kind},
                                        {"config", l_config},
                                        {"spec", l_spec},
                                        {"to_tokens", NULL},
                                        {"has_split", l_has_split},
                                        {"corrupt_range", l_corrupt_range}, {"chance", l_chance},
                                        {"positions", l_task_positions},
                                        {NULL, NULL}};

static const luaL_Reg dataset_methods[] = {{"batch", l_ds_batch},
                                           {"batch_at", l_ds_batch_at},
                                           {"positions", l_ds_positions},
                                           {"position_names", l_ds_position_names},
                                           {"target_dist", l_ds_target_dist},
                                           {"doc", l_ds_doc},
                                           {"show", l_ds_show},
                                           {"stats", l_ds_stats},
                                           {"size", l_ds_len},
                                           {"task", l_ds_task},
                                           {"split", l_ds_split},
                                           {"max_len", l_ds_max_len},
                                           {"write_jsonl", NULL},
                                           {NULL, NULL}};

/* Sets t[name] (t on top) to a function that calls lua/mech/task_custom.lua's `name`. */
static void set_lib_entry(lua_State *L, const char *name) {
    lua_pushstring(L, name);
    lua_pushcclosure(L, l_lib_entry, 1);
    lua_setfield(L, -2, name);
}

static void new_class(lua_State *L, const char *mt, const luaL_Reg *methods, lua_CFunction gc,
                      lua_CFunction tostr, lua_CFunction len) {
    luaL_newmetatable(L, mt);
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0); /* NULL entries (placeholders) are false: written in Lua */
    for (int i = 0; methods[i].name; i++)
        if (!methods[i].func) set_lib_entry(L, methods[i].name);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, tostr);
    lua_setfield(L, -2, "__tostring");
    if (len) {
        lua_pushcfunction(L, len);
        lua_setfield(L, -2, "__len");
    }
    lua_pop(L, 1);
}

int mlL_open_task(lua_State *L) {
    new_class(L, TASK_MT, task_methods, l_task_gc, l_task_tostring, NULL);
    new_class(L, DATASET_MT, dataset_methods, l_ds_gc, l_ds_tostring, l_ds_len);
    luaL_newmetatable(L, "mech.TaskDoc"); /* scratch documents freed by the collector */
    lua_pushcfunction(L, l_doc_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);

    static const luaL_Reg fns[] = {{"ar", l_ar},
                                   {"atr", l_atr},
                                   {"mqar", l_mqar},
                                   {"preset", l_preset},
                                   {"presets", l_presets},
                                   {"show", l_show},
                                   {"from_spec", l_from_spec},
                                   {"from_checkpoint", l_from_checkpoint},
                                   {NULL, NULL}};
    luaL_newlib(L, fns);
    set_lib_entry(L, "new"); /* tasks made in Lua and from files: lua/mech/task_custom.lua */
    set_lib_entry(L, "load");
    set_lib_entry(L, "register");
    set_lib_entry(L, "from_jsonl");
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE); /* its primitives */
    lua_pushcfunction(L, open_task_c);
    lua_setfield(L, -2, "mech.task_c");
    lua_pop(L, 1);
    push_names(L, ml_pos_names, ML_NPOS); /* the paper's eight: the first columns of every dataset:positions() */
    lua_setfield(L, -2, "positions");
    lua_pushinteger(L, ML_TRAIN_DOCS);
    lua_setfield(L, -2, "TRAIN_DOCS");
    lua_pushinteger(L, ML_EVAL_DOCS);
    lua_setfield(L, -2, "EVAL_DOCS");
    lua_pushinteger(L, ML_PAD);
    lua_setfield(L, -2, "PAD");
    lua_pushinteger(L, ML_IGNORE);
    lua_setfield(L, -2, "IGNORE");
    lua_setfield(L, -2, "task");
    return 0;
}

void mlL_meta_task(lua_State *L, int meta_idx, const char *path, int modules_idx) {
    meta_idx = lua_absindex(L, meta_idx);
    modules_idx = modules_idx ? lua_absindex(L, modules_idx) : 0;
    lua_pushcfunction(L, l_from_checkpoint);
    lua_pushstring(L, path);
    lua_createtable(L, 0, 1); /* the modules the caller of mech.load allowed */
    if (modules_idx) lua_pushvalue(L, modules_idx), lua_setfield(L, -2, "modules");
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
        lua_setfield(L, meta_idx, "task_error");
        return;
    }
    if (!lua_isnil(L, -1)) lua_setfield(L, meta_idx, "task");
    else lua_pop(L, 1);
}
