/* mech.task: the AR, ATR and MQAR tasks, presets, and task objects (core: src/tasks/task.h).
 * Datasets are src/lua/dataset.c, document tables src/lua/doc.c; tasks made outside C (a Lua task,
 * a file) and the reading of task records (from_spec, from_checkpoint) live in
 * lua/mech/task_custom.lua, with their primitives in src/lua/task_custom.c. The options of the
 * built-in kinds come from one table (src/tasks/options.c). */
#include <limits.h>
#include <string.h>

#include "lua/task.h"

mlL_task_box *mlL_checktask(lua_State *L, int idx, const char *fn) {
    mlL_task_box *b = luaL_testudata(L, idx, MLL_TASK_MT);
    if (!b || !b->t) mlL_argerror(L, fn, idx, "a mech.Task");
    return b;
}

void mlL_pushtask(lua_State *L, ml_task *t) {
    if (!t) mlL_raise(L);
    mlL_task_box *b = lua_newuserdatauv(L, sizeof *b, 1);
    b->t = t;
    ml_rng_init(&b->rng, ml_task_seed(t), ML_STREAM_USER - 1); /* a stream no dataset uses */
    luaL_setmetatable(L, MLL_TASK_MT);
}

const char *mlL_push_pos_names(lua_State *L, const ml_task *t, const char **names) {
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
    const char *list = mlL_push_pos_names(L, t, names);
    char q[96];
    return luaL_error(L, "%s: %s: expected a position name of task '%s' (%s), got %s%s%s%s", fn, what, ml_task_name(t),
                      list, s ? mlL_quote(s, q, sizeof q) : luaL_typename(L, idx), s ? " (did you mean '" : "",
                      s ? ml_closest(s, names) : "", s ? "'?)" : "");
}

int mlL_task_lib(lua_State *L, const char *name) {
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

ml_split mlL_optsplit(lua_State *L, int idx, const char *fn) {
    if (lua_isnoneornil(L, idx)) return ML_SPLIT_TRAIN;
    ml_split sp;
    if (lua_type(L, idx) != LUA_TSTRING || !ml_split_parse(lua_tostring(L, idx), &sp))
        mlL_argerror(L, fn, idx, "\"train\", \"dev\" or \"test\"");
    return sp;
}

void mlL_push_names(lua_State *L, const char *const *names, int n) {
    lua_newtable(L);
    for (int i = 0; n < 0 ? names[i] != NULL : i < n; i++) {
        lua_pushstring(L, names[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

int mlL_push_task_positions(lua_State *L, const ml_task *t) {
    lua_createtable(L, ml_task_npos(t), 0);
    for (int i = 0; i < ml_task_npos(t); i++) lua_pushstring(L, ml_task_pos_name(t, i)), lua_rawseti(L, -2, i + 1);
    return 1;
}

/* ------------------------------------------------------------------- constructors ---- */

/* mech.task.ar / atr / mqar{...}: the options table (argument 1, nil: none) read into the kind's
 * config, which the core's defaults fill first. Each key is read once, into a plain copy that mlL_options reads: an ENUM
 * option's boolean becomes the name it means, and AR's `length` the min_length and max_length
 * not given. */
static int new_task(lua_State *L, ml_task_kind k, const char *fn) {
    union {
        ml_ar_config ar;
        ml_atr_config atr;
        ml_mqar_config mqar;
    } cfg;
    if (k == ML_TASK_AR) cfg.ar = ml_ar_config_default();
    else if (k == ML_TASK_ATR) cfg.atr = ml_atr_config_default();
    else cfg.mqar = ml_mqar_config_default();
    lua_settop(L, 1);
    if (lua_isnil(L, 1)) lua_newtable(L), lua_replace(L, 1);
    mlL_checktable(L, 1, fn, 1);
    static const mlL_opt_type types[] = {[ML_TOPT_INT] = MLL_INT32, [ML_TOPT_NUM] = MLL_NUM,
                                         [ML_TOPT_BOOL] = MLL_CBOOL, [ML_TOPT_ENUM] = MLL_ENUM};
    mlL_option spec[32];
    const char *keys[32];
    int n = 0, m = 0;
    lua_newtable(L); /* 2: the copy */
    for (const ml_task_option *o = ml_task_options(k); o->name; o++) {
        keys[n++] = o->name;
        if (lua_getfield(L, 1, o->name) == LUA_TBOOLEAN && (o->if_true || o->if_false))
            lua_pushstring(L, o->names[lua_toboolean(L, -1) ? o->if_true : o->if_false]), lua_replace(L, -2);
        lua_setfield(L, 2, o->name);
        if (o->offset != ML_TOPT_NO_FIELD) spec[m++] = (mlL_option){o->name, types[o->type], o->offset, 0, 0, o->names, NULL};
    }
    keys[n] = NULL, spec[m] = (mlL_option){0};
    mlL_checkkeys(L, 1, fn, keys);
    lua_replace(L, 1); /* the copy is argument 1 from here on (messages number it so) */
    if (k == ML_TASK_AR && lua_getfield(L, 1, "length") != LUA_TNIL) { /* the copy holds only what was given */
        mlL_optint32(L, 1, "length", 0, fn); /* its type, under its own name */
        static const char *const bounds[] = {"min_length", "max_length"};
        for (int i = 0; i < 2; i++)
            if (lua_getfield(L, 1, bounds[i]) == LUA_TNIL) lua_pushvalue(L, 2), lua_setfield(L, 1, bounds[i]);
    }
    mlL_options(L, 1, fn, spec, &cfg);
    uint64_t seed = (uint64_t)mlL_optint(L, 1, "seed", ML_TASK_DEFAULT_SEED, fn);
    mlL_pushtask(L, k == ML_TASK_AR    ? ml_task_ar(&cfg.ar, seed)
                    : k == ML_TASK_ATR ? ml_task_atr(&cfg.atr, seed)
                                       : ml_task_mqar(&cfg.mqar, seed));
    return 1;
}

static int l_ar(lua_State *L) { return new_task(L, ML_TASK_AR, "mech.task.ar"); }
static int l_atr(lua_State *L) { return new_task(L, ML_TASK_ATR, "mech.task.atr"); }
static int l_mqar(lua_State *L) { return new_task(L, ML_TASK_MQAR, "mech.task.mqar"); }

/* mech.task.preset(name, [seed = 42], [{rng = "philox" | "numpy"}]) */
static int l_preset(lua_State *L) {
    const char *fn = "mech.task.preset";
    if (lua_type(L, 1) != LUA_TSTRING) return mlL_argerror(L, fn, 1, "a preset name");
    lua_Integer seed = ML_TASK_DEFAULT_SEED;
    if (!lua_isnoneornil(L, 2)) {
        int ok;
        seed = lua_tointegerx(L, 2, &ok);
        if (!ok) return mlL_argerror(L, fn, 2, "an integer seed");
    }
    static const char *const rng_names[] = {"philox", "numpy", NULL}; /* ml_task_rng order */
    static const char *const keys[] = {"rng", NULL};
    static const mlL_option spec[] = {{"rng", MLL_ENUM, 0, 0, 0, rng_names, NULL}, {0}};
    int rng = ML_RNG_PHILOX;
    mlL_opttable(L, 3, fn, 3, keys);
    mlL_options(L, 3, fn, spec, &rng);
    const char *name = lua_tostring(L, 1);
    ml_task *t = ml_task_preset_rng(name, (uint64_t)seed, (ml_task_rng)rng);
    bool known = false;
    for (int i = 0; ml_task_preset_names[i]; i++) known = known || strcmp(name, ml_task_preset_names[i]) == 0;
    if (!t && known) return mlL_raise(L); /* e.g. rng = "numpy" with an AR preset or a seed >= 2^32 */
    if (!t) {
        const char *near = ml_closest(name, ml_task_preset_names);
        return mlL_argfail(L, fn, 1, "unknown preset '%s' (did you mean '%s'?)", name, near ? near : "?");
    }
    mlL_pushtask(L, t);
    return 1;
}

static int l_presets(lua_State *L) {
    mlL_push_names(L, ml_task_preset_names, -1);
    return 1;
}

static const char *const spec_keys[] = {"kind", "name", "seed", "options", "module", "path", NULL};

/* mech.task.from_spec(spec): the task of a record made by task:spec() (lua/mech/task_custom.lua).
 * A task's option given beside `kind` (not under `options`) is told where it goes. */
static int l_from_spec(lua_State *L) {
    const char *fn = "mech.task.from_spec";
    static const char *const option_keys[] = {"modules", "dir", NULL};
    mlL_checktable(L, 1, fn, 1);
    for (lua_pushnil(L); lua_next(L, 1); lua_pop(L, 1)) {
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        for (int i = 0; key && spec_keys[i]; i++) key = strcmp(key, spec_keys[i]) ? key : NULL;
        for (int k = ML_TASK_AR; key && k <= ML_TASK_MQAR; k++)
            for (const ml_task_option *o = ml_task_options((ml_task_kind)k); o->name; o++)
                if (!strcmp(key, o->name))
                    return mlL_argfail(L, fn, 1, "'%s' is a task option: it goes under 'options' ({kind = ..., "
                                            "options = {%s = ...}})", key, key);
    }
    mlL_checkkeys(L, 1, fn, spec_keys);
    mlL_opttable(L, 2, fn, 2, option_keys);
    return mlL_task_lib(L, "from_spec");
}

/* mech.task.from_checkpoint(path | meta) -> task, or nil and why (lua/mech/task_custom.lua). */
static int l_from_checkpoint(lua_State *L) {
    const char *fn = "mech.task.from_checkpoint";
    if (lua_type(L, 1) != LUA_TSTRING && !lua_istable(L, 1))
        return mlL_argerror(L, fn, 1, "a checkpoint path or mech.load's metadata table");
    static const char *const option_keys[] = {"modules", "dir", NULL};
    mlL_opttable(L, 2, fn, 2, option_keys);
    return mlL_task_lib(L, "from_checkpoint");
}

/* ------------------------------------------------------------------ task methods ---- */

/* task:sample([seed | generator], [split]) */
static int l_sample(lua_State *L) {
    const char *fn = "task:sample";
    mlL_task_box *b = mlL_checktask(L, 1, fn);
    ml_split split = mlL_optsplit(L, 3, fn);
    ml_rng local, *rng = &b->rng;
    int ok = 1;
    if (lua_type(L, 2) == LUA_TNUMBER) {
        /* the first document of task:dataset(n, {seed = seed, split = split}) */
        ml_rng_init(&local, (uint64_t)lua_tointegerx(L, 2, &ok), ml_split_stream(split));
        rng = &local;
    } else if (!lua_isnoneornil(L, 2)) {
        ok = (rng = luaL_testudata(L, 2, MLL_RNG_MT)) != NULL;
    }
    if (!ok) return mlL_argerror(L, fn, 2, "an integer seed, a mech.Generator or nil");
    if (ml_task_get_kind(b->t) == ML_TASK_CUSTOM) {
        if (lua_type(L, 2) == LUA_TNUMBER && !lua_isinteger(L, 2))
            return mlL_argerror(L, fn, 2, "an integer seed, a mech.Generator or nil");
        lua_settop(L, 2);
        lua_pushstring(L, ml_split_name(split));
        return mlL_task_lib(L, "sample");
    }
    ml_doc *d = mlL_push_scratch_doc(L);
    if (ml_task_sample(b->t, rng, split, d) != ML_OK) return mlL_raise(L);
    mlL_push_doc(L, 1, d, split);
    return 1;
}

/* task:dataset([n], [{seed = task seed, split = "train"}]); n defaults to the paper's sizes:
 * 100,032 training documents, 320 for an eval split (docs/tasks.md, "Datasets and batches"). */
static int l_dataset(lua_State *L) {
    const char *fn = "task:dataset";
    mlL_task_box *b = mlL_checktask(L, 1, fn);
    if (lua_istable(L, 2)) lua_settop(L, 2), lua_pushnil(L), lua_insert(L, 2); /* (task, nil, opts) */
    lua_Integer n = -1;
    if (!lua_isnoneornil(L, 2)) {
        int ok;
        n = lua_tointegerx(L, 2, &ok);
        if (!ok || n < 0) return mlL_argerror(L, fn, 2, "a number of documents >= 0");
    }
    static const char *const keys[] = {"seed", "split", NULL};
    static const char *const split_names[] = {"train", "dev", "test", NULL}; /* ml_split order */
    typedef struct {
        int64_t seed;
        int split;
    } options;
    static const mlL_option spec[] = {MLL_OPTION(MLL_INT, "seed", options, seed),
                                      {"split", MLL_ENUM, offsetof(options, split), 0, 0, split_names, NULL}, {0}};
    options o = {(int64_t)ml_task_seed(b->t), ML_SPLIT_TRAIN};
    mlL_opttable(L, 3, fn, 3, keys);
    mlL_options(L, 3, fn, spec, &o);
    if (ml_task_get_kind(b->t) == ML_TASK_CUSTOM) { /* its documents come from Lua (n nil: its default) */
        lua_settop(L, 1);
        if (n < 0) lua_pushnil(L);
        else lua_pushinteger(L, n);
        lua_pushinteger(L, o.seed), lua_pushstring(L, ml_split_name((ml_split)o.split));
        return mlL_task_lib(L, "dataset");
    }
    if (n < 0) n = o.split == ML_SPLIT_TRAIN ? ML_TRAIN_DOCS : ML_EVAL_DOCS;
    ml_dataset **ds = mlL_newdataset(L);
    if (!(*ds = ml_dataset_new(b->t, n, (uint64_t)o.seed, (ml_split)o.split))) return mlL_raise(L);
    mlL_account(L, ml_dataset_bytes(*ds)); /* memory the collector cannot see */
    return 1;
}

static int l_token_name(lua_State *L) {
    mlL_task_box *b = mlL_checktask(L, 1, "task:token_name");
    int ok;
    lua_Integer id = lua_tointegerx(L, 2, &ok);
    if (!ok) return mlL_argerror(L, "task:token_name", 2, "an integer token id");
    char buf[32];
    lua_pushstring(L, ml_task_token_name(b->t, id < INT_MIN || id > INT_MAX ? -1 : (int)id, buf));
    return 1;
}

/* Pushes the name of token id (an integer) or raises naming the function. */
static void push_token_name(lua_State *L, mlL_task_box *b, lua_Integer id, const char *fn) {
    int v = ml_task_vocab_size(b->t);
    if (id < 0 || id >= v)
        mlL_argfail(L, fn, 2, "token id %I out of range for vocabulary size %d", id, v);
    char buf[32];
    lua_pushstring(L, ml_task_token_name(b->t, (int)id, buf));
}

/* task:to_str_tokens(tokens) -> the names of token ids: a list for one sequence (a table or a 1-D
 * tensor), a list of lists for a batch (B, L) */
static int l_to_str_tokens(lua_State *L) {
    const char *fn = "task:to_str_tokens";
    mlL_task_box *b = mlL_checktask(L, 1, fn);
    ml_tensor *t = mlL_testtensor(L, 2);
    if (t) {
        if (t->dtype != ML_I32 || t->ndim < 1 || t->ndim > 2)
            return mlL_argerror(L, fn, 2, "int32 token ids of shape (L) or (B, L)");
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
    if (!lua_istable(L, 2)) return mlL_argerror(L, fn, 2, "token ids (an int32 tensor or a list of integers)");
    lua_Integer n = (lua_Integer)lua_rawlen(L, 2);
    lua_createtable(L, (int)n, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 2, i);
        int ok;
        lua_Integer id = lua_tointegerx(L, -1, &ok);
        if (!ok) return mlL_argfail(L, fn, 2, "integer token ids expected, got %s at index %I", luaL_typename(L, -1), i);
        lua_pop(L, 1);
        push_token_name(L, b, id, fn);
        lua_rawseti(L, -2, i);
    }
    return 1;
}

static int l_kind(lua_State *L) {
    ml_task_kind k = ml_task_get_kind(mlL_checktask(L, 1, "task:kind")->t);
    if (k == ML_TASK_CUSTOM) return mlL_task_lib(L, "kind");
    lua_pushstring(L, ml_task_kind_name(k));
    return 1;
}

static int l_corrupt_range(lua_State *L) {
    int lo, hi;
    ml_task_corrupt_range(mlL_checktask(L, 1, "task:corrupt_range")->t, &lo, &hi);
    lua_pushinteger(L, lo);
    lua_pushinteger(L, hi);
    return 2;
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

/* task:config(): the options as a table (those that mech.task.ar / atr / mqar accept). */
static int l_config(lua_State *L) {
    mlL_task_box *b = mlL_checktask(L, 1, "task:config");
    if (ml_task_get_kind(b->t) == ML_TASK_CUSTOM) return mlL_task_lib(L, "config");
    lua_newtable(L);
    lua_pushinteger(L, (lua_Integer)ml_task_seed(b->t)), lua_setfield(L, -2, "seed");
    set_task_options(L, b->t);
    return 1;
}

/* task:spec(): the task's whole record {kind, name, seed, options}; mech.task.from_spec rebuilds
 * the same task from it (what checkpoints and manifests keep). A task of another origin (a Lua
 * module, a file) records {kind, module or path, options} in the same shape. */
static int l_spec(lua_State *L) {
    mlL_task_box *b = mlL_checktask(L, 1, "task:spec");
    lua_settop(L, 1);
    if (ml_task_get_kind(b->t) == ML_TASK_CUSTOM) return mlL_task_lib(L, "spec");
    lua_createtable(L, 0, 4);
    lua_pushstring(L, ml_task_kind_name(ml_task_get_kind(b->t))), lua_setfield(L, -2, "kind");
    lua_pushstring(L, ml_task_name(b->t)), lua_setfield(L, -2, "name");
    lua_pushinteger(L, (lua_Integer)ml_task_seed(b->t)), lua_setfield(L, -2, "seed");
    lua_newtable(L); /* the seed is kept once, at the top */
    set_task_options(L, b->t);
    lua_setfield(L, -2, "options");
    return 1;
}

/* task:positions() -> {names}: mech.task.positions, then the task's free names */
static int l_positions(lua_State *L) { return mlL_push_task_positions(L, mlL_checktask(L, 1, "task:positions")->t); }

static int l_tostring(lua_State *L) {
    mlL_task_box *b = mlL_checktask(L, 1, "tostring");
    lua_pushfstring(L, "mech.Task(%s, seed=%I, vocab=%d)", ml_task_name(b->t), (lua_Integer)ml_task_seed(b->t),
                    ml_task_vocab_size(b->t));
    return 1;
}

static int l_gc(lua_State *L) {
    mlL_task_box *b = luaL_checkudata(L, 1, MLL_TASK_MT);
    ml_task_release(b->t);
    b->t = NULL;
    return 0;
}

/* ------------------------------------------------------------------ module ---- */

int mlL_open_task(lua_State *L) {
    static const luaL_Reg methods[] = {{"sample", l_sample},       {"dataset", l_dataset},
                                       {"token_name", l_token_name}, {"to_str_tokens", l_to_str_tokens},
                                       {"show", mlL_task_show},    {"kind", l_kind},
                                       {"config", l_config},       {"spec", l_spec},
                                       {"corrupt_range", l_corrupt_range}, {"positions", l_positions},
                                       {NULL, NULL}};
    static const mlL_Decl decls[] = {{"task:vocab_size", "K", 'k', MLL_FN(ml_task_vocab_size)},
                                     {"task:name", "K", 's', MLL_FN(ml_task_name)},
                                     {"task:has_split", "K", 'b', MLL_FN(ml_task_has_split)},
                                     {"task:chance", "K", 'n', MLL_FN(ml_task_chance)},
                                     {NULL, NULL, 0, NULL}};
    static const luaL_Reg meta[] = {{"__gc", l_gc}, {"__tostring", l_tostring}, {NULL, NULL}};
    mlL_new_class(L, MLL_TASK_MT, methods, meta);
    luaL_getmetatable(L, MLL_TASK_MT);
    lua_getfield(L, -1, "__index");
    mlL_setdecls(L, -1, decls);
    mlL_setlua(L, -1, (const mlL_LuaReg[]){{"to_tokens", "mech.task_custom", NULL, MLL_CHECK_NONE, NULL},
                                            {NULL, NULL, NULL, 0, NULL}});
    lua_pop(L, 2);
    mlL_open_dataset(L);
    mlL_open_doc(L);

    static const luaL_Reg fns[] = {{"ar", l_ar},           {"atr", l_atr},
                                   {"mqar", l_mqar},       {"preset", l_preset},
                                   {"presets", l_presets}, {"show", mlL_doc_show},
                                   {"from_spec", l_from_spec}, {"from_checkpoint", l_from_checkpoint},
                                   {NULL, NULL}};
    luaL_newlib(L, fns);
    /* tasks made in Lua and from files: lua/mech/task_custom.lua */
    mlL_setlua(L, -1, (const mlL_LuaReg[]){{"new", "mech.task_custom", NULL, MLL_CHECK_NONE, NULL},
                                            {"load", "mech.task_custom", NULL, MLL_CHECK_NONE, NULL},
                                            {"register", "mech.task_custom", NULL, MLL_CHECK_NONE, NULL},
                                            {"from_jsonl", "mech.task_custom", NULL, MLL_CHECK_NONE, NULL},
                                            {NULL, NULL, NULL, 0, NULL}});
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE); /* their primitives */
    lua_pushcfunction(L, mlL_open_task_c);
    lua_setfield(L, -2, "mech.task_c");
    lua_pop(L, 1);
    mlL_push_names(L, ml_pos_names, ML_NPOS); /* the paper's eight: the first columns of every dataset:positions() */
    lua_setfield(L, -2, "positions");
    static const struct {
        const char *name;
        int value;
    } constants[] = {{"TRAIN_DOCS", ML_TRAIN_DOCS}, {"EVAL_DOCS", ML_EVAL_DOCS}, {"PAD", ML_PAD}, {"IGNORE", ML_IGNORE}};
    for (size_t i = 0; i < sizeof constants / sizeof *constants; i++)
        lua_pushinteger(L, constants[i].value), lua_setfield(L, -2, constants[i].name);
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
