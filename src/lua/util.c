/* Shared helpers of the binding: argument checks, option tables, error messages. */
#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua/binding.h"
#include "nn/model.h"

static int raise_message(lua_State *L, const char *fn, bool where);

/* The core names the function and counts arguments as the C call does ("sum: argument 2
 * expected a dimension in [-2, 1], got 5", the tensor being argument 1). When that name is the
 * one the running Lua call used, the message is given the binding's format and name; any other
 * (a model's core call behind a differently named method) keeps the core's words. */
int mlL_raise(lua_State *L) {
    lua_pushstring(L, ml_last_error());
    ml_clear_error();
    const char *e = lua_tostring(L, -1);
    size_t w = strspn(e, "abcdefghijklmnopqrstuvwxyz_0123456789."); /* "sum" or "mech.zeros" */
    lua_Debug ar;
    const char *last = e;
    for (size_t i = 0; i < w; i++)
        if (e[i] == '.') last = e + i + 1;
    if (w == 0 || w >= 64 || strncmp(e + w, ": ", 2) || !lua_getstack(L, 0, &ar) || !lua_getinfo(L, "n", &ar) || !ar.name ||
        strlen(ar.name) != (size_t)(e + w - last) || strncmp(ar.name, last, strlen(ar.name)))
        return lua_error(L);
    char fn[64];
    memcpy(fn, e, w), fn[w] = 0;
    lua_pushstring(L, e + w + 2);
    return raise_message(L, fn, false);
}

const char *mlL_describe(lua_State *L, int idx, char *buf, size_t n) {
    ml_tensor *t = mlL_testtensor(L, idx);
    if (t) {
        char s[ML_SHAPE_STR];
        const char *dt = ml_dtype_name(t->dtype);
        snprintf(buf, n, "%s %s tensor of shape %s", strchr("aeiou", dt[0]) ? "an" : "a", dt, ml_shape_str(s, t->ndim, t->shape));
    } else if (lua_isnone(L, idx)) {
        snprintf(buf, n, "no value");
    } else if (lua_type(L, idx) == LUA_TNUMBER || lua_type(L, idx) == LUA_TSTRING) {
        lua_pushvalue(L, idx); /* tostring on a copy: never convert the caller's slot */
        const char *fmt = lua_type(L, idx) == LUA_TSTRING ? "'%.60s'" : "%.60s";
        snprintf(buf, n, fmt, lua_tostring(L, -1));
        lua_pop(L, 1);
    } else {
        snprintf(buf, n, "%s", luaL_typename(L, idx));
    }
    return buf;
}

const char *mlL_error_text(lua_State *L, int idx) {
    const char *msg = lua_tostring(L, idx);
    if (msg) return msg;
    switch (lua_type(L, idx)) {
    case LUA_TNIL: return "raised nil as its error (not a message)";
    case LUA_TBOOLEAN: return "raised a boolean as its error (not a message)";
    case LUA_TTABLE: return "raised a table as its error (not a message)";
    case LUA_TFUNCTION: return "raised a function as its error (not a message)";
    default: return "raised a userdata as its error (not a message)";
    }
}

/* ---- the one error format ----
 * Argument errors read "bad argument #n to 'NAME' (...)", every other error "NAME: message".
 * NAME is a function's dotted path ("mech.zeros", "mech.interp.patching_map") or a method's
 * "class:method" ("tensor:sum", "model:run_with_cache"); a method does not count self, as Lua's
 * own luaL_argerror does not for a method call, and a bad self reads "calling 'NAME' on bad self
 * (...)". A bare fn ("sum") is a tensor op reached both ways (t:sum(), mech.sum(t)): the call
 * decides which name it gets. */
static const char *call_name(lua_State *L, const char *fn, int *arg, char *buf, size_t n) {
    if (strchr(fn, ':')) {
        if (arg) (*arg)--;
        return fn;
    }
    if (fn[strspn(fn, "abcdefghijklmnopqrstuvwxyz_0123456789")]) return fn; /* a path, or "tensor[i]" */
    lua_Debug ar;
    if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.namewhat && strcmp(ar.namewhat, "method") == 0) {
        if (arg) (*arg)--;
        /* the class of self: its metatable's name after "mech.", in lower case */
        char cls[32] = "tensor";
        int t = luaL_getmetafield(L, 1, "__name");
        if (t == LUA_TSTRING) {
            const char *mt = lua_tostring(L, -1), *dot = strrchr(mt, '.');
            snprintf(cls, sizeof cls, "%s", dot ? dot + 1 : mt);
            for (char *c = cls; *c; c++) *c = (char)tolower((unsigned char)*c);
        }
        if (t != LUA_TNIL) lua_pop(L, 1);
        snprintf(buf, n, "%s:%s", cls, fn);
    } else {
        snprintf(buf, n, "mech.%s", fn);
    }
    return buf;
}

/* Raises "bad argument #arg to 'NAME' (detail)" (or the bad-self form); detail is on top. `where`:
 * prefixed with the caller's position, as luaL_error does (the core's errors never were). */
static int raise_arg(lua_State *L, const char *fn, int arg, bool where) {
    luaL_checkstack(L, 4, "error message");
    char buf[96];
    const char *name = call_name(L, fn, &arg, buf, sizeof buf);
    const char *detail = lua_tostring(L, -1);
    if (where) luaL_where(L, 1);
    else lua_pushliteral(L, "");
    if (arg == 0) lua_pushfstring(L, "%scalling '%s' on bad self (%s)", lua_tostring(L, -1), name, detail);
    else lua_pushfstring(L, "%sbad argument #%d to '%s' (%s)", lua_tostring(L, -1), arg, name, detail);
    return lua_error(L);
}

int mlL_argerror(lua_State *L, const char *fn, int arg, const char *expected) {
    char got[160];
    mlL_describe(L, arg, got, sizeof got);
    lua_pushfstring(L, "%s expected, got %s", expected, got);
    return raise_arg(L, fn, arg, true);
}

int mlL_argfail(lua_State *L, const char *fn, int arg, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    return raise_arg(L, fn, arg, true);
}

/* Raises the message on top for fn: "argument N rest" (stack index N; some messages are built from
 * a "where" such as "argument 1 group 2") becomes an argument error, anything else "NAME: msg". */
static int raise_message(lua_State *L, const char *fn, bool where) {
    luaL_checkstack(L, 4, "error message");
    const char *msg = lua_tostring(L, -1);
    int arg, used = 0;
    if (sscanf(msg, "argument %d%n", &arg, &used) == 1 && arg > 0 && used > 0) {
        msg += used;
        lua_pushstring(L, msg + strspn(msg, ": "));
        return raise_arg(L, fn, arg, where);
    }
    char buf[96];
    const char *name = call_name(L, fn, NULL, buf, sizeof buf);
    if (where) luaL_where(L, 1);
    else lua_pushliteral(L, "");
    lua_pushfstring(L, "%s%s: %s", lua_tostring(L, -1), name, msg);
    return lua_error(L);
}

int mlL_error(lua_State *L, const char *fn, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    return raise_message(L, fn, true);
}

/* An option's error: "bad argument #n to 'NAME' (option 'key': expected ..., got ...)", n the
 * option table's stack index (option tables are arguments). */
int mlL_opterror(lua_State *L, const char *fn, int idx, const char *key, const char *expected) {
    char got[160];
    mlL_describe(L, -1, got, sizeof got);
    return mlL_argfail(L, fn, idx, "option '%s': expected %s, got %s", key, expected, got);
}

/* Bytes allocated outside the Lua heap since the collector last heard of them. Per thread, as
 * one thread runs one Lua state; a step taken in another state would only be wasted work. */
static _Thread_local size_t unreported_bytes = 0;

void mlL_account(lua_State *L, size_t nbytes) {
    /* The collector sees only a tensor's small userdata, and finalised objects wait a cycle
     * more: loops of small tensors outran it (4e6 ops on 4x4 tensors reached 2 GB). Every
     * allocation adds its real size to a debt, paid as incremental steps "as if" that much had
     * been allocated on the Lua heap, once per 64 KiB so small tensors cost no call each. */
    unreported_bytes += nbytes;
    if (unreported_bytes < 64 * 1024) return;
    size_t kb = unreported_bytes / 1024;
    unreported_bytes = 0;
    lua_gc(L, LUA_GCSTEP, (int)(kb > 1000000 ? 1000000 : kb));
}

void mlL_checktable(lua_State *L, int idx, const char *fn, int arg) {
    (void)arg; /* the stack index is the argument: methods' numbers are adjusted by the message */
    if (!lua_istable(L, idx)) mlL_argerror(L, fn, lua_absindex(L, idx), "a table");
}


const char *mlL_quote(const char *s, char *buf, size_t n) {
    size_t len = strlen(s);
    if (len <= 80) snprintf(buf, n, "'%s'", s);
    else snprintf(buf, n, "'%.72s...' (%zu characters)", s, len);
    return buf;
}

void mlL_checkkeys_at(lua_State *L, int idx, const char *fn, int arg, const char *what, const char *const *allowed) {
    idx = lua_absindex(L, idx);
    const char *sep = what ? ": " : "";
    what = what ? what : "";
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            mlL_argfail(L, fn, arg, "%s%soption table keys must be strings, got %s", what, sep, luaL_typename(L, -1));
        const char *k = lua_tostring(L, -1);
        bool ok = false;
        for (int i = 0; allowed[i] && !ok; i++) ok = strcmp(k, allowed[i]) == 0;
        if (!ok) {
            const char *near = ml_closest(k, allowed);
            char q[128];
            mlL_argfail(L, fn, arg, "%s%sunknown option %s%s%s%s", what, sep, mlL_quote(k, q, sizeof q),
                        near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
        }
    }
}

void mlL_checkkeys(lua_State *L, int idx, const char *fn, const char *const *allowed) {
    idx = lua_absindex(L, idx);
    mlL_checkkeys_at(L, idx, fn, idx, NULL, allowed);
}

/* ---- option reads ----
 * The binding's one rule: an option is read once, with lua_getfield (metamethods honoured, as in
 * Lua's own library), and everything checked and stored comes from that one read. Reading a key
 * twice let an __index that answers differently (a number, then nil) pass NULL to strcmp. The
 * top_* helpers below convert the value already pushed; they raise on a wrong type. */

/* Keeps the string at the top alive as long as the option table at idx: a value that came
 * from __index is referenced by nothing else once popped (registry[anchors][table] = {s, ...},
 * weak in its keys, so the list goes with the table). */
static const char *anchor_string(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    if (lua_getmetatable(L, idx)) { /* a plain table holds what it gave: nothing to keep */
        lua_pop(L, 1);
        if (luaL_getsubtable(L, LUA_REGISTRYINDEX, "mech.option_anchors") == 0) {
            lua_newtable(L);
            lua_pushliteral(L, "k");
            lua_setfield(L, -2, "__mode");
            lua_setmetatable(L, -2);
        }
        lua_pushvalue(L, idx);
        if (lua_rawget(L, -2) != LUA_TTABLE) {
            lua_pop(L, 1);
            lua_newtable(L);
            lua_pushvalue(L, idx);
            lua_pushvalue(L, -2);
            lua_rawset(L, -4);
        }
        lua_pushvalue(L, -3);
        lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
        lua_pop(L, 2);
    }
    return lua_tostring(L, -1);
}

/* Where an option lies, for messages: the table at stack index `table`, argument `arg` of fn, and
 * `what` ("series 2") when the table is nested in that argument, else NULL. */
typedef struct {
    const char *fn;
    int table, arg;
    const char *what;
} opt_at;

static int opt_error(lua_State *L, const opt_at *w, const char *key, const char *expected) {
    if (!w->what) return mlL_opterror(L, w->fn, w->arg, key, expected);
    char got[160];
    mlL_describe(L, -1, got, sizeof got);
    return mlL_argfail(L, w->fn, w->arg, "%s: option '%s': expected %s, got %s", w->what, key, expected, got);
}

static lua_Integer top_int(lua_State *L, const opt_at *w, const char *key) {
    int ok;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    if (!ok) opt_error(L, w, key, "an integer");
    return v;
}

static int top_int32(lua_State *L, const opt_at *w, const char *key) {
    lua_Integer v = top_int(L, w, key);
    if (v < INT32_MIN || v > INT32_MAX) opt_error(L, w, key, "an integer in [-2^31, 2^31)");
    return (int)v;
}

static void top_type(lua_State *L, const opt_at *w, const char *key, int type, const char *what) {
    if (lua_type(L, -1) != type) opt_error(L, w, key, what);
}

static lua_Number top_num(lua_State *L, const opt_at *w, const char *key) {
    top_type(L, w, key, LUA_TNUMBER, "a number");
    return lua_tonumber(L, -1);
}

static int top_bool(lua_State *L, const opt_at *w, const char *key) {
    top_type(L, w, key, LUA_TBOOLEAN, "a boolean");
    return lua_toboolean(L, -1);
}

static const char *top_str(lua_State *L, const opt_at *w, const char *key) {
    top_type(L, w, key, LUA_TSTRING, "a string");
    return anchor_string(L, w->table);
}

/* Pushes option `key` of the table at idx, read once; false (nothing pushed) when it is nil. */
static bool opt_read(lua_State *L, int idx, const char *key) {
    luaL_checkstack(L, 4, "option");
    if (lua_getfield(L, idx, key) != LUA_TNIL) return true;
    lua_pop(L, 1);
    return false;
}

/* The single-option readers: one row of mlL_options, over the default. */
#define READ_ONE(type, key, fn, v) mlL_options(L, idx, fn, (const mlL_option[]){{key, type, 0, 0, 0, NULL, NULL}, {NULL}}, &v)

int mlL_optint32(lua_State *L, int idx, const char *key, int def, const char *fn) {
    READ_ONE(MLL_INT32, key, fn, def);
    return def;
}

lua_Integer mlL_checkint(lua_State *L, int arg, const char *fn) {
    int ok = 0;
    lua_Integer v = lua_type(L, arg) == LUA_TNUMBER ? lua_tointegerx(L, arg, &ok) : 0;
    if (!ok) mlL_argerror(L, fn, arg, "an integer");
    return v;
}

lua_Integer mlL_optarg_int(lua_State *L, int arg, lua_Integer def, const char *fn) {
    return lua_isnoneornil(L, arg) ? def : mlL_checkint(L, arg, fn);
}

int mlL_checkint32(lua_State *L, int arg, const char *fn) {
    lua_Integer v = mlL_checkint(L, arg, fn);
    if (v < INT32_MIN || v > INT32_MAX) mlL_argerror(L, fn, arg, "an integer in [-2^31, 2^31)");
    return (int)v;
}

lua_Number mlL_checknum(lua_State *L, int arg, const char *fn) {
    if (lua_type(L, arg) != LUA_TNUMBER) mlL_argerror(L, fn, arg, "a number");
    return lua_tonumber(L, arg);
}

const char *mlL_checkstr(lua_State *L, int arg, const char *fn) {
    if (lua_type(L, arg) != LUA_TSTRING) mlL_argerror(L, fn, arg, "a string");
    return lua_tostring(L, arg);
}

void *mlL_checkudata(lua_State *L, int arg, const char *mt, const char *fn, const char *what) {
    void *p = luaL_testudata(L, arg, mt);
    if (!p) mlL_argerror(L, fn, arg, what);
    return p;
}

lua_Integer mlL_optint(lua_State *L, int idx, const char *key, lua_Integer def, const char *fn) {
    int64_t v = def;
    READ_ONE(MLL_INT, key, fn, v);
    return v;
}

lua_Number mlL_optnum(lua_State *L, int idx, const char *key, lua_Number def, const char *fn) {
    READ_ONE(MLL_NUM, key, fn, def);
    return def;
}

int mlL_optbool(lua_State *L, int idx, const char *key, int def, const char *fn) {
    READ_ONE(MLL_BOOL, key, fn, def);
    return def;
}

const char *mlL_optstr(lua_State *L, int idx, const char *key, const char *def, const char *fn) {
    READ_ONE(MLL_STR, key, fn, def);
    return def;
}

int mlL_checkshape(lua_State *L, int first, const char *fn, int64_t shape[ML_MAX_DIMS]) {
    int n = 0;
    if (lua_istable(L, first) && !mlL_testtensor(L, first)) {
        int len = (int)luaL_len(L, first);
        if (len > ML_MAX_DIMS) mlL_argfail(L, fn, first, "%d dimensions, expected at most %d", len, ML_MAX_DIMS);
        for (int i = 1; i <= len; i++) {
            lua_geti(L, first, i);
            int ok;
            lua_Integer v = lua_tointegerx(L, -1, &ok);
            if (!ok || v < 0)
                mlL_argfail(L, fn, first, "expected a shape of integers >= 0, entry %d is %s", i,
                            lua_isnil(L, -1) ? "nil" : luaL_tolstring(L, -1, NULL));
            shape[n++] = v;
            lua_pop(L, 1);
        }
        return n;
    }
    for (int i = first; lua_type(L, i) == LUA_TNUMBER; i++) {
        if (n == ML_MAX_DIMS) mlL_argfail(L, fn, i, "at most %d dimensions", ML_MAX_DIMS);
        int ok;
        lua_Integer v = lua_tointegerx(L, i, &ok);
        if (!ok || v < 0) mlL_argerror(L, fn, i, "a size (integer >= 0)");
        shape[n++] = v;
    }
    return n;
}

int mlL_checksite(lua_State *L, const ml_model *m, const char *name, const char *fn) {
    int s = ml_site_resolve(m, name);
    if (s >= 0) return s;
    char q[128];
    mlL_quote(name, q, sizeof q);
    int layer, nl = m->cfg.n_layers;
    if (ml_site_split(name, &layer) && layer >= nl) /* the layer is what is wrong */
        return mlL_error(L, fn, "unknown hook site %s: the model has %d layer%s (0–%d)", q, nl, nl == 1 ? "" : "s", nl - 1);
    /* candidates: every site in mechlab's spelling and, where it has one, TransformerLens's */
    enum { W = ML_SITE_NAME_MAX };
    const char **names = malloc(sizeof *names * (size_t)(2 * m->n_sites + 1));
    char *store = malloc(W * (size_t)(2 * m->n_sites + 1));
    if (!names || !store) {
        free(names), free(store);
        return mlL_error(L, fn, "out of memory");
    }
    int n = 0;
    for (int i = 0; i < m->n_sites; i++) {
        ml_site_fullname(m, i, store + W * n, W), names[n] = store + W * n, n++;
        const char *tl = ml_site_tl_name(m->sites[i].name);
        if (tl) ml_site_format(store + W * n, W, m->site_layer[i], tl), names[n] = store + W * n, n++;
    }
    names[n] = NULL;
    const char *near = ml_closest(name, names);
    lua_pushfstring(L, "unknown hook site %s (did you mean '%s'? model:hook_names() lists them)", q, near ? near : "");
    free(names), free(store);
    return mlL_error(L, fn, "%s", lua_tostring(L, -1));
}

ml_tensor *mlL_checktokens(lua_State *L, const ml_model *m, int arg, const char *fn) {
    ml_tensor *t = mlL_testtensor(L, arg);
    if (t && t->dtype != ML_I32) mlL_argerror(L, fn, arg, "int32 token ids of shape [B,L]");
    t = mlL_checkints(L, arg, fn, NULL);
    if (t->ndim != 1 && t->ndim != 2) mlL_argerror(L, fn, arg, "int32 token ids of shape [B,L]");
    ml_tensor *c = t->ndim == 1 ? ml_unsqueeze(t, 0) : ml_contiguous(t);
    if (!c) mlL_raise(L);
    mlL_pushtensor(L, c); /* anchored on the stack before the checks may raise */
    for (int64_t i = 0, n = ml_numel(c); i < n; i++) {
        int32_t v = ml_i32(c)[i];
        if (v < 0 || v >= m->cfg.vocab)
            mlL_argfail(L, fn, arg, "token id %d out of range for vocabulary size %d", (int)v, m->cfg.vocab);
    }
    return c;
}

void mlL_opttable(lua_State *L, int idx, const char *fn, int arg, const char *const *allowed) {
    lua_settop(L, idx);
    if (lua_isnil(L, idx)) lua_newtable(L), lua_replace(L, idx);
    mlL_checktable(L, idx, fn, arg);
    mlL_checkkeys(L, idx, fn, allowed);
}

/* ---- slimtensor: the generic option reader ---- */

/* The option error of row o for the value at the top of the stack (as read: an integer, a float
 * or the string) that fails its range or names. */
static void option_fail(lua_State *L, const opt_at *w, const mlL_option *o) {
    char want[256];
    if (o->expected) {
        snprintf(want, sizeof want, "%s", o->expected);
    } else if (o->type == MLL_ENUM) {
        int n = snprintf(want, sizeof want, "one of ");
        for (int i = 0; o->names[i] && n < (int)sizeof want; i++)
            n += snprintf(want + n, sizeof want - (size_t)n, "%s'%s'", i ? ", " : "", o->names[i]);
    } else {
        snprintf(want, sizeof want, "%s in [%.17g, %.17g]", o->type == MLL_INT || o->type == MLL_INT32 ? "an integer" : "a number",
                 o->min, o->max);
    }
    opt_error(L, w, o->key, want);
}

void mlL_options(lua_State *L, int idx, const char *fn, const mlL_option *spec, void *out) {
    idx = lua_absindex(L, idx);
    mlL_options_at(L, idx, fn, idx, NULL, spec, out);
}

void mlL_options_at(lua_State *L, int idx, const char *fn, int arg, const char *what, const mlL_option *spec, void *out) {
    idx = lua_absindex(L, idx);
    const opt_at *w = &(opt_at){fn, idx, arg, what};
    for (const mlL_option *o = spec; o->key; o++) {
        if (!opt_read(L, idx, o->key)) continue; /* the one read of this key: the value stays on top */
        char *f = (char *)out + o->offset;
        bool ranged = o->min < o->max;
        double v = 0; /* the number, for the range check */
        switch (o->type) {
        case MLL_INT:
        case MLL_INT32: {
            lua_Integer i = top_int(L, w, o->key);
            if (ranged && !(i >= o->min && i <= o->max)) lua_pushinteger(L, i), option_fail(L, w, o); /* before int32's */
            if (o->type == MLL_INT) *(int64_t *)f = i;
            else *(int *)f = top_int32(L, w, o->key);
            ranged = false;
            break;
        }
        case MLL_NUM: v = *(double *)f = top_num(L, w, o->key); break;
        case MLL_FLOAT: v = *(float *)f = (float)top_num(L, w, o->key); break;
        case MLL_BOOL: *(int *)f = top_bool(L, w, o->key); break;
        case MLL_CBOOL: *(bool *)f = top_bool(L, w, o->key); break;
        case MLL_STR: *(const char **)f = top_str(L, w, o->key); break;
        case MLL_ENUM: {
            const char *s = top_str(L, w, o->key);
            int i = 0;
            while (o->names[i] && strcmp(o->names[i], s)) i++;
            if (!o->names[i]) option_fail(L, w, o);
            *(int *)f = i;
            break;
        }
        }
        if (ranged && !(v >= o->min && v <= o->max)) lua_pushnumber(L, v), option_fail(L, w, o);
        lua_pop(L, 1);
    }
}

/* ------------------------------------------------------------------ sliminterp */

/* The closure of mlL_pushlua: require(upvalue 1)[upvalue 2](...) with every argument and result,
 * after the check (upvalue 4) of argument 1 naming upvalue 3. */
static int lua_forward(lua_State *L) {
    const char *fn = lua_tostring(L, lua_upvalueindex(3));
    lua_Integer check = lua_tointeger(L, lua_upvalueindex(4));
    if (check == MLL_CHECK_TABLE) mlL_checktable(L, 1, fn, 1), lua_settop(L, 1);
    if (check == MLL_CHECK_MODEL) mlL_checkmodel(L, 1, fn);
    int n = lua_gettop(L);
    lua_getglobal(L, "require");
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_call(L, 1, 1);
    lua_getfield(L, -1, lua_tostring(L, lua_upvalueindex(2)));
    lua_replace(L, -2);
    lua_insert(L, 1);
    lua_call(L, n, LUA_MULTRET);
    return lua_gettop(L);
}

void mlL_pushlua(lua_State *L, const char *module, const char *name, int check, const char *fn) {
    lua_pushstring(L, module);
    lua_pushstring(L, name);
    lua_pushstring(L, fn ? fn : name);
    lua_pushinteger(L, check);
    lua_pushcclosure(L, lua_forward, 4);
}

void mlL_setlua(lua_State *L, int table, const mlL_LuaReg *regs) {
    table = lua_absindex(L, table);
    for (; regs->name; regs++) {
        mlL_pushlua(L, regs->module, regs->function ? regs->function : regs->name, regs->check, regs->fn);
        lua_setfield(L, table, regs->name);
    }
}

int mlL_checklayer(lua_State *L, const ml_model *m, int arg, const char *fn) {
    int ok, n = m->cfg.n_layers;
    lua_Integer l = lua_tointegerx(L, arg, &ok);
    if (ok && l >= 0 && l < n) return (int)l;
    char got[96];
    return mlL_argfail(L, fn, arg, "expected a layer in [0, %d), got %s (the model has %d layer%s)", n,
                       mlL_describe(L, arg, got, sizeof got), n, n == 1 ? "" : "s");
}

ml_tensor *mlL_hook_result(lua_State *L, const char *who, ml_status *err) {
    ml_tensor *rep = lua_isnil(L, -1) ? NULL : mlL_testtensor(L, -1);
    if (rep) ml_retain(rep);
    else if (!lua_isnil(L, -1))
        *err = ml_fail(ML_ERR_ARG, "%s returned %s, expected nothing or a tensor", who, luaL_typename(L, -1));
    lua_pop(L, 1);
    return rep;
}

int mlL_raise_as(lua_State *L, const char *fn) {
    const char *e = ml_last_error(), *c = strstr(e, ": ");
    lua_pushstring(L, c ? c + 2 : e);
    ml_clear_error();
    return raise_message(L, fn, false);
}

void *mlL_scratch(lua_State *L, size_t n) {
    void *p = lua_newuserdatauv(L, n ? n : 1, 0);
    memset(p, 0, n ? n : 1);
    return p;
}

/* ------------------------------------------------------------------ classes */

void mlL_new_class(lua_State *L, const char *mt, const luaL_Reg *methods, const luaL_Reg *metamethods) {
    luaL_newmetatable(L, mt);
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
    luaL_setfuncs(L, metamethods, 0);
    lua_pop(L, 1);
}
