/* Lua binding of the generic ops (ops/ops.h): every op is a Tensor method and a mech.<name>
 * function (the same C function: t:add(u) is mech.add(t, u)), plus the arithmetic metamethods.
 * Dims and indices are 0-based, negative counts from the end. Tensor arguments also accept
 * numbers and (nested) tables, converted on the way in; converted values are boxed on the Lua
 * stack at once, so an error in a later argument cannot leak them. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lua/binding.h"
#include "ops/mixer_ops.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"

/* ------------------------------------------------------------------ argument helpers */

/* The tensor at idx; numbers and tables become tensors of dtype `dt` (borrowed pointer, kept
 * alive by the stack slot it replaces). */
static ml_tensor *operand(lua_State *L, int idx, const char *fn, ml_dtype dt) {
    idx = lua_absindex(L, idx);
    if (luaL_testudata(L, idx, MLL_TENSOR_MT)) return mlL_checktensor(L, idx, fn); /* reports closed tensors */
    if (lua_type(L, idx) != LUA_TNUMBER && !lua_istable(L, idx))
        mlL_argerror(L, fn, idx, "a tensor, a number or a table of numbers");
    ml_tensor *t = mlL_totensor(L, idx, fn, dt);
    mlL_pushtensor(L, t);
    lua_replace(L, idx);
    return t;
}

static lua_Integer int_arg(lua_State *L, int idx, const char *fn, const char *what) {
    int ok = 0;
    lua_Integer v = lua_type(L, idx) == LUA_TNUMBER ? lua_tointegerx(L, idx, &ok) : 0;
    if (!ok) mlL_argerror(L, fn, idx, what);
    return v;
}

/* A dim for a tensor of ndim dims; range errors read like the core's. */
static int dim_arg(lua_State *L, int idx, const char *fn, int ndim) {
    lua_Integer v = int_arg(L, idx, fn, "an integer dimension");
    if (v < -ML_MAX_DIMS - 1 || v > ML_MAX_DIMS) /* far out: keep it out of int range and ML_ALL_DIMS */
        mlL_argfail(L, fn, idx, "expected a dimension in [%d, %d], got %I", -ndim, ndim - 1, v);
    return (int)v;
}

static int opt_dim(lua_State *L, int idx, const char *fn, int ndim, int def) {
    return lua_isnoneornil(L, idx) ? def : dim_arg(L, idx, fn, ndim);
}

static bool opt_bool(lua_State *L, int idx, const char *fn, bool def) {
    if (lua_isnoneornil(L, idx)) return def;
    if (!lua_isboolean(L, idx)) mlL_argerror(L, fn, idx, "a boolean");
    return lua_toboolean(L, idx);
}

static double opt_num(lua_State *L, int idx, const char *fn, double def) {
    if (lua_isnoneornil(L, idx)) return def;
    if (lua_type(L, idx) != LUA_TNUMBER) mlL_argerror(L, fn, idx, "a number");
    return lua_tonumber(L, idx);
}

/* ------------------------------------------------------------------ elementwise */

static const ml_binop binops[] = {ML_ADD, ML_SUB,       ML_MUL,  ML_DIV, ML_POW, ML_MAXIMUM,
                                  ML_MINIMUM, ML_REMAINDER, ML_FMOD, ML_FLOOR_DIVIDE,
                                  ML_EQ,  ML_NE,  ML_LT,  ML_LE,  ML_GT,  ML_GE};

/* Binary op in upvalue 1; a number on either side uses the scalar forms (int32 tensors stay
 * int32 with integral numbers). */
static int l_binary(lua_State *L) {
    ml_binop op = (ml_binop)lua_tointeger(L, lua_upvalueindex(1));
    const char *fn = ml_binop_name(op);
    ml_tensor *a = luaL_testudata(L, 1, MLL_TENSOR_MT) ? mlL_checktensor(L, 1, fn) : NULL;
    ml_tensor *b = luaL_testudata(L, 2, MLL_TENSOR_MT) ? mlL_checktensor(L, 2, fn) : NULL;
    if (a && lua_type(L, 2) == LUA_TNUMBER) {
        mlL_pushtensor(L, ml_binary_scalar(op, a, lua_tonumber(L, 2)));
        return 1;
    }
    if (b && lua_type(L, 1) == LUA_TNUMBER) {
        mlL_pushtensor(L, ml_scalar_binary(op, lua_tonumber(L, 1), b));
        return 1;
    }
    /* tables (and numbers with no tensor beside them) are converted like the other operand */
    if (!a) a = operand(L, 1, fn, b ? b->dtype : ML_F32);
    if (!b) b = operand(L, 2, fn, a->dtype);
    mlL_pushtensor(L, ml_binary(op, a, b));
    return 1;
}

static int l_unary(lua_State *L) {
    ml_unop op = (ml_unop)lua_tointeger(L, lua_upvalueindex(1));
    ml_tensor *a = operand(L, 1, ml_unop_name(op), ML_F32);
    mlL_pushtensor(L, ml_unary(op, a));
    return 1;
}

/* clamp(t, lo, hi): nil for no bound */
static int l_clamp(lua_State *L) {
    ml_tensor *a = operand(L, 1, "clamp", ML_F32);
    double lo = opt_num(L, 2, "clamp", NAN), hi = opt_num(L, 3, "clamp", NAN);
    mlL_pushtensor(L, ml_clamp(a, lo, hi));
    return 1;
}

/* mech.where(cond, a, b) */
static int l_where(lua_State *L) {
    ml_tensor *c = operand(L, 1, "where", ML_I32);
    ml_tensor *a = mlL_testtensor(L, 2), *b = mlL_testtensor(L, 3);
    if (!a) a = operand(L, 2, "where", b ? b->dtype : ML_F32);
    if (!b) b = operand(L, 3, "where", a->dtype);
    mlL_pushtensor(L, ml_where(c, a, b));
    return 1;
}

/* t:where(cond, other) = mech.where(cond, t, other), as PyTorch's Tensor.where */
static int m_where(lua_State *L) {
    ml_tensor *a = mlL_checktensor(L, 1, "where");
    ml_tensor *c = operand(L, 2, "where", ML_I32);
    ml_tensor *b = operand(L, 3, "where", a->dtype);
    mlL_pushtensor(L, ml_where(c, a, b));
    return 1;
}

/* allclose(a, b, rtol = 1e-5, atol = 1e-8) -> boolean (false for different shapes) */
static int l_allclose(lua_State *L) {
    ml_tensor *a = operand(L, 1, "allclose", ML_F32), *b = operand(L, 2, "allclose", ML_F32);
    double rtol = opt_num(L, 3, "allclose", 1e-5), atol = opt_num(L, 4, "allclose", 1e-8);
    lua_pushboolean(L, ml_allclose(a, b, rtol, atol));
    return 1;
}

/* ------------------------------------------------------------------ reductions */

static const char *const red_names[] = {"sum", "mean", "max", "min", "argmax", "argmin", "var"};

/* sum/mean/argmax/argmin(t, dim = all, keepdim = false) */
static int l_reduce(lua_State *L) {
    ml_redop op = (ml_redop)lua_tointeger(L, lua_upvalueindex(1));
    const char *fn = red_names[op];
    ml_tensor *a = operand(L, 1, fn, ML_F32);
    int dim = opt_dim(L, 2, fn, a->ndim, ML_ALL_DIMS);
    bool keep = opt_bool(L, 3, fn, false);
    mlL_pushtensor(L, ml_reduce(op, a, dim, keep));
    return 1;
}

/* max/min(t) -> 0-dim; max/min(t, dim, keepdim) -> values, indices (0-based);
 * max/min(t, u) -> elementwise maximum/minimum, as PyTorch. */
static int l_extremum(lua_State *L) {
    ml_redop op = (ml_redop)lua_tointeger(L, lua_upvalueindex(1));
    const char *fn = red_names[op];
    ml_tensor *a = operand(L, 1, fn, ML_F32);
    if (luaL_testudata(L, 2, MLL_TENSOR_MT) || lua_istable(L, 2)) {
        ml_tensor *b = operand(L, 2, fn, a->dtype);
        mlL_pushtensor(L, ml_binary(op == ML_MAX ? ML_MAXIMUM : ML_MINIMUM, a, b));
        return 1;
    }
    if (lua_isnoneornil(L, 2)) {
        mlL_pushtensor(L, ml_reduce(op, a, ML_ALL_DIMS, false));
        return 1;
    }
    int dim = dim_arg(L, 2, fn, a->ndim);
    bool keep = opt_bool(L, 3, fn, false);
    mlL_pushtensor(L, ml_reduce(op, a, dim, keep));
    mlL_pushtensor(L, ml_reduce(op == ML_MAX ? ML_ARGMAX : ML_ARGMIN, a, dim, keep));
    return 2;
}

/* var / std(t, dim = all, keepdim = false, correction = 1); upvalue 1: true for std */
static int l_var(lua_State *L) {
    bool std = lua_tointeger(L, lua_upvalueindex(1)) != 0;
    const char *fn = std ? "std" : "var";
    ml_tensor *a = operand(L, 1, fn, ML_F32);
    int dim = opt_dim(L, 2, fn, a->ndim, ML_ALL_DIMS);
    bool keep = opt_bool(L, 3, fn, false);
    lua_Integer corr = lua_isnoneornil(L, 4) ? 1 : int_arg(L, 4, fn, "an integer correction");
    if (corr < 0 || corr > INT_MAX) return mlL_argerror(L, fn, 4, "a correction >= 0");
    mlL_pushtensor(L, (std ? ml_std : ml_var)(a, dim, keep, (int)corr));
    return 1;
}

/* norm(t, p = 2, dim = all, keepdim = false); p may be math.huge or -math.huge */
static int l_norm(lua_State *L) {
    ml_tensor *a = operand(L, 1, "norm", ML_F32);
    double p = opt_num(L, 2, "norm", 2);
    int dim = opt_dim(L, 3, "norm", a->ndim, ML_ALL_DIMS);
    bool keep = opt_bool(L, 4, "norm", false);
    mlL_pushtensor(L, ml_norm(a, p, dim, keep));
    return 1;
}

/* cumsum(t, dim) */
static int l_cumsum(lua_State *L) {
    ml_tensor *a = operand(L, 1, "cumsum", ML_F32);
    mlL_pushtensor(L, ml_cumsum(a, dim_arg(L, 2, "cumsum", a->ndim)));
    return 1;
}

/* ------------------------------------------------------------------ sorting */

/* sort(t, dim = -1, descending = false) -> values, indices */
static int l_sort(lua_State *L) {
    ml_tensor *a = operand(L, 1, "sort", ML_F32);
    int dim = opt_dim(L, 2, "sort", a->ndim, -1);
    ml_tensor *v, *i;
    if (ml_sort(a, dim, opt_bool(L, 3, "sort", false), &v, &i)) return mlL_raise(L);
    mlL_pushtensor(L, v);
    mlL_pushtensor(L, i);
    return 2;
}

/* argsort(t, dim = -1, descending = false) -> indices */
static int l_argsort(lua_State *L) {
    ml_tensor *a = operand(L, 1, "argsort", ML_F32);
    int dim = opt_dim(L, 2, "argsort", a->ndim, -1);
    mlL_pushtensor(L, ml_argsort(a, dim, opt_bool(L, 3, "argsort", false)));
    return 1;
}

/* topk(t, k, dim = -1, largest = true) -> values, indices (sorted) */
static int l_topk(lua_State *L) {
    ml_tensor *a = operand(L, 1, "topk", ML_F32);
    lua_Integer k = int_arg(L, 2, "topk", "an integer k");
    int dim = opt_dim(L, 3, "topk", a->ndim, -1);
    ml_tensor *v, *i;
    if (ml_topk(a, k, dim, opt_bool(L, 4, "topk", true), &v, &i)) return mlL_raise(L);
    mlL_pushtensor(L, v);
    mlL_pushtensor(L, i);
    return 2;
}

/* ------------------------------------------------------------------ shapes and einsum */

/* flatten(t, start_dim = 0, end_dim = -1) */
static int l_flatten(lua_State *L) {
    ml_tensor *a = operand(L, 1, "flatten", ML_F32);
    int s = opt_dim(L, 2, "flatten", a->ndim, 0), e = opt_dim(L, 3, "flatten", a->ndim, -1);
    mlL_pushtensor(L, ml_flatten(a, s, e));
    return 1;
}

/* mech.einsum(spec, a, b, ...) */
static int l_einsum(lua_State *L) {
    const char *spec = lua_type(L, 1) == LUA_TSTRING ? lua_tostring(L, 1) : NULL;
    if (!spec) return mlL_argerror(L, "einsum", 1, "a spec string such as \"ij,jk->ik\"");
    int n = lua_gettop(L) - 1;
    if (n < 1 || n > 16) return mlL_error(L, "einsum", "expected 1 to 16 tensors after the spec, got %d", n);
    ml_tensor *ts[16];
    for (int k = 0; k < n; k++) ts[k] = operand(L, k + 2, "einsum", ML_F32);
    mlL_pushtensor(L, ml_einsum(spec, n, ts));
    return 1;
}

/* ------------------------------------------------------------------ matmul, linear, softmax */

/* The eps of a norm at idx: a finite number >= 0, 1e-5 (the models' eps) when absent. */
static double eps_arg(lua_State *L, int idx, const char *fn) {
    double eps = opt_num(L, idx, fn, 1e-5);
    if (!(eps >= 0) || isinf(eps)) mlL_argerror(L, fn, idx, "a finite eps >= 0");
    return eps;
}

/* mech.layer_norm(x, weight[, bias[, eps = 1e-5]]): over the last dim, as the models' LayerNorm */
static int l_layer_norm(lua_State *L) {
    const char *fn = "layer_norm";
    ml_tensor *x = operand(L, 1, fn, ML_F32), *w = operand(L, 2, fn, ML_F32);
    ml_tensor *b = lua_isnoneornil(L, 3) ? NULL : operand(L, 3, fn, ML_F32);
    mlL_pushtensor(L, ml_layer_norm(x, w, b, eps_arg(L, 4, fn)));
    return 1;
}

/* mech.rms_norm(x, weight[, eps = 1e-5]): Mamba's RMSNorm */
static int l_rms_norm(lua_State *L) {
    const char *fn = "rms_norm";
    ml_tensor *x = operand(L, 1, fn, ML_F32), *w = operand(L, 2, fn, ML_F32);
    mlL_pushtensor(L, ml_rms_norm(x, w, eps_arg(L, 3, fn)));
    return 1;
}

/* softmax / log_softmax(t, dim = -1) */
static int l_softmax(lua_State *L) {
    bool log_ = lua_tointeger(L, lua_upvalueindex(1)) != 0;
    const char *fn = log_ ? "log_softmax" : "softmax";
    ml_tensor *a = operand(L, 1, fn, ML_F32);
    int dim = opt_dim(L, 2, fn, a->ndim, -1);
    mlL_pushtensor(L, log_ ? ml_log_softmax(a, dim) : ml_softmax(a, dim));
    return 1;
}

/* ------------------------------------------------------------------ indexing */

/* scatter_add(t, dim, index, src) -> a new tensor */
static int l_scatter_add(lua_State *L) {
    ml_tensor *a = operand(L, 1, "scatter_add", ML_F32);
    int dim = dim_arg(L, 2, "scatter_add", a->ndim);
    ml_tensor *idx = mlL_checkints(L, 3, "scatter_add", NULL);
    ml_tensor *src = operand(L, 4, "scatter_add", a->dtype);
    mlL_pushtensor(L, ml_scatter_add(a, dim, idx, src));
    return 1;
}

/* Collects the tensors of a list (table of tensors) at idx into a new array (borrowed pointers;
 * the table keeps them alive). `self` (may be NULL) goes first. */
static ml_tensor **tensor_list(lua_State *L, int idx, ml_tensor *self, const char *fn, int *n) {
    int len = (int)luaL_len(L, idx), total = len + (self ? 1 : 0);
    if (total < 1) mlL_argfail(L, fn, idx, "expected a non-empty list of tensors");
    /* a userdata owns the array, so errors below free it with the stack */
    ml_tensor **ts = lua_newuserdatauv(L, sizeof(ml_tensor *) * (size_t)total, 0);
    int k = 0;
    if (self) ts[k++] = self;
    for (int i = 1; i <= len; i++) {
        lua_geti(L, idx, i);
        ml_tensor *t = mlL_testtensor(L, -1);
        if (!t) mlL_argfail(L, fn, idx, "element %d expected a tensor, got %s", i, luaL_typename(L, -1));
        ts[k++] = t;
        lua_pop(L, 1);
    }
    *n = total;
    return ts;
}

/* mech.cat({a, b, ...}, dim = 0); as a method t:cat(u or {u, ...}, dim = 0) */
static int join(lua_State *L, bool stack) {
    const char *fn = stack ? "stack" : "cat";
    lua_settop(L, 3); /* fixed slots: what we push later must not look like an argument */
    ml_tensor *self = NULL;
    int list = 1, darg = 2;
    if (luaL_testudata(L, 1, MLL_TENSOR_MT)) {
        self = mlL_checktensor(L, 1, fn);
        list = 2;
        darg = 3;
        if (luaL_testudata(L, 2, MLL_TENSOR_MT)) { /* t:cat(u, dim): wrap u in a list */
            lua_createtable(L, 1, 0);
            lua_pushvalue(L, 2);
            lua_rawseti(L, -2, 1);
            lua_replace(L, 2);
        }
    }
    if (!lua_istable(L, list) || luaL_testudata(L, list, MLL_TENSOR_MT))
        return mlL_argerror(L, fn, list, "a list of tensors");
    int n;
    ml_tensor **ts = tensor_list(L, list, self, fn, &n);
    int nd = ts[0]->ndim + (stack ? 1 : 0);
    int dim = opt_dim(L, darg, fn, nd, 0);
    mlL_pushtensor(L, stack ? ml_stack(n, ts, dim) : ml_cat(n, ts, dim));
    return 1;
}
static int l_cat(lua_State *L) { return join(L, false); }
static int l_stack(lua_State *L) { return join(L, true); }

/* split(t, size, dim = 0) -> several tensors (views) */
static int l_split(lua_State *L) {
    ml_tensor *a = operand(L, 1, "split", ML_F32);
    lua_Integer size = int_arg(L, 2, "split", "an integer size");
    if (size <= 0) return mlL_argerror(L, "split", 2, "a size > 0");
    int dim = opt_dim(L, 3, "split", a->ndim, 0);
    int d = ml_dim(dim, a->ndim);
    int64_t len = (d >= 0 && a->ndim > 0) ? a->shape[d] : 0;
    int64_t count = len == 0 ? 1 : (len - 1) / size + 1; /* no overflow for huge sizes */
    if (count > 1000000) return mlL_error(L, "split", "%I pieces are too many to return", (lua_Integer)count);
    luaL_checkstack(L, (int)count + 2, "split: too many pieces");
    ml_tensor **out = lua_newuserdatauv(L, sizeof(ml_tensor *) * (size_t)count, 0);
    int n = ml_split_tensor(a, size, dim, out, (int)count);
    if (n < 0) return mlL_raise(L);
    for (int i = 0; i < n; i++) mlL_pushtensor(L, out[i]);
    return n;
}

/* ------------------------------------------------------------------ registration */

typedef struct {
    const char *name;
    lua_CFunction fn;
    int up;       /* upvalue (the op code), or -1 for none */
} entry;

/* Pushes the function of e (a closure over its op code when it has one). */
static void push_entry(lua_State *L, const entry *e) {
    if (e->up >= 0) {
        lua_pushinteger(L, e->up);
        lua_pushcclosure(L, e->fn, 1);
    } else {
        lua_pushcfunction(L, e->fn);
    }
}

/* The arithmetic metamethods of tensors: a number may stand on either side. */
static void set_metamethods(lua_State *L) {
    luaL_getmetatable(L, MLL_TENSOR_MT);
    static const struct {
        const char *name;
        int op;
    } meta[] = {{"__add", ML_ADD}, {"__sub", ML_SUB},       {"__mul", ML_MUL},          {"__div", ML_DIV},
                {"__pow", ML_POW}, {"__mod", ML_REMAINDER}, {"__idiv", ML_FLOOR_DIVIDE}};
    for (size_t i = 0; i < sizeof meta / sizeof *meta; i++) {
        lua_pushinteger(L, meta[i].op);
        lua_pushcclosure(L, l_binary, 1);
        lua_setfield(L, -2, meta[i].name);
    }
    lua_pushinteger(L, ML_NEG);
    lua_pushcclosure(L, l_unary, 1);
    lua_setfield(L, -2, "__unm");
    lua_pop(L, 1);
}

int mlL_open_ops(lua_State *L) {
    int mech = lua_gettop(L);
    entry entries[80]; /* the binary and unary ops and `named` below: 56 now */
    int n = 0;
    for (size_t i = 0; i < sizeof binops / sizeof *binops; i++)
        entries[n++] = (entry){ml_binop_name(binops[i]), l_binary, (int)binops[i]};
    for (int op = ML_NEG; op <= ML_COS; op++) entries[n++] = (entry){ml_unop_name((ml_unop)op), l_unary, op};
    static const entry named[] = {
        {"sum", l_reduce, ML_SUM},         {"mean", l_reduce, ML_MEAN},       {"argmax", l_reduce, ML_ARGMAX},
        {"argmin", l_reduce, ML_ARGMIN},   {"max", l_extremum, ML_MAX},       {"min", l_extremum, ML_MIN},
        {"var", l_var, 0},                 {"std", l_var, 1},                 {"norm", l_norm, -1},
        {"cumsum", l_cumsum, -1},          {"sort", l_sort, -1},              {"argsort", l_argsort, -1},
        {"topk", l_topk, -1},              {"flatten", l_flatten, -1},        {"clamp", l_clamp, -1},
        {"allclose", l_allclose, -1},
        {"softmax", l_softmax, 0},         {"log_softmax", l_softmax, 1},     {"scatter_add", l_scatter_add, -1},
        {"cat", l_cat, -1},                {"stack", l_stack, -1},            {"split", l_split, -1}};
    for (size_t i = 0; i < sizeof named / sizeof *named; i++) entries[n++] = named[i];
    /* one core call each, declared (src/lua/decl.c): methods and functions */
    static const mlL_Decl decls[] = {
        {"matmul", "OO", 'T', MLL_FN(ml_matmul)},       /* x·w */
        {"linear", "OOo", 'T', MLL_FN(ml_linear)},      /* (x, w, bias = nil): x·wᵀ + bias */
        {"gather", "OdI", 'T', MLL_FN(ml_gather)},      /* (t, dim, index) */
        {"index_select", "OdI", 'T', MLL_FN(ml_index_select)},
        {"embedding", "OI", 'T', MLL_FN(ml_embedding)}, /* (weight, ids) */
        {NULL, NULL, 0, NULL}};
    /* functions only: mech.causal_conv1d(x (B, L, D), weight (D, K) or (D, 1, K)[, bias (D)]) */
    static const mlL_Decl function_decls[] = {{"causal_conv1d", "OOo", 'T', MLL_FN(ml_causal_conv1d)}, {NULL, NULL, 0, NULL}};

    mlL_tensor_methods(L);
    int methods = lua_gettop(L);
    for (int i = 0; i < n; i++) {
        push_entry(L, &entries[i]);
        lua_setfield(L, mech, entries[i].name);
        push_entry(L, &entries[i]);
        lua_setfield(L, methods, entries[i].name);
    }
    mlL_setdecls(L, mech, decls);
    mlL_setdecls(L, methods, decls);
    mlL_setdecls(L, mech, function_decls);
    /* where, whose method form reads differently from the function */
    lua_pushcfunction(L, m_where);
    lua_setfield(L, methods, "where");
    lua_pop(L, 1);
    /* functions only: where's function form, einsum (of several tensors, as torch.einsum) and the
     * functional forms of the layers (torch.nn.functional's) */
    static const luaL_Reg functions[] = {{"where", l_where},           {"einsum", l_einsum},
                                         {"layer_norm", l_layer_norm}, {"rms_norm", l_rms_norm}, {NULL, NULL}};
    luaL_setfuncs(L, functions, 0);

    set_metamethods(L);
    return 0;
}
