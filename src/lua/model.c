/* mech.model{...}: language models from Lua, with hooks, training steps and checkpoints.
 *
 * Hooks: a table {["blocks.0.attention_output"] = fn, ...}; fn(activation, ctx) observes (returns
 * nothing) or returns a replacement of the same shape. ctx = {site=, layer=, name=}. Names are
 * validated against model:hook_names(); an unknown name suggests the closest. Persistent hooks
 * come from model:add_hook(name, fn), which returns a handle with :remove() and __close. The
 * model optimiser (mech.adamw, the mech.AdamW userdata) is in src/lua/optim.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/safetensors.h"
#include "lua/binding.h"
#include "lua/mixer.h"
#include "nn/checkpoint.h"
#include "nn/train.h"
#include "ops/nn_ops.h"

#define MLL_MODEL_MT "mech.Model"
#define MLL_HOOK_MT "mech.HookHandle"
#define MLL_HOOK_NAMES_MT "mech.HookNames"

typedef struct {
    ml_model *m;
    int in_hook;  /* Lua hooks of this model running now (the model is mid-computation) */
    bool closing; /* closed inside a hook: freed once the computation is over */
} model_box;

/* Frees a model closed inside one of its hooks, once no hook of it runs. */
static void settle_close(model_box *b) {
    if (b->closing && !b->in_hook) {
        ml_model_free(b->m);
        b->m = NULL;
        b->closing = false;
    }
}

static ml_model *check_model(lua_State *L, int arg, const char *fn) {
    model_box *b = luaL_testudata(L, arg, MLL_MODEL_MT);
    if (!b) mlL_argerror(L, fn, arg, "a mech.Model");
    settle_close(b);
    if (!b->m || b->closing) mlL_error(L, fn, "the model was closed");
    return b->m;
}

ml_model *mlL_checkmodel(lua_State *L, int arg, const char *fn) { return check_model(L, arg, fn); }

static void push_model(lua_State *L, ml_model *m) {
    model_box *b = lua_newuserdatauv(L, sizeof *b, 1);
    *b = (model_box){.m = m};
    luaL_setmetatable(L, MLL_MODEL_MT);
    lua_newtable(L); /* persistent hooks: site -> {fn, ...} */
    lua_setiuservalue(L, -2, 1);
    mlL_account(L, (size_t)m->n_total * 8);
}

/* ------------------------------------------------------------------ construction */

/* Reads the model options of the table at idx into c (the keys, defaults and checks come from the
 * options table, nn/options.c); an option the chosen architecture does not read is an error
 * naming it. given[i] (may be NULL) is set for each option present. `mixer` (instead of `arch`)
 * names the mixer by its class, name or module; a mixer written in Lua reads the common options,
 * and every other key is one of its own options (src/lua/mixer.c). */
static void read_options(lua_State *L, int idx, const char *fn, ml_model_config *c, bool *given) {
    const char *keys[64], *common[64];
    int nk = 0, nc = 0;
    for (int i = 0; i < ml_model_option_count() && nk < 61; i++) {
        const ml_model_option *o = ml_model_option_at(i);
        if (o->key) keys[nk++] = o->name;
        if (o->key && o->common) common[nc++] = o->name;
    }
    keys[nk++] = "mixer", common[nc++] = "mixer";
    keys[nk] = common[nc] = NULL;
    const char *arch;
    if (lua_getfield(L, idx, "mixer") != LUA_TNIL) {
        if (lua_getfield(L, idx, "arch") != LUA_TNIL) mlL_error(L, fn, "give 'arch' or 'mixer', not both");
        lua_pop(L, 1);
        arch = mlL_mixer_arch(L, -1, fn); /* a name the registry or the options table keeps */
    } else {
        arch = mlL_optstr(L, idx, "arch", "attention", fn);
    }
    lua_pop(L, 1);
    bool lua_mixer = mlL_mixer_is_lua(arch);
    if (!lua_mixer) mlL_checkkeys(L, idx, fn, keys);
    ml_model_config_defaults(c, arch);
    if (strlen(arch) >= sizeof c->arch) mlL_error(L, fn, "option 'arch' is too long");
    ml_model_config resolved = *c;
    ml_mixer_resolve_alias(&resolved);
    const ml_mixer_type *mixer = ml_mixer_find(resolved.arch); /* NULL: ml_model_new names the choices */
    for (int i = 0; i < ml_model_option_count(); i++) {
        const ml_model_option *o = ml_model_option_at(i);
        if (!o->key || (lua_mixer && !o->common)) continue; /* a Lua mixer's own options are read below */
        bool present = lua_getfield(L, idx, o->name) != LUA_TNIL;
        lua_pop(L, 1);
        if (given && i < ML_LOAD_MAX_OPTIONS) given[i] = present;
        if (!present || !strcmp(o->name, "arch")) continue;
        if (mixer && !ml_mixer_reads(mixer, o))
            mlL_error(L, fn, "option '%s' does not apply to arch '%s'", o->name, arch);
        if (o->type == ML_OPT_BOOL) ml_option_set(c, o, mlL_optbool(L, idx, o->name, 0, fn));
        else if (o->type == ML_OPT_INT) ml_option_set(c, o, mlL_optint32(L, idx, o->name, 0, fn));
        else if (o->type == ML_OPT_U64) ml_option_set(c, o, mlL_optint(L, idx, o->name, 0, fn));
        else {
            const char *v = mlL_optstr(L, idx, o->name, "", fn);
            if (!ml_option_set_str(c, o, v)) mlL_error(L, fn, "option '%s' is too long: '%s'", o->name, v);
        }
    }
    bool has_mixer = lua_getfield(L, idx, "mixer") != LUA_TNIL;
    lua_pop(L, 1);
    for (int i = 0; given && has_mixer && i < ml_model_option_count() && i < ML_LOAD_MAX_OPTIONS; i++)
        if (!strcmp(ml_model_option_at(i)->name, "arch")) given[i] = true; /* `mixer` gives the arch */
    if (lua_mixer) {
        common[nc++] = "arch";
        common[nc] = NULL;
        mlL_mixer_options(L, idx, fn, common, c);
    }
}

/* mech.model{...} */
static int l_model(lua_State *L) {
    const char *fn = "mech.model";
    mlL_checktable(L, 1, fn, 1);
    ml_model_config c;
    read_options(L, 1, fn, &c, NULL);
    ml_model *m = ml_model_new(&c);
    if (!m) return mlL_raise(L);
    push_model(L, m);
    return 1;
}

static int m_gc(lua_State *L) { /* unreachable: no computation can be using it */
    model_box *b = luaL_checkudata(L, 1, MLL_MODEL_MT);
    ml_model_free(b->m);
    b->m = NULL;
    return 0;
}

static int m_close(lua_State *L) { /* inside a hook the running forward still needs the model */
    model_box *b = luaL_checkudata(L, 1, MLL_MODEL_MT);
    b->closing = true;
    settle_close(b);
    return 0;
}

static int m_tostring(lua_State *L) {
    ml_model *m = check_model(L, 1, "model:tostring");
    lua_pushfstring(L, "mech.Model(%s, d_model=%d, n_layers=%d, vocab=%d, %s, params=%I)", m->cfg.arch, m->cfg.d_model,
                    m->cfg.n_layers, m->cfg.vocab, m->cfg.pos_emb ? "learned positions" : "NoPE",
                    (lua_Integer)ml_model_count(m));
    return 1;
}

static int m_config(lua_State *L) {
    ml_model *m = check_model(L, 1, "model:config");
    lua_newtable(L);
    for (int i = 0; i < ml_model_option_count(); i++) {
        const ml_model_option *o = ml_model_option_at(i);
        if (o->optional && o->type == ML_OPT_STRING && !strcmp(ml_option_str(&m->cfg, o), o->str_def)) continue;
        if (o->type == ML_OPT_STRING) lua_pushstring(L, ml_option_str(&m->cfg, o));
        else if (o->type == ML_OPT_BOOL) lua_pushboolean(L, (int)ml_option_get(&m->cfg, o));
        else lua_pushinteger(L, ml_option_get(&m->cfg, o));
        lua_setfield(L, -2, o->name);
    }
    return 1;
}

static int m_named_parameters(lua_State *L) {
    ml_model *m = check_model(L, 1, "model:named_parameters");
    lua_createtable(L, m->n_params, 0);
    for (int i = 0; i < m->n_params; i++) {
        lua_createtable(L, 2, 0);
        lua_pushstring(L, m->params[i].name);
        lua_rawseti(L, -2, 1);
        mlL_pushtensor(L, ml_retain(m->params[i].t));
        lua_rawseti(L, -2, 2);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* ------------------------------------------------------------------ sites & hooks */

/* Pushes site i's entry {id=, name=, layer=, component=, shape=} (shape: "B", "L" or sizes). */
static void push_site_entry(lua_State *L, const ml_model *m, int i) {
    char name[ML_SITE_NAME_MAX];
    ml_site_fullname(m, i, name, sizeof name);
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, i), lua_setfield(L, -2, "id");
    lua_pushstring(L, name), lua_setfield(L, -2, "name");
    lua_pushinteger(L, m->site_layer[i]), lua_setfield(L, -2, "layer");
    lua_pushstring(L, m->sites[i].name), lua_setfield(L, -2, "component");
    lua_createtable(L, m->sites[i].ndim, 0);
    for (int d = 0; d < m->sites[i].ndim; d++) {
        int64_t s = m->sites[i].shape[d];
        if (s == -1) lua_pushliteral(L, "B");
        else if (s == -2) lua_pushliteral(L, "L");
        else lua_pushinteger(L, s);
        lua_rawseti(L, -2, d + 1);
    }
    lua_setfield(L, -2, "shape");
}

/* model:site(layer, component) -> "blocks.{layer}.{component}" (TransformerLens component names
 * too); an error names the layer count or the layer's closest component. */
static int m_site(lua_State *L) {
    const char *fn = "model:site";
    ml_model *m = check_model(L, 1, fn);
    int layer = mlL_checklayer(L, m, 2, fn);
    const char *c = luaL_checkstring(L, 3);
    int s = ml_site_find(m, layer, c);
    if (s < 0) {
        const ml_layer *ly = &m->layers[layer];
        const char *names[ML_MAX_SITES + 1];
        int n = 0;
        for (int i = ly->site_first; i < ly->site_end && n < ML_MAX_SITES; i++) names[n++] = m->sites[i].name;
        names[n] = NULL;
        const char *near = ml_closest(c, names);
        return mlL_error(L, fn, "layer %d has no component '%s' (did you mean '%s'? model:hook_names() lists the sites)", layer, c, near ? near : "");
    }
    char name[ML_SITE_NAME_MAX];
    ml_site_fullname(m, s, name, sizeof name);
    lua_pushstring(L, name);
    return 1;
}

/* model:hook_names([filter]) -> {{id=, name=, layer=, component=, shape=}, ...}; filter as
 * run_with_cache's names */
static int m_hook_names(lua_State *L) {
    const char *fn = "model:hook_names";
    ml_model *m = check_model(L, 1, fn);
    lua_settop(L, 2);
    bool filtered = !lua_isnil(L, 2);
    if (filtered) mlL_checkfilter(L, 2, fn, "argument 2");
    /* every site first: a filter function may close the model, so it runs after the last read */
    lua_createtable(L, m->n_sites, 0); /* 3: all sites */
    for (int i = 0; i < m->n_sites; i++) push_site_entry(L, m, i), lua_rawseti(L, -2, i + 1);
    int n = m->n_sites;
    lua_createtable(L, n, 0); /* 4: the kept ones */
    for (int i = 1, k = 0; i <= n; i++) {
        lua_rawgeti(L, 3, i);
        lua_getfield(L, -1, "name");
        bool keep = !filtered || mlL_name_filter(L, 2, lua_tostring(L, -1), fn, "argument 2");
        lua_pop(L, 1);
        if (keep) lua_rawseti(L, 4, ++k);
        else lua_pop(L, 1);
    }
    luaL_setmetatable(L, MLL_HOOK_NAMES_MT);
    return 1;
}

typedef struct {
    lua_State *L;
    model_box *box;
    const ml_model *m;
    int hooks;   /* a table site -> {fn, ...}: the call's own hooks (a stack index of the calling */
    int persist; /* function's frame) or, when persist is not LUA_NOREF, its registry reference */
} hook_ud;

/* Calls fn (on top of the stack) with (act, ctx); returns a new reference to a replacement or
 * NULL; on a Lua error sets *err and the core message. */
static ml_tensor *call_hook(hook_ud *h, ml_tensor *act, const char *full, int layer, const char *name, ml_status *err) {
    lua_State *L = h->L;
    mlL_pushtensor(L, ml_retain(act));
    lua_createtable(L, 0, 3);
    lua_pushstring(L, full), lua_setfield(L, -2, "site");
    lua_pushinteger(L, layer), lua_setfield(L, -2, "layer");
    lua_pushstring(L, name), lua_setfield(L, -2, "name");
    h->box->in_hook++;
    int st = lua_pcall(L, 2, 1, 0);
    h->box->in_hook--;
    if (st != LUA_OK) {
        ml_fail(ML_ERR_ARG, "hook at %s: %s", full, mlL_error_text(L, -1)); /* never NULL to %s */
        lua_pop(L, 1);
        *err = ML_ERR_ARG;
        return NULL;
    }
    char who[128];
    snprintf(who, sizeof who, "hook at %s", full);
    return mlL_hook_result(L, who, err);
}

/* Pushes the hooks of the site (a list, possibly empty) or nil; returns how many. */
static int push_hooks(hook_ud *h, const char *full) {
    if (h->persist != LUA_NOREF) lua_rawgeti(h->L, LUA_REGISTRYINDEX, h->persist);
    else lua_pushvalue(h->L, h->hooks);
    lua_getfield(h->L, -1, full);
    lua_remove(h->L, -2);
    return lua_istable(h->L, -1) ? (int)lua_rawlen(h->L, -1) : 0;
}

static bool hooks_want(void *ud, int site) {
    hook_ud *h = ud;
    char full[96];
    ml_site_fullname(h->m, site, full, sizeof full);
    int n = push_hooks(h, full);
    lua_pop(h->L, 1);
    return n > 0;
}

/* The hooks of a site in registration order, each seeing the previous one's result. */
static ml_tensor *hooks_call(void *ud, int site, ml_tensor *act, ml_status *err) {
    hook_ud *h = ud;
    lua_State *L = h->L;
    char full[96];
    ml_site_fullname(h->m, site, full, sizeof full);
    ml_tensor *cur = NULL;
    int n = push_hooks(h, full);
    for (int i = 1; i <= n && !*err; i++) {
        lua_rawgeti(L, -1, i);
        ml_tensor *rep = call_hook(h, cur ? cur : act, full, h->m->site_layer[site], h->m->sites[site].name, err);
        if (rep) ml_release(cur), cur = rep;
    }
    lua_pop(L, 1);
    if (*err) ml_release(cur), cur = NULL;
    return cur;
}

/* Sets up a run from the optional hooks table at index `arg`. Returns whether it has hooks. */
static bool setup_run(lua_State *L, ml_model *m, int arg, hook_ud *h, ml_run *run, const char *fn) {
    memset(run, 0, sizeof *run);
    *h = (hook_ud){.L = L, .box = lua_touserdata(L, 1), .m = m, .persist = LUA_NOREF};
    if (lua_isnoneornil(L, arg)) return false;
    if (!lua_istable(L, arg)) mlL_argerror(L, fn, arg, "a table of hooks {site = function}");
    /* the call's hooks under mechlab's full names (keys may be TransformerLens names) */
    arg = lua_absindex(L, arg);
    lua_newtable(L);
    h->hooks = lua_gettop(L);
    bool any = false;
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        if (lua_type(L, -2) != LUA_TSTRING) mlL_error(L, fn, "hook table keys must be site names");
        char full[96];
        ml_site_fullname(m, mlL_checksite(L, m, lua_tostring(L, -2), fn), full, sizeof full);
        if (!lua_isfunction(L, -1)) mlL_error(L, fn, "hook for '%s' expected a function, got %s", lua_tostring(L, -2), luaL_typename(L, -1));
        if (lua_getfield(L, h->hooks, full) != LUA_TNIL)
            mlL_error(L, fn, "two hooks for site '%s' (one named '%s')", full, lua_tostring(L, -3));
        lua_pop(L, 1);
        lua_createtable(L, 1, 0);
        lua_insert(L, -2);
        lua_rawseti(L, -2, 1);
        lua_setfield(L, h->hooks, full);
        any = true;
    }
    if (any) {
        run->hook = hooks_call;
        run->wants = hooks_want;
        run->ud = h;
    }
    return any;
}

/* ---- persistent hooks (model:add_hook): m->hooks while a method or mech.interp function runs */

static bool has_persistent(lua_State *L, int model) {
    lua_getiuservalue(L, model, 1);
    bool any = false;
    lua_pushnil(L);
    while (!any && lua_next(L, -2)) {
        any = lua_istable(L, -1) && lua_rawlen(L, -1) > 0;
        lua_pop(L, any ? 2 : 1);
    }
    lua_pop(L, 1);
    return any;
}

/* The closure mlL_hooked makes: calls upvalue 1 with the arguments, with the persistent hooks of
 * the model in argument 1 as m->hooks. The call runs under lua_pcall so that m->hooks is restored
 * on an error too (it points into this frame). */
static int with_hooks(lua_State *L) {
    model_box *b = luaL_testudata(L, 1, MLL_MODEL_MT);
    if (b) settle_close(b);
    ml_model *m = b && !b->closing ? b->m : NULL;
    if (!m || (!m->hooks && !has_persistent(L, 1))) return lua_tocfunction(L, lua_upvalueindex(1))(L);
    int nargs = lua_gettop(L);
    hook_ud h = {.L = L, .box = b, .m = m, .persist = LUA_NOREF};
    ml_run run = {.hook = hooks_call, .wants = hooks_want, .ud = &h};
    lua_getiuservalue(L, 1, 1);
    h.persist = luaL_ref(L, LUA_REGISTRYINDEX);
    ml_run *outer = m->hooks;
    m->hooks = has_persistent(L, 1) ? &run : NULL;
    lua_pushvalue(L, lua_upvalueindex(1));
    for (int i = 1; i <= nargs; i++) lua_pushvalue(L, i);
    int st = lua_pcall(L, nargs, LUA_MULTRET, 0);
    if (b->m == m) m->hooks = outer; /* unless the call closed the model */
    luaL_unref(L, LUA_REGISTRYINDEX, h.persist);
    if (st != LUA_OK) return lua_error(L);
    return lua_gettop(L) - nargs;
}

void mlL_hooked(lua_State *L, int table, const char *const *names) {
    table = lua_absindex(L, table);
    for (; *names; names++) {
        lua_getfield(L, table, *names);
        lua_pushcclosure(L, with_hooks, 1);
        lua_setfield(L, table, *names);
    }
}

/* Token ids at `arg` (an int32 tensor or a table of integers; one document may be 1-D) as a new
 * reference of shape (B, L). */
static ml_tensor *tokens_arg(lua_State *L, int arg, const char *fn) {
    ml_tensor *t = luaL_testudata(L, arg, MLL_TENSOR_MT) ? mlL_checktensor(L, arg, fn) : NULL;
    if (t && t->dtype != ML_I32) mlL_argerror(L, fn, arg, "int32 token ids of shape [B,L]");
    t = mlL_checkints(L, arg, fn, NULL); /* anchored at arg */
    ml_tensor *u = t->ndim == 1 ? ml_unsqueeze(t, 0) : ml_retain(t);
    if (!u) mlL_raise(L);
    return u;
}

/* model:forward(tokens[, hooks]) -> logits (B, L, V); model:hidden(...) -> h (B, L, D) */
static int run_forward(lua_State *L, bool head, const char *fn) {
    ml_model *m = check_model(L, 1, fn);
    lua_settop(L, 3); /* 3 = hooks (or nil); temporaries go above */
    ml_tensor *tok = mlL_checktokens(L, m, 2, fn);
    hook_ud h;
    ml_run run;
    setup_run(L, m, 3, &h, &run, fn);
    ml_tensor *hid = ml_model_hidden(m, tok, &run);
    ml_tensor *out = hid && head ? ml_model_head(m, hid) : hid;
    if (head) ml_release(hid);
    settle_close(h.box);
    if (!out) return mlL_raise(L);
    mlL_pushtensor(L, out);
    return 1;
}

static int m_forward(lua_State *L) { return run_forward(L, true, "model:forward"); }
static int m_hidden(lua_State *L) { return run_forward(L, false, "model:hidden"); }
/* model:run_with_hooks(tokens, {[site] = fn, ...}) -> logits: TransformerLens's name for forward */
static int m_run_with_hooks(lua_State *L) { return run_forward(L, true, "model:run_with_hooks"); }

/* model:loss(tokens, targets[, hooks]) -> loss, logits at supervised rows (N, V), row indices (N) */
static int m_loss(lua_State *L) {
    const char *fn = "model:loss";
    ml_model *m = check_model(L, 1, fn);
    lua_settop(L, 4);
    ml_tensor *tok = mlL_checktokens(L, m, 2, fn);
    ml_tensor *tg = tokens_arg(L, 3, fn);
    mlL_pushtensor(L, tg);
    hook_ud h;
    ml_run run;
    setup_run(L, m, 4, &h, &run, fn);
    ml_tensor *logits, *rows;
    ml_tensor *loss = ml_model_loss(m, tok, tg, &run, &logits, &rows);
    settle_close(h.box);
    if (!loss) return mlL_raise(L);
    mlL_pushtensor(L, loss);
    mlL_pushtensor(L, logits);
    mlL_pushtensor(L, rows);
    return 3;
}

/* handle = model:add_hook(site, fn) */
static int m_add_hook(lua_State *L) {
    ml_model *m = check_model(L, 1, "model:add_hook");
    char site[96];
    ml_site_fullname(m, mlL_checksite(L, m, luaL_checkstring(L, 2), "model:add_hook"), site, sizeof site);
    if (!lua_isfunction(L, 3)) return mlL_argerror(L, "model:add_hook", 3, "a function(activation, ctx)");
    lua_settop(L, 3);
    lua_pushstring(L, site);
    lua_replace(L, 2); /* the handle keeps the full name */
    lua_getiuservalue(L, 1, 1);
    if (lua_getfield(L, -1, site) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_setfield(L, -3, site);
    }
    lua_pushvalue(L, 3);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    /* the handle: opaque, holding (model, site, fn) as user values, with :remove() */
    lua_newuserdatauv(L, 0, 3);
    for (int i = 1; i <= 3; i++) lua_pushvalue(L, i), lua_setiuservalue(L, -2, i);
    luaL_setmetatable(L, MLL_HOOK_MT);
    return 1;
}

/* model:reset_hooks(): removes every hook added with add_hook (their handles become no-ops) */
static int m_reset_hooks(lua_State *L) {
    check_model(L, 1, "model:reset_hooks");
    lua_newtable(L);
    lua_setiuservalue(L, 1, 1);
    return 0;
}

static int hook_remove(lua_State *L) {
    luaL_checkudata(L, 1, MLL_HOOK_MT);
    if (lua_getiuservalue(L, 1, 1) == LUA_TNIL) return 0; /* removed already */
    lua_getiuservalue(L, -1, 1);
    lua_getiuservalue(L, 1, 2);
    if (lua_gettable(L, -2) == LUA_TTABLE) {
        int list = lua_gettop(L);
        lua_Integer n = (lua_Integer)lua_rawlen(L, list);
        lua_getiuservalue(L, 1, 3);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, list, i);
            if (lua_rawequal(L, -1, -2)) {
                lua_pop(L, 1);
                for (lua_Integer j = i; j < n; j++) {
                    lua_rawgeti(L, list, j + 1);
                    lua_rawseti(L, list, j);
                }
                lua_pushnil(L);
                lua_rawseti(L, list, n);
                break;
            }
            lua_pop(L, 1);
        }
    }
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 1);
    return 0;
}

/* ------------------------------------------------------------------ training & evaluation */

static int push_stats(lua_State *L, const ml_batch_stats *s) {
    lua_createtable(L, 0, 4);
    lua_pushnumber(L, s->loss), lua_setfield(L, -2, "loss");
    lua_pushinteger(L, s->correct), lua_setfield(L, -2, "correct");
    lua_pushinteger(L, s->n), lua_setfield(L, -2, "n");
    lua_pushnumber(L, s->prob), lua_setfield(L, -2, "prob_sum");
    return 1;
}

/* model:train_step(opt, tokens, targets, lr [, on_nonfinite = "stop" | "record"])
 *   -> {loss, correct, n, prob_sum [, nonfinite = first non-finite parameter or "loss"]} */
static int m_train_step(lua_State *L) {
    const char *fn = "model:train_step";
    ml_model *m = check_model(L, 1, fn);
    ml_adamw *opt = mlL_checkadamw(L, 2, fn);
    ml_tensor *tok = mlL_checkints(L, 3, fn, NULL), *tg = mlL_checkints(L, 4, fn, NULL);
    lua_Number lr = luaL_checknumber(L, 5);
    const char *policy = lua_isnoneornil(L, 6) ? "stop" : lua_type(L, 6) == LUA_TSTRING ? lua_tostring(L, 6) : "";
    bool record = !strcmp(policy, "record");
    if (!record && strcmp(policy, "stop")) mlL_argerror(L, fn, 6, "\"stop\" or \"record\"");
    if (ml_model_check_tokens(m, tok)) mlL_error(L, fn, "%s", ml_last_error());
    ml_batch_stats s;
    if (ml_train_step(m, opt, tok, tg, lr, record ? ML_NONFINITE_KEEP : ML_NONFINITE_STOP, &s)) return mlL_raise(L);
    push_stats(L, &s);
    if (!isfinite(s.loss)) {
        lua_pushstring(L, s.nonfinite >= 0 ? m->params[s.nonfinite].name : "loss");
        lua_setfield(L, -2, "nonfinite");
    }
    return 1;
}

/* model:nonfinite() -> the first parameter (state-dict name) holding a NaN or an infinity, or nil */
static int m_nonfinite(lua_State *L) {
    ml_model *m = check_model(L, 1, "model:nonfinite");
    int i = ml_model_first_nonfinite(m);
    if (i < 0) lua_pushnil(L);
    else lua_pushstring(L, m->params[i].name);
    return 1;
}

/* model:evaluate(tokens, targets[, {precision = "fp32"}]): "fp32" runs a bf16 model in fp32 for the
 * call (the interchange evaluation's accuracy check, docs/kernels.md "bf16 training"). */
static int m_evaluate(lua_State *L) {
    const char *fn = "model:evaluate";
    static const char *const keys[] = {"precision", NULL}, *const fp32_only[] = {"fp32", NULL};
    static const mlL_option spec[] = {{"precision", MLL_ENUM, 0, 0, 0, fp32_only, "'fp32'"}, {NULL}};
    ml_model *m = check_model(L, 1, fn);
    ml_tensor *tok = mlL_checkints(L, 2, fn, NULL), *tg = mlL_checkints(L, 3, fn, NULL);
    mlL_opttable(L, 4, fn, 3, keys);
    int fp32 = -1; /* -1: the model's precision; 0: fp32 */
    mlL_options(L, 4, fn, spec, &fp32);
    if (ml_model_check_tokens(m, tok)) mlL_error(L, fn, "%s", ml_last_error());
    ml_batch_stats s;
    bool was_forced = fp32 == 0 ? ml_model_force_fp32(true) : false;
    ml_status st = ml_eval_batch(m, tok, tg, &s);
    if (fp32 == 0) ml_model_force_fp32(was_forced);
    if (st) return mlL_raise(L);
    return push_stats(L, &s);
}

/* ------------------------------------------------------------------ checkpoints */

#define MIXER_HASH_KEY "mixer.module_hash" /* a Lua mixer's module source hash, at save */

/* The string keys and string or number values of option 'meta' (the table at t) into keys and vals
 * (at most 64), each kept on the stack (a number's text is a new string); returns how many. */
static int meta_strings(lua_State *L, int t, const char *fn, const char **keys, const char **vals) {
    if (!lua_istable(L, t)) return mlL_error(L, fn, "option 'meta': expected a table of strings");
    int n = 0;
    for (lua_pushnil(L); lua_next(L, t); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING || (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER))
            return mlL_error(L, fn, "option 'meta': expected string keys and string or number values");
        if (n == 64) return mlL_error(L, fn, "at most 64 metadata entries");
        luaL_checkstack(L, 4, fn);
        lua_pushvalue(L, -2);
        vals[n] = luaL_tolstring(L, -2, NULL), keys[n++] = lua_tostring(L, -2);
        lua_rotate(L, -4, 2); /* both kept below the pair that lua_next goes on with */
    }
    return n;
}

/* model:save(path[, {optimizer=opt, meta={key=string,...}, torch=false}]) */
static int m_save(lua_State *L) {
    const char *fn = "model:save";
    ml_model *m = check_model(L, 1, fn);
    const char *path = luaL_checkstring(L, 2);
    ml_adamw *opt = NULL;
    bool torch = false;
    int n = 0;
    const char *keys[64], *vals[64];
    if (!lua_isnoneornil(L, 3)) {
        static const char *const ok[] = {"optimizer", "meta", "torch", NULL};
        mlL_checktable(L, 3, fn, 3);
        mlL_checkkeys(L, 3, fn, ok);
        torch = mlL_optbool(L, 3, "torch", 0, fn);
        if (lua_getfield(L, 3, "optimizer") != LUA_TNIL) opt = mlL_checkadamw(L, lua_gettop(L), fn);
        if (lua_getfield(L, 3, "meta") != LUA_TNIL) n = meta_strings(L, lua_gettop(L), fn, keys, vals);
    }
    /* a Lua mixer's module: found again by its name, and its source's hash kept (docs/nn.md) */
    if (mlL_mixer_is_lua(m->cfg.arch)) { /* without a module: an error that names the fix */
        if (n == 64) return mlL_error(L, "model:save", "at most 63 metadata entries with a Lua mixer");
        mlL_pushlua(L, "mech.nn.lua_mixer", "module_hash", MLL_CHECK_NONE, NULL);
        lua_pushstring(L, m->cfg.mixer_module);
        lua_pushstring(L, m->cfg.arch);
        lua_call(L, 2, 1);
        keys[n] = MIXER_HASH_KEY;
        vals[n++] = lua_tostring(L, -1); /* stays on the stack */
    }
    if (ml_checkpoint_save(path, m, opt, torch, n, keys, vals)) return mlL_raise(L);
    return 0;
}

/* mech.load(path[, {arch=..., d_model=..., ..., modules={...}}]) -> model, optimiser or nil, metadata
 * table. The options are the model's for a file without mechlab metadata; for a mechlab checkpoint
 * the ones given must match its config. `modules`: the modules the file may name (its Lua mixer's,
 * its Lua task's) beyond those already loaded (docs/security.md). A failed load leaves no mixer
 * registered and no module loaded by it. */
/* mech.load's option table (argument 2, or nil): the model's options into *options (true when there
 * are any); `modules`, the modules the caller allows, is left on the stack at *modules and the
 * trusted set made of it at *modules_set (0: none). */
static bool load_options(lua_State *L, const char *fn, ml_load_options *options, int *modules, int *modules_set) {
    bool have_options = false;
    if (lua_isnil(L, 2)) return false;
    mlL_checktable(L, 2, fn, 2);
    /* the model's options: a copy without `modules` */
    lua_newtable(L);
    int model_opts = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        if (lua_type(L, -2) == LUA_TSTRING && !strcmp(lua_tostring(L, -2), "modules")) {
            lua_pop(L, 1);
            continue;
        }
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_settable(L, model_opts);
        have_options = true;
    }
    if (have_options) read_options(L, model_opts, fn, &options->cfg, options->given);
    if (lua_getfield(L, 2, "modules") != LUA_TNIL) {
        *modules = lua_gettop(L);
        mlL_pushlua(L, "mech.trust", "set", MLL_CHECK_NONE, NULL);
        lua_pushvalue(L, *modules);
        lua_pushstring(L, fn);
        lua_call(L, 2, 1);
        *modules_set = lua_gettop(L);
    }
    return have_options;
}

void mlL_push_meta(lua_State *L, const ml_safetensors *f) {
    lua_newtable(L);
    for (int i = 0; i < ml_safetensors_meta_count(f); i++) {
        lua_pushstring(L, ml_safetensors_meta_value(f, i));
        lua_setfield(L, -2, ml_safetensors_meta_key(f, i));
    }
}

static int l_load(lua_State *L) {
    const char *fn = "mech.load";
    const char *path = mlL_checkstr(L, 1, fn);
    lua_settop(L, 2);
    ml_load_options options = {0};
    int modules = 0, modules_set = 0;
    bool have_options = load_options(L, fn, &options, &modules, &modules_set);
    /* a mixer written in Lua: registered, or its recorded module required, before the plan */
    ml_model_config fc;
    bool have = ml_checkpoint_config(path, &fc);
    int mark = mlL_mixer_mark(L);
    bool required = false;
    if (have) {
        char what[300];
        snprintf(what, sizeof what, "load: %s", path); /* as the core's load errors */
        required = mlL_mixer_require(L, &fc, what, modules_set);
    }
    ml_adamw o;
    bool has_opt;
    ml_safetensors *meta;
    ml_model *m = ml_checkpoint_load(path, have_options ? &options : NULL, &o, &has_opt, &meta);
    if (!m) {
        mlL_mixer_forget(L, mark, required ? fc.mixer_module : NULL);
        return mlL_raise(L);
    }
    push_model(L, m);
    if (has_opt) mlL_pushadamw(L, &o);
    else lua_pushnil(L);
    mlL_push_meta(L, meta);
    ml_safetensors_close(meta);
    int meta_idx = lua_gettop(L);
    if (have && fc.mixer_module[0] && lua_getfield(L, meta_idx, MIXER_HASH_KEY) == LUA_TSTRING) {
        mlL_pushlua(L, "mech.nn.lua_mixer", "check_module_hash", MLL_CHECK_NONE, NULL);
        lua_pushstring(L, fc.mixer_module);
        lua_pushvalue(L, -3);
        lua_pushstring(L, path);
        lua_call(L, 3, 0);
    }
    lua_settop(L, meta_idx);
    mlL_meta_task(L, meta_idx, path, modules);
    return 3;
}

int mlL_open_model(lua_State *L) {
    static const luaL_Reg methods[] = {
        {"config", m_config},       {"named_parameters", m_named_parameters}, {"hook_names", m_hook_names},
        {"site", m_site},           {"forward", m_forward},     {"hidden", m_hidden},         {"loss", m_loss},
        {"add_hook", m_add_hook},   {"train_step", m_train_step}, {"evaluate", m_evaluate},
        {"save", m_save},           {"reset_hooks", m_reset_hooks}, {"nonfinite", m_nonfinite},
        {"run_with_hooks", m_run_with_hooks}, {"run_with_cache", mlL_run_with_cache}, {NULL, NULL}};
    static const mlL_Decl decls[] = {
        {"model:n_params", "N", 'i', MLL_FN(ml_model_count)},
        {"model:zero_grad", "M", 'v', MLL_FN(ml_model_zero_grad)},
        /* model:unembed(x) -> logits: the final LayerNorm and the tied head on a residual x (B, L,
         * D) or (L, D), e.g. a cached block_output (the logit lens) -> (B, L, V) / (L, V) */
        {"model:unembed", "MT", 'T', MLL_FN(ml_model_unembed)},
        {NULL, NULL, 0, NULL}};
    luaL_newmetatable(L, MLL_MODEL_MT);
    luaL_newlib(L, methods);
    mlL_setdecls(L, -1, decls);
    /* the one list of methods that run with the model's persistent hooks on */
    mlL_hooked(L, -1, (const char *const[]){"forward", "hidden", "loss", "train_step", "evaluate", "run_with_hooks",
                                            "run_with_cache", NULL});
    /* the model as a mech.nn tree: model:NAME(...) is lua/mech/nn/tree.lua's NAME(model, ...) */
    mlL_setlua(L, -1, (const mlL_LuaReg[]){{"module", "mech.nn.tree", NULL, MLL_CHECK_MODEL, "model:module"},
                                            {"children", "mech.nn.tree", NULL, MLL_CHECK_MODEL, "model:children"},
                                            {"named_children", "mech.nn.tree", NULL, MLL_CHECK_MODEL, "model:named_children"},
                                            {"modules", "mech.nn.tree", NULL, MLL_CHECK_MODEL, "model:modules"},
                                            {"parameters", "mech.nn.tree", NULL, MLL_CHECK_MODEL, "model:parameters"},
                                            {"tree", "mech.nn.tree", NULL, MLL_CHECK_MODEL, "model:tree"},
                                            {"train", "mech.nn.tree", NULL, MLL_CHECK_MODEL, "model:train"},
                                            {"eval", "mech.nn.tree", NULL, MLL_CHECK_MODEL, "model:eval"},
                                            {NULL, NULL, NULL, 0, NULL}});
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, m_gc), lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, m_close), lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, m_tostring), lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);

    luaL_newmetatable(L, MLL_HOOK_MT);
    lua_newtable(L);
    lua_pushcfunction(L, hook_remove), lua_setfield(L, -2, "remove");
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, hook_remove), lua_setfield(L, -2, "__close");
    lua_pop(L, 1);

    luaL_newmetatable(L, MLL_HOOK_NAMES_MT);
    mlL_pushlua(L, "mech.show", "hook_names", MLL_CHECK_NONE, NULL), lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);

    static const luaL_Reg funcs[] = {{"model", l_model}, {"load", l_load}, {NULL, NULL}};
    luaL_setfuncs(L, funcs, 0);
    lua_newtable(L);
    for (int i = 0; i < ml_mixer_count(); i++) {
        lua_pushstring(L, ml_mixer_at(i)->name);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "architectures");
    return 0;
}
