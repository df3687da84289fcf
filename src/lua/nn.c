/* mech.nn: the layers of lua/mech/nn/ (Lua), reached as mech.nn on first use, and the one core
 * call they need, mech.nn.core's mixer_forward (a built-in mixer run as a layer). */
#include <stdio.h>
#include <string.h>

#include "lua/binding.h"
#include "nn/model.h"
#include "ops/nn_ops.h"

/* mech's __index: mech.nn is require "mech.nn" (loaded on first use). It is not stored in mech,
 * so walks over mech's own fields (the help test) do not descend into the Lua classes. */
static int mech_index(lua_State *L) {
    if (lua_type(L, 2) != LUA_TSTRING || strcmp(lua_tostring(L, 2), "nn") != 0) return 0;
    lua_getglobal(L, "require");
    lua_pushliteral(L, "mech.nn");
    lua_call(L, 1, 1);
    return 1;
}

typedef struct {
    lua_State *L;
    const ml_model *m;
    int fn;    /* stack index of the Lua hook function(component, act) -> nil or tensor */
    int wants; /* stack index of function(component) -> boolean, or 0 (every site wanted) */
    int err;   /* registry reference to the first error value of a Lua call, or LUA_NOREF */
} site_ud;

/* Keeps the first Lua error (on top of the stack) for l_mixer_forward to raise. */
static void keep_error(site_ud *h) {
    if (h->err == LUA_NOREF) h->err = luaL_ref(h->L, LUA_REGISTRYINDEX);
    else lua_pop(h->L, 1);
}

/* Whether the Lua side wants site `site` (a mixer computes some sites' values only then). An
 * error counts as wanted and is raised after the forward. */
static bool site_wants(void *ud, int site) {
    site_ud *h = ud;
    lua_State *L = h->L;
    lua_pushvalue(L, h->wants);
    lua_pushstring(L, h->m->sites[site].name);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        keep_error(h);
        return true;
    }
    bool want = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return want;
}

/* Each internal site of the mixer goes to the Lua hook under its component name ("mixer.q"); the
 * hook runs under lua_pcall so an error in it unwinds the core's forward normally. */
static ml_tensor *site_hook(void *ud, int site, ml_tensor *act, ml_status *err) {
    site_ud *h = ud;
    lua_State *L = h->L;
    lua_pushvalue(L, h->fn);
    lua_pushstring(L, h->m->sites[site].name);
    mlL_pushtensor(L, ml_retain(act));
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
        keep_error(h);
        *err = ML_ERR_ARG;
        ml_fail(ML_ERR_ARG, "mixer_forward: the hook raised an error");
        return NULL;
    }
    char who[128];
    snprintf(who, sizeof who, "mixer_forward: the hook at %s", h->m->sites[site].name);
    return mlL_hook_result(L, who, err);
}

/* core.mixer_forward(model, layer, x[, hook[, wants]]) -> y: block `layer`'s sequence mixer of a
 * built-in model alone on x (B, L, D); hook(component, act) sees (and may replace) each internal
 * site, wants(component) says which it needs (default: all). */
static int l_mixer_forward(lua_State *L) {
    const char *fn = "mech.nn.core.mixer_forward";
    ml_model *m = mlL_checkmodel(L, 1, fn);
    int layer = mlL_checkint32(L, 2, fn);
    ml_tensor *x = mlL_checktensor(L, 3, fn);
    if (!lua_isnoneornil(L, 4) && !lua_isfunction(L, 4)) mlL_argerror(L, fn, 4, "a function(component, act) or nil");
    if (!lua_isnoneornil(L, 5) && !lua_isfunction(L, 5)) mlL_argerror(L, fn, 5, "a function(component) or nil");
    lua_settop(L, 5);
    bool hooked = lua_isfunction(L, 4);
    site_ud h = {.L = L, .m = m, .fn = 4, .wants = lua_isfunction(L, 5) ? 5 : 0, .err = LUA_NOREF};
    ml_run run = {.hook = hooked ? site_hook : NULL, .wants = hooked && h.wants ? site_wants : NULL, .ud = &h};
    ml_tensor *y = ml_model_mixer_forward(m, layer, x, &run);
    if (h.err != LUA_NOREF) {
        ml_release(y);
        lua_rawgeti(L, LUA_REGISTRYINDEX, h.err);
        luaL_unref(L, LUA_REGISTRYINDEX, h.err);
        return lua_error(L);
    }
    mlL_pushtensor(L, y);
    return 1;
}

/* core.mixer_info(model, layer) -> {name =, mamba_block =}: the descriptor of block `layer`'s mixer. */
static int l_mixer_info(lua_State *L) {
    const char *fn = "mech.nn.core.mixer_info";
    ml_model *m = mlL_checkmodel(L, 1, fn);
    int layer = mlL_checkint32(L, 2, fn);
    if (layer < 0 || layer >= m->cfg.n_layers) return mlL_argerror(L, fn, 2, "a layer of the model");
    const ml_mixer_type *t = m->layers[layer].mixer;
    lua_createtable(L, 0, 2);
    lua_pushstring(L, t->name);
    lua_setfield(L, -2, "name");
    lua_pushboolean(L, t->mamba_block);
    lua_setfield(L, -2, "mamba_block");
    return 1;
}

static int open_core(lua_State *L) {
    static const luaL_Reg funcs[] = {{"mixer_forward", l_mixer_forward}, {"mixer_info", l_mixer_info}, {NULL, NULL}};
    /* core.cross_entropy(logits (N, V), targets (N) int32) -> mean loss (0-dim): the fused kernel
     * the built-in models train with; targets -100 are ignored */
    static const mlL_Decl decls[] = {{"mech.nn.cross_entropy", "TI", 'T', MLL_FN(ml_cross_entropy)}, {NULL, NULL, 0, NULL}};
    luaL_newlib(L, funcs);
    mlL_setdecls(L, -1, decls);
    return 1;
}

int mlL_open_nn(lua_State *L) {
    lua_newtable(L);
    lua_pushcfunction(L, mech_index);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    /* the core calls of lua/mech/nn/ */
    int top = lua_gettop(L);
    lua_getglobal(L, "package");
    if (lua_istable(L, -1) && lua_getfield(L, -1, "preload") == LUA_TTABLE) {
        lua_pushcfunction(L, open_core);
        lua_setfield(L, -2, "mech.nn.core");
    }
    lua_settop(L, top);
    return 0;
}
