/* Caches from Lua: site-name filters (literal names, {pattern = ...}, functions), the cache
 * class (a plain table {site = tensor} with methods: get, has, names, save, and lua/mech/
 * analysis.lua's residual-stream methods; a missing name is an error naming the closest), and
 * model:run_with_cache, which makes one (registered with the model's other methods and hooked
 * functions in model.c). The interventions and evaluators that read caches are interp.c's. */
#include <stdlib.h>
#include <string.h>

#include <lualib.h>

#include "interp/interp.h"
#include "lua/binding.h"
#include "nn/sites.h"

/* ------------------------------------------------------------------ names */

/* Whether Lua pattern `pat` matches `s` anywhere (string.find, so patterns behave as in Lua); a
 * malformed pattern is the caller's error, naming fn and the argument. */
static bool pattern_finds(lua_State *L, const char *s, const char *pat, const char *fn, const char *arg) {
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, LUA_STRLIBNAME);
    lua_getfield(L, -1, "find");
    lua_pushstring(L, s);
    lua_pushstring(L, pat);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK)
        mlL_error(L, fn, "%s: bad Lua pattern '%s': %s", arg, pat, lua_tostring(L, -1));
    bool found = !lua_isnil(L, -1);
    lua_pop(L, 3);
    return found;
}

/* The {pattern = "..."} table at idx, as mlL_checkfilter left it: its pattern, or NULL. Read raw,
 * so the string stays anchored in the table. */
static const char *filter_pattern(lua_State *L, int idx) {
    if (!lua_istable(L, idx)) return NULL;
    lua_pushliteral(L, "pattern");
    lua_rawget(L, idx);
    const char *pat = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL; /* idx anchors it */
    lua_pop(L, 1);
    return pat;
}

/* Whether idx holds a {pattern = "..."} table. Its `pattern` is read once (an __index may answer
 * differently on a second read, or give a string nothing else holds), and the table is replaced
 * in its slot by a plain one holding that pattern, which filter_pattern reads. */
static bool pattern_table(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    if (!lua_istable(L, idx)) return false;
    if (lua_getfield(L, idx, "pattern") != LUA_TSTRING) {
        lua_pop(L, 1);
        return false;
    }
    lua_createtable(L, 0, 1);
    lua_insert(L, -2);
    lua_setfield(L, -2, "pattern");
    lua_replace(L, idx);
    return true;
}

int mlL_checkfilter(lua_State *L, int idx, const char *fn, const char *arg) {
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) == LUA_TSTRING || lua_isfunction(L, idx) || pattern_table(L, idx)) return idx;
    return mlL_error(L, fn, "%s: expected a site name, {pattern = a Lua pattern} or a function(name), got %s", arg,
                      luaL_typename(L, idx));
}

bool mlL_name_filter(lua_State *L, int idx, const char *name, const char *fn, const char *arg) {
    idx = lua_absindex(L, idx);
    if (lua_isfunction(L, idx)) {
        lua_pushvalue(L, idx);
        lua_pushstring(L, name);
        lua_call(L, 1, 1);
        bool keep = lua_toboolean(L, -1);
        lua_pop(L, 1);
        return keep;
    }
    const char *pat = filter_pattern(L, idx);
    if (!pat) return lua_type(L, idx) == LUA_TSTRING && ml_site_literal_match(name, lua_tostring(L, idx));
    char tl[ML_SITE_NAME_MAX]; /* the pattern may be written against the TransformerLens spelling */
    return pattern_finds(L, name, pat, fn, arg) || (ml_site_tl_spelling(name, tl, sizeof tl) &&
                                                    pattern_finds(L, tl, pat, fn, arg));
}

/* Marks in want the sites one entry of a `names` option selects (the value at idx): a site name
 * or its trailing part (mechlab's or TransformerLens's spelling), {pattern = a Lua pattern} over
 * the full names, or a function. A name that selects nothing is an error with the closest name. */
static void select_sites(lua_State *L, ml_model *m, int idx, bool *want, const char *key, const char *fn) {
    char arg[64];
    snprintf(arg, sizeof arg, "option '%s'", key);
    idx = mlL_checkfilter(L, idx, fn, arg);
    if (lua_type(L, idx) == LUA_TSTRING) {
        const char *name = lua_tostring(L, idx);
        int s = ml_site_resolve(m, name);
        if (s >= 0) {
            want[s] = true;
            return;
        }
    }
    /* the names first: a filter function may close the model, so it runs after the last read */
    int n = m->n_sites;
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        char name[96];
        ml_site_fullname(m, i, name, sizeof name);
        lua_pushstring(L, name);
        lua_rawseti(L, -2, i + 1);
    }
    bool any = false;
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, -1, i + 1);
        if (mlL_name_filter(L, idx, lua_tostring(L, -1), fn, arg)) want[i] = any = true;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (!any && lua_type(L, idx) == LUA_TSTRING) mlL_checksite(L, m, lua_tostring(L, idx), fn); /* raises */
}

/* The `names` option: nil = every site; a name, {pattern =} or function, or a list of names and
 * {pattern =} tables. The mask is left on the stack. */
static bool *names_mask(lua_State *L, ml_model *m, int opt, const char *key, const char *fn) {
    bool *want = mlL_scratch(L, (size_t)m->n_sites + 1);
    int t = lua_getfield(L, opt, key);
    if (t == LUA_TNIL) memset(want, 1, (size_t)m->n_sites);
    else if (t == LUA_TTABLE && !pattern_table(L, -1)) {
        for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
            if (lua_type(L, -1) != LUA_TSTRING && !pattern_table(L, -1)) {
                mlL_error(L, fn, "option '%s': expected a list of site names or {pattern =} tables, got a %s at index %d", key, luaL_typename(L, -1), (int)i);
            }
            select_sites(L, m, -1, want, key, fn);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    } else {
        select_sites(L, m, -1, want, key, fn);
    }
    lua_pop(L, 1);
    return want;
}

/* ------------------------------------------------------------------ caches */

/* A cache is a plain table {full site name = tensor} (so pairs works) whose metatable adds the
 * methods below; indexing it with a name it lacks is an error naming the closest cached name,
 * and TransformerLens names index it too. New methods go in cache_methods (mlL_open_cache). */

static void check_cache(lua_State *L, int arg, const char *fn) {
    bool ok = lua_istable(L, arg) && luaL_getmetafield(L, arg, "__name") == LUA_TSTRING;
    if (ok) {
        ok = !strcmp(lua_tostring(L, -1), MLL_CACHE_MT);
        lua_pop(L, 1);
    }
    if (!ok) mlL_argerror(L, fn, arg, "a mech.Cache");
}

/* The cached names, sorted: a NULL-terminated array whose strings are anchored in a list left on
 * the stack (under the array's own userdata). */
static const char **cache_keys(lua_State *L, int cache, int *n_out) {
    cache = lua_absindex(L, cache);
    lua_newtable(L);
    int list = lua_gettop(L), n = 0;
    lua_pushnil(L);
    while (lua_next(L, cache)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING) lua_pushvalue(L, -1), lua_rawseti(L, list, ++n);
    }
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, LUA_TABLIBNAME);
    lua_getfield(L, -1, "sort");
    lua_pushvalue(L, list);
    lua_call(L, 1, 0);
    lua_pop(L, 2);
    const char **keys = mlL_scratch(L, sizeof *keys * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, list, i + 1);
        keys[i] = lua_tostring(L, -1); /* anchored in list */
        lua_pop(L, 1);
    }
    *n_out = n;
    return keys;
}

/* rawget(t, key) pushed; returns its type (caches are read raw: their __index raises). */
static int rawfield(lua_State *L, int t, const char *key) {
    t = lua_absindex(L, t);
    lua_pushstring(L, key);
    return lua_rawget(L, t);
}

/* Pushes cache[key] (mechlab or TransformerLens spelling) or raises naming the closest key. */
/* Pushes cache[key] in either spelling (a TransformerLens name tried as each component it stands
 * for); returns its type, nil pushed when absent. */
static int cache_raw(lua_State *L, int cache, const char *key) {
    char buf[ML_SITE_NAME_MAX];
    cache = lua_absindex(L, cache);
    int t = rawfield(L, cache, ml_site_canonical(key, buf, sizeof buf)), layer;
    const char *rest = ml_site_split(key, &layer), *c;
    for (int k = 1; t == LUA_TNIL && rest && (c = ml_site_component_at(rest, k)); k++) {
        lua_pop(L, 1);
        ml_site_format(buf, sizeof buf, layer, c);
        t = rawfield(L, cache, buf);
    }
    return t;
}

static void cache_fetch(lua_State *L, int cache, const char *key, const char *fn) {
    cache = lua_absindex(L, cache);
    if (cache_raw(L, cache, key) != LUA_TNIL) return;
    int n;
    const char **keys = cache_keys(L, cache, &n);
    char buf[ML_SITE_NAME_MAX], q[128];
    key = ml_site_canonical(key, buf, sizeof buf);
    const char *near = ml_closest(key, keys);
    mlL_error(L, fn, "%s is not in this cache%s%s%s; cache:names() lists the %d it holds", mlL_quote(key, q, sizeof q),
               near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "", n);
}

/* cache[key] for a key the table lacks: a method, else an activation under another spelling. */
static int cache_index(lua_State *L) {
    if (lua_type(L, 2) != LUA_TSTRING)
        return mlL_error(L, "cache", "keys are site names such as 'blocks.0.block_input', got %s", luaL_typename(L, 2));
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
    check_cache(L, 1, "cache");
    cache_fetch(L, 1, lua_tostring(L, 2), "cache");
    return 1;
}

/* cache:get(component[, layer]): cache:get("block_input", 1), cache:get("resid_pre", 1) */
static int cache_get(lua_State *L) {
    const char *fn = "cache:get";
    check_cache(L, 1, fn);
    const char *c = luaL_checkstring(L, 2);
    if (lua_isnoneornil(L, 3)) {
        cache_fetch(L, 1, c, fn);
        return 1;
    }
    int layer = mlL_checkint32(L, 3, fn);
    char key[ML_SITE_NAME_MAX];
    ml_site_format(key, sizeof key, layer, c);
    cache_fetch(L, 1, key, fn);
    return 1;
}

/* cache:has(name) -> whether cache[name] gives an activation */
static int cache_has(lua_State *L) {
    check_cache(L, 1, "cache:has");
    lua_pushboolean(L, cache_raw(L, 1, luaL_checkstring(L, 2)) != LUA_TNIL);
    return 1;
}

/* cache:names([filter]) -> the cached names, sorted; filter: a name (or its trailing part),
 * {pattern = a Lua pattern} or a function */
static int cache_names(lua_State *L) {
    const char *fn = "cache:names";
    check_cache(L, 1, fn);
    lua_settop(L, 2);
    bool filtered = !lua_isnil(L, 2);
    if (filtered) mlL_checkfilter(L, 2, fn, "argument 2");
    int n;
    const char **keys = cache_keys(L, 1, &n);
    lua_newtable(L);
    for (int i = 0, k = 0; i < n; i++)
        if (!filtered || mlL_name_filter(L, 2, keys[i], fn, "argument 2")) lua_pushstring(L, keys[i]), lua_rawseti(L, -2, ++k);
    return 1;
}

static void push_site_table(lua_State *L, ml_model *m, ml_tensor **t) {
    lua_newtable(L);
    for (int i = 0; i < m->n_sites; i++)
        if (t[i]) {
            char name[96];
            ml_site_fullname(m, i, name, sizeof name);
            mlL_pushtensor(L, t[i]);
            t[i] = NULL;
            lua_setfield(L, -2, name);
        }
    luaL_setmetatable(L, MLL_CACHE_MT);
}

/* The scalar options of run_with_cache (names, targets and rows are read where they are used). */
typedef struct {
    bool grads;
    int objective; /* 0: logprob, 1: prob */
} cache_options;

/* logits, cache[, grads] = model:run_with_cache(tokens[, {names=, grads=, targets=, rows=, objective=}]) */
int mlL_run_with_cache(lua_State *L) {
    const char *fn = "model:run_with_cache";
    static const char *const keys[] = {"names", "grads", "targets", "rows", "objective", NULL};
    ml_model *m = mlL_checkmodel(L, 1, fn);
    mlL_opttable(L, 3, fn, 2, keys);
    ml_tensor *tok = mlL_checktokens(L, m, 2, fn);
    static const char *const objectives[] = {"logprob", "prob", NULL};
    static const mlL_option spec[] = {MLL_OPTION(MLL_CBOOL, "grads", cache_options, grads),
                                      {"objective", MLL_ENUM, offsetof(cache_options, objective), 0, 0, objectives, NULL},
                                      {NULL, 0, 0, 0, 0, NULL, NULL}};
    cache_options o = {.grads = false, .objective = 0};
    mlL_options(L, 3, fn, spec, &o);
    bool grads = o.grads, logprob = o.objective == 0;
    bool *want = names_mask(L, m, 3, "names", fn);
    m = mlL_checkmodel(L, 1, fn); /* a names function may have closed it */
    ml_tensor **acts = mlL_scratch(L, sizeof *acts * ((size_t)m->n_sites + 1));
    ml_tensor **g = mlL_scratch(L, sizeof *g * ((size_t)m->n_sites + 1));
    ml_tensor *hid = NULL, *rows = NULL, *tg = NULL;
    ml_status st = ML_OK;
    if (grads) { /* arguments first (they may raise), anchored on the stack */
        int64_t B = tok->shape[0], L_ = tok->shape[1];
        if (lua_getfield(L, 3, "targets") == LUA_TNIL)
            return mlL_error(L, fn, "grads = true needs option 'targets' (int32, one answer token per sequence)");
        tg = mlL_checkints(L, -1, fn, "targets");
        if (lua_getfield(L, 3, "rows") != LUA_TNIL) rows = mlL_checkints(L, -1, fn, "rows");
        else mlL_pushtensor(L, rows = ml_full(ML_I32, 1, &B, (double)(L_ - 1)));
        ml_tensor *rc = ml_contiguous(rows), *tc = ml_contiguous(tg);
        st = rc && tc ? ml_run_cache_grad(m, tok, rc, tc, logprob, want, acts, g, &hid) : ml_last_status();
        ml_release(rc), ml_release(tc);
    } else {
        st = ml_run_cache(m, tok, want, acts, &hid);
    }
    ml_tensor *logits = st ? NULL : ml_model_head(m, hid);
    ml_release(hid);
    if (!logits) {
        for (int i = 0; i < m->n_sites; i++) ml_release(acts[i]), ml_release(g[i]), acts[i] = g[i] = NULL;
        return mlL_raise(L);
    }
    mlL_pushtensor(L, logits);
    push_site_table(L, m, acts);
    if (grads) push_site_table(L, m, g);
    for (int c = lua_gettop(L) - grads; c <= lua_gettop(L); c++) { /* the caches' model and tokens (at 4) */
        mlL_pushlua(L, "mech.analysis", "set_origin", MLL_CHECK_NONE, NULL);
        lua_pushvalue(L, c), lua_pushvalue(L, 1), lua_pushvalue(L, 4);
        lua_call(L, 3, 0);
    }
    return grads ? 3 : 2;
}

void mlL_open_cache(lua_State *L) {
    static const luaL_Reg cache_methods[] = {{"get", cache_get}, {"has", cache_has}, {"names", cache_names},
                                             {"save", mlL_cache_save}, {NULL, NULL}};
    luaL_newmetatable(L, MLL_CACHE_MT);
    luaL_newlib(L, cache_methods);
    mlL_setlua(L, -1, (const mlL_LuaReg[]){{"accumulated_resid", "mech.analysis", "cache_accumulated_resid", MLL_CHECK_NONE, NULL},
                                            {"decompose_resid", "mech.analysis", "cache_decompose_resid", MLL_CHECK_NONE, NULL},
                                            {"stack_head_results", "mech.analysis", "cache_stack_head_results", MLL_CHECK_NONE, NULL},
                                            {"apply_ln_to_stack", "mech.analysis", "cache_apply_ln_to_stack", MLL_CHECK_NONE, NULL},
                                            {"logit_attrs", "mech.analysis", "cache_logit_attrs", MLL_CHECK_NONE, NULL},
                                            {NULL, NULL, NULL, 0, NULL}});
    lua_pushvalue(L, -1), lua_setfield(L, -3, "__methods"); /* for the REPL's completion */
    lua_pushcclosure(L, cache_index, 1);
    lua_setfield(L, -2, "__index");
    mlL_pushlua(L, "mech.show", "cache", MLL_CHECK_NONE, NULL), lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
}
