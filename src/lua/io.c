/* Tensors to and from files other programs read (docs/interop.md): mech.save_tensors,
 * mech.load_tensors and cache:save for the tables run_with_cache returns. The format is
 * safetensors (io/safetensors.h): numpy and PyTorch read it with safetensors' own loaders.
 * And mech.json_decode: the core's JSON reader (io/json.h) for the Lua library's mech.json. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "io/safetensors.h"
#include "lua/binding.h"

/* Writes the string-keyed tensors of the table at idx to path (atomically), with the string
 * pairs of the table at meta_idx (0: none) as metadata. */
static void save_table(lua_State *L, int idx, int meta_idx, const char *path, const char *fn) {
    int n = 0, n_meta = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            mlL_error(L, fn, "tensor names must be strings, got a %s key", luaL_typename(L, -2));
        if (!mlL_testtensor(L, -1))
            mlL_error(L, fn, "'%s' expected a mech.Tensor, got %s", lua_tostring(L, -2), luaL_typename(L, -1));
        n++;
        lua_pop(L, 1);
    }
    if (meta_idx)
        for (lua_pushnil(L); lua_next(L, meta_idx); lua_pop(L, 1), n_meta++)
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
                mlL_error(L, fn, "metadata expected string keys and string values, got %s = %s",
                           luaL_typename(L, -2), luaL_typename(L, -1));
    /* Scratch arrays owned by the stack, so an error below frees them; the tables anchor the
     * strings and tensors they point to. */
    const char **names = lua_newuserdatauv(L, sizeof *names * (size_t)(n + 2 * n_meta + 1), 0);
    ml_tensor **ts = lua_newuserdatauv(L, sizeof *ts * (size_t)(n + 1), 0);
    const char **keys = names + n, **values = names + n + n_meta;
    int i = 0;
    for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1), i++) names[i] = lua_tostring(L, -2), ts[i] = mlL_testtensor(L, -1);
    i = 0;
    if (meta_idx)
        for (lua_pushnil(L); lua_next(L, meta_idx); lua_pop(L, 1), i++)
            keys[i] = lua_tostring(L, -2), values[i] = lua_tostring(L, -1);
    if (ml_safetensors_write(path, n, names, ts, n_meta, keys, values)) mlL_raise(L);
    lua_pop(L, 2);
}

/* mech.save_tensors(path, {name = tensor, ...}[, {metadata key = string, ...}]) */
static int l_save_tensors(lua_State *L) {
    const char *fn = "mech.save_tensors";
    const char *path = luaL_checkstring(L, 1);
    mlL_checktable(L, 2, fn, 2);
    if (!lua_isnoneornil(L, 3)) mlL_checktable(L, 3, fn, 3);
    save_table(L, 2, lua_isnoneornil(L, 3) ? 0 : 3, path, fn);
    return 0;
}

/* An open safetensors file or a parsed JSON tree owned by the stack: the collector frees it if an
 * error unwinds first. */
#define OWNED_MT "mech.IoOwned"
typedef struct {
    void *p;
    bool json;
} owned;

static int owned_gc(lua_State *L) {
    owned *o = luaL_checkudata(L, 1, OWNED_MT);
    if (o->json) ml_json_free(o->p);
    else ml_safetensors_close(o->p);
    o->p = NULL;
    return 0;
}

static owned *push_owned(lua_State *L, bool json) {
    owned *o = lua_newuserdatauv(L, sizeof *o, 0);
    *o = (owned){NULL, json};
    luaL_setmetatable(L, OWNED_MT);
    return o;
}

/* mech.load_tensors(path) -> {name = tensor, ...}, {metadata key = value, ...} */
static int l_load_tensors(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    owned *box = push_owned(L, false);
    ml_safetensors *f = box->p = ml_safetensors_open(path);
    if (!f) return mlL_raise(L);
    lua_newtable(L);
    for (int i = 0; i < ml_safetensors_count(f); i++) {
        lua_pushstring(L, ml_safetensors_name(f, i));
        mlL_pushtensor(L, ml_safetensors_get(f, ml_safetensors_name(f, i))); /* raises on NULL */
        lua_settable(L, -3);
    }
    lua_newtable(L);
    for (int i = 0; i < ml_safetensors_meta_count(f); i++) {
        lua_pushstring(L, ml_safetensors_meta_value(f, i));
        lua_setfield(L, -2, ml_safetensors_meta_key(f, i));
    }
    ml_safetensors_close(f);
    box->p = NULL;
    return 2;
}

/* cache:save(path): the sites' activations under their full names ("blocks.0.mixer.q"); a method
 * of mech.Cache (src/lua/cache.c). */
int mlL_cache_save(lua_State *L) {
    const char *fn = "cache:save";
    if (!lua_istable(L, 1)) mlL_argerror(L, fn, 1, "a cache table (from run_with_cache)");
    const char *path = luaL_checkstring(L, 2);
    save_table(L, 1, 0, path, fn);
    return 0;
}

/* v as Lua data, as lua/mech/json.lua always read it: null as nil (a member left out), a number
 * as an integer when it is whole and fits (math.tointeger), else a float. */
static void push_json(lua_State *L, const ml_json *v) {
    luaL_checkstack(L, 4, "mech.json_decode: nested too deeply");
    lua_Integer i;
    switch (v->type) {
    case ML_JSON_BOOL: lua_pushboolean(L, v->boolean); break;
    case ML_JSON_NUMBER:
        if (v->is_int) lua_pushinteger(L, (lua_Integer)v->integer);
        else if (floor(v->number) == v->number && lua_numbertointeger(v->number, &i)) lua_pushinteger(L, i);
        else lua_pushnumber(L, v->number);
        break;
    case ML_JSON_STRING: lua_pushlstring(L, v->str, v->len); break;
    case ML_JSON_ARRAY:
    case ML_JSON_OBJECT:
        lua_createtable(L, v->type == ML_JSON_ARRAY ? (int)v->count : 0, v->type == ML_JSON_OBJECT ? (int)v->count : 0);
        for (size_t k = 0; k < v->count; k++) {
            if (v->type == ML_JSON_ARRAY) lua_pushinteger(L, (lua_Integer)k + 1);
            else lua_pushlstring(L, v->keys[k], v->key_lens[k]);
            push_json(L, v->items[k]);
            lua_rawset(L, -3); /* a nil value sets nothing */
        }
        break;
    default: lua_pushnil(L); break;
    }
}

/* mech.json_decode(text[, name]) -> value: strict RFC 8259 (io/json.h); a malformed text raises
 * "mech.json_decode: [name: ]<what> at byte <offset>". */
static int l_json_decode(lua_State *L) {
    const char *fn = "mech.json_decode";
    if (lua_type(L, 1) != LUA_TSTRING) return mlL_argerror(L, fn, 1, "a string");
    size_t n;
    const char *text = lua_tolstring(L, 1, &n), *name = luaL_optstring(L, 2, NULL);
    owned *box = push_owned(L, true);
    if (!(box->p = ml_json_parse(text, n, NULL))) {
        const char *msg = ml_last_error();
        if (!strncmp(msg, "json: ", 6)) msg += 6;
        return mlL_error(L, fn, "%s%s%s", name ? name : "", name ? ": " : "", msg);
    }
    push_json(L, box->p);
    ml_json_free(box->p);
    box->p = NULL;
    return 1;
}

int mlL_open_io(lua_State *L) {
    static const luaL_Reg funcs[] = {{"save_tensors", l_save_tensors},
                                     {"load_tensors", l_load_tensors},
                                     {"json_decode", l_json_decode},
                                     {NULL, NULL}};
    luaL_setfuncs(L, funcs, 0);
    luaL_newmetatable(L, OWNED_MT);
    lua_pushcfunction(L, owned_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
    return 0;
}
