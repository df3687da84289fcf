/* The TransformerLens-style analysis toolkit from Lua (docs/analysis.md): per-head weight views
 * (model:weight), every parameter name (model:param: state-dict, hook-style and TransformerLens's
 * names), text out (model:generate), path patching and implicit attention; mech.viz is
 * lua/mech/viz.lua. Each function checks its arguments and calls src/interp or src/nn. */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "interp/interp.h"
#include "interp/pm_options.h"
#include "lua/binding.h"
#include "nn/generate.h"
#include "nn/sites.h"

/* Pushes the view of weight `name` of `layer`, or raises naming fn. */
static int push_weight(lua_State *L, ml_model *m, int layer, const char *name, const char *fn) {
    ml_tensor *w = ml_head_weight(m, layer, name);
    if (!w) return mlL_raise_as(L, fn);
    mlL_pushtensor(L, w);
    return 1;
}

/* model:weight(name[, layer]) -> a view: W_Q, W_K, W_V (H, D, d_h), W_O (H, d_h, D), b_O, W_E, W_pos, W_U */
static int m_weight(lua_State *L) {
    const char *fn = "model:weight";
    ml_model *m = mlL_checkmodel(L, 1, fn);
    const char *name = mlL_checkstr(L, 2, fn);
    bool global = !strcmp(name, "W_E") || !strcmp(name, "W_pos") || !strcmp(name, "W_U");
    int layer = 0;
    if (!global || !lua_isnoneornil(L, 3)) layer = mlL_checklayer(L, m, 3, fn);
    ml_clear_error();
    return push_weight(L, m, layer, name, fn);
}

/* model:param(name): by state-dict name ("backbone.layers.1.sequence_mixer.A_log") or hook-style
 * name ("blocks.1.mixer.A_log"), sharing the model's storage; TransformerLens's per-head names
 * ("blocks.0.attn.W_Q", "W_U", "unembed.W_U", "embed.W_E", "pos_embed.W_pos") as views. */
static int m_param(lua_State *L) {
    const char *fn = "model:param";
    ml_model *m = mlL_checkmodel(L, 1, fn);
    const char *name = mlL_checkstr(L, 2, fn);
    int layer;
    const char *rest = ml_site_split(name, &layer);
    if (rest && !strncmp(rest, "attn.", 5)) {
        for (int i = 0; ml_head_weight_names[i]; i++)
            if (!strcmp(rest + 5, ml_head_weight_names[i])) {
                if (layer >= m->cfg.n_layers)
                    return mlL_error(L, fn, "'%s': the model has %d layers (0–%d)", name, m->cfg.n_layers,
                                      m->cfg.n_layers - 1);
                return push_weight(L, m, layer, rest + 5, fn);
            }
    }
    if (!strcmp(name, "W_U") || !strcmp(name, "unembed.W_U")) return push_weight(L, m, 0, "W_U", fn);
    char spelled[160], q[128];
    int i = ml_model_resolve_param(m, name, spelled, sizeof spelled);
    if (i < 0) { /* quoted short, closest by layer */
        const char **names = lua_newuserdatauv(L, sizeof *names * (size_t)(m->n_params + 1), 0);
        for (int k = 0; k < m->n_params; k++) names[k] = m->params[k].name;
        names[m->n_params] = NULL;
        return mlL_error(L, fn, "no parameter named %s (did you mean '%s'? model:named_parameters() lists them)",
                          mlL_quote(name, q, sizeof q), ml_closest(spelled, names));
    }
    mlL_pushtensor(L, ml_retain(m->params[i].t));
    return 1;
}

/* model:generate(tokens[, {max_new=16, temperature=0, top_k=0, seed=0}]) -> tokens (B, L + max_new) */
static int m_generate(lua_State *L) {
    const char *fn = "model:generate";
    static const char *const keys[] = {"max_new", "temperature", "top_k", "seed", NULL};
    static const mlL_option spec[] = {
        {"max_new", MLL_INT32, offsetof(ml_generate_config, max_new), 0, 1000000, NULL, "an integer in [0, 10^6]"},
        {"temperature", MLL_NUM, offsetof(ml_generate_config, temperature), 0, DBL_MAX, NULL,
         "a finite number >= 0 (0: greedy)"},
        {"top_k", MLL_INT32, offsetof(ml_generate_config, top_k), 0, INT32_MAX, NULL, "an integer >= 0 (0: every token)"},
        MLL_OPTION(MLL_INT, "seed", ml_generate_config, seed), {NULL}};
    ml_model *m = mlL_checkmodel(L, 1, fn);
    mlL_opttable(L, 3, fn, 2, keys);
    ml_tensor *tok = mlL_checktokens(L, m, 2, fn);
    ml_generate_config c = {.max_new = 16}; /* greedy, every token, seed 0: nn/generate.h has no *_init */
    mlL_options(L, 3, fn, spec, &c);
    ml_tensor *out = ml_generate(m, tok, &c);
    if (!out) return mlL_raise(L);
    mlL_pushtensor(L, out);
    return 1;
}

/* A site name (either spelling) of option `key`, required. */
static int opt_site(lua_State *L, ml_model *m, const char *name, const char *key, const char *fn) {
    if (!name) return mlL_error(L, fn, "option '%s' (a site name) is required", key);
    return mlL_checksite(L, m, name, fn);
}

/* Option `key`'s head h of site s (only for a site with a head dimension), or -1 when absent. */
static int opt_head(lua_State *L, ml_model *m, int h, const char *key, int s, const char *fn) {
    if (h == -1) return -1;
    int n_heads = (int)ml_mixer_opt(&m->cfg, "n_heads");
    if (!ml_site_per_head(m, s))
        return mlL_error(L, fn, "option '%s' needs a per-head site (attn.hook_z, hook_q, ...), got %s", key,
                          m->sites[s].name);
    if (h < 0 || h >= n_heads)
        return mlL_error(L, fn, "option '%s': expected a head in [0, %d), got %d", key, n_heads, h);
    return h;
}

/* logits = mech.interp.path_patch(model, clean, corrupted, {sender=, receiver=, sender_head=,
 *   receiver_head=}): ml_path_patch_run. */
static int l_path_patch(lua_State *L) {
    const char *fn = "mech.interp.path_patch";
    static const char *const keys[] = {"sender", "receiver", "sender_head", "receiver_head", NULL};
    ml_model *m = mlL_checkmodel(L, 1, fn);
    mlL_checktable(L, 4, fn, 4);
    mlL_checkkeys(L, 4, fn, keys);
    ml_tensor *clean = mlL_checktokens(L, m, 2, fn), *corr = mlL_checktokens(L, m, 3, fn);
    if (!ml_same_shape(clean, corr)) return mlL_error(L, fn, "argument 3 expected corrupted tokens of the clean tokens' shape");
    struct path_options {
        const char *sender, *receiver;
        int sender_head, receiver_head; /* -1: every head */
    } o = {NULL, NULL, -1, -1};
    static const mlL_option spec[] = {
        MLL_OPTION(MLL_STR, "sender", struct path_options, sender), MLL_OPTION(MLL_STR, "receiver", struct path_options, receiver),
        MLL_OPTION(MLL_INT32, "sender_head", struct path_options, sender_head),
        MLL_OPTION(MLL_INT32, "receiver_head", struct path_options, receiver_head), {NULL}};
    mlL_options(L, 4, fn, spec, &o);
    ml_path_patch p = {.sender = opt_site(L, m, o.sender, "sender", fn), .receiver = opt_site(L, m, o.receiver, "receiver", fn)};
    p.sender_head = opt_head(L, m, o.sender_head, "sender_head", p.sender, fn);
    p.receiver_head = opt_head(L, m, o.receiver_head, "receiver_head", p.receiver, fn);
    ml_tensor *hid = ml_path_patch_run(m, clean, corr, &p);
    ml_tensor *logits = hid ? ml_model_head(m, hid) : NULL;
    ml_release(hid);
    if (!logits) return mlL_raise(L);
    mlL_pushtensor(L, logits);
    return 1;
}

/* A = mech.interp.implicit_attention(model, tokens, layer) -> (B, heads, L, L) */
static int l_implicit_attention(lua_State *L) {
    const char *fn = "mech.interp.implicit_attention";
    ml_model *m = mlL_checkmodel(L, 1, fn);
    ml_tensor *tok = mlL_checktokens(L, m, 2, fn);
    ml_tensor *a = ml_implicit_attention_run(m, tok, mlL_checklayer(L, m, 3, fn));
    if (!a) return mlL_raise(L);
    mlL_pushtensor(L, a);
    return 1;
}

int mlL_open_analysis(lua_State *L) {
    luaL_getmetatable(L, "mech.Model");
    if (lua_istable(L, -1) && lua_getfield(L, -1, "__index") == LUA_TTABLE) {
        lua_pushcfunction(L, m_weight), lua_setfield(L, -2, "weight");
        lua_pushcfunction(L, m_generate), lua_setfield(L, -2, "generate");
        mlL_hooked(L, -1, (const char *const[]){"generate", NULL}); /* persistent hooks apply */
        lua_pushcfunction(L, m_param), lua_setfield(L, -2, "param");
        lua_pop(L, 1);
    } else {
        lua_pop(L, lua_istable(L, -1) ? 1 : 0);
    }
    lua_pop(L, 1);
    if (lua_getfield(L, -1, "interp") == LUA_TTABLE) { /* mech.interp, made by mlL_open_interp */
        lua_pushcfunction(L, l_path_patch), lua_setfield(L, -2, "path_patch");
        lua_pushcfunction(L, l_implicit_attention), lua_setfield(L, -2, "implicit_attention");
        mlL_hooked(L, -1, (const char *const[]){"path_patch", "implicit_attention", NULL});
    }
    lua_pop(L, 1);
    /* mech.viz: lua/mech/viz.lua builds the page and the figure */
    lua_newtable(L);
    mlL_setlua(L, -1, (const mlL_LuaReg[]){{"attention", "mech.viz", NULL, MLL_CHECK_TABLE, "mech.viz.attention"},
                                            {"attention_grid", "mech.viz", NULL, MLL_CHECK_TABLE, "mech.viz.attention_grid"}, {NULL, NULL, NULL, 0, NULL}});
    lua_setfield(L, -2, "viz");
    return 0;
}
