/* Printing tensors: __tostring, and mech.set_printoptions / get_printoptions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/format.h"
#include "lua/binding.h"

/* As PyTorch prints (ml_tensor_repr, core/format.h), with the options of mech.set_printoptions
 * kept in the registry. */
typedef ml_print_options print_options;

#define PRINT_OPTIONS_KEY "mech.printoptions"

static print_options *print_opts(lua_State *L) {
    lua_getfield(L, LUA_REGISTRYINDEX, PRINT_OPTIONS_KEY);
    print_options *o = lua_touserdata(L, -1); /* created at module open: never NULL */
    lua_pop(L, 1);
    return o;
}

static int t_tostring(lua_State *L) {
    luaL_checkudata(L, 1, MLL_TENSOR_MT);
    ml_tensor *t = mlL_testtensor(L, 1); /* NULL once closed */
    if (!t) {
        lua_pushstring(L, "tensor(closed)");
        return 1;
    }
    char *s = ml_tensor_repr(t, t->grad_fn ? t->grad_fn->name : NULL, print_opts(L));
    if (!s) return mlL_raise(L);
    lua_pushstring(L, s);
    free(s);
    return 1;
}

/* mech.set_printoptions{threshold=, edgeitems=, precision=, linewidth=, sci_mode=, profile=}: keys
 * left out keep their value; profile ("default", "short", "full") sets all of them first;
 * sci_mode: true, false or "auto" (PyTorch's None). */
static int l_set_printoptions(lua_State *L) {
    const char *fn = "mech.set_printoptions";
    static const char *const keys[] = {"threshold", "edgeitems", "precision", "linewidth", "sci_mode", "profile", NULL};
    static const mlL_option profile[] = {
        {"profile", MLL_ENUM, 0, 0, 0, ml_print_profile_names, "'default', 'short' or 'full'"}, {NULL}};
    static const mlL_option opts[] = {
        {"threshold", MLL_NUM, offsetof(print_options, threshold), 0, INFINITY, NULL,
         "a number >= 0 (math.huge: never summarise)"},
        {"edgeitems", MLL_INT32, offsetof(print_options, edgeitems), 1, 1000, NULL, NULL},
        {"precision", MLL_INT32, offsetof(print_options, precision), 0, 16, NULL, NULL},
        {"linewidth", MLL_INT32, offsetof(print_options, linewidth), 1, 100000, NULL, NULL}, {NULL}};
    mlL_checktable(L, 1, fn, 1);
    mlL_checkkeys(L, 1, fn, keys);
    print_options o = *print_opts(L);
    int k = -1;
    mlL_options(L, 1, fn, profile, &k);
    if (k >= 0) o = ml_print_profiles[k];
    mlL_options(L, 1, fn, opts, &o);
    int t = lua_getfield(L, 1, "sci_mode");
    if (t == LUA_TBOOLEAN) o.sci_mode = lua_toboolean(L, -1) ? ML_SCI_ON : ML_SCI_OFF;
    else if (t == LUA_TSTRING && !strcmp(lua_tostring(L, -1), "auto")) o.sci_mode = ML_SCI_AUTO;
    else if (t != LUA_TNIL) {
        char got[96];
        return mlL_argfail(L, fn, 1, "option 'sci_mode': expected true, false or \"auto\", got %s",
                           mlL_describe(L, -1, got, sizeof got));
    }
    lua_pop(L, 1);
    *print_opts(L) = o;
    return 0;
}

/* mech.get_printoptions() -> {threshold=, edgeitems=, precision=, linewidth=, sci_mode=} (set_printoptions takes it back) */
static int l_get_printoptions(lua_State *L) {
    const print_options *o = print_opts(L);
    lua_createtable(L, 0, 4);
    lua_pushnumber(L, o->threshold), lua_setfield(L, -2, "threshold");
    lua_pushinteger(L, o->edgeitems), lua_setfield(L, -2, "edgeitems");
    lua_pushinteger(L, o->precision), lua_setfield(L, -2, "precision");
    lua_pushinteger(L, o->linewidth), lua_setfield(L, -2, "linewidth");
    if (o->sci_mode == ML_SCI_AUTO) lua_pushliteral(L, "auto");
    else lua_pushboolean(L, o->sci_mode == ML_SCI_ON);
    lua_setfield(L, -2, "sci_mode");
    return 1;
}

void mlL_open_print(lua_State *L) {
    *(print_options *)lua_newuserdatauv(L, sizeof(print_options), 0) = ml_print_profiles[0];
    lua_setfield(L, LUA_REGISTRYINDEX, PRINT_OPTIONS_KEY);
    luaL_getmetatable(L, MLL_TENSOR_MT);
    lua_pushcfunction(L, t_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
    luaL_setfuncs(L, (const luaL_Reg[]){{"set_printoptions", l_set_printoptions}, {"get_printoptions", l_get_printoptions}, {NULL, NULL}}, 0);
}
