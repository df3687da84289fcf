/* Mixers written in Lua (docs/nn.md, "Your own mixer"): a mech.nn Module class becomes a
 * runtime-registered C mixer descriptor (ml_mixer_register), so the paper's language model in C
 * (embedding, blocks, norms, MLP, head, sites, hooks, training, checkpoints, the interp
 * evaluators) runs it as it runs a built-in mixer.
 *
 * Per layer, build instantiates the class with the model's mixer options plus d_model, declares
 * the module's parameters from module:param_specs() (so they live in the model's flat buffer) and
 * its internal sites: every submodule output and HookPoint that fires during a forward, named
 * "mixer.<path>", with shapes found by two small probe forwards at different (B, L). Once the
 * parameters exist, attach hands their leaf views to the module (module:set_parameter). A forward
 * pushes a hook context (mech.nn.push_context) whose fire(path, t) calls ml_site with the running
 * ml_run, so model hooks, caches and patching see the internal sites, then calls module(x).
 *
 * The modules' code runs under lua_pcall on a thread of its own: an error inside a module becomes
 * the core's error naming the mixer and the layer, never a longjmp across the core's frames; and
 * the caller's thread keeps the frame its hook callbacks index (src/lua/model.c's hook tables sit
 * at stack indices of the calling binding function). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "lua/mixer.h"

#define ANCHOR_KEY "mech.mixers" /* registry: the userdata owning this state's Lua mixers */

typedef struct lua_mixer {
    ml_mixer_type type;     /* what the core registers; type.user points back here */
    char name[32];
    char module[128];       /* the module that registers it again in a fresh process ("" none) */
    lua_State *L;           /* the main thread (references are dropped there, also at close) */
    lua_State *T;           /* the thread the module's code runs on */
    int class_ref;          /* registry reference of the class */
    int refs;               /* the registration, plus one per layer built with it */
    struct lua_mixer *next; /* this state's mixers */
} lua_mixer;

typedef struct {
    ml_model *m;
    ml_run *run;
} fire_target;

/* One layer's mixer: the module instance and what its forward needs, in a Lua table. */
typedef struct {
    lua_mixer *mx;
    lua_State *L, *T;
    int ref;              /* registry: {obj=, specs=, pidx=, sites=, ctx=, target=} */
    char init_error[256]; /* a Lua init function failed (init cannot report; attach does) */
} layer_state;

static void mixer_unref(lua_mixer *mx) {
    if (--mx->refs == 0) free(mx);
}

/* The main thread: it lives as long as the state (a calling coroutine may end first). */
static lua_State *main_thread(lua_State *L) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    lua_State *T = lua_tothread(L, -1);
    lua_pop(L, 1);
    return T;
}

/* Calls a protected C function f(ud) on L; an error becomes the core's error with `what` in front. */
static ml_status protected(lua_State *L, lua_CFunction f, void *ud, const char *what) {
    int top = lua_gettop(L);
    if (!lua_checkstack(L, 40)) return ml_fail(ML_ERR_MEM, "%s: out of Lua stack", what);
    lua_pushcfunction(L, f);
    lua_pushlightuserdata(L, ud);
    int st = lua_pcall(L, 1, 0, 0);
    ml_status out = ML_OK;
    if (st != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        out = ml_fail(ML_ERR_ARG, "%s: %s", what, msg ? msg : "(error object is not a string)");
    }
    lua_settop(L, top);
    return out;
}

/* Pushes require(name) (raises on failure). */
static void push_require(lua_State *L, const char *name) {
    lua_getglobal(L, "require");
    lua_pushstring(L, name);
    lua_call(L, 1, 1);
}

/* Pushes mech.nn (the Module library, lua/mech/nn). */
static void push_nn(lua_State *L) { push_require(L, "mech.nn"); }

/* ------------------------------------------------------------------ build */

typedef struct {
    ml_model *m;
    int layer;
    layer_state *s;
} build_args;

static ml_param_kind init_kind(lua_State *L, int spec, const char *pname, int64_t *fan, const int64_t *shape, int ndim) {
    lua_getfield(L, spec, "fan");
    *fan = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
    lua_pop(L, 1);
    lua_getfield(L, spec, "init");
    ml_param_kind kind = ML_P_CUSTOM;
    if (lua_type(L, -1) == LUA_TSTRING) {
        static const char *const names[] = {"linear_weight", "linear_bias", "embedding", "conv_weight", "conv_bias",
                                            "ones", "zeros", NULL};
        static const ml_param_kind kinds[] = {ML_P_LINEAR_W, ML_P_LINEAR_B, ML_P_EMBEDDING, ML_P_CONV_W,
                                              ML_P_CONV_B, ML_P_ONES, ML_P_ZEROS};
        const char *k = lua_tostring(L, -1);
        int i = 0;
        while (names[i] && strcmp(names[i], k)) i++;
        if (!names[i]) luaL_error(L, "parameter '%s' has an unknown init '%s'", pname, k);
        kind = kinds[i];
        /* nn.Linear and nn.Conv1d fans: in_features (the last dim), K */
        if (!*fan && (kind == ML_P_LINEAR_W || kind == ML_P_CONV_W)) *fan = shape[ndim - 1];
    } else if (!lua_istable(L, -1) && !lua_isfunction(L, -1) && !lua_isnil(L, -1)) {
        luaL_error(L, "parameter '%s' has an init of type %s", pname, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    return kind;
}

/* Declares the module's parameters (state index 1 holds the layer table). */
static void declare_params(lua_State *L, build_args *a, int lt) {
    lua_getfield(L, lt, "obj");
    lua_getfield(L, -1, "param_specs");
    if (!lua_isfunction(L, -1)) luaL_error(L, "the module has no param_specs method (is it a mech.nn.Module?)");
    lua_insert(L, -2);
    lua_call(L, 1, 1);
    if (!lua_istable(L, -1)) luaL_error(L, "param_specs() returned %s, expected a list", luaL_typename(L, -1));
    int specs = lua_gettop(L);
    lua_pushvalue(L, specs);
    lua_setfield(L, lt, "specs");
    lua_newtable(L);
    int pidx = lua_gettop(L);
    lua_Integer n = luaL_len(L, specs);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, specs, i);
        int spec = lua_gettop(L);
        if (!lua_istable(L, spec)) luaL_error(L, "param_specs() entry %d is not a table", (int)i);
        lua_getfield(L, spec, "name");
        const char *pname = lua_tostring(L, -1);
        if (!pname) luaL_error(L, "param_specs() entry %d has no name", (int)i);
        lua_getfield(L, spec, "shape");
        int ndim = lua_istable(L, -1) ? (int)luaL_len(L, -1) : 0;
        if (ndim < 1 || ndim > 4) luaL_error(L, "parameter '%s' needs a shape of 1 to 4 dims", pname);
        int64_t shape[4];
        for (int d = 0; d < ndim; d++) {
            lua_geti(L, -1, d + 1);
            if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1) luaL_error(L, "parameter '%s' has a bad shape", pname);
            shape[d] = lua_tointeger(L, -1);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
        int64_t fan;
        ml_param_kind kind = init_kind(L, spec, pname, &fan, shape, ndim);
        int idx = ml_model_add_param(a->m, a->layer, pname, ndim, shape, kind, fan);
        if (idx < 0) luaL_error(L, "%s", ml_last_error());
        lua_pushinteger(L, idx);
        lua_rawseti(L, pidx, i);
        lua_settop(L, pidx);
    }
    lua_setfield(L, lt, "pidx");
    lua_settop(L, lt);
}

/* The probe context's fire: records path -> shape, first-seen order. Upvalue 1: {order = {...}, shapes = {}}. */
static int probe_fire(lua_State *L) {
    ml_tensor *t = mlL_checktensor(L, 2, "mixer probe");
    if (lua_type(L, 1) != LUA_TSTRING) return 1;
    lua_settop(L, 2);
    lua_getfield(L, lua_upvalueindex(1), "shapes");
    lua_pushvalue(L, 1);
    if (lua_rawget(L, -2) == LUA_TNIL) {
        lua_pop(L, 1);
        lua_createtable(L, t->ndim, 0);
        for (int d = 0; d < t->ndim; d++) lua_pushinteger(L, t->shape[d]), lua_rawseti(L, -2, d + 1);
        lua_pushvalue(L, 1);
        lua_pushvalue(L, -2);
        lua_rawset(L, 3);
        lua_getfield(L, lua_upvalueindex(1), "order");
        lua_pushvalue(L, 1);
        lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    }
    lua_settop(L, 2);
    return 1;
}

/* One probe forward of the module at (B, L): returns (on the stack) the table path -> shape and the order. */
static void probe(lua_State *L, int lt, int64_t B, int64_t T, int64_t D) {
    lua_newtable(L);
    int rec = lua_gettop(L);
    lua_newtable(L), lua_setfield(L, rec, "shapes");
    lua_newtable(L), lua_setfield(L, rec, "order");
    push_nn(L);
    int nn = lua_gettop(L);
    lua_getfield(L, nn, "push_context");
    lua_newtable(L);
    lua_pushvalue(L, rec);
    lua_pushcclosure(L, probe_fire, 1);
    lua_setfield(L, -2, "fire");
    lua_call(L, 1, 0);
    /* the module under the context; popped whatever happens */
    lua_getfield(L, lt, "obj");
    ml_tensor *x = ml_full(ML_F32, 3, (int64_t[]){B, T, D}, 0.01);
    mlL_pushtensor(L, x);
    int st = lua_pcall(L, 1, 1, 0);
    lua_getfield(L, nn, "pop_context");
    lua_call(L, 0, 0);
    if (st != LUA_OK) lua_error(L);
    ml_tensor *y = mlL_testtensor(L, -1);
    if (!y || y->dtype != ML_F32 || y->ndim != 3 || y->shape[0] != B || y->shape[1] != T || y->shape[2] != D) {
        char got[128];
        luaL_error(L, "forward returned %s, expected a float32 tensor of shape [%d,%d,%d] (B, L, d_model)", mlL_describe(L, -1, got, sizeof got), (int)B, (int)T, (int)D);
    }
    lua_pop(L, 1);
    lua_remove(L, nn);
}

/* Declares "mixer.<path>" for each path both probes fired, with B and L found from the two. */
static void declare_sites(lua_State *L, build_args *a, int lt) {
    const int64_t B1 = 2, T1 = 7, B2 = 3, T2 = 11;
    int64_t D = a->m->cfg.d_model;
    probe(L, lt, B1, T1, D);
    int p1 = lua_gettop(L);
    probe(L, lt, B2, T2, D);
    int p2 = lua_gettop(L);
    lua_newtable(L);
    int sites = lua_gettop(L);
    lua_getfield(L, p1, "order");
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = 1; i <= n; i++) {
        int top = lua_gettop(L);
        lua_geti(L, top, i);
        const char *path = lua_tostring(L, -1);
        if (!*path) { /* the root's own output is the block's attention_output */
            lua_settop(L, top);
            continue;
        }
        lua_getfield(L, p1, "shapes"), lua_getfield(L, -1, path);
        lua_getfield(L, p2, "shapes"), lua_getfield(L, -1, path);
        int s1 = top + 3, s2 = top + 5;
        if (lua_isnil(L, s2)) luaL_error(L, "site '%s' fired in one probe forward only", path);
        int ndim = (int)lua_rawlen(L, s1);
        if (ndim != (int)lua_rawlen(L, s2) || ndim > 5)
            luaL_error(L, "site '%s' changes its number of dims with (B, L) or has more than 5", path);
        int64_t shape[5];
        for (int d = 0; d < ndim; d++) {
            lua_geti(L, s1, d + 1), lua_geti(L, s2, d + 1);
            int64_t v1 = lua_tointeger(L, -2), v2 = lua_tointeger(L, -1);
            lua_pop(L, 2);
            if (v1 == B1 && v2 == B2) shape[d] = -1;
            else if (v1 == T1 && v2 == T2) shape[d] = -2;
            else if (v1 == v2) shape[d] = v1;
            else
                luaL_error(L, "dim %d of site '%s' is neither B, L nor a constant (%d at B=%d L=%d, %d at B=%d L=%d)", d, path, (int)v1, (int)B1, (int)T1, (int)v2, (int)B2, (int)T2);
        }
        char site[64];
        int len = snprintf(site, sizeof site, "mixer.%s", path);
        if (len >= (int)sizeof(((ml_site_decl *)0)->name))
            luaL_error(L, "site name 'mixer.%s' is longer than %d bytes", path,
                       (int)sizeof(((ml_site_decl *)0)->name) - 1);
        int id = ml_model_add_site(a->m, a->layer, site, ndim, shape);
        if (id < 0) luaL_error(L, "%s", ml_last_error());
        lua_pushinteger(L, id);
        lua_setfield(L, sites, path);
        lua_settop(L, top);
    }
    lua_settop(L, sites);
    lua_setfield(L, lt, "sites");
    lua_settop(L, lt);
}

static int fire_forward(lua_State *L);
static int wants_forward(lua_State *L);

static int build_lua(lua_State *L) {
    build_args *a = lua_touserdata(L, 1);
    lua_mixer *mx = a->s->mx;
    const ml_model_config *c = &a->m->cfg;
    lua_newtable(L);
    int lt = lua_gettop(L);
    /* the options: the recorded JSON, plus d_model */
    if (c->mixer_options[0]) {
        push_require(L, "mech.json");
        lua_getfield(L, -1, "decode");
        lua_pushstring(L, c->mixer_options);
        lua_call(L, 1, 1);
        lua_remove(L, -2);
        if (!lua_istable(L, -1)) luaL_error(L, "mixer options are not a JSON object");
    } else {
        lua_newtable(L);
    }
    lua_pushinteger(L, c->d_model);
    lua_setfield(L, -2, "d_model");
    int opts = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, mx->class_ref);
    lua_pushvalue(L, opts);
    lua_call(L, 1, 1);
    if (!lua_istable(L, -1)) luaL_error(L, "the class returned %s, expected a module", luaL_typename(L, -1));
    lua_setfield(L, lt, "obj");
    lua_settop(L, lt);
    declare_params(L, a, lt);
    /* the probes' forwards record no graph (lm_build restores grad mode, also after an error) */
    ml_set_grad_enabled(false);
    declare_sites(L, a, lt);
    /* the forward's context: fire and wants with the layer's running model and run */
    fire_target *tg = lua_newuserdatauv(L, sizeof *tg, 0);
    *tg = (fire_target){0};
    int target = lua_gettop(L);
    lua_pushvalue(L, target);
    lua_setfield(L, lt, "target");
    lua_newtable(L);
    lua_pushvalue(L, target), lua_getfield(L, lt, "sites");
    lua_pushcclosure(L, fire_forward, 2);
    lua_setfield(L, -2, "fire");
    lua_pushvalue(L, target), lua_getfield(L, lt, "sites");
    lua_pushcclosure(L, wants_forward, 2);
    lua_setfield(L, -2, "wants");
    lua_setfield(L, lt, "ctx");
    lua_settop(L, lt);
    a->s->ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

static ml_status lm_build(ml_model *m, int layer, void **state) {
    lua_mixer *mx = (lua_mixer *)ml_mixer_for_layer(&m->cfg, layer)->user;
    layer_state *s = calloc(1, sizeof *s);
    if (!s) return ml_fail(ML_ERR_MEM, "model: out of memory");
    *state = s;
    *s = (layer_state){.mx = mx, .L = mx->L, .T = mx->T, .ref = LUA_NOREF};
    mx->refs++;
    build_args a = {.m = m, .layer = layer, .s = s};
    char what[96];
    snprintf(what, sizeof what, "model: mixer '%s' layer %d", mx->name, layer);
    bool old = ml_grad_enabled();
    ml_status st = protected(mx->T, build_lua, &a, what);
    ml_set_grad_enabled(old);
    return st;
}

/* ------------------------------------------------------------------ init, attach, forward */

typedef struct {
    ml_model *m;
    int layer;
    layer_state *s;
    ml_rng *rng;
    ml_tensor *x, *y; /* forward: input, output (new reference) */
    ml_run *run;
} call_args;

/* The parameters of kind ML_P_CUSTOM: {normal = std}, {uniform = {a, b}} or a function(t, gen). */
static int init_lua(lua_State *L) {
    call_args *a = lua_touserdata(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, a->s->ref);
    int lt = lua_gettop(L);
    lua_getfield(L, lt, "specs");
    lua_getfield(L, lt, "pidx");
    int specs = lt + 1, pidx = lt + 2;
    lua_Integer n = (lua_Integer)lua_rawlen(L, pidx);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, pidx, i);
        ml_param *p = &a->m->params[lua_tointeger(L, -1)];
        lua_geti(L, specs, i);
        lua_getfield(L, -1, "init");
        int init = lua_gettop(L);
        float *x = ml_f32(a->m->flat) + p->offset;
        if (p->kind != ML_P_CUSTOM) {
        } else if (lua_istable(L, init)) {
            if (lua_getfield(L, init, "normal") == LUA_TNUMBER) {
                double std = lua_tonumber(L, -1);
                for (int64_t k = 0; k < p->numel; k++) x[k] = (float)(std * ml_rng_normal(a->rng));
            } else if (lua_getfield(L, init, "uniform") == LUA_TTABLE) {
                lua_geti(L, -1, 1), lua_geti(L, -2, 2);
                double lo = lua_tonumber(L, -2), hi = lua_tonumber(L, -1);
                for (int64_t k = 0; k < p->numel; k++) x[k] = (float)(lo + (hi - lo) * ml_rng_double(a->rng));
            } else {
                luaL_error(L, "parameter '%s': init expected {normal = std} or {uniform = {a, b}}", p->name);
            }
        } else if (lua_isfunction(L, init)) {
            lua_pushvalue(L, init);
            mlL_pushtensor(L, ml_retain(p->t));
            ml_rng *g = lua_newuserdatauv(L, sizeof *g, 0);
            *g = *a->rng;
            luaL_setmetatable(L, MLL_RNG_MT);
            lua_pushvalue(L, -1);
            lua_insert(L, init + 1); /* keep the generator to read its state back */
            lua_call(L, 2, 0);
            *a->rng = *(ml_rng *)lua_touserdata(L, init + 1);
        }
        lua_settop(L, pidx);
    }
    return 0;
}

static void lm_init(ml_model *m, int layer, void *state, ml_rng *rng) {
    layer_state *s = state;
    call_args a = {.m = m, .layer = layer, .s = s, .rng = rng};
    bool old = ml_set_grad_enabled(false);
    s->init_error[0] = 0;
    if (protected(s->T, init_lua, &a, "init")) snprintf(s->init_error, sizeof s->init_error, "%s", ml_last_error());
    ml_set_grad_enabled(old);
}

/* Hands the model's leaf views to the module: module:set_parameter(name, view). */
static int attach_lua(lua_State *L) {
    call_args *a = lua_touserdata(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, a->s->ref);
    int lt = lua_gettop(L);
    lua_getfield(L, lt, "specs");
    lua_getfield(L, lt, "pidx");
    lua_getfield(L, lt, "obj");
    int specs = lt + 1, pidx = lt + 2, obj = lt + 3;
    lua_getfield(L, obj, "set_parameter");
    int setp = lua_gettop(L);
    if (!lua_isfunction(L, setp)) luaL_error(L, "the module has no set_parameter method");
    lua_Integer n = (lua_Integer)lua_rawlen(L, pidx);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_pushvalue(L, setp);
        lua_pushvalue(L, obj);
        lua_geti(L, specs, i);
        lua_getfield(L, -1, "name");
        lua_remove(L, -2);
        lua_geti(L, pidx, i);
        mlL_pushtensor(L, ml_retain(a->m->params[lua_tointeger(L, -1)].t));
        lua_remove(L, -2);
        lua_call(L, 3, 0);
    }
    return 0;
}

static ml_status lm_attach(ml_model *m, int layer, void *state) {
    layer_state *s = state;
    char what[96];
    snprintf(what, sizeof what, "model: mixer '%s' layer %d", s->mx->name, layer);
    if (s->init_error[0]) return ml_fail(ML_ERR_ARG, "%s: %s", what, s->init_error);
    call_args a = {.m = m, .layer = layer, .s = s};
    return protected(s->T, attach_lua, &a, what);
}

/* The forward context's fire(path, t): the site of `path` through ml_site with the running model
 * and run. Upvalues: the fire_target and the table path -> site id. */
static int fire_forward(lua_State *L) {
    fire_target *tg = lua_touserdata(L, lua_upvalueindex(1));
    lua_settop(L, 2);
    ml_tensor *t = mlL_testtensor(L, 2);
    if (!t || lua_type(L, 1) != LUA_TSTRING || !*lua_tostring(L, 1) || !tg->m) return 1;
    lua_pushvalue(L, 1);
    if (lua_rawget(L, lua_upvalueindex(2)) != LUA_TNUMBER)
        return luaL_error(L, "module path '%s' fired, but it did not when the model was built (its sites are those "
                             "of every forward)", lua_tostring(L, 1));
    ml_tensor *y = ml_site(tg->m, tg->run, (int)lua_tointeger(L, -1), t);
    if (!y) return luaL_error(L, "%s", ml_last_error());
    mlL_pushtensor(L, y);
    return 1;
}

/* wants(path): does a hook of the running call want the site (compute only then). */
static int wants_forward(lua_State *L) {
    fire_target *tg = lua_touserdata(L, lua_upvalueindex(1));
    lua_settop(L, 1);
    bool w = false;
    if (tg->m && lua_type(L, 1) == LUA_TSTRING && lua_rawget(L, lua_upvalueindex(2)) == LUA_TNUMBER)
        w = ml_site_wanted(tg->m, tg->run, (int)lua_tointeger(L, -1));
    lua_pushboolean(L, w);
    return 1;
}

static int forward_lua(lua_State *L) {
    call_args *a = lua_touserdata(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, a->s->ref);
    int lt = lua_gettop(L);
    push_nn(L);
    int nn = lua_gettop(L);
    lua_getfield(L, lt, "target");
    fire_target *tg = lua_touserdata(L, -1), saved = *tg; /* a hook may run this layer again */
    lua_getfield(L, nn, "push_context");
    lua_getfield(L, lt, "ctx");
    lua_call(L, 1, 0);
    *tg = (fire_target){.m = a->m, .run = a->run};
    lua_getfield(L, lt, "obj");
    mlL_pushtensor(L, ml_retain(a->x));
    int st = lua_pcall(L, 1, 1, 0);
    *tg = saved;
    lua_getfield(L, nn, "pop_context");
    lua_call(L, 0, 0);
    if (st != LUA_OK) lua_error(L);
    ml_tensor *y = mlL_testtensor(L, -1), *x = a->x;
    if (!y || y->dtype != x->dtype || !ml_same_shape(y, x)) {
        char got[128], want[ML_SHAPE_STR];
        luaL_error(L, "forward returned %s, expected a %s tensor of shape %s (the block input's)",
                   mlL_describe(L, -1, got, sizeof got), ml_dtype_name(x->dtype), ml_shape_str(want, x->ndim, x->shape));
    }
    a->y = ml_retain(y);
    return 0;
}

static ml_tensor *lm_forward(ml_model *m, int layer, void *state, ml_tensor *x, ml_run *run) {
    layer_state *s = state;
    call_args a = {.m = m, .layer = layer, .s = s, .x = x, .run = run};
    char what[96];
    snprintf(what, sizeof what, "blocks.%d.mixer (mixer '%s')", layer, s->mx->name);
    if (protected(s->T, forward_lua, &a, what)) {
        ml_release(a.y);
        return NULL;
    }
    return a.y;
}

static void lm_free(void *state) {
    layer_state *s = state;
    if (!s) return;
    if (s->ref != LUA_NOREF) luaL_unref(s->L, LUA_REGISTRYINDEX, s->ref);
    mixer_unref(s->mx);
    free(s);
}

/* ------------------------------------------------------------------ registration */

typedef struct {
    lua_mixer *head;
    lua_State *T; /* the modules' thread, kept alive as the anchor's user value */
} anchor;

static int anchor_gc(lua_State *L) {
    anchor *an = lua_touserdata(L, 1);
    for (lua_mixer *mx = an->head, *next; mx; mx = next) {
        next = mx->next;
        ml_mixer_unregister(&mx->type);
        luaL_unref(L, LUA_REGISTRYINDEX, mx->class_ref);
        mixer_unref(mx); /* models still holding it free it last */
    }
    an->head = NULL;
    return 0;
}

static anchor *get_anchor(lua_State *L) {
    if (lua_getfield(L, LUA_REGISTRYINDEX, ANCHOR_KEY) == LUA_TUSERDATA) {
        anchor *an = lua_touserdata(L, -1);
        lua_pop(L, 1);
        return an;
    }
    lua_pop(L, 1);
    anchor *an = lua_newuserdatauv(L, sizeof *an, 1);
    an->head = NULL;
    an->T = lua_newthread(L);
    lua_setiuservalue(L, -2, 1);
    lua_newtable(L);
    lua_pushcfunction(L, anchor_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, ANCHOR_KEY);
    return an;
}

static const lua_mixer *lua_mixer_of(const ml_mixer_type *t) {
    return t && t->build == lm_build ? (const lua_mixer *)t->user : NULL;
}

/* The class's name (Module:extend("Name") keeps it as __name), or NULL. */
static const char *class_name(lua_State *L, int cls) {
    lua_pushliteral(L, "__name");
    lua_rawget(L, cls);
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    lua_pop(L, 1); /* the class keeps the string alive */
    return s;
}

/* "BaseConv" -> "base_conv", "GLA" -> "gla": the arch name of a class. */
static void snake_case(const char *s, char *out, size_t n) {
    size_t k = 0;
    for (size_t i = 0; s[i] && k + 2 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isupper(c) && i > 0 && (islower((unsigned char)s[i - 1]) || isdigit((unsigned char)s[i - 1]))) out[k++] = '_';
        out[k++] = (char)tolower(c);
    }
    out[k] = 0;
}

/* Registers the class at `cls` (a mech.nn Module class) as a mixer; name and module may be NULL.
 * Returns its name (owned by the registry). An already registered class keeps its name. */
static const char *register_class(lua_State *L, int cls, const char *name, const char *module, const char *fn) {
    cls = lua_absindex(L, cls);
    if (!lua_istable(L, cls)) {
        char got[64];
        luaL_error(L, "%s: expected a mech.nn Module class, got %s", fn, mlL_describe(L, cls, got, sizeof got));
    }
    /* a built-in mixer's layer class (mech.nn.Mamba, ...) is that mixer */
    lua_getfield(L, cls, "arch");
    const char *arch = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    const ml_mixer_type *bt = arch ? ml_mixer_find(arch) : NULL;
    lua_pop(L, 1);
    if (bt && !bt->user) return bt->name;
    anchor *an = get_anchor(L);
    for (lua_mixer *mx = an->head; mx; mx = mx->next) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, mx->class_ref);
        bool same = lua_rawequal(L, -1, cls);
        lua_pop(L, 1);
        if (same && (!name || !strcmp(name, mx->name))) {
            if (module && *module && !mx->module[0]) snprintf(mx->module, sizeof mx->module, "%s", module);
            return mx->name;
        }
    }
    char snake[64];
    if (!name) {
        const char *cn = class_name(L, cls);
        if (!cn) luaL_error(L, "%s: the class has no name (make it with mech.nn.Module:extend(\"Name\"))", fn);
        snake_case(cn, snake, sizeof snake);
        name = snake;
    }
    if (module && strlen(module) >= sizeof an->head->module)
        luaL_error(L, "%s: module name '%s' is too long", fn, module);
    /* a name held by another class: replaced when no model uses it any more */
    const ml_mixer_type *old = ml_mixer_find(name);
    if (old && lua_mixer_of(old)) {
        lua_gc(L, LUA_GCCOLLECT);
        lua_mixer *om = (lua_mixer *)lua_mixer_of(old);
        if (om->refs > 1)
            luaL_error(L, "%s: another class is registered as mixer '%s' and models built with it are alive; give "
                          "this one another name ({name = ...})", fn, name);
        for (lua_mixer **p = &an->head; *p; p = &(*p)->next)
            if (*p == om) {
                *p = om->next;
                break;
            }
        ml_mixer_unregister(&om->type);
        luaL_unref(L, LUA_REGISTRYINDEX, om->class_ref);
        mixer_unref(om);
    }
    if (strlen(name) >= sizeof an->head->name)
        luaL_error(L, "%s: mixer name '%s' is longer than %d bytes ({name = ...} gives another)", fn, name,
                   (int)sizeof an->head->name - 1);
    lua_mixer *mx = calloc(1, sizeof *mx);
    if (!mx) luaL_error(L, "%s: out of memory", fn);
    memcpy(mx->name, name, strlen(name) + 1);
    memcpy(mx->module, module ? module : "", strlen(module ? module : "") + 1);
    mx->type = (ml_mixer_type){.name = mx->name, .build = lm_build, .init = lm_init,
                               .attach = lm_attach, .forward = lm_forward, .free_state = lm_free, .user = mx};
    if (ml_mixer_register(&mx->type)) {
        free(mx);
        char msg[300];
        snprintf(msg, sizeof msg, "%s", ml_last_error());
        luaL_error(L, "%s: %s%s", fn, msg,
                   ml_mixer_find(name) ? " (give the class another name: {name = ...})" : "");
    }
    mx->L = main_thread(L);
    mx->T = an->T;
    mx->refs = 1;
    lua_pushvalue(L, cls);
    mx->class_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    mx->next = an->head;
    an->head = mx;
    return mx->name;
}

/* mech.register_mixer(Class[, {name=, module=}]) -> name */
static int l_register_mixer(lua_State *L) {
    const char *fn = "mech.register_mixer";
    static const char *const keys[] = {"name", "module", NULL};
    mlL_opttable(L, 2, fn, 2, keys);
    const char *name = lua_getfield(L, 2, "name") != LUA_TNIL ? mlL_optstr(L, 2, "name", NULL, fn) : NULL;
    const char *module = lua_getfield(L, 2, "module") != LUA_TNIL ? mlL_optstr(L, 2, "module", NULL, fn) : NULL;
    lua_pushstring(L, register_class(L, 1, name, module, fn));
    return 1;
}

/* A mixer named by a string: a built-in name or alias, a registered name, else a module to
 * require whose value is the class (or that registers it). */
static const char *resolve_string(lua_State *L, const char *s, const char *fn) {
    ml_model_config probe;
    ml_model_config_defaults(&probe, NULL);
    if (strlen(s) < sizeof probe.arch) {
        snprintf(probe.arch, sizeof probe.arch, "%s", s);
        ml_mixer_resolve_alias(&probe);
        if (ml_mixer_find(probe.arch)) return strcmp(probe.arch, s) ? s : ml_mixer_find(probe.arch)->name;
    }
    int top = lua_gettop(L);
    lua_getglobal(L, "require");
    lua_pushstring(L, s);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK)
        luaL_error(L, "%s: option 'mixer' '%s' is no built-in or registered mixer, and requiring it as a module "
                      "failed: %s", fn, s, lua_tostring(L, -1));
    if (!lua_istable(L, -1))
        luaL_error(L, "%s: module '%s' returned %s, expected its mixer class", fn, s, luaL_typename(L, -1));
    const char *name = register_class(L, -1, NULL, s, fn);
    lua_settop(L, top);
    return name;
}

const char *mlL_mixer_arch(lua_State *L, int idx, const char *fn) {
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) == LUA_TSTRING) return resolve_string(L, lua_tostring(L, idx), fn);
    if (lua_istable(L, idx)) return register_class(L, idx, NULL, NULL, fn);
    mlL_argerror(L, fn, 1, "option 'mixer' as a mech.nn Module class or a mixer's name or module");
    return NULL;
}

bool mlL_mixer_is_lua(const char *arch) { return lua_mixer_of(ml_mixer_find(arch)) != NULL; }

void mlL_mixer_options(lua_State *L, int idx, const char *fn, const char *const *config_keys, ml_model_config *c) {
    idx = lua_absindex(L, idx);
    const lua_mixer *mx = lua_mixer_of(ml_mixer_find(c->arch));
    snprintf(c->mixer_module, sizeof c->mixer_module, "%s", mx->module);
    lua_newtable(L);
    int opts = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        bool config = false;
        if (lua_type(L, -2) != LUA_TSTRING) luaL_error(L, "%s: option keys must be strings", fn);
        const char *k = lua_tostring(L, -2);
        for (int i = 0; config_keys[i] && !config; i++) config = !strcmp(config_keys[i], k);
        if (!config) {
            int t = lua_type(L, -1);
            if (t != LUA_TNUMBER && t != LUA_TSTRING && t != LUA_TBOOLEAN && t != LUA_TTABLE)
                luaL_error(L, "%s: mixer option '%s' expected a number, string, boolean or table (it is recorded in "
                              "checkpoints), got %s", fn, k, luaL_typename(L, -1));
            lua_pushvalue(L, -2);
            lua_pushvalue(L, -2);
            lua_rawset(L, opts);
        }
        lua_pop(L, 1);
    }
    lua_pushnil(L);
    if (lua_next(L, opts) == 0) { /* none */
        c->mixer_options[0] = 0;
        lua_settop(L, opts - 1);
        return;
    }
    lua_pop(L, 2);
    push_require(L, "mech.json");
    lua_getfield(L, -1, "encode");
    lua_pushvalue(L, opts);
    lua_call(L, 1, 1);
    size_t len;
    const char *text = lua_tolstring(L, -1, &len);
    if (len >= sizeof c->mixer_options)
        luaL_error(L, "%s: the mixer options take %d bytes as JSON, more than %d", fn, (int)len,
                   (int)sizeof c->mixer_options - 1);
    memcpy(c->mixer_options, text, len + 1);
    lua_settop(L, opts - 1);
}

void mlL_mixer_require(lua_State *L, const ml_model_config *c, const char *what) {
    ml_model_config r = *c;
    ml_mixer_resolve_alias(&r);
    if (ml_mixer_find(r.arch) || !c->mixer_module[0]) return; /* else the core names the choices */
    int top = lua_gettop(L);
    lua_getglobal(L, "require");
    lua_pushstring(L, c->mixer_module);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK)
        luaL_error(L, "%s: mixer '%s' is not registered and its module '%s' could not be loaded: %s", what, c->arch,
                   c->mixer_module, lua_tostring(L, -1));
    if (lua_istable(L, -1) && !ml_mixer_find(c->arch)) register_class(L, -1, c->arch, c->mixer_module, what);
    lua_settop(L, top);
    if (!ml_mixer_find(c->arch))
        luaL_error(L, "%s: module '%s' did not register mixer '%s'", what, c->mixer_module, c->arch);
}

int mlL_open_mixer(lua_State *L) {
    lua_pushcfunction(L, l_register_mixer);
    lua_setfield(L, -2, "register_mixer");
    return 0;
}
