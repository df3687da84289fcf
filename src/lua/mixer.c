/* Mixers written in Lua (docs/nn.md, "Your own mixer"): a mech.nn Module class becomes a
 * runtime-registered C mixer descriptor (ml_mixer_register), so the paper's language model in C
 * (embedding, blocks, norms, MLP, head, sites, hooks, training, checkpoints, the interp
 * evaluators) runs it as it runs a built-in mixer.
 *
 * Per layer, build declares what lua/mech/nn/lua_mixer.lua finds: the class instantiated with the
 * model's mixer options plus d_model, the module's parameters from module:param_specs() (so they
 * live in the model's flat buffer) and its internal sites, every submodule output and HookPoint
 * that fires during a forward, named "mixer.<path>", with shapes found by two small probe
 * forwards at different (B, L). Once the
 * parameters exist, attach hands their leaf views to the module (module:set_parameter). A forward
 * pushes a hook context (mech.nn.push_context) whose fire(path, t) calls ml_site with the running
 * ml_run, so model hooks, caches and patching see the internal sites, then calls module(x).
 *
 * The modules' code runs under lua_pcall on a thread of its own: an error inside a module becomes
 * the core's error naming the mixer and the layer, never a longjmp across the core's frames; and
 * the caller's thread keeps the frame its hook callbacks index (src/lua/model.c's hook tables sit
 * at stack indices of the calling binding function). */
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
    int serial;             /* its place in the order of registration (mlL_mixer_mark) */
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

/* Takes mx out of the model builder and drops the registration (a model still holding it frees it
 * last). */
static void drop_mixer(lua_State *L, lua_mixer *mx) {
    ml_mixer_unregister(&mx->type);
    luaL_unref(L, LUA_REGISTRYINDEX, mx->class_ref);
    mixer_unref(mx);
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
        out = ml_fail(ML_ERR_ARG, "%s: %s", what, mlL_error_text(L, -1));
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


/* ------------------------------------------------------------------ build */

typedef struct {
    ml_model *m;
    int layer;
    layer_state *s;
} build_args;

static int fire_forward(lua_State *L);
static int wants_forward(lua_State *L);

/* Declares the parameters {{name=, shape=, init=, fan=}, ...} at `params`; their model indices
 * go to the layer table's pidx. */
static void declare_params(lua_State *L, build_args *a, int lt, int params) {
    lua_newtable(L);
    int pidx = lua_gettop(L);
    for (lua_Integer i = 1; lua_rawgeti(L, params, i) == LUA_TTABLE; i++) {
        int p = lua_gettop(L);
        lua_getfield(L, p, "name"), lua_getfield(L, p, "shape"), lua_getfield(L, p, "init"), lua_getfield(L, p, "fan");
        int ndim = (int)lua_rawlen(L, p + 2);
        int64_t shape[4];
        for (int d = 0; d < ndim; d++) shape[d] = (lua_rawgeti(L, p + 2, d + 1), lua_tointeger(L, -1));
        int idx = ml_model_add_param_named(a->m, a->layer, lua_tostring(L, p + 1), ndim, shape, lua_tostring(L, p + 3),
                                           lua_tointeger(L, p + 4));
        if (idx < 0) luaL_error(L, "%s", ml_last_error());
        lua_pushinteger(L, idx);
        lua_rawseti(L, pidx, i);
        lua_settop(L, pidx);
    }
    lua_settop(L, pidx);
    lua_setfield(L, lt, "pidx");
}

/* Declares "mixer.<path>" for each {path, shape} at `list`; the table path -> site id goes to the
 * layer table's sites. */
static void declare_sites(lua_State *L, build_args *a, int lt, int list) {
    lua_newtable(L);
    int sites = lua_gettop(L);
    for (lua_Integer i = 1; lua_rawgeti(L, list, i) == LUA_TTABLE; i++) {
        lua_rawgeti(L, -1, 1), lua_rawgeti(L, -2, 2);
        const char *path = lua_tostring(L, -2);
        int ndim = (int)lua_rawlen(L, -1);
        int64_t shape[5];
        for (int d = 0; d < ndim; d++) shape[d] = (lua_rawgeti(L, -1 - d, d + 1), lua_tointeger(L, -1));
        int id = ml_model_add_mixer_site(a->m, a->layer, path, ndim, shape);
        if (id < 0) luaL_error(L, "%s", ml_last_error());
        lua_pushinteger(L, id);
        lua_setfield(L, sites, path);
        lua_settop(L, sites);
    }
    lua_settop(L, sites);
    lua_setfield(L, lt, "sites");
}

/* The layer table {obj=, specs=, pidx=, sites=, ctx=, target=}: the module and its parameters and
 * sites from lua/mech/nn/lua_mixer.lua, declared in the model; the forward's context. */
static int build_lua(lua_State *L) {
    build_args *a = lua_touserdata(L, 1);
    push_require(L, "mech.nn.lua_mixer");
    int lib = lua_gettop(L);
    lua_getfield(L, lib, "build");
    lua_rawgeti(L, LUA_REGISTRYINDEX, a->s->mx->class_ref);
    lua_pushstring(L, a->m->cfg.mixer_options);
    lua_pushinteger(L, a->m->cfg.d_model);
    lua_call(L, 3, 1);
    int lt = lua_gettop(L);
    lua_getfield(L, lt, "params");
    declare_params(L, a, lt, lt + 1);
    /* the probes' forwards record no graph (lm_build restores grad mode, also after an error) */
    ml_set_grad_enabled(false);
    lua_getfield(L, lib, "sites");
    lua_getfield(L, lt, "obj");
    lua_pushinteger(L, a->m->cfg.d_model);
    lua_call(L, 2, 1);
    declare_sites(L, a, lt, lua_gettop(L));
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
        if (p->kind == ML_P_CUSTOM && lua_istable(L, init)) {
            bool normal = lua_getfield(L, init, "normal") == LUA_TNUMBER;
            if (!normal && lua_getfield(L, init, "uniform") != LUA_TTABLE)
                luaL_error(L, "parameter '%s': init expected {normal = std} or {uniform = {a, b}}", p->name);
            if (!normal) lua_geti(L, -1, 1), lua_geti(L, -2, 2);
            ml_param_fill_random(a->m, (int)(p - a->m->params), !normal, lua_tonumber(L, normal ? -1 : -2),
                                 lua_tonumber(L, -1), a->rng);
        } else if (p->kind == ML_P_CUSTOM && lua_isfunction(L, init)) {
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
    push_require(L, "mech.nn");
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
    char site[64], what[128];
    ml_site_format(site, sizeof site, layer, "mixer");
    snprintf(what, sizeof what, "%s (mixer '%s')", site, s->mx->name);
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
    int count;    /* registrations made so far (the next one's serial) */
} anchor;

static int anchor_gc(lua_State *L) {
    anchor *an = lua_touserdata(L, 1);
    for (lua_mixer *mx = an->head, *next; mx; mx = next) {
        next = mx->next;
        drop_mixer(L, mx);
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
    an->count = 0;
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

/* Registers the class at `cls` (a mech.nn Module class) as a mixer; name and module may be NULL.
 * Returns its name (owned by the registry). An already registered class keeps its name. */
/* A mixer name held by another class is given up when no model uses it any more; while one does,
 * registering another class under it is an error. */
static void release_name(lua_State *L, anchor *an, const char *name, const char *fn) {
    const ml_mixer_type *old = ml_mixer_find(name);
    if (!old || !lua_mixer_of(old)) return;
    lua_gc(L, LUA_GCCOLLECT);
    lua_mixer *om = (lua_mixer *)lua_mixer_of(old);
    if (om->refs > 1)
        mlL_error(L, fn, "another class is registered as mixer '%s' and models built with it are alive; give this one "
                         "another name ({name = ...})", name);
    for (lua_mixer **p = &an->head; *p; p = &(*p)->next)
        if (*p == om) {
            *p = om->next;
            break;
        }
    drop_mixer(L, om);
}

/* A new Lua mixer named `name` for the class at cls, registered with the model builder. */
static lua_mixer *add_mixer(lua_State *L, anchor *an, int cls, const char *name, const char *module, const char *fn) {
    lua_mixer *mx = calloc(1, sizeof *mx);
    if (!mx) mlL_error(L, fn, "out of memory");
    memcpy(mx->name, name, strlen(name) + 1);
    memcpy(mx->module, module ? module : "", strlen(module ? module : "") + 1);
    mx->type = (ml_mixer_type){.name = mx->name, .build = lm_build, .init = lm_init,
                               .attach = lm_attach, .forward = lm_forward, .free_state = lm_free, .user = mx};
    if (ml_mixer_register(&mx->type)) {
        free(mx);
        char msg[300];
        snprintf(msg, sizeof msg, "%s", ml_last_error());
        mlL_error(L, fn, "%s%s", msg,
                   ml_mixer_find(name) ? " (give the class another name: {name = ...})" : "");
    }
    mx->L = main_thread(L);
    mx->T = an->T;
    mx->refs = 1;
    lua_pushvalue(L, cls);
    mx->class_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    mx->next = an->head;
    mx->serial = an->count++;
    an->head = mx;
    return mx;
}

static const char *register_class(lua_State *L, int cls, const char *name, const char *module, const char *fn) {
    cls = lua_absindex(L, cls);
    if (!lua_istable(L, cls)) {
        char got[64];
        mlL_error(L, fn, "expected a mech.nn Module class, got %s", mlL_describe(L, cls, got, sizeof got));
    }
    /* a built-in mixer's layer class (mech.nn.Mamba, ...) is that mixer */
    lua_getfield(L, cls, "arch");
    const char *arch = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    const ml_mixer_type *bt = arch ? ml_mixer_find(arch) : NULL;
    lua_pop(L, 1);
    if (bt && !bt->user) return bt->name;
    /* only a mech.nn Module class is a mixer (a module such as `os` named by a file never is) */
    lua_pushliteral(L, "__nnclass");
    bool is_class = lua_rawget(L, cls) == LUA_TBOOLEAN && lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (!is_class)
        mlL_error(L, fn, "expected a mech.nn Module class (made with mech.nn.Module:extend), got a table that is not one");
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
    if (!name) { /* "BaseConv" -> "base_conv" (lua/mech/nn/lua_mixer.lua) */
        mlL_pushlua(L, "mech.nn.lua_mixer", "arch_name", MLL_CHECK_NONE, NULL);
        lua_pushvalue(L, cls);
        lua_call(L, 1, 1);
        if (!lua_isstring(L, -1)) mlL_error(L, fn, "the class has no name (make it with mech.nn.Module:extend(\"Name\"))");
        snprintf(snake, sizeof snake, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        name = snake;
    }
    if (module && strlen(module) >= sizeof an->head->module)
        mlL_error(L, fn, "module name '%s' is too long", module);
    release_name(L, an, name, fn);
    if (strlen(name) >= sizeof an->head->name)
        mlL_error(L, fn, "mixer name '%s' is longer than %d bytes ({name = ...} gives another)", name,
                   (int)sizeof an->head->name - 1);
    return add_mixer(L, an, cls, name, module, fn)->name;
}

int mlL_mixer_mark(lua_State *L) { return get_anchor(L)->count; }

void mlL_mixer_forget(lua_State *L, int mark, const char *module) {
    anchor *an = get_anchor(L);
    for (lua_mixer **p = &an->head; *p;) {
        lua_mixer *mx = *p;
        if (mx->serial < mark) {
            p = &mx->next;
            continue;
        }
        *p = mx->next;
        drop_mixer(L, mx);
    }
    if (module) {
        luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
        lua_pushnil(L);
        lua_setfield(L, -2, module);
        lua_pop(L, 1);
    }
}

/* register_class(class, name, module, fn) under lua_pcall (its errors are then a load's to undo). */
static int protected_register(lua_State *L) {
    register_class(L, 1, lua_tostring(L, 2), lua_tostring(L, 3), lua_tostring(L, 4));
    return 0;
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
                      "failed: %s", fn, s, mlL_error_text(L, -1));
    if (!lua_istable(L, -1))
        mlL_error(L, fn, "module '%s' returned %s, expected its mixer class", s, luaL_typename(L, -1));
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
    push_require(L, "mech.nn.lua_mixer");
    lua_getfield(L, -1, "options_json");
    lua_pushvalue(L, idx);
    lua_pushstring(L, fn);
    lua_newtable(L);
    for (int i = 0; config_keys[i]; i++) lua_pushboolean(L, 1), lua_setfield(L, -2, config_keys[i]);
    lua_call(L, 3, 1);
    size_t len;
    const char *text = lua_tolstring(L, -1, &len);
    if (len >= sizeof c->mixer_options)
        mlL_error(L, fn, "the mixer options take %d bytes as JSON, more than %d", (int)len,
                   (int)sizeof c->mixer_options - 1);
    memcpy(c->mixer_options, text, len + 1);
    lua_pop(L, 2);
}

/* Raises the message on top of L after undoing this load's registrations (and its require). */
static void refuse(lua_State *L, int mark, const char *required) {
    mlL_mixer_forget(L, mark, required);
    lua_error(L);
}

/* Raises "<what>: mixer 'arch' is not registered, and the file ..." with mech.trust's refusal: the
 * checkpoint names a module the user has not allowed (docs/security.md). */
static void refuse_untrusted(lua_State *L, const char *arch, const char *module, const char *what) {
    char named[96];
    snprintf(named, sizeof named, "mixer '%s' is not registered, and the file", arch);
    mlL_pushlua(L, "mech.trust", "refusal", MLL_CHECK_NONE, NULL);
    lua_pushstring(L, named);
    lua_pushstring(L, module);
    lua_call(L, 2, 1);
    lua_pushfstring(L, "%s: %s", what, lua_tostring(L, -1));
    lua_error(L);
}

bool mlL_mixer_require(lua_State *L, const ml_model_config *c, const char *what, int modules_idx) {
    ml_model_config r = *c;
    ml_mixer_resolve_alias(&r);
    if (ml_mixer_find(r.arch) || !c->mixer_module[0]) return false; /* else the core names the choices */
    int top = lua_gettop(L), mark = mlL_mixer_mark(L);
    modules_idx = modules_idx ? lua_absindex(L, modules_idx) : 0;
    const char *module = c->mixer_module;
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    bool loaded = lua_getfield(L, -1, module) != LUA_TNIL;
    if (!loaded) { /* the file names it: only the user may allow it */
        lua_pop(L, 1);
        mlL_pushlua(L, "mech.trust", "allowed", MLL_CHECK_NONE, NULL);
        lua_pushstring(L, module);
        if (modules_idx) lua_pushvalue(L, modules_idx);
        else lua_pushnil(L);
        lua_call(L, 2, 1);
        bool allowed = lua_toboolean(L, -1);
        lua_pop(L, 1);
        if (!allowed) refuse_untrusted(L, c->arch, module, what);
        lua_getglobal(L, "require");
        lua_pushstring(L, module);
        if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
            lua_pushfstring(L, "%s: mixer '%s' is not registered and its module '%s' could not be loaded: %s", what,
                            c->arch, module, mlL_error_text(L, -1));
            refuse(L, mark, module);
        }
    }
    bool required = !loaded;
    if (!ml_mixer_find(c->arch)) {
        lua_pushliteral(L, "__nnclass");
        bool is_class = lua_istable(L, -2) && lua_rawget(L, -2) == LUA_TBOOLEAN && lua_toboolean(L, -1);
        lua_pop(L, 1);
        if (!is_class) {
            char got[64];
            lua_pushfstring(L, "%s: module '%s' is %s, not a mech.nn Module class, and registered no mixer '%s'", what,
                            module, mlL_describe(L, -1, got, sizeof got), c->arch);
            refuse(L, mark, required ? module : NULL);
        }
        lua_pushcfunction(L, protected_register);
        lua_pushvalue(L, -2);
        lua_pushstring(L, c->arch);
        lua_pushstring(L, module);
        lua_pushstring(L, what);
        if (lua_pcall(L, 4, 0, 0) != LUA_OK) refuse(L, mark, required ? module : NULL);
    }
    lua_settop(L, top);
    if (!ml_mixer_find(c->arch)) {
        lua_pushfstring(L, "%s: module '%s' did not register mixer '%s'", what, module, c->arch);
        refuse(L, mark, required ? module : NULL);
    }
    return required;
}

int mlL_open_mixer(lua_State *L) {
    lua_pushcfunction(L, l_register_mixer);
    lua_setfield(L, -2, "register_mixer");
    mlL_pushlua(L, "mech.trust", "allow_module", MLL_CHECK_NONE, NULL);
    lua_setfield(L, -2, "allow_module");
    return 0;
}
