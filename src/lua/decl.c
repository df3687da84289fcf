/* Declared wrappers: a core call with checked arguments and one result, written as a row of a
 * table (name, argument kinds, result kind, core function) instead of a C function each, in the
 * spirit of Torch7's cwrap. One dispatcher reads the row (an upvalue), checks and converts the
 * arguments in order, calls the core function through the C type its kinds spell, and pushes the
 * result; every error has the binding's one format, naming the row. */
#include <string.h>

#include "lua/binding.h"
#include "lua/task.h"
#include "nn/model.h"

/* A converted argument or result. */
typedef union {
    ml_tensor *t;
    ml_model *m;
    const ml_task *task;
    const ml_dataset *ds;
    const char *s;
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
    case 'O': /* an operand: a tensor, or a number or table converted to float32 in its slot */
        if ((v->t = mlL_testtensor(L, arg))) break;
        if (lua_type(L, arg) != LUA_TNUMBER && !lua_istable(L, arg))
            mlL_argerror(L, row->name, arg, "a tensor, a number or a table of numbers");
        v->t = mlL_totensor(L, arg, row->name, ML_F32);
        mlL_pushtensor(L, v->t), lua_replace(L, arg);
        break;
    case 'o': /* an operand or nil (NULL) */
        if (lua_isnoneornil(L, arg)) v->t = NULL;
        else read_arg(L, row, arg, 'O', t0, v);
        break;
    case 'I': v->t = mlL_checkints(L, arg, row->name, NULL); break;
    case 'M':
    case 'N': v->m = mlL_checkmodel(L, arg, row->name); break;
    case 's': v->s = mlL_checkstr(L, arg, row->name); break;
    case 'K': v->task = mlL_checktask(L, arg, row->name)->t; break;
    case 'A': v->ds = mlL_checkdataset(L, arg, row->name); break;
    case 'D': /* a dimension or nil (-1, the last) */
        if (lua_isnoneornil(L, arg)) v->d = -1;
        else read_arg(L, row, arg, 'd', t0, v);
        break;
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
typedef ml_tensor *(*fn_T_TTT)(ml_tensor *, ml_tensor *, ml_tensor *);
typedef ml_tensor *(*fn_T_TdT)(ml_tensor *, int, ml_tensor *);
typedef ml_tensor *(*fn_T_MT)(ml_model *, ml_tensor *);
typedef int64_t (*fn_i_N)(const ml_model *);
typedef void (*fn_v_M)(ml_model *);
typedef int (*fn_k_K)(const ml_task *);
typedef const char *(*fn_s_K)(const ml_task *);
typedef bool (*fn_b_K)(const ml_task *);
typedef double (*fn_n_K)(const ml_task *);
typedef int64_t (*fn_i_A)(const ml_dataset *);
typedef int (*fn_k_A)(const ml_dataset *);
typedef double (*fn_n_)(void);
typedef void (*fn_v_)(void);
typedef bool (*fn_b_s)(const char *);

/* Calls row->fn with a[] through the type of its signature; the result goes to *r. */
static void call_core(lua_State *L, const mlL_Decl *row, const char *sig, const arg_val *a, arg_val *r) {
    if (!strcmp(sig, "T:T")) r->t = ((fn_T_T)row->fn)(a[0].t);
    else if (!strcmp(sig, "T:Td")) r->t = ((fn_T_Td)row->fn)(a[0].t, a[1].d);
    else if (!strcmp(sig, "T:Tdd")) r->t = ((fn_T_Tdd)row->fn)(a[0].t, a[1].d, a[2].d);
    else if (!strcmp(sig, "T:Tdi")) r->t = ((fn_T_Tdi)row->fn)(a[0].t, a[1].d, a[2].i);
    else if (!strcmp(sig, "T:Tdii")) r->t = ((fn_T_Tdii)row->fn)(a[0].t, a[1].d, a[2].i, a[3].i);
    else if (!strcmp(sig, "T:TT")) r->t = ((fn_T_TT)row->fn)(a[0].t, a[1].t);
    else if (!strcmp(sig, "b:C")) r->b = ((fn_b_C)row->fn)(a[0].t);
    else if (!strcmp(sig, "b:CC")) r->b = ((fn_b_CC)row->fn)(a[0].t, a[1].t);
    else if (!strcmp(sig, "i:C")) r->i = ((fn_i_C)row->fn)(a[0].t);
    else if (!strcmp(sig, "v:T")) ((fn_v_T)row->fn)(a[0].t);
    else if (!strcmp(sig, "T:TTT")) r->t = ((fn_T_TTT)row->fn)(a[0].t, a[1].t, a[2].t);
    else if (!strcmp(sig, "T:TdT")) r->t = ((fn_T_TdT)row->fn)(a[0].t, a[1].d, a[2].t);
    else if (!strcmp(sig, "T:MT")) r->t = ((fn_T_MT)row->fn)(a[0].m, a[1].t);
    else if (!strcmp(sig, "i:N")) r->i = ((fn_i_N)row->fn)(a[0].m);
    else if (!strcmp(sig, "v:M")) ((fn_v_M)row->fn)(a[0].m);
    else if (!strcmp(sig, "k:K")) r->d = ((fn_k_K)row->fn)(a[0].task);
    else if (!strcmp(sig, "s:K")) r->s = ((fn_s_K)row->fn)(a[0].task);
    else if (!strcmp(sig, "b:K")) r->b = ((fn_b_K)row->fn)(a[0].task);
    else if (!strcmp(sig, "n:K")) r->n = ((fn_n_K)row->fn)(a[0].task);
    else if (!strcmp(sig, "i:A")) r->i = ((fn_i_A)row->fn)(a[0].ds);
    else if (!strcmp(sig, "k:A")) r->d = ((fn_k_A)row->fn)(a[0].ds);
    else if (!strcmp(sig, "n:")) r->n = ((fn_n_)row->fn)();
    else if (!strcmp(sig, "v:")) ((fn_v_)row->fn)();
    else if (!strcmp(sig, "b:s")) r->b = ((fn_b_s)row->fn)(a[0].s);
    else luaL_error(L, "%s: no dispatcher for the signature '%s'", row->name, sig);
}

/* The C function of every declared row (the row is upvalue 1). */
static int dispatch(lua_State *L) {
    const mlL_Decl *row = lua_touserdata(L, lua_upvalueindex(1));
    arg_val a[MLL_DECL_MAX_ARGS], r;
    int n = (int)strlen(row->args);
    for (int i = 0; i < n; i++) read_arg(L, row, i + 1, row->args[i], i ? a[0].t : NULL, &a[i]);
    /* the C types the kinds stand for: operands and indices are tensors, an optional dim a dim */
    char sig[MLL_DECL_MAX_ARGS + 3] = {row->result, ':'};
    for (int i = 0; i <= n; i++) {
        char k = row->args[i];
        sig[2 + i] = k == 'O' || k == 'o' || k == 'I' ? 'T' : k == 'D' || k == 'k' ? 'd' : k;
    }
    call_core(L, row, sig, a, &r);
    switch (row->result) {
    case 'T': mlL_pushtensor(L, r.t); return 1; /* NULL raises the core's error */
    case 'b': lua_pushboolean(L, r.b); return 1;
    case 'i': lua_pushinteger(L, r.i); return 1;
    case 'k': lua_pushinteger(L, r.d); return 1;
    case 'n': lua_pushnumber(L, r.n); return 1;
    case 's': lua_pushstring(L, r.s); return 1;
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
