/* mech.optim: AdamW and SGD as objects over any list of leaf tensors, a mech.Model or a module
 * (an object with :parameters() or :named_parameters()), in parameter groups; clipping by the
 * global gradient norm; and mech.adamw(model), the flat optimiser of a mech.Model that
 * model:train_step and checkpoints use (mech.AdamW). The maths and the state live in optim/optim.h
 * (ml_optimizer); which tensors a list, model or module gives is lua/mech/optim_params.lua; this
 * file reads the hyper-parameters and builds the tables of state_dict. */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "lua/binding.h"
#include "nn/model.h"
#include "optim/optim.h"

#define MLL_OPTIM_MT "mech.Optimizer"

typedef struct {
    ml_optimizer *o;
} optim_box;

/* The hyper-parameters as options and param_groups fields, in the order messages list them: the
 * kind that reads one (-1: both) and its type: 'n' a number, 'a' a number given only as an option
 * (beta1, beta2), 'b' a boolean, '2' the pair betas (beta1 and beta2, adjacent in the struct). */
typedef struct {
    const char *name;
    size_t off;
    int kind;
    char type;
} hparam;
#define HP(f) #f, offsetof(ml_optim_hparams, f)
static const hparam hparams[] = {
    {HP(lr), -1, 'n'}, {"betas", offsetof(ml_optim_hparams, beta1), ML_OPTIM_ADAMW, '2'},
    {HP(beta1), ML_OPTIM_ADAMW, 'a'}, {HP(beta2), ML_OPTIM_ADAMW, 'a'}, {HP(eps), ML_OPTIM_ADAMW, 'n'},
    {HP(momentum), ML_OPTIM_SGD, 'n'}, {HP(dampening), ML_OPTIM_SGD, 'n'}, {HP(nesterov), ML_OPTIM_SGD, 'b'},
    {HP(weight_decay), -1, 'n'}, {NULL, 0, 0, 0}};
#undef HP

static bool reads(const hparam *p, ml_optim_kind kind) { return p->kind < 0 || p->kind == (int)kind; }

/* Checks the keys of the option table at idx (plus "params" in a group), as mlL_checkkeys_at. */
static void check_option_keys(lua_State *L, int idx, const char *fn, int arg, const char *what, ml_optim_kind kind,
                              bool group) {
    const char *keys[16] = {"params"};
    int n = group;
    for (const hparam *p = hparams; p->name; p++)
        if (reads(p, kind)) keys[n++] = p->name;
    keys[n] = NULL;
    mlL_checkkeys_at(L, idx, fn, arg, what, keys);
}

/* The hyper-parameters each kind reads by mlL_options, after the pair betas (by hand: a list); lr
 * first (mech.adamw reads the rest). */
#define HP(type, f) MLL_OPTION(type, #f, ml_optim_hparams, f)
static const mlL_option adamw_spec[] = {HP(MLL_NUM, lr), HP(MLL_NUM, beta1), HP(MLL_NUM, beta2), HP(MLL_NUM, eps),
                                        HP(MLL_NUM, weight_decay), {NULL}};
static const mlL_option sgd_spec[] = {HP(MLL_NUM, lr), HP(MLL_NUM, momentum), HP(MLL_NUM, dampening),
                                      HP(MLL_CBOOL, nesterov), HP(MLL_NUM, weight_decay), {NULL}};
#undef HP

/* Option betas of the table at idx (by hand, once: a pair) into *beta1 and *beta2, before beta1 and
 * beta2 themselves; the table is argument arg, or lies inside it where `what` ("group 3") says. */
static void read_betas(lua_State *L, int idx, const char *fn, int arg, const char *what, double *beta1, double *beta2) {
    int top = lua_gettop(L), b = top + 1;
    if (lua_getfield(L, idx, "betas") != LUA_TNIL) {
        bool ok = lua_istable(L, b) && luaL_len(L, b) == 2;
        for (int i = 0; ok && i < 2; i++, lua_settop(L, b))
            if ((ok = lua_geti(L, b, i + 1) == LUA_TNUMBER)) *(i ? beta2 : beta1) = lua_tonumber(L, -1);
        char got[160];
        if (!ok)
            mlL_argfail(L, fn, arg, "%s%soption 'betas': expected a list of two numbers {beta1, beta2}, got %s",
                        what ? what : "", what ? ": " : "", mlL_describe(L, b, got, sizeof got));
    }
    lua_settop(L, top);
}

/* Reads the hyper-parameters of the table at idx over h (which holds the defaults) and checks them;
 * arg and what as read_betas'. */
static void read_hparams(lua_State *L, int idx, const char *fn, int arg, const char *what, ml_optim_kind kind,
                         ml_optim_hparams *h) {
    idx = lua_absindex(L, idx);
    if (kind == ML_OPTIM_ADAMW) read_betas(L, idx, fn, arg, what, &h->beta1, &h->beta2);
    mlL_options_at(L, idx, fn, arg, what, kind == ML_OPTIM_ADAMW ? adamw_spec : sgd_spec, h);
    const char *sep = what ? ": " : "";
    what = what ? what : "";
    char why[160];
    if (ml_optim_hparams_problem(kind, h, why, sizeof why)) mlL_argfail(L, fn, arg, "%s%s%s", what, sep, why);
}

/* Appends the tensors of the value at idx to the lists at stack indices 3 (tensors) and 4 (their
 * labels for messages; lua/mech/optim_params.lua's collect). Returns the list's length. */
static int collect(lua_State *L, int idx, const char *fn, const char *where, bool allow_single) {
    idx = lua_absindex(L, idx);
    mlL_pushlua(L, "mech.optim_params", "collect", MLL_CHECK_NONE, NULL);
    lua_pushvalue(L, idx), lua_pushvalue(L, 3), lua_pushvalue(L, 4);
    lua_pushstring(L, fn), lua_pushstring(L, where), lua_pushboolean(L, allow_single);
    lua_call(L, 6, 0);
    return (int)lua_rawlen(L, 3);
}

/* Turns the lists at `list` / `labels` into tensors, checking each with check_param (leaf,
 * requires grad, ...) when asked; a hole or a non-tensor is an error naming its label. */
static ml_tensor **list_tensors(lua_State *L, int list, int labels, int n, const char *fn, bool check_param) {
    ml_tensor **ts = lua_newuserdatauv(L, sizeof(ml_tensor *) * (size_t)(n ? n : 1), 0); /* freed with the stack */
    char got[160], why[160];
    for (int i = 0; i < n; i++) {
        lua_geti(L, list, i + 1);
        lua_geti(L, labels, i + 1);
        int v = lua_gettop(L) - 1;
        ml_tensor *t = mlL_testtensor(L, v);
        if (!t) mlL_error(L, fn, "%s expected a tensor, got %s", lua_tostring(L, -1), mlL_describe(L, v, got, sizeof got));
        if (check_param && ml_optim_param_problem(t, why, sizeof why))
            mlL_error(L, fn, "%s expected a float32 contiguous leaf tensor that requires grad, got %s",
                       lua_tostring(L, -1), why);
        ts[i] = t;
        lua_pop(L, 2);
    }
    return ts;
}

/* A list of parameter groups (lua/mech/optim_params.lua's is_group_list)? */
static bool is_group_list(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    mlL_pushlua(L, "mech.optim_params", "is_group_list", MLL_CHECK_NONE, NULL);
    lua_pushvalue(L, idx);
    lua_call(L, 1, 1);
    bool g = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return g;
}

/* The parameter groups of argument 1 (a list of {params = ..., lr = ..., ...}): each group's
 * hyper-parameters over base into hs[g], its tensors appended to the lists at 3 and 4, their
 * number into counts[g]. Returns the number of tensors. */
static int read_groups(lua_State *L, const char *fn, ml_optim_kind kind, const ml_optim_hparams *base, int ng,
                       ml_optim_hparams *hs, int *counts) {
    int n = 0;
    for (int g = 0; g < ng; g++) {
        char w[64]; /* "argument 1 group 3": where messages point */
        snprintf(w, sizeof w, "argument 1 group %d", g + 1);
        lua_geti(L, 1, g + 1);
        int gi = lua_gettop(L);
        if (!lua_istable(L, gi) || mlL_testtensor(L, gi)) {
            char got[160];
            mlL_error(L, fn, "%s expected a table {params = ..., lr = ..., ...}, got %s", w, mlL_describe(L, gi, got, sizeof got));
        }
        const char *group = w + strlen("argument 1 "); /* "group 3" */
        check_option_keys(L, gi, fn, 1, group, kind, true);
        hs[g] = *base;
        read_hparams(L, gi, fn, 1, group, kind, &hs[g]);
        int before = n;
        if (lua_getfield(L, gi, "params") == LUA_TNIL) mlL_error(L, fn, "%s has no 'params'", w); /* by hand: tensors */
        char where[80];
        snprintf(where, sizeof where, "%s params", w);
        n = collect(L, -1, fn, where, false);
        counts[g] = n - before;
        lua_pop(L, 2);
    }
    return n;
}

static int new_optimizer(lua_State *L, ml_optim_kind kind) {
    const char *fn = kind == ML_OPTIM_SGD ? "mech.optim.sgd" : "mech.optim.adamw";
    lua_settop(L, 2);
    ml_optim_hparams base = ml_optim_defaults(kind);
    if (!lua_isnil(L, 2)) {
        if (!lua_istable(L, 2)) mlL_argerror(L, fn, 2, "an option table");
        check_option_keys(L, 2, fn, 2, NULL, kind, false);
        read_hparams(L, 2, fn, 2, NULL, kind, &base);
    }
    lua_newtable(L); /* 3: tensors */
    lua_newtable(L); /* 4: labels */
    int n_groups = 0, n = 0;
    /* the groups' hyper-parameters and sizes, in a userdata freed with the stack */
    ml_optim_hparams *hs;
    int *counts;
    if (is_group_list(L, 1)) {
        n_groups = (int)luaL_len(L, 1);
        hs = lua_newuserdatauv(L, sizeof *hs * (size_t)n_groups, 0);
        counts = lua_newuserdatauv(L, sizeof *counts * (size_t)n_groups, 0);
        n = read_groups(L, fn, kind, &base, n_groups, hs, counts);
    } else {
        hs = lua_newuserdatauv(L, sizeof *hs, 0);
        counts = lua_newuserdatauv(L, sizeof *counts, 0);
        hs[0] = base;
        counts[0] = n = collect(L, 1, fn, "argument 1", false);
        n_groups = 1;
    }
    if (n == 0) {
        char got[160];
        mlL_error(L, fn, "argument 1 expected a non-empty list of tensors, a mech.Model or a module, got %s",
                   mlL_describe(L, 1, got, sizeof got));
    }
    ml_tensor **ts = list_tensors(L, 3, 4, n, fn, true);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (ts[i] == ts[j]) {
                lua_geti(L, 4, i + 1);
                lua_geti(L, 4, j + 1);
                mlL_error(L, fn, "%s is the same tensor as %s (a parameter may appear once)", lua_tostring(L, -2),
                           lua_tostring(L, -1));
            }
    optim_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->o = NULL;
    luaL_setmetatable(L, MLL_OPTIM_MT);
    b->o = ml_optimizer_new(kind, n_groups, hs, counts, ts);
    if (!b->o) return mlL_raise(L);
    size_t elems = 0;
    for (int i = 0; i < n; i++) elems += (size_t)ml_numel(ts[i]);
    mlL_account(L, elems * (kind == ML_OPTIM_ADAMW ? 8 : 4));
    return 1;
}

static int l_adamw(lua_State *L) { return new_optimizer(L, ML_OPTIM_ADAMW); }
static int l_sgd(lua_State *L) { return new_optimizer(L, ML_OPTIM_SGD); }

static ml_optimizer *check_opt(lua_State *L, int arg, const char *fn) {
    optim_box *b = luaL_testudata(L, arg, MLL_OPTIM_MT);
    if (!b) mlL_argerror(L, fn, arg, "a mech.optim optimizer (mech.optim.adamw or mech.optim.sgd)");
    if (!b->o) mlL_error(L, fn, "the optimizer is not initialised");
    return b->o;
}

/* An optional 0-based group index at arg; -1 when absent (all groups). */
static int opt_group(lua_State *L, int arg, const ml_optimizer *o, const char *fn) {
    if (lua_isnoneornil(L, arg)) return -1;
    int ok = 0;
    lua_Integer g = lua_type(L, arg) == LUA_TNUMBER ? lua_tointegerx(L, arg, &ok) : 0;
    if (!ok || g < 0 || g >= o->n_groups) {
        char what[64];
        snprintf(what, sizeof what, "a group index in [0, %d]", o->n_groups - 1);
        mlL_argerror(L, fn, arg, what);
    }
    return (int)g;
}

static int o_step(lua_State *L) {
    if (ml_optimizer_step(check_opt(L, 1, "optimizer:step"))) return mlL_raise(L);
    return 0;
}

/* opt:zero_grad([set_to_none = true]) */
static int o_zero_grad(lua_State *L) {
    ml_optimizer *o = check_opt(L, 1, "optimizer:zero_grad");
    if (!lua_isnoneornil(L, 2) && !lua_isboolean(L, 2)) mlL_argerror(L, "optimizer:zero_grad", 2, "a boolean set_to_none");
    ml_optimizer_zero_grad(o, lua_isnoneornil(L, 2) || lua_toboolean(L, 2));
    return 0;
}

/* opt:set_lr(lr [, group]) */
static int o_set_lr(lua_State *L) {
    const char *fn = "optimizer:set_lr";
    ml_optimizer *o = check_opt(L, 1, fn);
    if (lua_type(L, 2) != LUA_TNUMBER) mlL_argerror(L, fn, 2, "a learning rate (number >= 0)");
    double lr = lua_tonumber(L, 2);
    if (!(lr >= 0) || isinf(lr)) mlL_argerror(L, fn, 2, "a finite learning rate >= 0");
    int g = opt_group(L, 3, o, fn);
    for (int i = 0; i < o->n_groups; i++)
        if (g < 0 || g == i) o->groups[i].h.lr = lr;
    return 0;
}

/* opt:get_lr([group = 0]) */
static int o_get_lr(lua_State *L) {
    ml_optimizer *o = check_opt(L, 1, "optimizer:get_lr");
    int g = opt_group(L, 2, o, "optimizer:get_lr");
    lua_pushnumber(L, o->groups[g < 0 ? 0 : g].h.lr);
    return 1;
}

/* The hyper-parameters of group g as a table (PyTorch's param_group without the tensors). */
static void push_hparams(lua_State *L, const ml_optimizer *o, int g) {
    lua_newtable(L);
    for (const hparam *p = hparams; p->name; p++) {
        const double *d = (const double *)(const void *)((const char *)&o->groups[g].h + p->off);
        if (!reads(p, o->kind) || p->type == 'a') continue;
        if (p->type == 'b') lua_pushboolean(L, *(const bool *)d);
        else if (p->type == 'n') lua_pushnumber(L, *d);
        else lua_createtable(L, 2, 0), lua_pushnumber(L, d[0]), lua_rawseti(L, -2, 1), lua_pushnumber(L, d[1]), lua_rawseti(L, -2, 2);
        lua_setfield(L, -2, p->name);
    }
}

/* The groups: their hyper-parameters and params, the tensors (indices: their 0-based indices). */
static void push_groups(lua_State *L, const ml_optimizer *o, bool indices) {
    lua_createtable(L, o->n_groups, 0);
    for (int g = 0; g < o->n_groups; g++) {
        push_hparams(L, o, g);
        lua_createtable(L, o->groups[g].count, 0);
        for (int k = 0, i = o->groups[g].first; k < o->groups[g].count; k++, i++) {
            if (indices) lua_pushinteger(L, i);
            else mlL_pushtensor(L, ml_retain(o->state[i].param));
            lua_rawseti(L, -2, k + 1);
        }
        lua_setfield(L, -2, "params");
        lua_rawseti(L, -2, g + 1);
    }
}

/* opt:param_groups() -> {{lr=, weight_decay=, ..., params = {tensor, ...}}, ...} (copies of the
 * hyper-parameters; change them with set_lr) */
static int o_param_groups(lua_State *L) {
    push_groups(L, check_opt(L, 1, "optimizer:param_groups"), false);
    return 1;
}

/* opt:parameters() -> every tensor, in order (so clip_grad_norm(opt, ...) works) */
static int o_parameters(lua_State *L) {
    ml_optimizer *o = check_opt(L, 1, "optimizer:parameters");
    lua_createtable(L, o->n_params, 0);
    for (int i = 0; i < o->n_params; i++) {
        mlL_pushtensor(L, ml_retain(o->state[i].param));
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static const char *buf_name(ml_optim_kind kind, int k) {
    return kind == ML_OPTIM_SGD ? "momentum_buffer" : k == 0 ? "exp_avg" : "exp_avg_sq";
}

/* opt:state_dict() -> {kind=, state = {[i] = {step=, exp_avg=, exp_avg_sq=} or {step=, momentum_buffer=}},
 * param_groups = {{lr=, ..., params = {i, ...}}, ...}} with 0-based parameter indices, as PyTorch.
 * The tensors are copies: later steps do not change a saved dict. */
static int o_state_dict(lua_State *L) {
    ml_optimizer *o = check_opt(L, 1, "optimizer:state_dict");
    lua_newtable(L);
    lua_pushstring(L, ml_optim_kind_name(o->kind)), lua_setfield(L, -2, "kind");
    lua_newtable(L);
    for (int i = 0; i < o->n_params; i++) {
        const ml_optim_state *s = &o->state[i];
        if (s->step == 0 && !s->buf1) continue; /* never updated: no state, as PyTorch */
        lua_newtable(L);
        lua_pushinteger(L, s->step), lua_setfield(L, -2, "step");
        const ml_tensor *bufs[2] = {s->buf1, s->buf2};
        for (int k = 0; k < 2; k++)
            if (bufs[k]) {
                mlL_pushtensor(L, ml_copy_contiguous(bufs[k], ML_F32));
                lua_setfield(L, -2, buf_name(o->kind, k));
            }
        lua_rawseti(L, -2, i);
    }
    lua_setfield(L, -2, "state");
    push_groups(L, o, true);
    lua_setfield(L, -2, "param_groups");
    return 1;
}

/* opt:load_state_dict(sd): the groups' hyper-parameters and every parameter's state from a dict
 * of opt:state_dict() (same kind, group sizes and shapes). Everything is checked first. The dict is
 * a document of tensors, not options: its fields are read by hand, each once. */
/* The per-parameter states of a state dict (the table at `state`, keyed by 0-based parameter
 * index): all are checked before any is applied. */
static void load_states(lua_State *L, ml_optimizer *o, int state, const char *fn) {
    char b1[ML_SHAPE_STR], b2[ML_SHAPE_STR];
    for (int pass = 0; pass < 2; pass++) /* check all, then apply */
        for (int i = 0; i < o->n_params; i++) {
            const ml_tensor *p = o->state[i].param;
            lua_geti(L, state, i);
            if (lua_isnil(L, -1)) {
                if (pass) ml_optimizer_set_state(o, i, 0, NULL, NULL);
                lua_pop(L, 1);
                continue;
            }
            if (!lua_istable(L, -1)) mlL_error(L, fn, "argument 2 state[%d] expected a table", i);
            lua_getfield(L, -1, "step");
            int ok = 0;
            lua_Integer step = lua_tointegerx(L, -1, &ok);
            if (!ok || step < 0) mlL_error(L, fn, "argument 2 state[%d].step expected an integer >= 0", i);
            lua_pop(L, 1);
            const ml_tensor *bufs[2] = {NULL, NULL};
            for (int k = 0; k < (o->kind == ML_OPTIM_ADAMW ? 2 : 1); k++) {
                lua_getfield(L, -1 - k, buf_name(o->kind, k));
                ml_tensor *t = mlL_testtensor(L, -1);
                if (!t && !lua_isnil(L, -1))
                    mlL_error(L, fn, "argument 2 state[%d].%s expected a tensor", i, buf_name(o->kind, k));
                if (t && (t->dtype != ML_F32 || !ml_same_shape(t, p)))
                    mlL_error(L, fn, "argument 2 state[%d].%s has %s %s, expected float32 %s (parameter %d)", i,
                               buf_name(o->kind, k), ml_dtype_name(t->dtype), ml_shape_str(b1, t->ndim, t->shape),
                               ml_shape_str(b2, p->ndim, p->shape), i);
                bufs[k] = t;
            }
            if (o->kind == ML_OPTIM_ADAMW && (!bufs[0] || !bufs[1]))
                mlL_error(L, fn, "argument 2 state[%d] expected exp_avg and exp_avg_sq", i);
            if (pass && ml_optimizer_set_state(o, i, step, bufs[0], bufs[1])) mlL_raise(L);
            lua_settop(L, state);
        }
}

static int o_load_state_dict(lua_State *L) {
    const char *fn = "optimizer:load_state_dict";
    ml_optimizer *o = check_opt(L, 1, fn);
    lua_settop(L, 2);
    if (!lua_istable(L, 2)) mlL_argerror(L, fn, 2, "a table from opt:state_dict()");
    const char *kind = ml_optim_kind_name(o->kind);
    if (lua_getfield(L, 2, "kind") != LUA_TSTRING || strcmp(lua_tostring(L, -1), kind))
        mlL_error(L, fn, "argument 2 expected the state of a %s optimizer, got kind %s", kind,
                   lua_isstring(L, -1) ? lua_tostring(L, -1) : luaL_typename(L, -1));
    lua_pop(L, 1);
    if (lua_getfield(L, 2, "param_groups") != LUA_TTABLE || luaL_len(L, -1) != o->n_groups)
        mlL_error(L, fn, "argument 2 expected param_groups, a list of %d groups", o->n_groups);
    int groups = lua_gettop(L);
    ml_optim_hparams *hs = lua_newuserdatauv(L, sizeof *hs * (size_t)o->n_groups, 0);
    for (int g = 0; g < o->n_groups; g++) {
        char where[64];
        snprintf(where, sizeof where, "argument 2 param_groups[%d]", g + 1);
        if (lua_geti(L, groups, g + 1) != LUA_TTABLE) mlL_error(L, fn, "%s expected a table", where);
        hs[g] = o->groups[g].h;
        read_hparams(L, -1, fn, 2, where + strlen("argument 2 "), o->kind, &hs[g]); /* "param_groups[1]" */
        if (lua_getfield(L, -1, "params") != LUA_TTABLE || luaL_len(L, -1) != o->groups[g].count)
            mlL_error(L, fn, "%s expected params, a list of %d parameter indices (the optimizer's group %d)", where,
                       o->groups[g].count, g);
        lua_pop(L, 2);
    }
    if (lua_getfield(L, 2, "state") != LUA_TTABLE) mlL_error(L, fn, "argument 2 expected a 'state' table");
    load_states(L, o, lua_gettop(L), fn);
    for (int g = 0; g < o->n_groups; g++) o->groups[g].h = hs[g];
    return 0;
}

static int o_gc(lua_State *L) {
    optim_box *b = luaL_checkudata(L, 1, MLL_OPTIM_MT);
    ml_optimizer_free(b->o);
    b->o = NULL;
    return 0;
}

/* Fields: kind, n_groups, n_params, lr (group 0's; setting it sets every group's); then the methods. */
static int o_index(lua_State *L) {
    ml_optimizer *o = check_opt(L, 1, "index");
    const char *k = lua_tostring(L, 2);
    if (k && !strcmp(k, "kind")) lua_pushstring(L, ml_optim_kind_name(o->kind));
    else if (k && !strcmp(k, "n_groups")) lua_pushinteger(L, o->n_groups);
    else if (k && !strcmp(k, "n_params")) lua_pushinteger(L, o->n_params);
    else if (k && !strcmp(k, "lr")) lua_pushnumber(L, o->groups[0].h.lr);
    else {
        lua_pushvalue(L, 2);
        lua_rawget(L, lua_upvalueindex(1));
    }
    return 1;
}

/* opt.lr = x sets every group's lr (opt:set_lr(x)); no other field can be set. */
static int o_newindex(lua_State *L) {
    ml_optimizer *o = check_opt(L, 1, "optimizer:set_lr");
    const char *k = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
    if (!k || strcmp(k, "lr"))
        return mlL_error(L, "mech.optim", "field '%s' cannot be set (only lr; opt:set_lr(lr, group) sets one group's)",
                          k ? k : luaL_typename(L, 2));
    if (lua_type(L, 3) != LUA_TNUMBER || !(lua_tonumber(L, 3) >= 0) || isinf(lua_tonumber(L, 3))) {
        char got[160];
        return mlL_error(L, "opt.lr", "expected a finite learning rate >= 0, got %s", mlL_describe(L, 3, got, sizeof got));
    }
    for (int g = 0; g < o->n_groups; g++) o->groups[g].h.lr = lua_tonumber(L, 3);
    return 0;
}

/* mech.optim.clip_grad_norm(params, max_norm) -> the global L2 norm of the gradients before clipping */
static int l_clip_grad_norm(lua_State *L) {
    const char *fn = "mech.optim.clip_grad_norm";
    lua_settop(L, 2);
    if (lua_type(L, 2) != LUA_TNUMBER) mlL_argerror(L, fn, 2, "a number max_norm >= 0");
    double max_norm = lua_tonumber(L, 2);
    if (isnan(max_norm) || max_norm < 0) mlL_argerror(L, fn, 2, "a number max_norm >= 0");
    lua_newtable(L);
    lua_newtable(L);
    if (is_group_list(L, 1)) mlL_error(L, fn, "argument 1 expected tensors, not parameter groups (pass opt itself)");
    int n = collect(L, 1, fn, "argument 1", true);
    ml_tensor **ts = list_tensors(L, 3, 4, n, fn, false);
    double total;
    if (ml_clip_grad_norm(n, ts, max_norm, &total)) return mlL_raise(L);
    lua_pushnumber(L, total);
    return 1;
}

/* ------------------------------------------------------------------ mech.adamw: the model optimiser
 * (one flat state over every parameter of a mech.Model; model:train_step, mech.train and checkpoints
 * use it) */

#define MLL_ADAMW_MT "mech.AdamW"

ml_adamw *mlL_checkadamw(lua_State *L, int arg, const char *fn) {
    ml_adamw *o = luaL_testudata(L, arg, MLL_ADAMW_MT);
    if (!o) mlL_argerror(L, fn, arg, "a mech.AdamW optimiser");
    return o;
}

void mlL_pushadamw(lua_State *L, const ml_adamw *state) {
    ml_adamw *box = lua_newuserdatauv(L, sizeof *box, 0);
    *box = *state;
    luaL_setmetatable(L, MLL_ADAMW_MT);
    mlL_account(L, state->m ? (size_t)ml_numel(state->m) * 8 : 0);
}

static const char *const model_adamw_keys[] = {"betas", "beta1", "beta2", "eps", "weight_decay", NULL};

/* mech.adamw(model, {betas={0.9, 0.999} or beta1=, beta2=, eps=1e-8, weight_decay=0}) */
static int l_model_adamw(lua_State *L) {
    const char *fn = "mech.adamw";
    ml_model *m = mlL_checkmodel(L, 1, fn);
    ml_optim_hparams h = {.beta1 = ML_ADAMW_BETA1, .beta2 = ML_ADAMW_BETA2, .eps = ML_ADAMW_EPS}; /* no weight decay */
    if (!lua_isnoneornil(L, 2)) {
        mlL_checktable(L, 2, fn, 2);
        /* lr by hand, a key refused: the learning rate is the step's here, so say where it goes */
        if (lua_getfield(L, 2, "lr") != LUA_TNIL)
            return luaL_error(L, "%s: option 'lr' is not an option of this optimiser: pass the learning rate to each "
                                 "step (model:train_step(opt, tokens, targets, lr)), or use mech.optim.adamw(model, "
                                 "{lr = ...}) and opt:step() (torch.optim.AdamW)", fn);
        lua_pop(L, 1);
        mlL_checkkeys(L, 2, fn, model_adamw_keys);
        read_betas(L, 2, fn, 2, NULL, &h.beta1, &h.beta2);
        mlL_options(L, 2, fn, adamw_spec + 1, &h); /* adamw_spec without its first row, lr */
    }
    ml_adamw *o = lua_newuserdatauv(L, sizeof *o, 0);
    memset(o, 0, sizeof *o);
    luaL_setmetatable(L, MLL_ADAMW_MT);
    if (ml_adamw_init(o, m->n_total, h.beta1, h.beta2, h.eps, h.weight_decay)) return mlL_raise(L);
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

/* ------------------------------------------------------------------ schedules */

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
    static const mlL_option spec[] = { /* over ml_schedule_config_init's defaults; ranges as ml_schedule_init's */
        {"kind", MLL_ENUM, offsetof(ml_schedule_config, kind), 0, 0, ml_schedule_kind_names, NULL},
        {"lr", MLL_NUM, offsetof(ml_schedule_config, lr), 0, DBL_MAX, NULL, "a finite number >= 0"},
        {"total", MLL_INT, offsetof(ml_schedule_config, total), 0, (double)INT64_MAX, NULL, "an integer >= 0"},
        {"warmup", MLL_NUM, offsetof(ml_schedule_config, warmup), 0, 1, NULL, NULL},
        {NULL}};
    mlL_checktable(L, 1, fn, 1);
    mlL_checkkeys(L, 1, fn, keys);
    ml_schedule_config c;
    ml_schedule_config_init(&c);
    mlL_options(L, 1, fn, spec, &c);
    ml_schedule *s = lua_newuserdatauv(L, sizeof *s, 0);
    if (ml_schedule_from_config(s, &c)) return mlL_raise_as(L, fn);
    lua_pushcclosure(L, schedule_call, 1);
    return 1;
}

int mlL_open_optim(lua_State *L) {
    static const luaL_Reg methods[] = {{"step", o_step},
                                       {"zero_grad", o_zero_grad},
                                       {"set_lr", o_set_lr},
                                       {"get_lr", o_get_lr},
                                       {"param_groups", o_param_groups},
                                       {"parameters", o_parameters},
                                       {"state_dict", o_state_dict},
                                       {"load_state_dict", o_load_state_dict},
                                       {NULL, NULL}};
    luaL_newmetatable(L, MLL_OPTIM_MT);
    luaL_newlib(L, methods);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "methods"); /* as mech.Tensor's: the fuzzer and help find them there too */
    lua_pushcclosure(L, o_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, o_gc), lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, o_newindex), lua_setfield(L, -2, "__newindex");
    mlL_pushlua(L, "mech.show", "optimizer", MLL_CHECK_NONE, NULL), lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
    static const luaL_Reg funcs[] = {
        {"adamw", l_adamw}, {"sgd", l_sgd}, {"clip_grad_norm", l_clip_grad_norm}, {NULL, NULL}};
    luaL_newlib(L, funcs);
    lua_setfield(L, -2, "optim");
    luaL_newmetatable(L, MLL_ADAMW_MT);
    lua_pushcfunction(L, adamw_gc), lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, adamw_index), lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_model_adamw);
    lua_setfield(L, -2, "adamw");
    lua_pushcfunction(L, l_lr_schedule);
    lua_setfield(L, -2, "lr_schedule");
    return 0;
}
