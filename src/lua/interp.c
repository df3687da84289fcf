/* Interventions from Lua (src/interp): the mech.interp table (patching, ablations, conv surgery,
 * Mamba's implicit attention, patching maps, attention mass, attribution patching, the paper's
 * interchange evaluator). Every function here checks its arguments, calls src/interp and
 * converts the result; the Lua face with site choice, labels, CSV writing, plot_map's checks and
 * the training-loop evaluator is lua/mech/interchange.lua. Caches and model:run_with_cache /
 * run_with_hooks are model methods (model.c registers them, cache.c holds them); models and
 * datasets come from mlL_checkmodel (model.c) and mlL_checkdataset (dataset.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lualib.h>

#include "interp/interp.h"
#include "interp/pm_options.h"
#include "nn/sites.h"
#include "lua/binding.h"
#include "tasks/task.h"

#define MLL_PATCHING_MAP_MT "mech.PatchingMap" /* map:plot{...} */

/* positions: nil (every position), an integer (every example), or a list (one per example, -1 = none) */
static int32_t *read_positions(lua_State *L, int idx, int64_t B, const char *fn) {
    if (lua_isnil(L, idx)) return NULL;
    idx = lua_absindex(L, idx);
    int32_t *p = mlL_scratch(L, sizeof *p * (size_t)(B + 1)); /* left on the stack */
    if (lua_isinteger(L, idx)) {
        for (int64_t b = 0; b < B; b++) p[b] = (int32_t)lua_tointeger(L, idx);
        return p;
    }
    if (!lua_istable(L, idx) || (int64_t)lua_rawlen(L, idx) != B) {
        char want[64];
        snprintf(want, sizeof want, "nil, an integer or a list of %d positions", (int)B);
        lua_pushvalue(L, idx);
        mlL_opterror(L, fn, 3, "pos", want);
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
    ml_model *m = mlL_checkmodel(L, 1, fn);
    mlL_checktable(L, 3, fn, 3);
    mlL_checkkeys(L, 3, fn, keys);
    ml_tensor *tok = mlL_checktokens(L, m, 2, fn);
    int top = lua_gettop(L);
    struct patch_options {
        const char *site;
        bool reference;
    } o = {NULL, false};
    static const mlL_option spec[] = {MLL_OPTION(MLL_STR, "site", struct patch_options, site),
                                      MLL_OPTION(MLL_CBOOL, "reference", struct patch_options, reference), {NULL}};
    mlL_options(L, 3, fn, spec, &o);
    if (!o.site) return mlL_error(L, fn, "option 'site' is required");
    int s = mlL_checksite(L, m, o.site, fn);
    lua_getfield(L, 3, "source"); /* by hand, once: a tensor */
    ml_tensor *src = mlL_testtensor(L, -1);
    if (!src) return mlL_opterror(L, fn, 3, "source", "a tensor");
    lua_getfield(L, 3, "pos"); /* by hand, once: an integer or a list */
    int32_t *pos = read_positions(L, -1, tok->shape[0], fn);
    ml_patch p = {.site = s, .source = src, .pos = pos};
    ml_tensor *hid = ml_patch_run(m, tok, &p, o.reference);
    ml_tensor *logits = hid ? ml_model_head(m, hid) : NULL;
    ml_release(hid);
    lua_settop(L, top);
    mlL_pushtensor(L, logits);
    return 1;
}

/* mean = mech.interp.site_mean(model, dataset, site[, {n=, batch=}]) -> (L, ...) */
typedef struct {
    int64_t n; /* documents, from the first */
    int batch;
} site_mean_options;

static int l_site_mean(lua_State *L) {
    const char *fn = "mech.interp.site_mean";
    static const char *const keys[] = {"n", "batch", NULL};
    static const mlL_option spec[] = {MLL_OPTION(MLL_INT, "n", site_mean_options, n),
                                      MLL_OPTION(MLL_INT32, "batch", site_mean_options, batch), {NULL, 0, 0, 0, 0, NULL, NULL}};
    ml_model *m = mlL_checkmodel(L, 1, fn);
    ml_dataset *ds = mlL_checkdataset(L, 2, fn);
    int s = mlL_checksite(L, m, mlL_checkstr(L, 3, fn), fn);
    mlL_opttable(L, 4, fn, 4, keys);
    site_mean_options o = {.n = ml_dataset_size(ds), .batch = 64};
    mlL_options(L, 4, fn, spec, &o);
    if (ml_site_pos_dim(m, s) != 1) return mlL_error(L, fn, "site '%s' is not of shape (B, L, ...)", lua_tostring(L, 3));
    mlL_pushtensor(L, ml_site_mean(m, ds, o.n, s, o.batch));
    return 1;
}

/* n = mech.interp.short_conv_edit(model, "identity" | "zero" | "truncate"[, {layer=-1, keep=}]) */
typedef struct {
    int layer; /* -1: every layer */
    int keep;  /* taps kept by "truncate" */
} conv_edit_options;

static int l_short_conv_edit(lua_State *L) {
    const char *fn = "mech.interp.short_conv_edit";
    static const char *const keys[] = {"layer", "keep", NULL};
    static const mlL_option spec[] = {MLL_OPTION(MLL_INT32, "layer", conv_edit_options, layer),
                                      MLL_OPTION(MLL_INT32, "keep", conv_edit_options, keep), {NULL, 0, 0, 0, 0, NULL, NULL}};
    ml_model *m = mlL_checkmodel(L, 1, fn);
    const char *k = mlL_checkstr(L, 2, fn);
    int kind = 0;
    while (ml_conv_edit_names[kind] && strcmp(k, ml_conv_edit_names[kind])) kind++;
    if (!ml_conv_edit_names[kind]) return mlL_argfail(L, fn, 2, "expected 'identity', 'zero' or 'truncate', got '%s'", k);
    mlL_opttable(L, 3, fn, 3, keys);
    conv_edit_options o = {.layer = -1, .keep = kind == ML_CONV_TRUNCATE ? -1 : 0};
    mlL_options(L, 3, fn, spec, &o);
    if (kind == ML_CONV_TRUNCATE && o.keep < 0) return mlL_error(L, fn, "'truncate' needs option 'keep' >= 0");
    int n = ml_short_conv_edit(m, o.layer, (ml_conv_edit)kind, o.keep);
    if (n < 0) return mlL_raise(L);
    if (n == 0) /* nothing edited: the caller's experiment would silently measure the unedited model */
        return mlL_error(L, fn, "the model (arch '%s') has no short convolution%s", m->cfg.arch,
                          o.layer >= 0 ? " in that layer" : "");
    lua_pushinteger(L, n);
    return 1;
}

/* alpha = mech.interp.mamba_attention(model, tokens, layer) -> (B, E, L, L) */
static int l_mamba_attention(lua_State *L) {
    const char *fn = "mech.interp.mamba_attention";
    ml_model *m = mlL_checkmodel(L, 1, fn);
    ml_tensor *tok = mlL_checktokens(L, m, 2, fn);
    mlL_pushtensor(L, ml_mamba_attention_run(m, tok, mlL_checklayer(L, m, 3, fn)));
    return 1;
}

/* ------------------------------------------------------------------ the patching map */

/* A (rows, cols) float32 tensor of x. */
static void push_floats(lua_State *L, const float *x, int rows, int cols) {
    ml_tensor *t = ml_from_f32(2, (int64_t[]){rows, cols}, x);
    mlL_pushtensor(L, t);
}


/* Option `key` of the table at opt: an integer for every example, a list of B integers or an
 * int32 tensor of B elements, into out[B]. Returns false when the option is absent. */
static bool read_per_example(lua_State *L, int opt, const char *key, int64_t B, int32_t *out, const char *fn) {
    if (lua_getfield(L, opt, key) == LUA_TNIL) { /* by hand, once: an integer, a list or a tensor */
        lua_pop(L, 1);
        return false;
    }
    ml_tensor *t = mlL_testtensor(L, -1);
    bool ok = true;
    if (lua_isinteger(L, -1)) {
        for (int64_t b = 0; b < B; b++) out[b] = (int32_t)lua_tointeger(L, -1);
    } else if (t) {
        ok = t->dtype == ML_I32 && ml_numel(t) == B;
        for (int64_t b = 0; ok && b < B; b++) out[b] = (int32_t)ml_get_flat(t, b);
    } else if (lua_istable(L, -1) && (int64_t)lua_rawlen(L, -1) == B) {
        for (int64_t b = 0; ok && b < B; b++) {
            lua_rawgeti(L, -1, b + 1);
            ok = lua_isinteger(L, -1);
            out[b] = (int32_t)lua_tointeger(L, -1);
            lua_pop(L, 1);
        }
    } else {
        ok = false;
    }
    if (!ok)
        mlL_error(L, fn, "option '%s': expected an integer, a list of %d integers or an int32 tensor of %d, got %s",
                   key, (int)B, (int)B, luaL_typename(L, -1));
    lua_pop(L, 1);
    return true;
}

/* Option 'layers' (default: every layer) into layers; returns how many. */
static int map_layers(lua_State *L, const ml_model *m, int opt, int *layers, const char *fn) {
    int nl = 0, n_layers = m->cfg.n_layers;
    if (lua_getfield(L, opt, "layers") == LUA_TNIL) { /* by hand, once: a list */
        for (int l = 0; l < n_layers; l++) layers[nl++] = l;
    } else {
        if (!lua_istable(L, -1)) return mlL_error(L, fn, "option 'layers': expected a list of layers");
        for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++, lua_pop(L, 1)) {
            int ok;
            lua_Integer l = lua_tointegerx(L, -1, &ok);
            if (!ok || l < 0 || l >= n_layers || nl == n_layers)
                return mlL_error(L, fn, "option 'layers': expected distinct layers in [0, %d), got %s", n_layers,
                                  luaL_tolstring(L, -1, NULL));
            layers[nl++] = (int)l;
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return nl;
}

/* The map's rows: layers x option 'components' (default: the six paper sites), the components
 * each layer has, a per-head component once per head. A component no layer has is an error
 * naming the closest site. */
static int *map_sites(lua_State *L, ml_model *m, int opt, int *n_out, int **heads_out, const char *fn) {
    int *layers = mlL_scratch(L, sizeof *layers * (size_t)(m->cfg.n_layers + 1)), top = lua_gettop(L);
    int nl = map_layers(L, m, opt, layers, fn), nc = 0;
    bool given = lua_getfield(L, opt, "components") != LUA_TNIL; /* by hand, once: a list */
    if (given && !lua_istable(L, -1)) mlL_error(L, fn, "option 'components': expected a list of names");
    int max_c = given ? (int)lua_rawlen(L, -1) : ML_ENTRY_PAPER;
    const char **comps = mlL_scratch(L, sizeof *comps * (size_t)(max_c + 1));
    for (int i = 0; i < max_c; i++) {
        if (given && lua_rawgeti(L, top + 1, i + 1) != LUA_TSTRING)
            mlL_error(L, fn, "option 'components': expected names, got a %s", luaL_typename(L, -1));
        comps[nc++] = given ? lua_tostring(L, -1) : ml_entry_names[i];
        if (given) lua_pop(L, 1); /* the strings stay anchored in the list */
    }
    int *sites = mlL_scratch(L, sizeof *sites * (size_t)(nl * nc + 1)), missing;
    int R = ml_site_grid(m, layers, nl, comps, nc, sites, &missing), n = ml_pm_rows(m, sites, R, NULL, NULL);
    if (n < 0) mlL_raise_as(L, fn);
    if (given && missing >= 0) { /* raises naming the closest site */
        char name[ML_SITE_NAME_MAX];
        ml_site_format(name, sizeof name, nl ? layers[0] : 0, comps[missing]);
        mlL_checksite(L, m, name, fn);
    }
    if (R == 0) mlL_error(L, fn, "no site to patch");
    int *rows = mlL_scratch(L, sizeof *rows * (size_t)n), *heads = mlL_scratch(L, sizeof *heads * (size_t)n);
    ml_pm_rows(m, sites, R, rows, heads);
    *heads_out = heads;
    *n_out = n;
    return rows;
}

/* The map's columns: option 'positions' (negative counts from the end; default: every one). An
 * entry may be a position name of the task of option 'dataset' (its own names included): that
 * column patches each example at its document's position of that name (none where the document
 * has none); c->example_positions then holds every column per example and names[j] the column's
 * name (NULL for an integer column). */
static void map_positions(lua_State *L, int opt, ml_tensor *clean, ml_pm_config *c, const char ***names,
                          const ml_dataset *ds, int64_t first, const char *fn) {
    int64_t Lq = clean->shape[1], B = clean->shape[0];
    int np = 0;
    int32_t *positions;
    *names = NULL;
    if (lua_getfield(L, opt, "positions") == LUA_TNIL) { /* by hand, once: a list */
        positions = mlL_scratch(L, sizeof *positions * (size_t)Lq);
        for (int64_t p = 0; p < Lq; p++) positions[np++] = (int32_t)p;
    } else {
        if (!lua_istable(L, -1))
            mlL_error(L, fn, "option 'positions': expected a list of integers or position names");
        int t = lua_gettop(L);
        size_t n = lua_rawlen(L, t) + 1;
        positions = mlL_scratch(L, sizeof *positions * n);
        const char **nm = mlL_scratch(L, sizeof *nm * n);
        bool named = false; /* any name: the columns per example (allocated before the loop, which reads the top) */
        for (lua_Integer i = 1; lua_rawgeti(L, t, i) != LUA_TNIL; i++, lua_pop(L, 1))
            named = named || lua_type(L, -1) == LUA_TSTRING;
        lua_pop(L, 1);
        int32_t *ex = named ? mlL_scratch(L, sizeof *ex * n * (size_t)B) : NULL;
        if (named && ds && (first < 0 || first > ml_dataset_size(ds) - B)) /* first + B could overflow */
            luaL_error(L, "%s: option 'first': expected documents [first, first + %d) within the dataset's %d, got %d",
                       fn, (int)B, (int)ml_dataset_size(ds), (int)first);
        for (lua_Integer i = 1; lua_rawgeti(L, t, i) != LUA_TNIL; i++, lua_pop(L, 1)) {
            nm[np] = NULL;
            if (lua_type(L, -1) == LUA_TSTRING) { /* a named position: per document */
                if (!ds)
                    luaL_error(L, "%s: option 'positions' entry %d is a position name ('%s'): it needs option "
                               "'dataset' (the documents of the clean tokens)", fn, (int)i, lua_tostring(L, -1));
                char what[48];
                snprintf(what, sizeof what, "option 'positions' entry %d", (int)i);
                int slot = mlL_task_pos(L, ml_dataset_task(ds), -1, fn, what);
                nm[np] = ml_task_pos_name(ml_dataset_task(ds), slot);
                for (int64_t b = 0; b < B; b++) {
                    int32_t pos[ML_MAX_POS];
                    if (ml_dataset_readout_positions(ds, first + b, 0, pos)) mlL_raise_as(L, fn);
                    ex[np * B + b] = pos[slot] >= 0 && pos[slot] < Lq ? pos[slot] : -1;
                }
                positions[np++] = -1;
                continue;
            }
            int ok;
            lua_Integer p = lua_tointegerx(L, -1, &ok);
            if (ok && p < 0) p += Lq;
            if (!ok || p < 0 || p >= Lq)
                mlL_error(L, fn, "option 'positions': expected integers in [-%d, %d) or position names, got %s",
                           (int)Lq, (int)Lq, luaL_tolstring(L, -1, NULL));
            positions[np++] = (int32_t)p;
        }
        if (ex) { /* the integer columns too, per example */
            for (int j = 0; j < np; j++)
                for (int64_t b = 0; !nm[j] && b < B; b++) ex[j * B + b] = positions[j];
            c->example_positions = ex, *names = nm;
        }
    }
    if (np == 0) mlL_error(L, fn, "option 'positions' is empty");
    c->n_positions = np;
    c->positions = positions;
}

/* The readout: row rows[b] must predict targets[b]. From options 'rows' (and 'targets', default
 * the token after each row), or from option 'dataset' (with 'first', default 0): the clean tokens
 * are its documents [first, first + B), read where each answers (target_item − 1, the first
 * query for MQAR). Without either the map refuses: a guessed row (the last token, often padding
 * or <eos>) reads no answer and makes a working model look at chance. */
static void map_readout(lua_State *L, const ml_model *m, ml_tensor *clean, int opt, ml_pm_config *c,
                        const ml_dataset *ds, int64_t first, const char *fn) {
    int64_t B = clean->shape[0];
    int32_t *rows = mlL_scratch(L, sizeof *rows * (size_t)B), *targets = mlL_scratch(L, sizeof *targets * (size_t)B);
    bool has_rows = read_per_example(L, opt, "rows", B, rows, fn);
    if (ds && has_rows) mlL_error(L, fn, "give option 'dataset' or options 'rows' and 'targets', not both");
    if (!ds && !has_rows)
        luaL_error(L, "%s: say where the answer is read: option 'dataset' (the clean tokens are its documents from "
                      "option 'first') or option 'rows' (and 'targets'; ic.readout(ds, first, n) gives both)", fn);
    if (ds && ml_pm_dataset_rows(ds, first, clean, rows)) mlL_raise_as(L, fn);
    bool has_targets = read_per_example(L, opt, "targets", B, targets, fn);
    if (ml_pm_check_readout(clean, m->cfg.vocab, rows, targets, has_targets)) mlL_raise_as(L, fn);
    c->rows = rows, c->targets = targets;
}

/* A metric given as a Lua function(logits (B, L, V)) -> number: called under lua_pcall so that an
 * error unwinds through the C evaluator's cleanup; the error value waits in slot `err`. */
typedef struct {
    lua_State *L;
    int f, err;
    const char *fn;
} lua_metric;

static double call_lua_metric(void *ud, ml_model *m, ml_tensor *hid, ml_status *err) {
    lua_metric *lm = ud;
    lua_State *L = lm->L;
    ml_tensor *logits = ml_model_head(m, hid);
    if (!logits) return *err = ml_last_status(), 0;
    lua_pushvalue(L, lm->f);
    mlL_pushtensor(L, logits);
    int status = lua_pcall(L, 1, 1, 0), isnum = 0;
    double v = status == LUA_OK ? lua_tonumberx(L, -1, &isnum) : 0;
    if (!isnum && lua_isnil(L, lm->err)) { /* the first failure is the one raised */
        if (status == LUA_OK)
            lua_pushfstring(L, "%s: option 'metric' returned %s, expected a number", lm->fn, luaL_typename(L, -1));
        else
            lua_pushvalue(L, -1);
        lua_replace(L, lm->err);
    }
    lua_pop(L, 1);
    if (!isnum) *err = ML_ERR_ARG, ml_fail(ML_ERR_ARG, "%s: the metric function failed", lm->fn);
    return v;
}

/* Option 'metric', at stack index `metric` (read by hand, once: a name or a function): a
 * function's adaptor is set up in lm, with the slot for its error pushed. */
static void map_metric(lua_State *L, int opt, int metric, ml_pm_config *c, lua_metric *lm, const char *fn) {
    c->metric = ML_PM_PROB;
    if (lua_type(L, metric) == LUA_TFUNCTION) {
        lm->L = L, lm->f = metric, lm->fn = fn;
        lua_pushnil(L);
        lm->err = lua_gettop(L);
        c->metric = ML_PM_FUNCTION, c->fn = call_lua_metric, c->ud = lm;
        return;
    }
    if (lua_isnil(L, metric)) return;
    const char *s = lua_type(L, metric) == LUA_TSTRING ? lua_tostring(L, metric) : NULL;
    for (int k = 0; s && k < ML_PM_FUNCTION; k++)
        if (!strcmp(s, ml_pm_metric_names[k])) {
            c->metric = (ml_pm_metric)k;
            return;
        }
    lua_pushvalue(L, metric);
    mlL_opterror(L, fn, opt, "metric", "'prob', 'logprob', 'logit' or a function(logits)");
}

/* The map as a table (docs/interventions.md, "Patching maps") with the PatchingMap methods. */
static void push_map(lua_State *L, const ml_model *m, const ml_pm_config *c, const char *const *col_names,
                     const ml_pm_result *r, double threshold, double chance, const char *fn) {
    int R = r->n_rows, np = r->n_cols;
    lua_createtable(L, 0, 16);
    push_floats(L, r->values, R, np), lua_setfield(L, -2, "values");
    push_floats(L, r->patched, R, np), lua_setfield(L, -2, "patched");
    lua_createtable(L, R, 0);
    lua_createtable(L, R, 0);
    for (int i = 0; i < R; i++) {
        char name[ML_SITE_NAME_MAX];
        ml_site_fullname(m, c->sites[i], name, sizeof name);
        lua_pushstring(L, name), lua_rawseti(L, -3, i + 1);
        if (c->heads[i] >= 0)
            lua_pushfstring(L, "layer %d head %d %s", m->site_layer[c->sites[i]], c->heads[i], m->sites[c->sites[i]].name);
        else
            lua_pushfstring(L, "layer %d %s", m->site_layer[c->sites[i]], m->sites[c->sites[i]].name);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -3, "row_labels");
    lua_setfield(L, -2, "sites");
    lua_createtable(L, R, 0);
    for (int i = 0; i < R; i++) lua_pushinteger(L, c->heads[i]), lua_rawseti(L, -2, i + 1);
    lua_setfield(L, -2, "heads");
    lua_createtable(L, np, 0);
    lua_createtable(L, np, 0);
    for (int j = 0; j < np; j++) {
        if (col_names && col_names[j]) { /* a named position: its name in both */
            lua_pushstring(L, col_names[j]), lua_rawseti(L, -3, j + 1);
            lua_pushstring(L, col_names[j]), lua_rawseti(L, -2, j + 1);
            continue;
        }
        lua_pushinteger(L, c->positions[j]), lua_rawseti(L, -3, j + 1);
        lua_pushfstring(L, "%d", (int)c->positions[j]), lua_rawseti(L, -2, j + 1);
    }
    lua_setfield(L, -3, "col_labels");
    lua_setfield(L, -2, "positions");
    lua_pushstring(L, ml_pm_metric_names[c->metric]), lua_setfield(L, -2, "metric");
    lua_pushnumber(L, r->clean), lua_setfield(L, -2, "clean");
    lua_pushnumber(L, r->corrupted), lua_setfield(L, -2, "corrupted");
    lua_pushnumber(L, r->den), lua_setfield(L, -2, "den");
    if (c->ablate) lua_pushstring(L, c->ablate == ML_PM_ZERO ? "zero" : "mean"), lua_setfield(L, -2, "ablate");
    lua_pushnumber(L, threshold), lua_setfield(L, -2, "threshold");
    lua_pushboolean(L, c->ablate || r->den > threshold), lua_setfield(L, -2, "passes");
    lua_pushnumber(L, r->accuracy), lua_setfield(L, -2, "accuracy");
    lua_pushnumber(L, chance), lua_setfield(L, -2, "chance");
    if (r->accuracy < 2 * chance) {
        lua_pushfstring(L, "the model's accuracy on the clean tokens (%f) is at chance (%f): its attributions are noise",
                        r->accuracy, chance);
        fprintf(stderr, "%s: warning: %s\n", fn, lua_tostring(L, -1));
        lua_setfield(L, -2, "warning");
    }
    luaL_setmetatable(L, MLL_PATCHING_MAP_MT);
}

/* map = mech.interp.patching_map(model, clean, corrupted[, {layers=, components=, positions=,
 *   metric=, rows=, targets=, dataset=, first=, threshold=0.01, chance=}]): ml_patching_map (src/interp).
 * With option ablate = "zero" | "mean", corrupted is nil (or left out: (model, clean, opts)). Each
 * option is read once: the scalars by mlL_options; by hand the lists (layers, components,
 * positions), rows and targets (a list or a tensor), the dataset (an object) and the metric (a
 * name or a function). */
static int l_patching_map(lua_State *L) {
    const char *fn = "mech.interp.patching_map";
    static const char *const keys[] = {"layers", "components", "positions", "metric", "rows", "targets",
                                       "dataset", "first", "threshold", "chance", "ablate", NULL};
    static const mlL_option spec[] = {
        {"ablate", MLL_ENUM, offsetof(ml_pm_options, ablate), 0, 0, ml_pm_ablation_names, "'zero' or 'mean'"},
        MLL_OPTION(MLL_INT, "first", ml_pm_options, first), MLL_OPTION(MLL_NUM, "threshold", ml_pm_options, threshold),
        MLL_OPTION(MLL_NUM, "chance", ml_pm_options, chance), {NULL}};
    ml_model *m = mlL_checkmodel(L, 1, fn);
    /* (model, clean, options): a table without a list part is options, not corrupted tokens */
    if (lua_gettop(L) == 3 && lua_istable(L, 3) && lua_rawlen(L, 3) == 0) lua_pushnil(L), lua_insert(L, 3);
    lua_settop(L, 4);
    mlL_opttable(L, 4, fn, 4, keys);
    ml_pm_options o;
    ml_pm_options_init(&o);
    mlL_options(L, 4, fn, spec, &o);
    ml_pm_config c = {.ablate = o.ablate < 0 ? ML_PM_PATCH : (ml_pm_ablate)(ML_PM_ZERO + o.ablate)};
    if (c.ablate && !lua_isnil(L, 3))
        return mlL_error(L, fn, "give corrupted tokens (argument 3) or option 'ablate', not both");
    /* by hand, once each: the dataset (an object, slot 5) and the metric (a name or a function, slot 6) */
    const ml_dataset *ds = lua_getfield(L, 4, "dataset") == LUA_TNIL ? NULL : mlL_checkdataset(L, 5, fn);
    lua_getfield(L, 4, "metric");
    ml_tensor *clean = mlL_checktokens(L, m, 2, fn), *corr = c.ablate ? clean : mlL_checktokens(L, m, 3, fn);
    if (!ml_same_shape(clean, corr)) {
        char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
        return mlL_error(L, fn, "argument 3 expected corrupted tokens of the clean tokens' shape %s, got %s",
                          ml_shape_str(s1, clean->ndim, clean->shape), ml_shape_str(s2, corr->ndim, corr->shape));
    }
    lua_metric lm = {0};
    int *heads;
    c.sites = map_sites(L, m, 4, &c.n_sites, &heads, fn);
    c.heads = heads;
    const char **col_names;
    map_positions(L, 4, clean, &c, &col_names, ds, o.first, fn);
    map_readout(L, m, clean, 4, &c, ds, o.first, fn);
    map_metric(L, 4, 6, &c, &lm, fn);
    /* chance as the interchange evaluation has it (the task's answers); 1/V when no task is known */
    if (isnan(o.chance)) o.chance = ds ? ml_task_chance(ml_dataset_task(ds)) : 1.0 / m->cfg.vocab;
    ml_pm_result *r = ml_patching_map(m, clean, corr, &c);
    if (!r) {
        if (lm.err && !lua_isnil(L, lm.err)) lua_pushvalue(L, lm.err), lua_error(L);
        return mlL_raise(L);
    }
    push_map(L, m, &c, col_names, r, o.threshold, o.chance, fn);
    ml_pm_result_free(r);
    return 1;
}

/* ------------------------------------------------------------------ the evaluators */

/* Option 'sites' (a list of site names, either spelling) into sites[max]; false when absent. */
static bool opt_sites(lua_State *L, const ml_model *m, int opt, int *sites, int *n, int max, const char *fn) {
    if (lua_getfield(L, opt, "sites") == LUA_TNIL) return lua_pop(L, 1), false; /* by hand, once: a list */
    if (!lua_istable(L, -1)) mlL_error(L, fn, "option 'sites': expected a list of site names");
    *n = 0;
    for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++, lua_pop(L, 1)) {
        if (lua_type(L, -1) != LUA_TSTRING) mlL_error(L, fn, "option 'sites': expected names, got a %s", luaL_typename(L, -1));
        if (*n == max) mlL_error(L, fn, "at most %d sites", max);
        sites[(*n)++] = mlL_checksite(L, m, lua_tostring(L, -1), fn);
    }
    lua_pop(L, 2);
    return true;
}

/* Option `key` (a list of position names) into out[max]; label types must name the key or the
 * value item. False when absent. */
static bool opt_pos_list(lua_State *L, int opt, const ml_task *t, const char *key, int *out, int *n, int max,
                         const char *fn) {
    if (lua_getfield(L, opt, key) == LUA_TNIL) return lua_pop(L, 1), false; /* by hand, once: a list */
    bool lt = !strcmp(key, "label_types");
    char what[48];
    snprintf(what, sizeof what, "option '%s'", key);
    if (!lua_istable(L, -1)) mlL_error(L, fn, "option '%s': expected a list of names", key);
    *n = 0;
    for (lua_Integer i = 1; lua_rawgeti(L, -1, i) != LUA_TNIL; i++, lua_pop(L, 1)) {
        if (*n == max) mlL_error(L, fn, "option '%s' takes at most %d names", key, max);
        int p = mlL_task_pos(L, t, -1, fn, what);
        if (lt && p != ML_POS_QUERY_ITEM_ORIG && p != ML_POS_TARGET_ITEM_ORIG)
            mlL_error(L, fn, "option 'label_types': expected query_item_orig or target_item_orig, got %s",
                       ml_task_pos_name(t, p));
        out[(*n)++] = p;
    }
    lua_pop(L, 2);
    return true;
}

/* {{name, value}, ...} of the evaluator's aggregate metrics. */
static void push_metrics(lua_State *L, const ml_metric *v, int n) {
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_createtable(L, 2, 0);
        lua_pushstring(L, v[i].name), lua_rawseti(L, -2, 1);
        lua_pushnumber(L, v[i].value), lua_rawseti(L, -2, 2);
        lua_rawseti(L, -2, i + 1);
    }
}

/* Sets the site's full name, layer and component in the table on top. */
static void set_site_fields(lua_State *L, const ml_model *m, int site) {
    char name[ML_SITE_NAME_MAX];
    ml_site_fullname(m, site, name, sizeof name);
    lua_pushstring(L, name), lua_setfield(L, -2, "site");
    lua_pushinteger(L, m->site_layer[site]), lua_setfield(L, -2, "layer");
    lua_pushstring(L, m->sites[site].name), lua_setfield(L, -2, "component");
}

/* The evaluator's result as mech.interp.interchange documents it. */
static void push_ic_result(lua_State *L, const ml_model *m, const ml_ic_result *r, const ml_metric *v, int n) {
    lua_createtable(L, 0, 12);
    push_metrics(L, v, n), lua_setfield(L, -2, "metrics");
    lua_createtable(L, r->n_combos, 0);
    for (int k = 0; k < r->n_combos; k++) {
        lua_createtable(L, 0, 5);
        set_site_fields(L, m, r->combo_site[k]);
        lua_pushstring(L, ml_ic_pos_name(r, r->combo_lt[k])), lua_setfield(L, -2, "label_type");
        lua_pushstring(L, ml_ic_pos_name(r, r->combo_pos[k])), lua_setfield(L, -2, "position");
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
}

/* res = mech.interp.interchange(model, dataset, {sites=, label_types=, positions=, seed=, batch=,
 *   first=, count=, swap=, reference=, workers=}): ml_ic_run and ml_ic_metrics (src/interp/interchange.c).
 * sites: full site names (default: the paper's components at every layer). */
static int l_interchange(lua_State *L) {
    const char *fn = "mech.interp.interchange";
    static const char *const keys[] = {"sites", "label_types", "positions", "seed", "batch", "first",
                                       "count", "swap", "reference", "workers", NULL};
    ml_model *m = mlL_checkmodel(L, 1, fn);
    ml_dataset *ds = mlL_checkdataset(L, 2, fn);
    mlL_opttable(L, 3, fn, 3, keys);
    ml_ic_config *c = lua_newuserdatauv(L, sizeof *c, 0); /* collected with the call */
    ml_ic_config_paper(c, m, ml_dataset_task(ds));
    opt_sites(L, m, 3, c->sites, &c->n_sites, ML_IC_MAX_SITES, fn);
    const ml_task *task = ml_dataset_task(ds);
    opt_pos_list(L, 3, task, "label_types", c->label_types, &c->n_label_types, 2, fn);
    opt_pos_list(L, 3, task, "positions", c->positions, &c->n_positions, ML_IC_MAX_POS, fn);
    static const mlL_option ic_opts[] = { /* over ml_ic_config_paper's defaults (seed 42, batch 320) */
        MLL_OPTION(MLL_INT, "seed", ml_ic_config, seed),
        {"batch", MLL_INT32, offsetof(ml_ic_config, batch), 1, INT32_MAX, NULL, "a positive integer"},
        MLL_OPTION(MLL_CBOOL, "swap", ml_ic_config, swap),
        MLL_OPTION(MLL_CBOOL, "reference", ml_ic_config, reference),
        {"workers", MLL_INT32, offsetof(ml_ic_config, workers), 0, 64, NULL, "a count in [1, 64] (0: mech.threads())"},
        {NULL}};
    mlL_options(L, 3, fn, ic_opts, c);
    /* one row each, in order: count's default (the rest of the dataset) depends on first */
    int64_t first = mlL_optint(L, 3, "first", 0, fn), size = ml_dataset_size(ds);
    int64_t count = mlL_optint(L, 3, "count", first >= 0 && first <= size ? size - first : 0, fn);
    ml_ic_result *r = ml_ic_run(m, ds, first, count, c);
    if (!r) return mlL_raise(L);
    ml_metric *v;
    int n;
    if (ml_ic_metrics(m, r, &v, &n)) {
        ml_ic_result_free(r);
        return mlL_raise(L);
    }
    push_ic_result(L, m, r, v, n);
    free(v);
    ml_ic_result_free(r);
    return 1;
}

/* attention_mass's and attribution_patching's scalars: documents [0, n) of the dataset (at most all;
 * default all), and the seed of attribution_patching's corruptions (42). */
typedef struct {
    int64_t n;
    uint64_t seed;
} docs_options;
static const mlL_option docs_spec[] = {
    {"n", MLL_INT, offsetof(docs_options, n), 1, (double)INT64_MAX, NULL, "a positive number of documents"},
    MLL_OPTION(MLL_INT, "seed", docs_options, seed), {NULL}};

/* mass = mech.interp.attention_mass(model, dataset[, {query="query_item", key="target_item_orig",
 *   n=}]) -> {[layer] = mass} for the layers with an attention (ml_attention_mass). */
static int l_attention_mass(lua_State *L) {
    const char *fn = "mech.interp.attention_mass";
    static const char *const keys[] = {"query", "key", "n", NULL};
    ml_model *m = mlL_checkmodel(L, 1, fn);
    ml_dataset *ds = mlL_checkdataset(L, 2, fn);
    mlL_opttable(L, 3, fn, 3, keys);
    docs_options o = {ml_dataset_size(ds), 42};
    mlL_options(L, 3, fn, (const mlL_option[]){docs_spec[0], {NULL}}, &o); /* n only */
    /* query and key by hand, once each: position names that mlL_task_pos resolves where they lie */
    lua_getfield(L, 3, "query");
    int q = lua_isnil(L, -1) ? ML_POS_QUERY_ITEM : mlL_task_pos(L, ml_dataset_task(ds), -1, fn, "option 'query'");
    lua_getfield(L, 3, "key");
    int k = lua_isnil(L, -1) ? ML_POS_TARGET_ITEM_ORIG : mlL_task_pos(L, ml_dataset_task(ds), -1, fn, "option 'key'");
    double mass[ML_MAX_LAYERS];
    bool has[ML_MAX_LAYERS];
    if (ml_attention_mass(m, ds, o.n < ml_dataset_size(ds) ? o.n : ml_dataset_size(ds), q, k, mass, has)) return mlL_raise(L);
    lua_newtable(L);
    for (int l = 0; l < m->cfg.n_layers; l++)
        if (has[l]) lua_pushnumber(L, mass[l]), lua_rawseti(L, -2, l);
    return 1;
}

/* est = mech.interp.attribution_patching(model, dataset, {sites=, label_types=, positions=, seed=42,
 *   n=}) -> {{site=, layer=, component=, label_type=, position=, estimate=}, ...}
 * (ml_attribution_patching; label types x sites x positions, in that order). */
static int l_attribution_patching(lua_State *L) {
    const char *fn = "mech.interp.attribution_patching";
    static const char *const keys[] = {"sites", "label_types", "positions", "seed", "n", NULL};
    ml_model *m = mlL_checkmodel(L, 1, fn);
    ml_dataset *ds = mlL_checkdataset(L, 2, fn);
    mlL_checktable(L, 3, fn, 3);
    mlL_checkkeys(L, 3, fn, keys);
    docs_options o = {ml_dataset_size(ds), 42};
    mlL_options(L, 3, fn, docs_spec, &o);
    ml_ap_config c = {.n_label_types = 2, .label_types = {ML_POS_QUERY_ITEM_ORIG, ML_POS_TARGET_ITEM_ORIG}, .seed = o.seed};
    int *sites = mlL_scratch(L, sizeof *sites * ML_IC_MAX_SITES);
    if (!opt_sites(L, m, 3, sites, &c.n_sites, ML_IC_MAX_SITES, fn)) return mlL_error(L, fn, "option 'sites' is required");
    const ml_task *task = ml_dataset_task(ds);
    if (!opt_pos_list(L, 3, task, "positions", c.positions, &c.n_positions, ML_IC_MAX_POS, fn))
        return mlL_error(L, fn, "option 'positions' is required");
    opt_pos_list(L, 3, task, "label_types", c.label_types, &c.n_label_types, 2, fn);
    c.sites = sites;
    ml_ap_result *r = ml_attribution_patching(m, ds, o.n < ml_dataset_size(ds) ? o.n : ml_dataset_size(ds), &c);
    if (!r) return mlL_raise(L);
    lua_createtable(L, c.n_label_types * c.n_sites * c.n_positions, 0);
    for (int k = 0, i = 0; k < c.n_label_types; k++)
        for (int s = 0; s < c.n_sites; s++)
            for (int j = 0; j < c.n_positions; j++, i++) {
                lua_createtable(L, 0, 6);
                set_site_fields(L, m, c.sites[s]);
                lua_pushstring(L, ml_task_pos_name(task, c.label_types[k])), lua_setfield(L, -2, "label_type");
                lua_pushstring(L, ml_task_pos_name(task, c.positions[j])), lua_setfield(L, -2, "position");
                lua_pushnumber(L, r->estimate[i]), lua_setfield(L, -2, "estimate");
                lua_rawseti(L, -2, i + 1);
            }
    ml_ap_result_free(r);
    return 1;
}

/* v = mech.interp.kl_div(corrupted_logits, intervened_logits) (1-D, length V): KL/|V| */
static int l_kl_div(lua_State *L) {
    const char *fn = "mech.interp.kl_div";
    ml_tensor *a = mlL_checktensor(L, 1, fn), *b = mlL_checktensor(L, 2, fn);
    if (a->dtype != ML_F32 || b->dtype != ML_F32 || a->ndim != 1 || !ml_same_shape(a, b))
        return mlL_error(L, fn, "expected two float32 vectors of the same length");
    ml_tensor *ac = ml_contiguous(a), *bc = ml_contiguous(b);
    double v = ac && bc ? ml_ic_kl_div(ml_f32(ac), ml_f32(bc), a->shape[0]) : 0;
    ml_release(ac), ml_release(bc);
    lua_pushnumber(L, v);
    return 1;
}

/* i = mech.interp.argmax({values}, {names}): max_perc's winner (1-based; #names + 1 = "nothing") */
static int l_argmax(lua_State *L) {
    const char *fn = "mech.interp.argmax";
    mlL_checktable(L, 1, fn, 1);
    mlL_checktable(L, 2, fn, 2);
    int n = (int)lua_rawlen(L, 2);
    if ((int)lua_rawlen(L, 1) != n || n > 64) return mlL_error(L, fn, "expected equal lists of at most 64");
    double v[64];
    const char *names[64];
    for (int i = 0; i < n; i++, lua_pop(L, 2)) { /* strings only: a number converted here would not be anchored */
        if (lua_rawgeti(L, 1, i + 1) != LUA_TNUMBER) mlL_argfail(L, fn, 1, "entry %d expected a number, got %s", i + 1, luaL_typename(L, -1));
        if (lua_rawgeti(L, 2, i + 1) != LUA_TSTRING) mlL_argfail(L, fn, 2, "entry %d expected a name, got %s", i + 1, luaL_typename(L, -1));
        v[i] = lua_tonumber(L, -2), names[i] = lua_tostring(L, -1); /* anchored in the table */
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
        return mlL_error(L, fn, "expected lo < hi with hi - lo < 2^31, got %d, %d", lo, hi);
    lua_pushinteger(L, ml_ic_corrupt(g, lo, hi, orig));
    return 1;
}

int mlL_open_interp(lua_State *L) {
    mlL_open_cache(L);
    luaL_newmetatable(L, MLL_PATCHING_MAP_MT);
    lua_createtable(L, 0, 1);
    mlL_pushlua(L, "mech.interchange", "checked_plot_map", MLL_CHECK_NONE, NULL), lua_setfield(L, -2, "plot");
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    static const luaL_Reg fns[] = {{"patch", l_patch},         {"site_mean", l_site_mean}, {"short_conv_edit", l_short_conv_edit},
                                   {"mamba_attention", l_mamba_attention}, {"interchange", l_interchange},
                                   {"patching_map", l_patching_map},
                                   {"attention_mass", l_attention_mass}, {"attribution_patching", l_attribution_patching},
                                   {"kl_div", l_kl_div},       {"argmax", l_argmax},       {"corrupt", l_corrupt},
                                   {NULL, NULL}};
    luaL_newlib(L, fns);
    /* the figures: lua/mech/interchange.lua checks plot_map's options and draws a map (also
     * map:plot); plot_layers and plot_components (also mech.plot.layers and .components, mech.c)
     * are lua/mech/analysis.lua's */
    mlL_setlua(L, -1, (const mlL_LuaReg[]){{"plot_map", "mech.interchange", "checked_plot_map", MLL_CHECK_NONE, NULL},
                                            {"plot_layers", "mech.analysis", NULL, MLL_CHECK_NONE, NULL},
                                            {"plot_components", "mech.analysis", NULL, MLL_CHECK_NONE, NULL},
                                            {NULL, NULL, NULL, 0, NULL}});
    mlL_hooked(L, -1, (const char *const[]){"patch", "site_mean", "mamba_attention", "interchange", "attention_mass",
                                             "attribution_patching", NULL});
    /* mech.interp.components: the paper's six block sites, in order (nn/model.c owns the list) */
    lua_createtable(L, ML_ENTRY_PAPER, 0);
    for (int i = 0; i < ML_ENTRY_PAPER; i++) lua_pushstring(L, ml_entry_names[i]), lua_rawseti(L, -2, i + 1);
    lua_setfield(L, -2, "components");
    lua_setfield(L, -2, "interp");
    /* mech.help([x]) prints x's entry of lua/mech/help.lua (the REPL also names it `help`) */
    mlL_setlua(L, -1, (const mlL_LuaReg[]){{"help", "mech.help", NULL, MLL_CHECK_NONE, NULL}, {NULL, NULL, NULL, 0, NULL}});
    return mlL_open_analysis(L);
}
