/* Tensor userdata: constructors, 0-based indexing and slicing, printing, autograd verbs.
 *
 * Indexing (0-based; negative counts from the end):
 *   t[i]             select along dim 0 (a number for a 1-D tensor, else a view)
 *   t[{i, j, ...}]   one entry per leading dim; each entry is
 *                      a number       select (the dim disappears),
 *                      "a:b" / "a:b:s" / ":"   a Python-style slice (the dim stays),
 *                      {a, b[, s]}    the same slice as a table.
 *   t[idx] = v       writes a number or a tensor (broadcast) into the selected part.
 * Elements of a full index are numbers; everything else is a view sharing storage. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/format.h"
#include "core/threads.h"
#include "lua/binding.h"

typedef struct {
    ml_tensor *t; /* NULL after __close */
} tensor_box;

/* ------------------------------------------------------------------ userdata */

ml_tensor *mlL_testtensor(lua_State *L, int arg) {
    tensor_box *b = luaL_testudata(L, arg, MLL_TENSOR_MT);
    return b ? b->t : NULL;
}

ml_tensor *mlL_checktensor(lua_State *L, int arg, const char *fn) {
    tensor_box *b = luaL_testudata(L, arg, MLL_TENSOR_MT);
    if (!b) mlL_argerror(L, fn, arg, "a tensor");
    if (!b->t) mlL_argfail(L, fn, arg, "is a tensor that was closed");
    return b->t;
}

void mlL_pushtensor(lua_State *L, ml_tensor *t) {
    if (!t) mlL_raise(L);
    tensor_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->t = t;
    luaL_setmetatable(L, MLL_TENSOR_MT);
    /* the tensor itself, and its storage when it is new (a view's is counted already) */
    size_t bytes = sizeof *t;
    if (t->storage->refcount == 1) bytes += sizeof *t->storage + (t->storage->nbytes + 63) / 64 * 64;
    mlL_account(L, bytes);
}

void mlL_tensor_methods(lua_State *L) {
    luaL_getmetatable(L, MLL_TENSOR_MT);
    lua_getfield(L, -1, "methods");
    lua_remove(L, -2);
}

static int t_gc(lua_State *L) {
    tensor_box *b = luaL_checkudata(L, 1, MLL_TENSOR_MT);
    ml_release(b->t);
    b->t = NULL;
    return 0;
}

/* ------------------------------------------------------------------ from Lua values */

/* Walks a nested table to find its shape (rectangular check happens while filling). `what`
 * names the value in errors: "argument 2", "option 'rows'". */
static int table_shape(lua_State *L, int idx, int64_t *shape, const char *fn, const char *what) {
    int nd = 0;
    lua_pushvalue(L, idx);
    while (lua_istable(L, -1)) {
        if (nd == ML_MAX_DIMS) mlL_error(L, fn, "%s is nested deeper than %d levels", what, ML_MAX_DIMS);
        shape[nd++] = (int64_t)luaL_len(L, -1);
        if (shape[nd - 1] == 0) break;
        lua_geti(L, -1, 1);
        lua_remove(L, -2);
    }
    lua_pop(L, 1);
    return nd;
}

/* Fills t (contiguous) from the nested table at idx. ints_only: leaves must be integers in
 * int32 range (index arguments); otherwise numbers, truncated for an int32 t as PyTorch does. */
static void fill_from_table(lua_State *L, int idx, ml_tensor *t, int dim, int64_t *pos, const char *fn,
                            const char *what, bool ints_only) {
    int64_t n = (int64_t)luaL_len(L, idx);
    if (n != t->shape[dim])
        mlL_error(L, fn, "%s is not rectangular: a row at depth %d has %I entries, expected %I", what, dim,
                   (lua_Integer)n, (lua_Integer)t->shape[dim]);
    for (int64_t i = 0; i < n; i++) {
        lua_geti(L, idx, i + 1);
        if (dim + 1 < t->ndim) {
            if (!lua_istable(L, -1))
                mlL_error(L, fn, "%s is not rectangular: expected a table at depth %d, got %s", what, dim + 1,
                           luaL_typename(L, -1));
            fill_from_table(L, lua_gettop(L), t, dim + 1, pos, fn, what, ints_only);
        } else if (ints_only) {
            int ok;
            lua_Integer v = lua_tointegerx(L, -1, &ok);
            if (!ok || lua_type(L, -1) != LUA_TNUMBER || v < INT32_MIN || v > INT32_MAX)
                mlL_error(L, fn, "%s: expected integers in int32 range, got %s at a leaf", what,
                           lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
            ml_i32(t)[(*pos)++] = (int32_t)v;
        } else {
            int ok;
            lua_Number v = lua_tonumberx(L, -1, &ok);
            if (!ok || lua_type(L, -1) != LUA_TNUMBER)
                mlL_error(L, fn, "%s expected numbers, got %s at a leaf", what, luaL_typename(L, -1));
            if (t->dtype == ML_F32) ml_f32(t)[*pos] = (float)v;
            else ml_i32(t)[*pos] = (int32_t)v;
            (*pos)++;
        }
        lua_pop(L, 1);
    }
}

/* A new tensor of dtype from the (nested) table at idx. */
static ml_tensor *from_table(lua_State *L, int idx, const char *fn, const char *what, ml_dtype dtype, bool ints_only) {
    idx = lua_absindex(L, idx);
    int64_t shape[ML_MAX_DIMS];
    int nd = table_shape(L, idx, shape, fn, what);
    ml_tensor *out = ml_empty(dtype, nd, shape);
    if (!out) mlL_raise(L);
    /* Box it first so that a Lua error during filling cannot leak it. */
    mlL_pushtensor(L, out);
    int64_t pos = 0;
    if (ml_numel(out) > 0) fill_from_table(L, idx, out, 0, &pos, fn, what, ints_only);
    ml_retain(out);
    lua_pop(L, 1);
    return out;
}

ml_tensor *mlL_totensor(lua_State *L, int arg, const char *fn, ml_dtype dtype) {
    arg = lua_absindex(L, arg);
    ml_tensor *t = mlL_testtensor(L, arg);
    if (t) return ml_retain(t);
    if (lua_type(L, arg) == LUA_TNUMBER) {
        ml_tensor *s = ml_scalar(lua_isinteger(L, arg) && dtype == ML_I32 ? ML_I32 : dtype, lua_tonumber(L, arg));
        if (!s) mlL_raise(L);
        return s;
    }
    if (!lua_istable(L, arg)) mlL_argerror(L, fn, arg, "a tensor, a number or a table of numbers");
    char what[32];
    snprintf(what, sizeof what, "argument %d", arg);
    return from_table(L, arg, fn, what, dtype, false);
}

ml_tensor *mlL_checkints(lua_State *L, int idx, const char *fn, const char *key) {
    idx = lua_absindex(L, idx);
    char what[80];
    if (key) snprintf(what, sizeof what, "option '%.40s'", key);
    else snprintf(what, sizeof what, "argument %d", idx);
    ml_tensor *t = NULL;
    if (luaL_testudata(L, idx, MLL_TENSOR_MT)) {
        t = mlL_checktensor(L, idx, fn); /* reports a closed tensor */
        if (t->dtype == ML_I32) return t;
    } else if (lua_type(L, idx) == LUA_TNUMBER) {
        int ok;
        lua_Integer v = lua_tointegerx(L, idx, &ok);
        if (ok && v >= INT32_MIN && v <= INT32_MAX && !(t = ml_scalar(ML_I32, (double)v))) mlL_raise(L);
    } else if (lua_istable(L, idx)) {
        t = from_table(L, idx, fn, what, ML_I32, true);
    }
    if (!t || t->dtype != ML_I32) {
        char got[160];
        mlL_error(L, fn, "%s: expected an int32 tensor or a table of integers, got %s", what,
                   mlL_describe(L, idx, got, sizeof got));
    }
    mlL_pushtensor(L, t);
    lua_replace(L, idx);
    return t;
}

/* ------------------------------------------------------------------ constructors */

static const char *const ctor_keys[] = {"dtype", "requires_grad", "generator", NULL};
static const char *const dtype_names[] = {"float32", "int32", "float", "int", NULL}; /* index % 2: ml_dtype */
typedef struct {
    int dtype;
    bool requires_grad;
} ctor_options;
static const mlL_option ctor_spec[] = {
    {"dtype", MLL_ENUM, offsetof(ctor_options, dtype), 0, 0, dtype_names, "'float32' or 'int32'"},
    MLL_OPTION(MLL_CBOOL, "requires_grad", ctor_options, requires_grad), {NULL}};

/* Reads {dtype=, requires_grad=} at idx (may be none). */
static void ctor_opts(lua_State *L, int idx, const char *fn, ml_dtype *dtype, int *requires_grad) {
    ctor_options o = {(int)*dtype, false};
    if (!lua_isnoneornil(L, idx)) {
        if (!lua_istable(L, idx)) mlL_argerror(L, fn, idx, "an option table {dtype=..., requires_grad=...}");
        mlL_checkkeys(L, idx, fn, ctor_keys);
        mlL_options(L, idx, fn, ctor_spec, &o);
    }
    *dtype = (ml_dtype)(o.dtype % 2), *requires_grad = o.requires_grad;
}

static void finish_new(lua_State *L, ml_tensor *t, int requires_grad) {
    mlL_pushtensor(L, t);
    if (requires_grad && ml_set_requires_grad(t, true)) mlL_raise(L);
}

/* Index of the first argument after the shape (numbers, or one table). */
static int after_shape(lua_State *L, int first) {
    if (lua_istable(L, first)) return first + 1;
    int i = first;
    while (lua_type(L, i) == LUA_TNUMBER) i++;
    return i;
}

static int l_tensor(lua_State *L) {
    ml_dtype dtype = ML_F32;
    int rg;
    if (lua_isnoneornil(L, 1)) return mlL_argerror(L, "mech.tensor", 1, "a number, a (nested) table of numbers or a tensor");
    ctor_opts(L, 2, "mech.tensor", &dtype, &rg);
    ml_tensor *src = mlL_testtensor(L, 1);
    ml_tensor *t = src ? ml_to_dtype(src, dtype) : mlL_totensor(L, 1, "mech.tensor", dtype);
    if (src && t == src) { /* a fresh copy, never an alias */
        ml_release(t);
        t = ml_clone(src);
        if (t) {
            ml_tensor *d = ml_detach(t);
            ml_release(t);
            t = d;
        }
    }
    finish_new(L, t, rg);
    return 1;
}

static int make_filled(lua_State *L, const char *fn, double value, bool has_value_arg) {
    int64_t shape[ML_MAX_DIMS];
    int nd = mlL_checkshape(L, 1, fn, shape);
    int next = after_shape(L, 1);
    if (has_value_arg) {
        if (lua_type(L, next) != LUA_TNUMBER) return mlL_argerror(L, fn, next, "a fill value (number)");
        value = lua_tonumber(L, next++);
    }
    ml_dtype dtype = ML_F32;
    int rg;
    ctor_opts(L, next, fn, &dtype, &rg);
    if (ml_check_shape(fn, 1, nd, shape)) mlL_raise(L); /* the message names fn, not the core's "empty" */
    finish_new(L, ml_full(dtype, nd, shape, value), rg);
    return 1;
}

static int l_zeros(lua_State *L) { return make_filled(L, "mech.zeros", 0, false); }
static int l_ones(lua_State *L) { return make_filled(L, "mech.ones", 1, false); }
static int l_full(lua_State *L) { return make_filled(L, "mech.full", 0, true); }

static int l_arange(lua_State *L) {
    lua_Number start = 0, stop, step = 1;
    int nargs = 0;
    while (lua_type(L, nargs + 1) == LUA_TNUMBER) nargs++;
    if (nargs == 0) return mlL_argerror(L, "mech.arange", 1, "a number (stop, or start, stop[, step])");
    if (nargs == 1) stop = lua_tonumber(L, 1);
    else {
        start = lua_tonumber(L, 1);
        stop = lua_tonumber(L, 2);
        if (nargs >= 3) step = lua_tonumber(L, 3);
    }
    bool all_int = true;
    for (int i = 1; i <= nargs && i <= 3; i++) all_int = all_int && lua_isinteger(L, i);
    ml_dtype dtype = all_int ? ML_I32 : ML_F32;
    int rg;
    ctor_opts(L, nargs + 1, "mech.arange", &dtype, &rg);
    if (step != 0 && fabs((stop - start) / step) > 1e10) return mlL_error(L, "mech.arange", "too many elements");
    finish_new(L, ml_arange(dtype, start, stop, step), rg);
    return 1;
}

/* ---- the default generator and mech.Generator ---- */

static ml_rng *default_rng(lua_State *L) {
    lua_getfield(L, LUA_REGISTRYINDEX, "mech.default_rng");
    ml_rng *r = luaL_testudata(L, -1, MLL_RNG_MT);
    lua_pop(L, 1);
    return r; /* created at module open: never NULL */
}

static ml_rng *opt_generator(lua_State *L, int idx, const char *fn) {
    if (!lua_istable(L, idx)) return default_rng(L);
    lua_getfield(L, idx, "generator");
    ml_rng *r = NULL;
    if (!lua_isnil(L, -1)) {
        r = luaL_testudata(L, -1, MLL_RNG_MT);
        if (!r) mlL_error(L, fn, "option 'generator': expected a mech.Generator, got %s", luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    return r ? r : default_rng(L);
}

static int make_random(lua_State *L, const char *fn, bool normal) {
    int64_t shape[ML_MAX_DIMS];
    int nd = mlL_checkshape(L, 1, fn, shape);
    int next = after_shape(L, 1);
    ml_dtype dtype = ML_F32;
    int rg;
    ctor_opts(L, next, fn, &dtype, &rg);
    if (dtype != ML_F32) return mlL_error(L, fn, "only float32 random tensors are supported");
    ml_rng *r = opt_generator(L, next, fn);
    if (ml_check_shape(fn, 1, nd, shape)) mlL_raise(L);
    finish_new(L, normal ? ml_normal(nd, shape, 0, 1, r) : ml_uniform(nd, shape, 0, 1, r), rg);
    return 1;
}

static int l_rand(lua_State *L) { return make_random(L, "mech.rand", false); }
static int l_randn(lua_State *L) { return make_random(L, "mech.randn", true); }

/* mech.randint(low, high, shape...[, {generator=}]): int32, uniform over [low, high). */
static int l_randint(lua_State *L) {
    const char *fn = "mech.randint";
    for (int i = 1; i <= 2; i++)
        if (!lua_isinteger(L, i)) return mlL_argerror(L, fn, i, "an integer");
    lua_Integer lo = lua_tointeger(L, 1), hi = lua_tointeger(L, 2);
    if (lo < INT32_MIN || lo > INT32_MAX) return mlL_argerror(L, fn, 1, "an integer in int32 range");
    if (hi <= lo || hi > (lua_Integer)INT32_MAX + 1 || hi - lo > (lua_Integer)UINT32_MAX)
        return mlL_argerror(L, fn, 2, "an integer above argument 1, at most 2^31 and less than 2^32 above it (excluded)");
    int64_t shape[ML_MAX_DIMS];
    int nd = mlL_checkshape(L, 3, fn, shape);
    int next = after_shape(L, 3);
    if (!lua_isnoneornil(L, next) && !lua_istable(L, next))
        return mlL_argerror(L, fn, next, "a table of options {generator=}");
    ml_rng *r = opt_generator(L, next, fn);
    if (ml_check_shape(fn, 3, nd, shape)) mlL_raise(L);
    finish_new(L, ml_randint(nd, shape, (int32_t)lo, (uint32_t)(hi - lo), r), 0);
    return 1;
}

static int l_generator(lua_State *L) {
    lua_Integer seed = luaL_checkinteger(L, 1);
    lua_Integer stream = luaL_optinteger(L, 2, ML_STREAM_USER);
    ml_rng *r = lua_newuserdatauv(L, sizeof *r, 0);
    ml_rng_init(r, (uint64_t)seed, (uint64_t)stream);
    luaL_setmetatable(L, MLL_RNG_MT);
    return 1;
}

static int l_manual_seed(lua_State *L) {
    lua_Integer seed = luaL_checkinteger(L, 1);
    ml_rng_init(default_rng(L), (uint64_t)seed, ML_STREAM_USER);
    return 0;
}

static int g_uniform(lua_State *L) {
    ml_rng *r = luaL_checkudata(L, 1, MLL_RNG_MT);
    lua_pushnumber(L, (lua_Number)ml_rng_uniform(r));
    return 1;
}
static int g_normal(lua_State *L) {
    ml_rng *r = luaL_checkudata(L, 1, MLL_RNG_MT);
    lua_pushnumber(L, ml_rng_normal(r));
    return 1;
}
static int g_below(lua_State *L) {
    ml_rng *r = luaL_checkudata(L, 1, MLL_RNG_MT);
    lua_Integer n = luaL_checkinteger(L, 2);
    if (n < 1 || n > 0xFFFFFFFFll) return mlL_argerror(L, "Generator:below", 2, "an integer in [1, 2^32)");
    lua_pushinteger(L, (lua_Integer)ml_rng_below(r, (uint32_t)n));
    return 1;
}
static int g_tostring(lua_State *L) {
    ml_rng *r = luaL_checkudata(L, 1, MLL_RNG_MT);
    lua_pushfstring(L, "mech.Generator(seed=%I, stream=%I, drawn=%I)", (lua_Integer)r->seed, (lua_Integer)r->stream,
                    (lua_Integer)(r->counter * 4 - (uint64_t)(4 - r->used)));
    return 1;
}

/* ------------------------------------------------------------------ indexing */

/* Applies the index at stack idx to t (new reference). The view being built is held in a box
 * on the stack, so that a Lua error midway (a bad entry, an index table whose __index or __len
 * raises) leaves it to the collector instead of leaking it. */
static ml_tensor *apply_index(lua_State *L, ml_tensor *t, int idx, const char *fn) {
    idx = lua_absindex(L, idx);
    tensor_box *cur = lua_newuserdatauv(L, sizeof *cur, 0);
    cur->t = ml_retain(t);
    luaL_setmetatable(L, MLL_TENSOR_MT);
    if (lua_type(L, idx) == LUA_TNUMBER) {
        if (!lua_isinteger(L, idx)) mlL_error(L, fn, "index expected an integer, got %s", lua_tostring(L, idx));
        if (t->ndim == 0) mlL_error(L, fn, "cannot index a 0-dim tensor");
        ml_tensor *out = ml_select(t, 0, lua_tointeger(L, idx));
        if (!out) mlL_raise(L);
        lua_pop(L, 1);
        return out;
    }
    if (!lua_istable(L, idx))
        mlL_error(L, fn, "index expected an integer or a table of indices/slices, got %s", luaL_typename(L, idx));
    lua_Integer n = luaL_len(L, idx);
    if (n > t->ndim) mlL_error(L, fn, "%I indices for a tensor with %d dimensions", n, t->ndim);
    int dim = 0;
    for (int k = 1; k <= n; k++) {
        lua_geti(L, idx, k);
        ml_tensor *next = NULL;
        int64_t a, b, st;
        if (lua_type(L, -1) == LUA_TNUMBER && lua_isinteger(L, -1)) {
            next = ml_select(cur->t, dim, lua_tointeger(L, -1));
        } else if (lua_type(L, -1) == LUA_TSTRING && ml_parse_slice(lua_tostring(L, -1), cur->t->shape[dim], &a, &b, &st)) {
            next = ml_slice(cur->t, dim++, a, b, st);
        } else if (lua_istable(L, -1)) {
            lua_geti(L, -1, 1);
            lua_geti(L, -2, 2);
            lua_geti(L, -3, 3);
            a = luaL_optinteger(L, -3, 0);
            b = luaL_optinteger(L, -2, cur->t->shape[dim]);
            st = luaL_optinteger(L, -1, 1);
            lua_pop(L, 3);
            next = ml_slice(cur->t, dim++, a, b, st);
        } else {
            mlL_error(L, fn, "index entry %d expected an integer, a slice string like \"1:3\" or a table {start, stop[, step]}, got %s",
                      k, luaL_typename(L, -1));
        }
        lua_pop(L, 1);
        if (!next) mlL_raise(L);
        ml_release(cur->t);
        cur->t = next;
    }
    ml_tensor *out = cur->t;
    cur->t = NULL;
    lua_pop(L, 1);
    return out;
}

/* An element x of t as Lua has it: an integer for int32, else a float. */
static int push_element(lua_State *L, const ml_tensor *t, double x) {
    if (t->dtype == ML_I32) lua_pushinteger(L, (lua_Integer)x);
    else lua_pushnumber(L, x);
    return 1;
}

static int push_element_or_view(lua_State *L, ml_tensor *v) {
    if (v->ndim > 0) return mlL_pushtensor(L, v), 1;
    push_element(L, v, ml_get_flat(v, 0));
    ml_release(v);
    return 1;
}

static int t_index(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor[i]");
    if (lua_type(L, 2) == LUA_TSTRING) {
        const char *k = lua_tostring(L, 2);
        mlL_tensor_methods(L);
        lua_getfield(L, -1, k);
        if (!lua_isnil(L, -1)) return 1;
        lua_pop(L, 2);
        if (!strcmp(k, "grad")) {
            if (t->grad) mlL_pushtensor(L, ml_retain(t->grad));
            else lua_pushnil(L);
            return 1;
        }
        if (!strcmp(k, "requires_grad")) {
            lua_pushboolean(L, t->requires_grad || t->grad_fn);
            return 1;
        }
        if (!strcmp(k, "grad_fn")) {
            if (t->grad_fn) lua_pushstring(L, t->grad_fn->name);
            else lua_pushnil(L);
            return 1;
        }
        if (!strcmp(k, "is_leaf")) {
            lua_pushboolean(L, t->grad_fn == NULL);
            return 1;
        }
        if (!strcmp(k, "T")) { /* every dim reversed, as PyTorch's .T (and numpy's) */
            int perm[ML_MAX_DIMS];
            for (int d = 0; d < t->ndim; d++) perm[d] = t->ndim - 1 - d;
            mlL_pushtensor(L, ml_permute(t, perm));
            return 1;
        }
        if (!strcmp(k, "mT")) { /* the last two dims swapped, as PyTorch's .mT */
            if (t->ndim < 2) return mlL_error(L, "tensor.mT", "expected a tensor with at least 2 dimensions, got %d", t->ndim);
            mlL_pushtensor(L, ml_transpose(t, -2, -1));
            return 1;
        }
        return luaL_error(L, "tensor has no method or field '%s'", k);
    }
    return push_element_or_view(L, apply_index(L, t, 2, "tensor[i]"));
}

static int t_newindex(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor[i] = v");
    if (lua_type(L, 2) == LUA_TSTRING) {
        const char *k = lua_tostring(L, 2);
        if (!strcmp(k, "requires_grad")) {
            if (ml_set_requires_grad(t, lua_toboolean(L, 3))) mlL_raise(L);
            return 0;
        }
        if (!strcmp(k, "grad")) {
            if (!lua_isnil(L, 3)) {
                ml_tensor *g = mlL_checktensor(L, 3, "tensor.grad = g");
                if (!ml_same_shape(g, t) || g->dtype != ML_F32) return mlL_error(L, "tensor.grad = g", "expected a float32 tensor of the tensor's shape");
                /* A copy of the values, detached: a grad with history (x.grad = x * 2) would
                 * hold x through its graph, a cycle of refcounts the collector cannot see. */
                ml_tensor *copy = ml_copy_contiguous(g, ML_F32);
                if (!copy) return mlL_raise(L);
                ml_release(t->grad);
                t->grad = copy;
            } else {
                ml_zero_grad(t);
            }
            return 0;
        }
        return mlL_error(L, "tensor[i] = v", "cannot set field '%s' of a tensor", k);
    }
    ml_tensor *dst = apply_index(L, t, 2, "tensor[i] = v");
    ml_status st;
    if (lua_type(L, 3) == LUA_TNUMBER) st = ml_fill_(dst, lua_tonumber(L, 3));
    else {
        ml_tensor *src = mlL_testtensor(L, 3);
        if (!src) {
            ml_release(dst);
            return mlL_argerror(L, "tensor[i] = v", 3, "a number or a tensor");
        }
        st = ml_copy_(dst, src);
    }
    ml_release(dst);
    if (st) mlL_raise(L);
    return 0;
}

/* ------------------------------------------------------------------ shape & conversion methods */

static int m_shape(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor:shape");
    lua_createtable(L, t->ndim, 0);
    for (int d = 0; d < t->ndim; d++) {
        lua_pushinteger(L, t->shape[d]);
        lua_rawseti(L, -2, d + 1);
    }
    return 1;
}

static int check_dim_arg(lua_State *L, int arg, const ml_tensor *t, const char *fn) {
    lua_Integer d = mlL_checkint(L, arg, fn);
    int r = ml_dim((int)d, t->ndim);
    if (r < 0 || d != (int)d || t->ndim == 0)
        mlL_argfail(L, fn, arg, "expected a dimension in [%d, %d], got %d", -t->ndim, t->ndim - 1, (int)d);
    return r;
}

static int m_size(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor:size");
    if (lua_isnoneornil(L, 2)) return m_shape(L);
    lua_pushinteger(L, t->shape[check_dim_arg(L, 2, t, "tensor:size")]);
    return 1;
}

static int m_dim(lua_State *L) {
    lua_pushinteger(L, mlL_checktensor(L, 1, "tensor:dim")->ndim);
    return 1;
}
static int m_dtype(lua_State *L) {
    lua_pushstring(L, ml_dtype_name(mlL_checktensor(L, 1, "tensor:dtype")->dtype));
    return 1;
}
static int t_len(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "#");
    lua_pushinteger(L, t->ndim ? t->shape[0] : 1);
    return 1;
}

static int m_item(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor:item");
    if (ml_numel(t) != 1) {
        char s[ML_SHAPE_STR];
        return mlL_error(L, "tensor:item", "expected a tensor with one element, got shape %s", ml_shape_str(s, t->ndim, t->shape));
    }
    return push_element(L, t, ml_get_flat(t, 0));
}

/* Reads a full element index from arguments first.. (0-based, negatives from the end). */
static void element_index(lua_State *L, const ml_tensor *t, int first, int64_t *idx, const char *fn) {
    for (int d = 0; d < t->ndim; d++) {
        int ok;
        lua_Integer i = lua_tointegerx(L, first + d, &ok);
        if (!ok) mlL_argerror(L, fn, first + d, "an integer index");
        if (i < 0) i += t->shape[d];
        if (i < 0 || i >= t->shape[d])
            mlL_error(L, fn, "index %d out of range for dim %d of size %d", (int)lua_tointeger(L, first + d), d,
                       (int)t->shape[d]);
        idx[d] = i;
    }
    if (!lua_isnone(L, first + t->ndim) && lua_type(L, first + t->ndim) == LUA_TNUMBER)
        mlL_error(L, fn, "too many indices for a tensor with %d dimensions", t->ndim);
}

static int m_get(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor:get");
    int64_t idx[ML_MAX_DIMS];
    element_index(L, t, 2, idx, "tensor:get");
    return push_element(L, t, ml_get(t, idx));
}

static int m_set(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor:set");
    lua_Number v = mlL_checknum(L, 2, "tensor:set");
    int64_t idx[ML_MAX_DIMS];
    element_index(L, t, 3, idx, "tensor:set");
    if (ml_grad_enabled() && t->requires_grad && !t->grad_fn)
        return mlL_argfail(L, "tensor:set", 1, "is a leaf that requires grad; modify it inside mech.no_grad");
    ml_set(t, idx, v);
    lua_settop(L, 1);
    return 1;
}

static void push_list(lua_State *L, const ml_tensor *t, int dim, int64_t off) {
    lua_createtable(L, t->shape[dim] < (1 << 24) ? (int)t->shape[dim] : 0, 0); /* a size hint only */
    for (int64_t i = 0; i < t->shape[dim]; i++) {
        int64_t o = off + i * t->stride[dim];
        if (dim + 1 < t->ndim) push_list(L, t, dim + 1, o);
        else if (t->dtype == ML_I32) lua_pushinteger(L, ml_i32(t)[o]);
        else lua_pushnumber(L, ml_f32(t)[o]);
        lua_rawseti(L, -2, i + 1);
    }
}

static int m_tolist(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor:tolist");
    if (t->ndim == 0) return m_item(L);
    if (ml_numel(t) == 0) { /* no element, but one table per index of the dims before the first 0 */
        int64_t tables = 1, row = 1;
        for (int d = 0; d < t->ndim && t->shape[d]; d++) {
            row = row > (INT64_C(1) << 40) / t->shape[d] ? INT64_C(1) << 40 : row * t->shape[d];
            tables += row;
        }
        if (tables > (INT64_C(1) << 24)) {
            char s[ML_SHAPE_STR];
            return mlL_error(L, "tensor:tolist", "the tensor of shape %s has no element, but its nested lists would need more than 2^24 tables",
                              ml_shape_str(s, t->ndim, t->shape));
        }
    }
    push_list(L, t, 0, 0);
    return 1;
}

/* ------------------------------------------------------------------ view methods */

static int m_slice(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor:slice");
    int d = check_dim_arg(L, 2, t, "tensor:slice");
    mlL_pushtensor(L, ml_slice(t, d, mlL_optarg_int(L, 3, 0, "tensor:slice"), mlL_optarg_int(L, 4, t->shape[d], "tensor:slice"),
                                  mlL_optarg_int(L, 5, 1, "tensor:slice")));
    return 1;
}
static int m_transpose(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor:transpose");
    int a = t->ndim >= 2 ? -2 : 0, b = t->ndim >= 2 ? -1 : 0;
    if (!lua_isnoneornil(L, 2)) a = check_dim_arg(L, 2, t, "tensor:transpose"), b = check_dim_arg(L, 3, t, "tensor:transpose");
    mlL_pushtensor(L, ml_transpose(t, a, b));
    return 1;
}
static int m_permute(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor:permute");
    int64_t p[ML_MAX_DIMS];
    int n = mlL_checkshape(L, 2, "tensor:permute", p);
    if (n != t->ndim) return mlL_error(L, "tensor:permute", "expected %d dimensions, got %d", t->ndim, n);
    int perm[ML_MAX_DIMS];
    for (int d = 0; d < n; d++) perm[d] = (int)p[d];
    mlL_pushtensor(L, ml_permute(t, perm));
    return 1;
}

/* Shapes for view/reshape/expand may contain -1: read them by hand. */
static int shape_with_neg(lua_State *L, int first, const char *fn, int64_t *shape) {
    int n = 0;
    if (lua_istable(L, first)) {
        int len = (int)luaL_len(L, first);
        if (len > ML_MAX_DIMS) mlL_error(L, fn, "at most %d dimensions", ML_MAX_DIMS);
        for (int i = 1; i <= len; i++) {
            lua_geti(L, first, i);
            int ok;
            shape[n++] = lua_tointegerx(L, -1, &ok);
            if (!ok) mlL_argfail(L, fn, first, "expected a shape of integers, entry %d is %s", i, luaL_typename(L, -1));
            lua_pop(L, 1);
        }
        return n;
    }
    for (int i = first; lua_type(L, i) == LUA_TNUMBER; i++) {
        if (n == ML_MAX_DIMS) mlL_error(L, fn, "at most %d dimensions", ML_MAX_DIMS);
        shape[n++] = mlL_checkint(L, i, fn);
    }
    return n;
}

/* t:view(...), t:reshape(...), t:expand(...): a tensor and a shape (numbers or a table, -1 allowed) */
static int reshaping(lua_State *L, const char *fn, ml_tensor *(*op)(ml_tensor *, int, const int64_t *)) {
    ml_tensor *t = mlL_checktensor(L, 1, fn);
    int64_t s[ML_MAX_DIMS];
    int n = shape_with_neg(L, 2, fn, s);
    mlL_pushtensor(L, op(t, n, s));
    return 1;
}
static int m_view(lua_State *L) { return reshaping(L, "tensor:view", ml_view); }
static int m_reshape(lua_State *L) { return reshaping(L, "tensor:reshape", ml_reshape); }
static int m_expand(lua_State *L) { return reshaping(L, "tensor:expand", ml_expand); }
static int m_float(lua_State *L) {
    mlL_pushtensor(L, ml_to_dtype(mlL_checktensor(L, 1, "tensor:float"), ML_F32));
    return 1;
}
static int m_int(lua_State *L) {
    mlL_pushtensor(L, ml_to_dtype(mlL_checktensor(L, 1, "tensor:int"), ML_I32));
    return 1;
}
static int m_copy_(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor:copy_");
    ml_tensor *src = mlL_totensor(L, 2, "tensor:copy_", t->dtype);
    ml_status st = ml_copy_(t, src);
    ml_release(src);
    if (st) mlL_raise(L);
    lua_settop(L, 1);
    return 1;
}
static int m_fill_(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor:fill_");
    if (ml_fill_(t, mlL_checknum(L, 2, "tensor:fill_"))) mlL_raise(L);
    lua_settop(L, 1);
    return 1;
}

/* ------------------------------------------------------------------ misc module functions */

static int l_threads(lua_State *L) {
    if (!lua_isnoneornil(L, 1)) {
        lua_Integer n = luaL_checkinteger(L, 1);
        /* 64 is OpenBLAS's own ceiling (Debian's build); more threads than that only cost memory,
         * and under an address-space limit libgomp exits the process when it cannot create one */
        if (n < 1 || n > 64) return mlL_argerror(L, "mech.threads", 1, "a thread count in [1, 64]");
        ml_set_threads((int)n);
    }
    lua_pushinteger(L, ml_threads());
    return 1;
}

static int l_is_tensor(lua_State *L) {
    lua_pushboolean(L, mlL_testtensor(L, 1) != NULL);
    return 1;
}

static int l_memory(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)ml_storage_live_bytes());
    return 1;
}

static int t_close(lua_State *L) { return t_gc(L); }

int mlL_open_tensor(lua_State *L) {
    static const luaL_Reg methods[] = {
        {"shape", m_shape}, {"size", m_size}, {"dim", m_dim}, {"dtype", m_dtype},
        {"item", m_item}, {"get", m_get}, {"set", m_set}, {"tolist", m_tolist},
        {"slice", m_slice}, {"transpose", m_transpose}, {"permute", m_permute}, {"view", m_view},
        {"reshape", m_reshape}, {"expand", m_expand}, {"float", m_float}, {"int", m_int}, {"copy_", m_copy_},
        {"fill_", m_fill_}, {NULL, NULL}};
    /* the simple ones: one core call each (src/lua/decl.c) */
    static const mlL_Decl decls[] = {
        {"tensor:numel", "C", 'i', MLL_FN(ml_numel)},
        {"tensor:narrow", "Tdii", 'T', MLL_FN(ml_narrow)},
        {"tensor:select", "Tdi", 'T', MLL_FN(ml_select)},
        {"tensor:squeeze", "Td", 'T', MLL_FN(ml_squeeze)},
        {"tensor:unsqueeze", "Tk", 'T', MLL_FN(ml_unsqueeze)},
        {"tensor:contiguous", "T", 'T', MLL_FN(ml_contiguous)},
        {"tensor:clone", "T", 'T', MLL_FN(ml_clone)},
        {"tensor:detach", "T", 'T', MLL_FN(ml_detach)},
        {"tensor:is_contiguous", "C", 'b', MLL_FN(ml_is_contiguous)},
        {"tensor:equal", "CC", 'b', MLL_FN(ml_equal)},
        {"tensor:zero_grad", "T", 'v', MLL_FN(ml_zero_grad)},
        {NULL, NULL, 0, NULL}};
    static const luaL_Reg meta[] = {{"__index", t_index}, {"__newindex", t_newindex}, {"__gc", t_gc},
                                    {"__close", t_close}, {"__len", t_len}, {NULL, NULL}};
    luaL_newmetatable(L, MLL_TENSOR_MT);
    luaL_setfuncs(L, meta, 0);
    luaL_newlib(L, methods);
    mlL_setdecls(L, -1, decls);
    lua_setfield(L, -2, "methods");
    lua_pushliteral(L, "mech.Tensor");
    lua_setfield(L, -2, "__name");
    lua_pop(L, 1);

    static const luaL_Reg gen_methods[] = {{"uniform", g_uniform}, {"normal", g_normal}, {"below", g_below}, {NULL, NULL}};
    luaL_newmetatable(L, MLL_RNG_MT);
    luaL_newlib(L, gen_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, g_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_generator);
    lua_pushinteger(L, 0);
    lua_call(L, 1, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "mech.default_rng");

    static const luaL_Reg funcs[] = {
        {"tensor", l_tensor}, {"zeros", l_zeros}, {"ones", l_ones}, {"full", l_full}, {"arange", l_arange},
        {"rand", l_rand}, {"randn", l_randn}, {"randint", l_randint}, {"Generator", l_generator}, {"manual_seed", l_manual_seed},
        {"threads", l_threads}, {"is_tensor", l_is_tensor}, {"memory_bytes", l_memory}, {NULL, NULL}};
    luaL_setfuncs(L, funcs, 0);
    mlL_open_autograd(L);
    mlL_open_print(L);
    /* mech.default_generator: the generator mech.manual_seed reseeds (PyTorch's torch.default_generator);
     * an init(t, gen) outside a model draws from it */
    lua_getfield(L, LUA_REGISTRYINDEX, "mech.default_rng");
    lua_setfield(L, -2, "default_generator");
    return 0;
}
