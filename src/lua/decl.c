/* Declared wrappers: a core call with checked arguments and one result, written as a row of a
 * table (name, argument kinds, result kind, core function) instead of a C function each, in the
 * spirit of Torch7's cwrap. One dispatcher reads the row (an upvalue), checks and converts the
 * arguments in order, calls the core function through the C type its kinds spell, and pushes the
 * result; every error has the binding's one format, naming the row. */
#include <string.h>

#include "lua/binding.h"

/* A converted argument or result. */
typedef union {
    ml_tensor *t;
    int d; /* a dimension, or a C int */
    int64_t i;
    double n;
    bool b;
} arg_val;

/* Reads argument `arg` of kind k into *v; `t0` is argument 1's tensor (for dimensions). */
static void read_arg(lua_State *L, const mlL_Decl *row, int arg, char k, const ml_tensor *t0, arg_val *v) {
    switch (k) {
    case 'T':
    case 'C': v->t = mlL_checktensor(L, arg, row->name); break;
    case 'd': {
        lua_Integer d = mlL_checkint(L, arg, row->name);
        if (!t0) luaL_error(L, "%s: a dimension must follow a tensor in its declaration", row->name);
        int r = d == (int)d ? ml_dim((int)d, t0->ndim) : -1;
        if (r < 0 || t0->ndim == 0)
            mlL_argfail(L, row->name, arg, "expected a dimension in [%d, %d], got %I", -t0->ndim, t0->ndim - 1, d);
        v->d = r;
        break;
    }
    case 'k': v->d = mlL_checkint32(L, arg, row->name); break;
    case 'i': v->i = mlL_checkint(L, arg, row->name); break;
    case 'n': v->n = mlL_checknum(L, arg, row->name); break;
    default: luaL_error(L, "%s: bad declaration kind '%c'", row->name, k);
    }
}

/* The C types of a signature: "T:Tdi" is ml_tensor *f(ml_tensor *, int, int64_t). */
typedef ml_tensor *(*fn_T_T)(ml_tensor *);
typedef ml_tensor *(*fn_T_Td)(ml_tensor *, int);
typedef ml_tensor *(*fn_T_Tdd)(ml_tensor *, int, int);
typedef ml_tensor *(*fn_T_Tdi)(ml_tensor *, int, int64_t);
typedef ml_tensor *(*fn_T_Tdii)(ml_tensor *, int, int64_t, int64_t);
typedef ml_tensor *(*fn_T_TT)(ml_tensor *, ml_tensor *);
typedef bool (*fn_b_C)(const ml_tensor *);
typedef bool (*fn_b_CC)(const ml_tensor *, const ml_tensor *);
typedef int64_t (*fn_i_C)(const ml_tensor *);
typedef void (*fn_v_T)(ml_tensor *);

/* Calls row->fn with a[] through the type of its signature; the result goes to *r. */
static void call_core(lua_State *L, const mlL_Decl *row, const char *sig, const arg_val *a, arg_val *r) {
    if (!strcmp(sig, "T:T") || !strcmp(sig, "T:C")) r->t = ((fn_T_T)row->fn)(a[0].t);
    else if (!strcmp(sig, "T:Td") || !strcmp(sig, "T:Tk")) r->t = ((fn_T_Td)row->fn)(a[0].t, a[1].d);
    else if (!strcmp(sig, "T:Tdd")) r->t = ((fn_T_Tdd)row->fn)(a[0].t, a[1].d, a[2].d);
    else if (!strcmp(sig, "T:Tdi")) r->t = ((fn_T_Tdi)row->fn)(a[0].t, a[1].d, a[2].i);
    else if (!strcmp(sig, "T:Tdii")) r->t = ((fn_T_Tdii)row->fn)(a[0].t, a[1].d, a[2].i, a[3].i);
    else if (!strcmp(sig, "T:TT")) r->t = ((fn_T_TT)row->fn)(a[0].t, a[1].t);
    else if (!strcmp(sig, "b:C")) r->b = ((fn_b_C)row->fn)(a[0].t);
    else if (!strcmp(sig, "b:CC")) r->b = ((fn_b_CC)row->fn)(a[0].t, a[1].t);
    else if (!strcmp(sig, "i:C")) r->i = ((fn_i_C)row->fn)(a[0].t);
    else if (!strcmp(sig, "v:T")) ((fn_v_T)row->fn)(a[0].t);
    else luaL_error(L, "%s: no dispatcher for the signature '%s'", row->name, sig);
}

/* The C function of every declared row (the row is upvalue 1). */
static int dispatch(lua_State *L) {
    const mlL_Decl *row = lua_touserdata(L, lua_upvalueindex(1));
    arg_val a[MLL_DECL_MAX_ARGS], r;
    int n = (int)strlen(row->args);
    for (int i = 0; i < n; i++) read_arg(L, row, i + 1, row->args[i], i ? a[0].t : NULL, &a[i]);
    char sig[MLL_DECL_MAX_ARGS + 3] = {row->result, ':'};
    memcpy(sig + 2, row->args, (size_t)n + 1);
    call_core(L, row, sig, a, &r);
    switch (row->result) {
    case 'T': mlL_pushtensor(L, r.t); return 1; /* NULL raises the core's error */
    case 'b': lua_pushboolean(L, r.b); return 1;
    case 'i': lua_pushinteger(L, r.i); return 1;
    default: return 0;
    }
}

void mlL_setdecls(lua_State *L, int table, const mlL_Decl *rows) {
    table = lua_absindex(L, table);
    for (; rows->name; rows++) {
        const char *colon = strchr(rows->name, ':'), *dot = strrchr(rows->name, '.');
        const char *key = colon ? colon + 1 : dot ? dot + 1 : rows->name;
        lua_pushlightuserdata(L, (void *)rows);
        lua_pushcclosure(L, dispatch, 1);
        lua_setfield(L, table, key);
    }
}
