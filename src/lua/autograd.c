/* The autograd verbs of the binding: t:backward, t:requires_grad_, mech.no_grad,
 * mech.grad_enabled and mech.gradcheck (the tape itself is src/autograd/). */
#include "autograd/autograd.h"
#include "lua/binding.h"

static int m_backward(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor:backward");
    ml_tensor *g = lua_isnoneornil(L, 2) ? NULL : mlL_checktensor(L, 2, "tensor:backward");
    if (ml_backward(t, g)) mlL_raise(L);
    return 0;
}
static int m_requires_grad_(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 1, "tensor:requires_grad_");
    if (ml_set_requires_grad(t, lua_isnone(L, 2) ? true : lua_toboolean(L, 2))) mlL_raise(L);
    lua_settop(L, 1);
    return 1;
}

/* mech.no_grad(fn, ...) calls fn(...) with gradient recording off and returns its results;
 * the previous mode comes back even when fn raises an error. */
static int l_no_grad(lua_State *L) {
    if (!lua_isfunction(L, 1)) mlL_argerror(L, "mech.no_grad", 1, "a function");
    bool old = ml_set_grad_enabled(false);
    int st = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
    ml_set_grad_enabled(old);
    if (st != LUA_OK) return lua_error(L);
    return lua_gettop(L);
}

static int l_grad_enabled(lua_State *L) {
    lua_pushboolean(L, ml_grad_enabled());
    return 1;
}

/* mech.gradcheck(fn, {inputs...}, {eps=, atol=, rtol=}) -> true or error message */
typedef struct {
    lua_State *L;
    int fn_idx, n;
} gc_ud;

static ml_tensor *gradcheck_cb(void *ud, ml_tensor **inputs) {
    gc_ud *g = ud;
    lua_State *L = g->L;
    lua_pushvalue(L, g->fn_idx);
    for (int i = 0; i < g->n; i++) {
        ml_retain(inputs[i]);
        mlL_pushtensor(L, inputs[i]);
    }
    if (lua_pcall(L, g->n, 1, 0) != LUA_OK) {
        ml_fail(ML_ERR_ARG, "%s", mlL_error_text(L, -1));
        lua_pop(L, 1);
        return NULL;
    }
    ml_tensor *out = mlL_testtensor(L, -1);
    if (!out) {
        lua_pop(L, 1);
        ml_fail(ML_ERR_ARG, "the function must return a tensor");
        return NULL;
    }
    ml_retain(out);
    lua_pop(L, 1);
    return out;
}

static int l_gradcheck(lua_State *L) {
    if (!lua_isfunction(L, 1)) mlL_argerror(L, "mech.gradcheck", 1, "a function");
    mlL_checktable(L, 2, "mech.gradcheck", 2);
    int n = (int)luaL_len(L, 2);
    if (n < 1 || n > 16) return mlL_argfail(L, "mech.gradcheck", 2, "expected 1 to 16 tensors, got %d", n);
    struct tolerances {
        double eps, atol, rtol;
    } tol = {1e-2, 1e-3, 1e-2};
    if (lua_istable(L, 3)) {
        static const char *const keys[] = {"eps", "atol", "rtol", NULL};
        static const mlL_option opts[] = {MLL_OPTION(MLL_NUM, "eps", struct tolerances, eps),
                                          MLL_OPTION(MLL_NUM, "atol", struct tolerances, atol),
                                          MLL_OPTION(MLL_NUM, "rtol", struct tolerances, rtol), {NULL}};
        mlL_checkkeys(L, 3, "mech.gradcheck", keys);
        mlL_options(L, 3, "mech.gradcheck", opts, &tol);
    }
    ml_tensor *ins[16];
    for (int i = 0; i < n; i++) {
        lua_geti(L, 2, i + 1);
        ins[i] = mlL_checktensor(L, lua_gettop(L), "mech.gradcheck");
        lua_pop(L, 1); /* still referenced by the table */
    }
    gc_ud ud = {L, 1, n};
    ml_status st = ml_gradcheck(gradcheck_cb, &ud, n, ins, tol.eps, tol.atol, tol.rtol);
    lua_pushboolean(L, st == ML_OK);
    if (st) {
        lua_pushstring(L, ml_last_error());
        ml_clear_error();
        return 2;
    }
    return 1;
}

void mlL_open_autograd(lua_State *L) {
    mlL_tensor_methods(L);
    luaL_setfuncs(L, (const luaL_Reg[]){{"backward", m_backward}, {"requires_grad_", m_requires_grad_}, {NULL, NULL}}, 0);
    lua_pop(L, 1);
    luaL_setfuncs(L, (const luaL_Reg[]){{"no_grad", l_no_grad}, {"grad_enabled", l_grad_enabled}, {"gradcheck", l_gradcheck}, {NULL, NULL}}, 0);
}
