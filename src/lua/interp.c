/* Interventions from Lua (src/interp): model:run_with_cache, model:run_with_hooks and the
 * mech.interp table (patching, ablations, conv surgery, Mamba's implicit attention, the paper's
 * interchange evaluator). The Lua face with CSV writing and the training-loop evaluator is
 * lua/mech/interchange.lua.
 *
 * Models and datasets are the userdata of model.c and task.c; both boxes start with the core
 * pointer (model_box {ml_model *m}, dataset_box {ml_dataset *ds}), which is all this file reads. */
#include <stdlib.h>
#include <string.h>

#include "interp/interp.h"
#include "lua/binding.h"
#include "tasks/task.h"

static ml_model *check_model(lua_State *L, int arg, const char *fn) {
    ml_model **b = luaL_testudata(L, arg, "mech.Model");
    if (!b) mlL_argerror(L, fn, arg, "a mech.Model");
    if (!*b) luaL_error(L, "%s: the model was closed", fn);
    return *b;
}

static ml_dataset *check_dataset(lua_State *L, int arg, const char *fn) {
    ml_dataset **b = luaL_testudata(L, arg, "mech.Dataset");
    if (!b || !*b) mlL_argerror(L, fn, arg, "a mech.Dataset");
    return *b;
}

static ml_tensor *check_tokens(lua_State *L, ml_model *m, int arg, const char *fn) {
    ml_tensor *t = mlL_testtensor(L, arg);
    if (!t || t->dtype != ML_I32 || (t->ndim != 1 && t->ndim != 2)) mlL_argerror(L, fn, arg, "int32 token ids of shape [B,L]");
    ml_tensor *c = t->ndim == 1 ? ml_unsqueeze(t, 0) : ml_contiguous(t);
    if (!c) mlL_raise(L);
    for (int64_t i = 0, n = ml_numel(c); i < n; i++) {
        int32_t v = (int32_t)ml_get_flat(c, i);
        if (v < 0 || v >= m->cfg.vocab) {
            ml_release(c);
            luaL_error(L, "%s: token id %d out of range for vocabulary size %d", fn, v, m->cfg.vocab);
        }
    }
    mlL_pushtensor(L, c); /* anchored on the stack */
    return c;
}

/* Zeroed scratch memory owned by the stack (freed by the collector even when an error unwinds). */
static void *scratch(lua_State *L, size_t n) {
    void *p = lua_newuserdatauv(L, n ? n : 1, 0);
    memset(p, 0, n ? n : 1);
    return p;
}

/* The `names` option: nil = every site; a list of full names. The mask is left on the stack. */
static bool *names_mask(lua_State *L, ml_model *m, int opt, const char *key, const char *fn) {
    bool *want = scratch(L, (size_t)m->n_sites + 1);
    int t = lua_getfield(L, opt, key);
    if (t == LUA_TNIL) memset(want, 1, (size_t)m->n_sites);
    else if (t == LUA_TSTRING) want[mlL_checksite(L, m, lua_tostring(L, -1), fn)] = true;
    else if (t == LUA_TTABLE) {
        for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
            if (lua_type(L, -1) != LUA_TSTRING) {
                luaL_error(L, "%s: option '%s' expected a list of site names, got a %s at index %d", fn, key,
                           luaL_typename(L, -1), (int)i);
            }
            want[mlL_checksite(L, m, lua_tostring(L, -1), fn)] = true;
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    } else {
        luaL_error(L, "%s: option '%s' expected a site name or a list of them, got %s", fn, key, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    return want;
}

static void push_site_table(lua_State *L, ml_model *m, ml_tensor **t) {
    lua_newtable(L);
    for (int i = 0; i < m->n_sites; i++)
        if (t[i]) {
            char name[96];
            ml_site_fullname(m, i, name, sizeof name);
            mlL_pushtensor(L, t[i]);
            t[i] = NULL;
            lua_setfield(L, -2, name);
        }
    luaL_setmetatable(L, MLL_CACHE_MT); /* cache:save(path) */
}

/* logits, cache[, grads] = model:run_with_cache(tokens[, {names=, grads=, targets=, rows=, objective=}]) */
static int m_run_with_cache(lua_State *L) {
    const char *fn = "run_with_cache";
    static const char *const keys[] = {"names", "grads", "targets", "rows", "objective", NULL};
    ml_model *m = check_model(L, 1, fn);
    lua_settop(L, 3);
    if (lua_isnil(L, 3)) lua_newtable(L), lua_replace(L, 3);
    mlL_checktable(L, 3, fn, 2);
    mlL_checkkeys(L, 3, fn, keys);
    ml_tensor *tok = check_tokens(L, m, 2, fn);
    bool grads = mlL_optbool(L, 3, "grads", 0, fn);
    bool *want = names_mask(L, m, 3, "names", fn);
    ml_tensor **acts = scratch(L, sizeof *acts * ((size_t)m->n_sites + 1));
    ml_tensor **g = scratch(L, sizeof *g * ((size_t)m->n_sites + 1));
    ml_tensor *hid = NULL, *rows = NULL, *tg = NULL;
    ml_status st = ML_OK;
    bool logprob = true;
    if (grads) { /* arguments first (they may raise), anchored on the stack */
        int64_t B = tok->shape[0], L_ = tok->shape[1];
        if (lua_getfield(L, 3, "targets") == LUA_TNIL)
            return luaL_error(L, "%s: grads = true needs option 'targets' (int32, one answer token per sequence)", fn);
        tg = mlL_totensor(L, -1, fn, ML_I32);
        mlL_pushtensor(L, tg);
        if (lua_getfield(L, 3, "rows") != LUA_TNIL) rows = mlL_totensor(L, -1, fn, ML_I32);
        else rows = ml_full(ML_I32, 1, &B, (double)(L_ - 1));
        mlL_pushtensor(L, rows);
        const char *obj = mlL_optstr(L, 3, "objective", "logprob", fn);
        if (strcmp(obj, "logprob") && strcmp(obj, "prob"))
            return luaL_error(L, "%s: option 'objective' expected 'logprob' or 'prob', got '%s'", fn, obj);
        logprob = !strcmp(obj, "logprob");
        ml_tensor *rc = ml_contiguous(rows), *tc = ml_contiguous(tg);
        st = rc && tc ? ml_run_cache_grad(m, tok, rc, tc, logprob, want, acts, g, &hid) : ml_last_status();
        ml_release(rc), ml_release(tc);
    } else {
        st = ml_run_cache(m, tok, want, acts, &hid);
    }
    ml_tensor *logits = st ? NULL : ml_model_head(m, hid);
    ml_release(hid);
    if (!logits) {
        for (int i = 0; i < m->n_sites; i++) ml_release(acts[i]), ml_release(g[i]), acts[i] = g[i] = NULL;
        return mlL_raise(L);
    }
    mlL_pushtensor(L, logits);
    push_site_table(L, m, acts);
    if (grads) push_site_table(L, m, g);
    return grads ? 3 : 2;
}

/* model:run_with_hooks(tokens, {[site] = fn, ...}) -> logits (model:forward with hooks) */
static int m_run_with_hooks(lua_State *L) {
    check_model(L, 1, "run_with_hooks");
    lua_settop(L, 3);
    if (!lua_isnil(L, 3) && !lua_istable(L, 3)) mlL_argerror(L, "run_with_hooks", 3, "a table of hooks {site = function}");
    luaL_getmetafield(L, 1, "__index");
    lua_getfield(L, -1, "forward");
    lua_pushvalue(L, 1), lua_pushvalue(L, 2), lua_pushvalue(L, 3);
    lua_call(L, 3, 1);
    return 1;
}

/* positions: nil (every position), an integer (every example), or a list (one per example, -1 = none) */
static int32_t *read_positions(lua_State *L, int idx, int64_t B, const char *fn) {
    if (lua_isnil(L, idx)) return NULL;
    idx = lua_absindex(L, idx);
    int32_t *p = scratch(L, sizeof *p * (size_t)(B + 1)); /* left on the stack */
    if (lua_isinteger(L, idx)) {
        for (int64_t b = 0; b < B; b++) p[b] = (int32_t)lua_tointeger(L, idx);
        return p;
    }
    if (!lua_istable(L, idx) || (int64_t)lua_rawlen(L, idx) != B) {
        luaL_error(L, "%s: option 'pos' expected nil, an integer or a list of %d positions", fn, (int)B);
    }
    for (int64_t b = 0; b < B; b++) {
        lua_rawgeti(L, idx, b + 1);
        p[b] = (int32_t)luaL_optinteger(L, -1, -1);
        lua_pop(L, 1);
    }
    return p;
}

/* logits = mech.interp.patch(model, base_tokens, {site=, source=, pos=, reference=false})
 * source: the site's values from another run (B, ...) or a per-position value (L, ...) broadcast
 * over the batch (a mean or zeros); pos: nil = every position. */
static int l_patch(lua_State *L) {
    const char *fn = "mech.interp.patch";
    static const char *const keys[] = {"site", "source", "pos", "reference", NULL};
    ml_model *m = check_model(L, 1, fn);
    mlL_checktable(L, 3, fn, 3);
    mlL_checkkeys(L, 3, fn, keys);
    ml_tensor *tok = check_tokens(L, m, 2, fn);
    int top = lua_gettop(L);
    const char *site = mlL_optstr(L, 3, "site", NULL, fn);
    if (!site) return luaL_error(L, "%s: option 'site' is required", fn);
    int s = mlL_checksite(L, m, site, fn);
    lua_getfield(L, 3, "source");
    ml_tensor *src = mlL_testtensor(L, -1);
    if (!src) return luaL_error(L, "%s: option 'source' expected a tensor, got %s", fn, luaL_typename(L, -1));
    bool reference = mlL_optbool(L, 3, "reference", 0, fn);
    lua_getfield(L, 3, "pos");
    int32_t *pos = read_positions(L, -1, tok->shape[0], fn);
    ml_patch p = {.site = s, .source = src, .pos = pos};
    ml_tensor *hid = NULL;
    if (reference) hid = ml_patch_full(m, tok, &p);
    else {
        bool *want = scratch(L, (size_t)m->n_sites);
        ml_tensor **acts = scratch(L, sizeof *acts * (size_t)m->n_sites);
        ml_patch_needs(m, s, want);
        if (ml_run_cache(m, tok, want, acts, NULL) == ML_OK) hid = ml_patch_fast(m, acts, &p, NULL);
        for (int i = 0; i < m->n_sites; i++) ml_release(acts[i]);
    }
    ml_tensor *logits = hid ? ml_model_head(m, hid) : NULL;
    ml_release(hid);
    lua_settop(L, top);
    mlL_pushtensor(L, logits);
    return 1;
}

/* mean = mech.interp.site_mean(model, dataset, site[, {n=, batch=}]) -> (L, ...) */
static int l_site_mean(lua_State *L) {
    const char *fn = "mech.interp.site_mean";
    ml_model *m = check_model(L, 1, fn);
    ml_dataset *ds = check_dataset(L, 2, fn);
    int s = mlL_checksite(L, m, luaL_checkstring(L, 3), fn);
    int64_t n = ml_dataset_size(ds);
    int batch = 64;
    if (!lua_isnoneornil(L, 4)) {
        static const char *const keys[] = {"n", "batch", NULL};
        mlL_checktable(L, 4, fn, 4);
        mlL_checkkeys(L, 4, fn, keys);
        n = mlL_optint(L, 4, "n", n, fn);
        batch = mlL_optint32(L, 4, "batch", batch, fn);
    }
    if (ml_site_pos_dim(m, s) != 1) return luaL_error(L, "%s: site '%s' is not of shape (B, L, ...)", fn, lua_tostring(L, 3));
    mlL_pushtensor(L, ml_site_mean(m, ds, n, s, batch));
    return 1;
}

/* n = mech.interp.short_conv_edit(model, "identity" | "zero" | "truncate"[, {layer=-1, keep=}]) */
static int l_short_conv_edit(lua_State *L) {
    const char *fn = "mech.interp.short_conv_edit";
    ml_model *m = check_model(L, 1, fn);
    const char *k = luaL_checkstring(L, 2);
    ml_conv_edit kind;
    if (!strcmp(k, "identity")) kind = ML_CONV_IDENTITY;
    else if (!strcmp(k, "zero")) kind = ML_CONV_ZERO;
    else if (!strcmp(k, "truncate")) kind = ML_CONV_TRUNCATE;
    else return luaL_error(L, "%s: argument 2 expected 'identity', 'zero' or 'truncate', got '%s'", fn, k);
    int layer = -1, keep = 0;
    if (!lua_isnoneornil(L, 3)) {
        static const char *const keys[] = {"layer", "keep", NULL};
        mlL_checktable(L, 3, fn, 3);
        mlL_checkkeys(L, 3, fn, keys);
        layer = mlL_optint32(L, 3, "layer", -1, fn);
        keep = mlL_optint32(L, 3, "keep", kind == ML_CONV_TRUNCATE ? -1 : 0, fn);
    }
    if (kind == ML_CONV_TRUNCATE && keep < 0) return luaL_error(L, "%s: 'truncate' needs option 'keep' >= 0", fn);
    int n = ml_short_conv_edit(m, layer, kind, keep);
    if (n < 0) return mlL_raise(L);
    lua_pushinteger(L, n);
    return 1;
}

/* alpha = mech.interp.mamba_attention(model, tokens, layer) -> (B, E, L, L) */
static int l_mamba_attention(lua_State *L) {
    const char *fn = "mech.interp.mamba_attention";
    ml_model *m = check_model(L, 1, fn);
    ml_tensor *tok = check_tokens(L, m, 2, fn);
    lua_Integer layer = luaL_checkinteger(L, 3);
    if (layer < 0 || layer >= m->cfg.n_layers)
        return luaL_error(L, "%s: argument 3 expected a layer in [0, %d), got %d", fn, m->cfg.n_layers, (int)layer);
    bool *want = scratch(L, (size_t)m->n_sites + 1);
    ml_tensor **acts = scratch(L, sizeof *acts * ((size_t)m->n_sites + 1)), *a = NULL;
    static const char *const need[] = {"mixer.dt", "mixer.B", "mixer.C"};
    for (int i = 0; i < 3; i++) {
        int s = ml_site_lookup(m, (int)layer, need[i]);
        if (s >= 0) want[s] = true;
    }
    if (ml_run_cache(m, tok, want, acts, NULL) == ML_OK) a = ml_mamba_attention(m, (int)layer, acts);
    for (int i = 0; i < m->n_sites; i++) ml_release(acts[i]);
    mlL_pushtensor(L, a);
    return 1;
}

/* ------------------------------------------------------------------ the evaluator */

static int pos_arg(lua_State *L, int idx, const char *fn, const char *what) {
    const char *s = lua_tostring(L, idx);
    int p = s ? ml_pos_index(s) : -1;
    if (p < 0)
        luaL_error(L, "%s: %s expected a position name (%s, %s, %s, %s, %s, %s, %s, %s), got %s", fn, what,
                   ml_pos_names[0], ml_pos_names[1], ml_pos_names[2], ml_pos_names[3], ml_pos_names[4],
                   ml_pos_names[5], ml_pos_names[6], ml_pos_names[7], s ? s : luaL_typename(L, idx));
    return p;
}

static void push_floats(lua_State *L, const float *x, int rows, int cols) {
    ml_tensor *t = ml_from_f32(2, (int64_t[]){rows, cols}, x);
    mlL_pushtensor(L, t);
}

/* res = mech.interp.interchange(model, dataset, {sites=, label_types=, positions=, seed=, batch=,
 *   first=, count=, swap=, reference=})
 * sites: full site names (default: the paper's components at every layer). Returns
 * {metrics = {{name, value}, ...}, combos = {{site, layer, component, label_type, position}},
 *  restored_prob, corrupted_prob, restored_logit, corrupted_logit, kl_div (combos x docs tensors),
 *  original_prob, original_logit (docs), seconds, patched_examples} */
static int l_interchange(lua_State *L) {
    const char *fn = "mech.interp.interchange";
    static const char *const keys[] = {"sites", "label_types", "positions", "seed", "batch", "first",
                                       "count", "swap", "reference", NULL};
    ml_model *m = check_model(L, 1, fn);
    ml_dataset *ds = check_dataset(L, 2, fn);
    lua_settop(L, 3);
    if (lua_isnil(L, 3)) lua_newtable(L), lua_replace(L, 3);
    mlL_checktable(L, 3, fn, 3);
    mlL_checkkeys(L, 3, fn, keys);
    ml_ic_config *c = lua_newuserdatauv(L, sizeof *c, 0); /* collected with the call */
    ml_ic_config_paper(c, m, ml_dataset_task(ds));
    if (lua_getfield(L, 3, "sites") != LUA_TNIL) {
        if (!lua_istable(L, -1)) return luaL_error(L, "%s: option 'sites' expected a list of site names", fn);
        c->n_sites = 0;
        for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
            if (lua_type(L, -1) != LUA_TSTRING) return luaL_error(L, "%s: option 'sites' expected names, got a %s", fn, luaL_typename(L, -1));
            if (c->n_sites == ML_IC_MAX_SITES) return luaL_error(L, "%s: at most %d sites", fn, ML_IC_MAX_SITES);
            c->sites[c->n_sites++] = mlL_checksite(L, m, lua_tostring(L, -1), fn);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (lua_getfield(L, 3, "label_types") != LUA_TNIL) {
        if (!lua_istable(L, -1)) return luaL_error(L, "%s: option 'label_types' expected a list of names", fn);
        c->n_label_types = 0;
        for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
            if (c->n_label_types == 2) return luaL_error(L, "%s: option 'label_types' takes at most 2 names", fn);
            int p = pos_arg(L, -1, fn, "option 'label_types'");
            if (p != ML_POS_QUERY_ITEM_ORIG && p != ML_POS_TARGET_ITEM_ORIG)
                return luaL_error(L, "%s: option 'label_types' expected query_item_orig or target_item_orig, got %s", fn,
                                  ml_pos_names[p]);
            c->label_types[c->n_label_types++] = p;
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (lua_getfield(L, 3, "positions") != LUA_TNIL) {
        if (!lua_istable(L, -1)) return luaL_error(L, "%s: option 'positions' expected a list of names", fn);
        c->n_positions = 0;
        for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
            if (c->n_positions == ML_IC_MAX_POS) return luaL_error(L, "%s: too many positions", fn);
            c->positions[c->n_positions++] = pos_arg(L, -1, fn, "option 'positions'");
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    c->seed = (uint64_t)mlL_optint(L, 3, "seed", 42, fn);
    c->batch = mlL_optint32(L, 3, "batch", 320, fn);
    c->swap = mlL_optbool(L, 3, "swap", 0, fn);
    c->reference = mlL_optbool(L, 3, "reference", 0, fn);
    int64_t first = mlL_optint(L, 3, "first", 0, fn);
    int64_t count = mlL_optint(L, 3, "count", ml_dataset_size(ds) - first, fn);
    if (c->batch < 1) return luaL_error(L, "%s: option 'batch' expected a positive integer", fn);
    ml_ic_result *r = ml_ic_run(m, ds, first, count, c);
    if (!r) return mlL_raise(L);
    ml_metric *v;
    int n;
    if (ml_ic_metrics(m, r, &v, &n)) {
        ml_ic_result_free(r);
        return mlL_raise(L);
    }
    lua_createtable(L, 0, 12);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_createtable(L, 2, 0);
        lua_pushstring(L, v[i].name), lua_rawseti(L, -2, 1);
        lua_pushnumber(L, v[i].value), lua_rawseti(L, -2, 2);
        lua_rawseti(L, -2, i + 1);
    }
    free(v);
    lua_setfield(L, -2, "metrics");
    lua_createtable(L, r->n_combos, 0);
    for (int k = 0; k < r->n_combos; k++) {
        char name[96];
        ml_site_fullname(m, r->combo_site[k], name, sizeof name);
        lua_createtable(L, 0, 5);
        lua_pushstring(L, name), lua_setfield(L, -2, "site");
        lua_pushinteger(L, m->site_layer[r->combo_site[k]]), lua_setfield(L, -2, "layer");
        lua_pushstring(L, m->sites[r->combo_site[k]].name), lua_setfield(L, -2, "component");
        lua_pushstring(L, ml_pos_names[r->combo_lt[k]]), lua_setfield(L, -2, "label_type");
        lua_pushstring(L, ml_pos_names[r->combo_pos[k]]), lua_setfield(L, -2, "position");
        lua_rawseti(L, -2, k + 1);
    }
    lua_setfield(L, -2, "combos");
    push_floats(L, r->restored_prob, r->n_combos, r->n_docs), lua_setfield(L, -2, "restored_prob");
    push_floats(L, r->corrupted_prob, r->n_combos, r->n_docs), lua_setfield(L, -2, "corrupted_prob");
    push_floats(L, r->restored_logit, r->n_combos, r->n_docs), lua_setfield(L, -2, "restored_logit");
    push_floats(L, r->corrupted_logit, r->n_combos, r->n_docs), lua_setfield(L, -2, "corrupted_logit");
    push_floats(L, r->kl_div, r->n_combos, r->n_docs), lua_setfield(L, -2, "kl_div");
    push_floats(L, r->original_prob, 1, r->n_docs), lua_setfield(L, -2, "original_prob");
    push_floats(L, r->original_logit, 1, r->n_docs), lua_setfield(L, -2, "original_logit");
    mlL_pushtensor(L, ml_from_i32(2, (int64_t[]){r->n_combos, r->n_docs}, r->corrupt_token));
    lua_setfield(L, -2, "corrupt_token");
    lua_pushnumber(L, r->seconds), lua_setfield(L, -2, "seconds");
    lua_pushinteger(L, r->patched_forwards), lua_setfield(L, -2, "patched_examples");
    lua_pushinteger(L, r->n_combos), lua_setfield(L, -2, "n_combos");
    ml_ic_result_free(r);
    return 1;
}

/* v = mech.interp.kl_div(corrupted_logits, intervened_logits) (1-D, length V): KL/|V| */
static int l_kl_div(lua_State *L) {
    const char *fn = "mech.interp.kl_div";
    ml_tensor *a = mlL_checktensor(L, 1, fn), *b = mlL_checktensor(L, 2, fn);
    if (a->dtype != ML_F32 || b->dtype != ML_F32 || a->ndim != 1 || !ml_same_shape(a, b))
        return luaL_error(L, "%s: expected two float32 vectors of the same length", fn);
    ml_tensor *ac = ml_contiguous(a), *bc = ml_contiguous(b);
    double v = ac && bc ? ml_ic_kl_div(ml_f32(ac), ml_f32(bc), a->shape[0]) : 0;
    ml_release(ac), ml_release(bc);
    lua_pushnumber(L, v);
    return 1;
}

/* i = mech.interp.argmax({values}, {names}): max_perc's winner (1-based; #names + 1 = "nothing") */
static int l_argmax(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checktype(L, 2, LUA_TTABLE);
    int n = (int)lua_rawlen(L, 2);
    if ((int)lua_rawlen(L, 1) != n || n > 64) return luaL_error(L, "mech.interp.argmax: expected equal lists of at most 64");
    double v[64];
    const char *names[64];
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, 1, i + 1), v[i] = luaL_checknumber(L, -1), lua_pop(L, 1);
        lua_rawgeti(L, 2, i + 1), names[i] = luaL_checkstring(L, -1), lua_pop(L, 1); /* anchored in the table */
    }
    lua_pushinteger(L, ml_ic_argmax(v, names, n) + 1);
    return 1;
}

/* r = mech.interp.corrupt(lo, hi, orig, generator): the corruption draw (docs/interventions.md) */
static int l_corrupt(lua_State *L) {
    const char *fn = "mech.interp.corrupt";
    int lo = mlL_checkint32(L, 1, fn), hi = mlL_checkint32(L, 2, fn), orig = mlL_checkint32(L, 3, fn);
    ml_rng *g = luaL_testudata(L, 4, MLL_RNG_MT);
    if (!g) return mlL_argerror(L, fn, 4, "a mech.Generator");
    if (hi <= lo || (int64_t)hi - lo > INT32_MAX)
        return luaL_error(L, "%s: expected lo < hi with hi - lo < 2^31, got %d, %d", fn, lo, hi);
    lua_pushinteger(L, ml_ic_corrupt(g, lo, hi, orig));
    return 1;
}

int mlL_open_interp(lua_State *L) {
    static const luaL_Reg methods[] = {{"run_with_cache", m_run_with_cache}, {"run_with_hooks", m_run_with_hooks}, {NULL, NULL}};
    luaL_getmetatable(L, "mech.Model");
    if (lua_istable(L, -1) && lua_getfield(L, -1, "__index") == LUA_TTABLE) {
        luaL_setfuncs(L, methods, 0);
        lua_pop(L, 1);
    } else {
        lua_pop(L, lua_istable(L, -1) ? 1 : 0);
    }
    lua_pop(L, 1);
    static const luaL_Reg fns[] = {{"patch", l_patch},         {"site_mean", l_site_mean}, {"short_conv_edit", l_short_conv_edit},
                                   {"mamba_attention", l_mamba_attention}, {"interchange", l_interchange},
                                   {"kl_div", l_kl_div},       {"argmax", l_argmax},       {"corrupt", l_corrupt},
                                   {NULL, NULL}};
    luaL_newlib(L, fns);
    lua_setfield(L, -2, "interp");
    return 0;
}
