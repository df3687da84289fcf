/* mech.sys: the few operating-system services the Lua library needs (terminal detection, a
 * monotonic clock, directories, atomic file writes, the metrics CSV). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "io/csv.h"
#include "lua/binding.h"

#define MLL_METRICS_MT "mech.Metrics"

static int s_isatty(lua_State *L) {
    lua_pushboolean(L, isatty((int)luaL_optinteger(L, 1, 1)));
    return 1;
}

static int s_time(lua_State *L) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + 1e-9 * (lua_Number)ts.tv_nsec);
    return 1;
}

/* mkdir -p */
static int s_mkdir(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return luaL_error(L, "mech.sys.mkdir: argument 1 expected a path of 1..4095 bytes");
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        char c = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return luaL_error(L, "mech.sys.mkdir: cannot create '%s': %s", buf, strerror(errno));
        buf[i] = c;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return luaL_error(L, "mech.sys.mkdir: '%s' is not a directory", path);
    return 0;
}

static int s_exists(lua_State *L) {
    struct stat st;
    lua_pushboolean(L, stat(luaL_checkstring(L, 1), &st) == 0);
    return 1;
}

static int s_write_atomic(lua_State *L) {
    size_t n;
    const char *path = luaL_checkstring(L, 1);
    const char *data = luaL_checklstring(L, 2, &n);
    if (ml_write_file_atomic(path, data, n)) return mlL_raise(L);
    return 0;
}

/* metrics = mech.sys.metrics(path): long-format CSV step,split,metric,value (appends) */
static int s_metrics(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    ml_metrics **box = lua_newuserdatauv(L, sizeof *box, 0);
    *box = NULL;
    luaL_setmetatable(L, MLL_METRICS_MT);
    *box = ml_metrics_open(path);
    if (!*box) return mlL_raise(L);
    return 1;
}

static ml_metrics *check_metrics(lua_State *L) {
    ml_metrics **box = luaL_checkudata(L, 1, MLL_METRICS_MT);
    if (!*box) luaL_error(L, "metrics: the file was closed");
    return *box;
}

static int metrics_append(lua_State *L) {
    ml_metrics *m = check_metrics(L);
    if (ml_metrics_append(m, luaL_checkinteger(L, 2), luaL_checkstring(L, 3), luaL_checkstring(L, 4), luaL_checknumber(L, 5)))
        return mlL_raise(L);
    return 0;
}

static int metrics_close(lua_State *L) {
    ml_metrics **box = luaL_checkudata(L, 1, MLL_METRICS_MT);
    ml_status st = ml_metrics_close(*box);
    *box = NULL;
    if (st) return mlL_raise(L);
    return 0;
}

int mlL_open_sys(lua_State *L) {
    luaL_newmetatable(L, MLL_METRICS_MT);
    static const luaL_Reg mm[] = {{"append", metrics_append}, {"close", metrics_close}, {NULL, NULL}};
    luaL_newlib(L, mm);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, metrics_close), lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, metrics_close), lua_setfield(L, -2, "__close");
    lua_pop(L, 1);
    static const luaL_Reg funcs[] = {{"isatty", s_isatty}, {"time", s_time},     {"mkdir", s_mkdir},
                                     {"exists", s_exists}, {"write_atomic", s_write_atomic},
                                     {"metrics", s_metrics}, {NULL, NULL}};
    luaL_newlib(L, funcs);
    lua_setfield(L, -2, "sys");
    return 0;
}
