/* The primitives of lua/mech/task_custom.lua (require "mech.task_c"): tasks made outside C (a Lua
 * task, a file) and the reading of task records. That file holds the loop, the defaults and the
 * messages' context; src/tasks/custom.c the checks; src/lua/doc.c the reading of documents. */
#include <stdlib.h>

#include "io/os.h"
#include "io/safetensors.h"
#include "lua/task.h"

/* task = C.custom(name, seed, vocab (V or a list of names), positions (list of names), lo, hi,
 * holdout, definition) */
static int c_custom(lua_State *L) {
    const char *fn = "mech.task.new";
    const char *name = luaL_checkstring(L, 1);
    lua_Integer seed = luaL_checkinteger(L, 2);
    ml_custom_config c = {0};
    if (lua_istable(L, 3)) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, 3);
        if (n < 1 || n > ML_MAX_DOC_LEN) return mlL_argfail(L, fn, 1, "option 'vocab': expected 1 .. 2^24 names, got %I", n);
        const char **names = lua_newuserdatauv(L, sizeof(char *) * (size_t)n, 0); /* collected with the call */
        for (lua_Integer i = 1; i <= n; i++) {
            if (lua_rawgeti(L, 3, i) != LUA_TSTRING)
                return mlL_argfail(L, fn, 1, "option 'vocab': entry %I expected a token name (a string), got %s", i,
                                        luaL_typename(L, -1));
            names[i - 1] = lua_tostring(L, -1);
            lua_pop(L, 1); /* the string stays alive in the table */
        }
        c.vocab = (int)n, c.token_names = names;
    } else {
        lua_Integer v = luaL_checkinteger(L, 3);
        c.vocab = v < 1 || v > ML_MAX_DOC_LEN ? 0 : (int)v;
    }
    luaL_checktype(L, 4, LUA_TTABLE);
    /* the paper's names are bits of the mask; the others are the task's free names, in order */
    const char **free_names = lua_newuserdatauv(L, sizeof(char *) * (lua_rawlen(L, 4) + 1), 0);
    for (lua_Integer i = 1; lua_rawgeti(L, 4, i) != LUA_TNIL; i++) {
        if (lua_type(L, -1) != LUA_TSTRING)
            return mlL_argfail(L, fn, 1, "option 'positions': entry %I expected a position name, got %s", i,
                                    luaL_typename(L, -1));
        const char *pn = lua_tostring(L, -1);
        int k = ml_pos_index(pn);
        if (k >= 0 && (c.positions >> k & 1)) return mlL_argfail(L, fn, 1, "option 'positions': lists '%s' twice", pn);
        if (k >= 0) c.positions |= 1u << k;
        else free_names[c.n_free_positions++] = pn; /* alive in the table */
        lua_pop(L, 1);
    }
    c.free_positions = free_names;
    c.corrupt_lo = (int)luaL_checkinteger(L, 5);
    c.corrupt_hi = (int)luaL_checkinteger(L, 6);
    c.holdout = luaL_checknumber(L, 7);
    luaL_checktype(L, 8, LUA_TTABLE);
    mlL_pushtask(L, ml_task_custom(&c, name, (uint64_t)seed));
    lua_pushvalue(L, 8);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

/* ds, gen, scratch = C.open(task, n, seed, split): an empty dataset with room for n documents, the
 * generator of (seed, split) the sample function draws from, and a document buffer for C.append. */
static int c_open(lua_State *L) {
    mlL_task_box *b = mlL_checktask(L, 1, "task:dataset");
    lua_Integer n = luaL_checkinteger(L, 2), seed = luaL_checkinteger(L, 3);
    ml_split split = mlL_optsplit(L, 4, "task:dataset");
    ml_dataset **ds = mlL_newdataset(L);
    if (!(*ds = ml_dataset_open(b->t, n, split))) return mlL_raise(L);
    lua_getiuservalue(L, 1, 1);
    lua_setiuservalue(L, -2, 1);
    ml_rng *g = lua_newuserdatauv(L, sizeof *g, 0);
    ml_rng_init(g, (uint64_t)seed, ml_split_stream(split));
    luaL_setmetatable(L, MLL_RNG_MT);
    mlL_push_scratch_doc(L);
    return 3;
}

/* C.done(ds): a filled dataset, its memory accounted; returns ds */
static int c_done(lua_State *L) {
    mlL_account(L, ml_dataset_bytes(mlL_checkdataset(L, 1, "task:dataset")));
    lua_settop(L, 1);
    return 1;
}

/* ... = C.call(f, ...): f(...) called from C, so that the messages of a C function f carry no Lua
 * source position (as when the binding called it). */
static int c_call(lua_State *L) {
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* C.set_name(task, name): a preset's name on the task rebuilt from its record. */
static int c_set_name(lua_State *L) {
    ml_task_set_name(mlL_checktask(L, 1, "mech.task.from_spec")->t, luaL_checkstring(L, 2));
    return 0;
}

/* meta = C.meta(path): the metadata of the safetensors file at path, {key = value}. */
static int c_meta(lua_State *L) {
    ml_safetensors *st = ml_safetensors_open(luaL_checkstring(L, 1));
    if (!st) return mlL_raise(L);
    mlL_push_meta(L, st); /* only running out of memory raises before the close */
    ml_safetensors_close(st);
    return 1;
}

/* text = C.read_data(path, base, max_bytes), or nil and why: a data file a record names (the
 * core's ml_read_data_file: below base, regular, bounded; docs/security.md). */
static int c_read_data(lua_State *L) {
    size_t n;
    char *text = ml_read_data_file(luaL_checkstring(L, 1), luaL_optstring(L, 2, NULL), luaL_checkinteger(L, 3), &n);
    if (!text) {
        luaL_pushfail(L);
        lua_pushstring(L, ml_last_error());
        return 2;
    }
    lua_pushlstring(L, text, n);
    free(text);
    return 1;
}

int mlL_open_task_c(lua_State *L) {
    static const luaL_Reg f[] = {{"custom", c_custom},     {"open", c_open},         {"done", c_done},
                                 {"meta", c_meta},         {"call", c_call},         {"set_name", c_set_name},
                                 {"read_data", c_read_data}, {"append", mlL_doc_append},
                                 {"append_batch", mlL_doc_append_batch}, {NULL, NULL}};
    luaL_newlib(L, f);
    return 1;
}
