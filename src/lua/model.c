/* mech.model{...}: language models from Lua, with hooks, training steps and checkpoints.
 *
 * Hooks: a table {["blocks.0.attention_output"] = fn, ...}; fn(activation, ctx) observes (returns
 * nothing) or returns a replacement of the same shape. ctx = {site=, layer=, name=}. Names are
 * validated against model:hook_names(); an unknown name suggests the closest. Persistent hooks
 * come from model:add_hook(name, fn), which returns a handle with :remove() and __close. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "lua/binding.h"
#include "nn/checkpoint.h"
#include "nn/train.h"

#define MLL_MODEL_MT "mech.Model"
#define MLL_HOOK_MT "mech.HookHandle"
#define MLL_ADAMW_MT "mech.AdamW"

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
    if (!b->m || b->closing) luaL_error(L, "%s: the model was closed", fn);
    return b->m;
}

static ml_adamw *check_adamw(lua_State *L, int arg, const char *fn) {
    ml_adamw *o = luaL_testudata(L, arg, MLL_ADAMW_MT);
    if (!o) mlL_argerror(L, fn, arg, "a mech.AdamW optimiser");
    return o;
}

static void push_model(lua_State *L, ml_model *m) {
    model_box *b = lua_newuserdatauv(L, sizeof *b, 1);
    *b = (model_box){.m = m};
    luaL_setmetatable(L, MLL_MODEL_MT);
    lua_newtable(L); /* persistent hooks: site -> {fn, ...} */
    lua_setiuservalue(L, -2, 1);
    mlL_account(L, (size_t)m->n_total * 8);
}

/* ------------------------------------------------------------------ construction */

/* mech.model{...}: the keys, defaults and checks come from the options table (nn/options.c); an
 * option the chosen architecture does not read is an error naming it. */
static int l_model(lua_State *L) {
    const char *fn = "mech.model";
    mlL_checktable(L, 1, fn, 1);
    const char *keys[64];
    int nk = 0;
    for (int i = 0; i < ml_model_option_count() && nk < 63; i++)
        if (ml_model_option_at(i)->key) keys[nk++] = ml_model_option_at(i)->name;
    keys[nk] = NULL;
    mlL_checkkeys(L, 1, fn, keys);
    ml_model_config c;
    const char *arch = mlL_optstr(L, 1, "arch", "attention", fn);
    ml_model_config_defaults(&c, arch);
    if (strlen(arch) >= sizeof c.arch) return luaL_error(L, "%s: option 'arch' is too long", fn);
    ml_model_config resolved = c;
    ml_mixer_resolve_alias(&resolved);
    const ml_mixer_type *mixer = ml_mixer_find(resolved.arch); /* NULL: ml_model_new names the choices */
    for (int i = 0; i < ml_model_option_count(); i++) {
        const ml_model_option *o = ml_model_option_at(i);
        if (!o->key || !strcmp(o->name, "arch")) continue;
        bool given = lua_getfield(L, 1, o->name) != LUA_TNIL;
        lua_pop(L, 1);
        if (!given) continue;
        if (mixer && !ml_mixer_reads(mixer, o))
            return luaL_error(L, "%s: option '%s' does not apply to arch '%s'", fn, o->name, arch);
        if (o->type == ML_OPT_BOOL) ml_option_set(&c, o, mlL_optbool(L, 1, o->name, 0, fn));
        else if (o->type == ML_OPT_INT) ml_option_set(&c, o, mlL_optint32(L, 1, o->name, 0, fn));
        else if (o->type == ML_OPT_U64) ml_option_set(&c, o, mlL_optint(L, 1, o->name, 0, fn));
        else {
            const char *v = mlL_optstr(L, 1, o->name, "", fn);
            if (!ml_option_set_str(&c, o, v)) return luaL_error(L, "%s: option '%s' is too long: '%s'", fn, o->name, v);
        }
    }
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
    ml_model *m = check_model(L, 1, "tostring");
    lua_pushfstring(L, "mech.Model(%s, d_model=%d, n_layers=%d, vocab=%d, %s, params=%I)", m->cfg.arch, m->cfg.d_model,
                    m->cfg.n_layers, m->cfg.vocab, m->cfg.pos_emb ? "learned positions" : "NoPE",
                    (lua_Integer)ml_model_count(m));
    return 1;
}

static int m_config(lua_State *L) {
    ml_model *m = check_model(L, 1, "config");
    lua_newtable(L);
    for (int i = 0; i < ml_model_option_count(); i++) {
        const ml_model_option *o = ml_model_option_at(i);
        if (o->type == ML_OPT_STRING) lua_pushstring(L, ml_option_str(&m->cfg, o));
        else if (o->type == ML_OPT_BOOL) lua_pushboolean(L, (int)ml_option_get(&m->cfg, o));
        else lua_pushinteger(L, ml_option_get(&m->cfg, o));
        lua_setfield(L, -2, o->name);
    }
    return 1;
}

static int m_n_params(lua_State *L) {
    lua_pushinteger(L, ml_model_count(check_model(L, 1, "n_params")));
    return 1;
}

static int m_named_parameters(lua_State *L) {
    ml_model *m = check_model(L, 1, "named_parameters");
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

static int m_param(lua_State *L) {
    ml_model *m = check_model(L, 1, "param");
    const char *name = luaL_checkstring(L, 2);
    int i = ml_model_find_param(m, name);
    if (i < 0) {
        const char **names = malloc(sizeof *names * (size_t)(m->n_params + 1));
        if (!names) return luaL_error(L, "param: out of memory");
        for (int k = 0; k < m->n_params; k++) names[k] = m->params[k].name;
        names[m->n_params] = NULL;
        lua_pushfstring(L, "param: no parameter named '%s' (did you mean '%s'?)", name, mlL_closest(name, names));
        free(names);
        return lua_error(L);
    }
    mlL_pushtensor(L, ml_retain(m->params[i].t));
    return 1;
}

static int m_zero_grad(lua_State *L) {
    ml_model_zero_grad(check_model(L, 1, "zero_grad"));
    return 0;
}

/* ------------------------------------------------------------------ sites & hooks */

static int m_hook_names(lua_State *L) {
    ml_model *m = check_model(L, 1, "hook_names");
    lua_createtable(L, m->n_sites, 0);
    for (int i = 0; i < m->n_sites; i++) {
        char name[96];
        ml_site_fullname(m, i, name, sizeof name);
        lua_createtable(L, 0, 2);
        lua_pushstring(L, name);
        lua_setfield(L, -2, "name");
        lua_createtable(L, m->sites[i].ndim, 0);
        for (int d = 0; d < m->sites[i].ndim; d++) {
            int64_t s = m->sites[i].shape[d];
            if (s == -1) lua_pushliteral(L, "B");
            else if (s == -2) lua_pushliteral(L, "L");
            else lua_pushinteger(L, s);
            lua_rawseti(L, -2, d + 1);
        }
        lua_setfield(L, -2, "shape");
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

typedef struct {
    lua_State *L;
    model_box *box;
    const ml_model *m;
    int hooks;   /* stack index: call-specific table site -> fn (or 0) */
    int persist; /* stack index: persistent table site -> {fn...} */
} hook_ud;

static int has_hook(hook_ud *h, const char *full) {
    lua_State *L = h->L;
    int found = 0;
    if (h->hooks) {
        found = lua_getfield(L, h->hooks, full) != LUA_TNIL;
        lua_pop(L, 1);
    }
    if (!found) {
        lua_getfield(L, h->persist, full);
        found = lua_istable(L, -1) && lua_rawlen(L, -1) > 0;
        lua_pop(L, 1);
    }
    return found;
}

static bool hook_wants(void *ud, int site) {
    hook_ud *h = ud;
    char full[96];
    ml_site_fullname(h->m, site, full, sizeof full);
    return has_hook(h, full);
}

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
        ml_fail(ML_ERR_ARG, "hook at %s: %s", full, lua_tostring(L, -1));
        lua_pop(L, 1);
        *err = ML_ERR_ARG;
        return NULL;
    }
    ml_tensor *rep = NULL;
    if (!lua_isnil(L, -1)) {
        rep = mlL_testtensor(L, -1);
        if (!rep) {
            ml_fail(ML_ERR_ARG, "hook at %s returned %s, expected nothing or a tensor", full, luaL_typename(L, -1));
            *err = ML_ERR_ARG;
        } else {
            ml_retain(rep);
        }
    }
    lua_pop(L, 1);
    return rep;
}

static ml_tensor *hook_call(void *ud, int site, ml_tensor *act, ml_status *err) {
    hook_ud *h = ud;
    lua_State *L = h->L;
    char full[96];
    ml_site_fullname(h->m, site, full, sizeof full);
    int layer = h->m->site_layer[site];
    const char *name = h->m->sites[site].name;
    ml_tensor *cur = ml_retain(act);
    bool replaced = false;
    /* persistent hooks first, in registration order, then the call's own */
    lua_getfield(L, h->persist, full);
    if (lua_istable(L, -1)) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
        for (lua_Integer i = 1; i <= n && !*err; i++) {
            lua_rawgeti(L, -1, i);
            ml_tensor *rep = call_hook(h, cur, full, layer, name, err);
            if (rep) ml_release(cur), cur = rep, replaced = true;
        }
    }
    lua_pop(L, 1);
    if (h->hooks && !*err) {
        if (lua_getfield(L, h->hooks, full) != LUA_TNIL) {
            ml_tensor *rep = call_hook(h, cur, full, layer, name, err);
            if (rep) ml_release(cur), cur = rep, replaced = true;
        } else {
            lua_pop(L, 1);
        }
    }
    if (*err || !replaced) {
        ml_release(cur);
        return NULL;
    }
    return cur;
}

/* Sets up a run from the optional hooks table at index `arg`. Returns whether any hook exists. */
static bool setup_run(lua_State *L, ml_model *m, int arg, hook_ud *h, ml_run *run, const char *fn) {
    memset(run, 0, sizeof *run);
    h->L = L;
    h->box = lua_touserdata(L, 1);
    h->m = m;
    h->hooks = 0;
    lua_getiuservalue(L, 1, 1);
    h->persist = lua_gettop(L);
    bool any = false;
    lua_pushnil(L);
    while (lua_next(L, h->persist)) {
        any = any || (lua_istable(L, -1) && lua_rawlen(L, -1) > 0);
        lua_pop(L, 1);
    }
    if (!lua_isnoneornil(L, arg)) {
        if (!lua_istable(L, arg)) mlL_argerror(L, fn, arg, "a table of hooks {site = function}");
        h->hooks = lua_absindex(L, arg);
        lua_pushnil(L);
        while (lua_next(L, h->hooks)) {
            if (lua_type(L, -2) != LUA_TSTRING) luaL_error(L, "%s: hook table keys must be site names", fn);
            mlL_checksite(L, m, lua_tostring(L, -2), fn);
            if (!lua_isfunction(L, -1)) luaL_error(L, "%s: hook for '%s' expected a function, got %s", fn, lua_tostring(L, -2), luaL_typename(L, -1));
            any = true;
            lua_pop(L, 1);
        }
    }
    if (any) {
        run->hook = hook_call;
        run->wants = hook_wants;
        run->ud = h;
    }
    return any;
}

static ml_tensor *tokens_arg(lua_State *L, int arg, const char *fn) {
    ml_tensor *t = mlL_totensor(L, arg, fn, ML_I32);
    if (t->dtype != ML_I32) {
        ml_release(t);
        mlL_argerror(L, fn, arg, "int32 token ids of shape [B,L]");
    }
    if (t->ndim == 1) { /* one document */
        ml_tensor *u = ml_unsqueeze(t, 0);
        ml_release(t);
        t = u;
    }
    return t;
}

/* Token ids must index the embedding (t must be anchored on the Lua stack: this may raise). */
static void check_token_range(lua_State *L, ml_model *m, const ml_tensor *t, const char *fn) {
    if (t->dtype != ML_I32) mlL_argerror(L, fn, 2, "int32 token ids");
    for (int64_t i = 0, n = ml_numel(t); i < n; i++) {
        int32_t v = (int32_t)ml_get_flat(t, i);
        if (v < 0 || v >= m->cfg.vocab)
            luaL_error(L, "%s: token id %d out of range for vocabulary size %d", fn, (int)v, m->cfg.vocab);
    }
}

/* model:forward(tokens[, hooks]) -> logits (B, L, V); model:hidden(...) -> h (B, L, D) */
static int run_forward(lua_State *L, bool head, const char *fn) {
    ml_model *m = check_model(L, 1, fn);
    lua_settop(L, 3); /* 3 = hooks (or nil); temporaries go above */
    ml_tensor *tok = tokens_arg(L, 2, fn);
    mlL_pushtensor(L, tok); /* owned by the stack from here on */
    check_token_range(L, m, tok, fn);
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

static int m_forward(lua_State *L) { return run_forward(L, true, "forward"); }
static int m_hidden(lua_State *L) { return run_forward(L, false, "hidden"); }

/* model:loss(tokens, targets[, hooks]) -> loss, logits at supervised rows (N, V), row indices (N) */
static int m_loss(lua_State *L) {
    const char *fn = "loss";
    ml_model *m = check_model(L, 1, fn);
    lua_settop(L, 4);
    ml_tensor *tok = tokens_arg(L, 2, fn);
    mlL_pushtensor(L, tok);
    check_token_range(L, m, tok, fn);
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
    ml_model *m = check_model(L, 1, "add_hook");
    const char *site = luaL_checkstring(L, 2);
    mlL_checksite(L, m, site, "add_hook");
    luaL_checktype(L, 3, LUA_TFUNCTION);
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
    const char *fn = "train_step";
    ml_model *m = check_model(L, 1, fn);
    ml_adamw *opt = check_adamw(L, 2, fn);
    ml_tensor *tok = mlL_checktensor(L, 3, fn), *tg = mlL_checktensor(L, 4, fn);
    lua_Number lr = luaL_checknumber(L, 5);
    const char *policy = lua_isnoneornil(L, 6) ? "stop" : lua_type(L, 6) == LUA_TSTRING ? lua_tostring(L, 6) : "";
    bool record = !strcmp(policy, "record");
    if (!record && strcmp(policy, "stop")) mlL_argerror(L, fn, 6, "\"stop\" or \"record\"");
    check_token_range(L, m, tok, fn);
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
    ml_model *m = check_model(L, 1, "nonfinite");
    int i = ml_model_first_nonfinite(m);
    if (i < 0) lua_pushnil(L);
    else lua_pushstring(L, m->params[i].name);
    return 1;
}

static int m_evaluate(lua_State *L) {
    const char *fn = "evaluate";
    ml_model *m = check_model(L, 1, fn);
    ml_tensor *tok = mlL_checktensor(L, 2, fn), *tg = mlL_checktensor(L, 3, fn);
    check_token_range(L, m, tok, fn);
    ml_batch_stats s;
    if (ml_eval_batch(m, tok, tg, &s)) return mlL_raise(L);
    return push_stats(L, &s);
}

/* ------------------------------------------------------------------ optimiser */

static const char *const adamw_keys[] = {"betas", "beta1", "beta2", "eps", "weight_decay", NULL};

/* mech.adamw(model, {beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0}) */
static int l_adamw(lua_State *L) {
    const char *fn = "mech.adamw";
    ml_model *m = check_model(L, 1, fn);
    double b1 = ML_ADAMW_BETA1, b2 = ML_ADAMW_BETA2, eps = ML_ADAMW_EPS, wd = 0;
    if (!lua_isnoneornil(L, 2)) {
        mlL_checktable(L, 2, fn, 2);
        mlL_checkkeys(L, 2, fn, adamw_keys);
        b1 = mlL_optnum(L, 2, "beta1", b1, fn);
        b2 = mlL_optnum(L, 2, "beta2", b2, fn);
        eps = mlL_optnum(L, 2, "eps", eps, fn);
        wd = mlL_optnum(L, 2, "weight_decay", wd, fn);
    }
    ml_adamw *o = lua_newuserdatauv(L, sizeof *o, 0);
    memset(o, 0, sizeof *o);
    luaL_setmetatable(L, MLL_ADAMW_MT);
    if (ml_adamw_init(o, m->n_total, b1, b2, eps, wd)) return mlL_raise(L);
    mlL_account(L, (size_t)m->n_total * 8);
    return 1;
}

static int adamw_gc(lua_State *L) {
    ml_adamw_free(luaL_checkudata(L, 1, MLL_ADAMW_MT));
    return 0;
}

static int adamw_index(lua_State *L) {
    ml_adamw *o = luaL_checkudata(L, 1, MLL_ADAMW_MT);
    const char *k = luaL_checkstring(L, 2);
    if (!strcmp(k, "step")) lua_pushinteger(L, o->step);
    else if (!strcmp(k, "beta1")) lua_pushnumber(L, o->beta1);
    else if (!strcmp(k, "beta2")) lua_pushnumber(L, o->beta2);
    else if (!strcmp(k, "eps")) lua_pushnumber(L, o->eps);
    else if (!strcmp(k, "weight_decay")) lua_pushnumber(L, o->weight_decay);
    else if (!strcmp(k, "exp_avg")) mlL_pushtensor(L, ml_retain(o->m));
    else if (!strcmp(k, "exp_avg_sq")) mlL_pushtensor(L, ml_retain(o->v));
    else return luaL_error(L, "AdamW has no field '%s'", k);
    return 1;
}

/* mech.lr_schedule{kind="cosine", lr=1e-3, total=1000, warmup=0.1} -> function(step) -> lr */
static int schedule_call(lua_State *L) {
    const ml_schedule *s = lua_touserdata(L, lua_upvalueindex(1));
    lua_Integer step = luaL_checkinteger(L, 1);
    lua_pushnumber(L, ml_schedule_lr(s, step));
    return 1;
}

static int l_lr_schedule(lua_State *L) {
    const char *fn = "mech.lr_schedule";
    static const char *const keys[] = {"kind", "lr", "total", "warmup", NULL};
    mlL_checktable(L, 1, fn, 1);
    mlL_checkkeys(L, 1, fn, keys);
    ml_schedule_kind kind;
    const char *k = mlL_optstr(L, 1, "kind", "cosine", fn);
    if (ml_schedule_kind_parse(k, &kind)) return mlL_raise(L);
    ml_schedule *s = lua_newuserdatauv(L, sizeof *s, 0);
    if (ml_schedule_init(s, kind, mlL_optnum(L, 1, "lr", 1e-3, fn), mlL_optint(L, 1, "total", 0, fn),
                         mlL_optnum(L, 1, "warmup", 0.1, fn)))
        return mlL_raise(L);
    lua_pushcclosure(L, schedule_call, 1);
    return 1;
}

/* ------------------------------------------------------------------ checkpoints */

/* model:save(path[, {optimizer=opt, meta={key=string,...}}]) */
static int m_save(lua_State *L) {
    const char *fn = "save";
    ml_model *m = check_model(L, 1, fn);
    const char *path = luaL_checkstring(L, 2);
    ml_adamw *opt = NULL;
    int n = 0;
    const char *keys[64], *vals[64];
    if (!lua_isnoneornil(L, 3)) {
        static const char *const ok[] = {"optimizer", "meta", NULL};
        mlL_checktable(L, 3, fn, 3);
        mlL_checkkeys(L, 3, fn, ok);
        if (lua_getfield(L, 3, "optimizer") != LUA_TNIL) opt = check_adamw(L, lua_gettop(L), fn);
        if (lua_getfield(L, 3, "meta") != LUA_TNIL) {
            int t = lua_gettop(L);
            if (!lua_istable(L, t)) return luaL_error(L, "save: option 'meta' expected a table of strings");
            /* copy into a table of strings that stays on the stack, so the pointers stay valid */
            lua_newtable(L);
            int anchor = lua_gettop(L);
            lua_pushnil(L);
            while (lua_next(L, t)) {
                if (lua_type(L, -2) != LUA_TSTRING || (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER))
                    return luaL_error(L, "save: option 'meta' expected string keys and string or number values");
                lua_pushvalue(L, -2);
                luaL_tolstring(L, -2, NULL);
                lua_settable(L, anchor);
                lua_pop(L, 1);
            }
            lua_pushnil(L);
            while (lua_next(L, anchor)) {
                if (n == 64) return luaL_error(L, "save: at most 64 metadata entries");
                keys[n] = lua_tostring(L, -2);
                vals[n++] = lua_tostring(L, -1);
                lua_pop(L, 1);
            }
        }
    }
    if (ml_checkpoint_save(path, m, opt, n, keys, vals)) return mlL_raise(L);
    return 0;
}

/* mech.load(path) -> model, optimiser or nil, metadata table */
static int l_load(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    ml_adamw o;
    bool has_opt;
    ml_safetensors *meta;
    ml_model *m = ml_checkpoint_load(path, &o, &has_opt, &meta);
    if (!m) return mlL_raise(L);
    push_model(L, m);
    if (has_opt) {
        ml_adamw *box = lua_newuserdatauv(L, sizeof *box, 0);
        *box = o;
        luaL_setmetatable(L, MLL_ADAMW_MT);
    } else {
        lua_pushnil(L);
    }
    lua_newtable(L);
    for (int i = 0; i < ml_safetensors_meta_count(meta); i++) {
        lua_pushstring(L, ml_safetensors_meta_value(meta, i));
        lua_setfield(L, -2, ml_safetensors_meta_key(meta, i));
    }
    ml_safetensors_close(meta);
    return 3;
}

int mlL_open_model(lua_State *L) {
    static const luaL_Reg methods[] = {
        {"config", m_config},       {"n_params", m_n_params},     {"named_parameters", m_named_parameters},
        {"param", m_param},         {"zero_grad", m_zero_grad},   {"hook_names", m_hook_names},
        {"forward", m_forward},     {"hidden", m_hidden},         {"loss", m_loss},
        {"add_hook", m_add_hook},   {"train_step", m_train_step}, {"evaluate", m_evaluate},
        {"save", m_save},           {"nonfinite", m_nonfinite},   {NULL, NULL}};
    luaL_newmetatable(L, MLL_MODEL_MT);
    luaL_newlib(L, methods);
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

    luaL_newmetatable(L, MLL_ADAMW_MT);
    lua_pushcfunction(L, adamw_gc), lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, adamw_index), lua_setfield(L, -2, "__index");
    lua_pop(L, 1);

    static const luaL_Reg funcs[] = {{"model", l_model}, {"adamw", l_adamw}, {"lr_schedule", l_lr_schedule},
                                     {"load", l_load}, {NULL, NULL}};
    luaL_setfuncs(L, funcs, 0);
    lua_newtable(L);
    for (int i = 0; i < ml_mixer_count(); i++) {
        lua_pushstring(L, ml_mixer_at(i)->name);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "architectures");
    return 0;
}
