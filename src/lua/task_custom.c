/* The primitives of lua/mech/task_custom.lua (require "mech.task_c"): tasks made outside C (a Lua
 * task, a file) and the reading of task records. That file holds the loop, the defaults and the
 * messages' context; src/tasks/custom.c the checks; src/lua/doc.c the reading of documents. */
#define _DEFAULT_SOURCE /* realpath */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    lua_newtable(L); /* only running out of memory raises before the close */
    for (int i = 0; i < ml_safetensors_meta_count(st); i++) {
        lua_pushstring(L, ml_safetensors_meta_value(st, i));
        lua_setfield(L, -2, ml_safetensors_meta_key(st, i));
    }
    ml_safetensors_close(st);
    return 1;
}

/* Returns fail and the message (formatted as lua_pushfstring does). */
static int fail(lua_State *L, const char *fmt, ...) {
    luaL_pushfail(L);
    va_list ap;
    va_start(ap, fmt);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    return 2;
}

/* text = C.read_data(path, base, max_bytes), or nil and why: a data file a record names
 * (docs/security.md). With base (a directory, or nil), a relative path is taken from base and the
 * file's real path (symlinks resolved) must lie below base's; with or without it, the file must be
 * a regular file (never a FIFO, device or directory: opened without blocking, checked on the open
 * descriptor) of at most max_bytes. */
static int c_read_data(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    const char *base = luaL_optstring(L, 2, NULL);
    lua_Integer max = luaL_checkinteger(L, 3);
    char full[PATH_MAX], real[PATH_MAX], real_base[PATH_MAX];
    if (base && path[0] != '/') {
        if (snprintf(full, sizeof full, "%s/%s", base, path) >= (int)sizeof full)
            return fail(L, "the path '%s' is too long", path);
    } else {
        snprintf(full, sizeof full, "%s", path);
    }
    if (!realpath(full, real)) return fail(L, "cannot read %s: %s", full, strerror(errno));
    if (base) {
        if (!realpath(base, real_base)) return fail(L, "cannot read the directory %s: %s", base, strerror(errno));
        size_t n = strlen(real_base);
        bool below = !strncmp(real, real_base, n) && (real[n] == '/' || (n == 1 && real_base[0] == '/'));
        if (!below)
            return fail(L, "'%s' is not a file below %s (it is %s; a record may only name a file in its own directory)",
                        path, base, real);
    }
    int fd = open(real, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return fail(L, "cannot read %s: %s", full, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(L, "%s is not a regular file (a FIFO, device or directory is never read as data)", full);
    }
    if (st.st_size > max) {
        close(fd);
        return fail(L, "%s holds %I bytes, more than the %I a data file may hold", full, (lua_Integer)st.st_size, max);
    }
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, (size_t)st.st_size + 1);
    size_t got = 0;
    for (;;) { /* a file that grows while read stops at the bound */
        ssize_t r = read(fd, out + got, (size_t)st.st_size + 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
        if (got > (size_t)st.st_size) break;
    }
    close(fd);
    if (got != (size_t)st.st_size) return fail(L, "%s changed while it was read", full);
    luaL_pushresultsize(&b, got);
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
