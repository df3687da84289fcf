/* mech.sys: the operating-system services the Lua library needs (terminal detection, a
 * monotonic clock, directories, atomic file writes, the metrics CSV) and those of run records
 * and sweeps (run-directory locks, signals caught as a flag, child processes). The services
 * themselves are io/os.h's and io/csv.h's; this file checks arguments and converts results. */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/csv.h"
#include "io/os.h"
#include "lua/binding.h"
#include "ops/kernels.h"

#define MLL_METRICS_MT "mech.Metrics"

/* Raises the core's error with the "mech." its messages leave out ("sys.mkdir: ..."). */
static int sys_raise(lua_State *L) {
    const char *msg = ml_last_error();
    return luaL_error(L, "mech.%s", msg);
}

static int s_isatty(lua_State *L) {
    lua_pushboolean(L, isatty((int)luaL_optinteger(L, 1, 1)));
    return 1;
}

/* mkdir -p */
static int s_mkdir(lua_State *L) { return ml_mkdir_p(luaL_checkstring(L, 1)) ? sys_raise(L) : 0; }

/* text = mech.sys.read_file(path [, max_bytes]): the whole file, or nil and a message (as
 * io.open) when it cannot be opened, is not a regular file (a FIFO or a device is never read) or
 * holds more than max_bytes (default 2 GiB); a third result, true, says the file is there but was
 * refused. */
static int s_read_file(lua_State *L) {
    const char *fn = "mech.sys.read_file";
    size_t n;
    const char *path = luaL_checkstring(L, 1);
    lua_Integer max = mlL_optarg_int(L, 2, (lua_Integer)ML_READ_MAX, fn);
    if (max < 0 || (unsigned long long)max > ML_READ_MAX) return mlL_argerror(L, fn, 2, "a byte count in [0, 2^31]");
    bool unopened = false;
    char *text = ml_read_file_bounded(path, (size_t)max, &n, &unopened);
    if (!text) {
        luaL_pushfail(L);
        lua_pushfstring(L, "mech.%s", ml_last_error());
        lua_pushboolean(L, !unopened);
        return 3;
    }
    lua_pushlstring(L, text, n);
    free(text);
    return 1;
}

/* size = mech.sys.file_size(path): the size of a regular file (symlinks followed), else nil; it
 * opens nothing, so a FIFO cannot block it. */
static int s_file_size(lua_State *L) {
    long long size;
    if (!ml_regular_size(luaL_checkstring(L, 1), &size)) return luaL_pushfail(L), 1;
    lua_pushinteger(L, (lua_Integer)size);
    return 1;
}

/* path = mech.sys.realpath(path): the absolute path without symlinks, or nil and a message. */
static int s_realpath(lua_State *L) {
    char buf[PATH_MAX];
    if (ml_realpath(luaL_checkstring(L, 1), buf)) {
        luaL_pushfail(L);
        lua_pushfstring(L, "mech.%s", ml_last_error());
        return 2;
    }
    lua_pushstring(L, buf);
    return 1;
}

/* held = mech.sys.lock_held(path): whether another process holds the lock; creates and writes
 * nothing (io/os.h: ml_lock_probe). A symlink or a non-regular file there is an error. */
static int s_lock_held(lua_State *L) {
    int held = ml_lock_probe(luaL_checkstring(L, 1));
    if (held < 0) return sys_raise(L);
    lua_pushboolean(L, held);
    return 1;
}

/* mech.sys.redirect_output(path): this process's stdout and stderr appended to path (opened with
 * O_NOFOLLOW, created with O_EXCL, a regular file only). */
static int s_redirect_output(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    int fd = ml_open_write_in_place(path, O_WRONLY | O_APPEND, "sys.redirect_output");
    if (fd < 0) return sys_raise(L);
    fflush(stdout);
    fflush(stderr);
    int bad = dup2(fd, 1) < 0 || dup2(fd, 2) < 0;
    close(fd);
    if (bad) return luaL_error(L, "mech.sys.redirect_output: cannot redirect to '%s'", path);
    return 0;
}

/* f = mech.sys.atomic(path): a file written in pieces (f:write(s, ...)) and published whole by
 * f:commit() (io/csv.h: ml_atomic_open); dropped (f:abort(), a to-be-closed variable's end, the
 * collector) it leaves no temporary file and the target untouched. */
#define MLL_ATOMIC_MT "mech.AtomicFile"

static ml_atomic_file **check_atomic(lua_State *L) {
    ml_atomic_file **box = luaL_checkudata(L, 1, MLL_ATOMIC_MT);
    if (!*box) luaL_error(L, "mech.sys.atomic: the file was already committed or aborted");
    return box;
}

static int s_atomic(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    ml_atomic_file **box = lua_newuserdatauv(L, sizeof *box, 0);
    *box = NULL;
    luaL_setmetatable(L, MLL_ATOMIC_MT);
    *box = ml_atomic_open(path);
    if (!*box) return mlL_raise(L);
    return 1;
}

static int atomic_write(lua_State *L) {
    ml_atomic_file **box = check_atomic(L);
    int top = lua_gettop(L);
    for (int i = 2; i <= top; i++) {
        size_t n;
        const char *s = luaL_checklstring(L, i, &n);
        if (ml_atomic_write(*box, s, n)) return mlL_raise(L);
    }
    return 0;
}

static int atomic_commit(lua_State *L) {
    ml_atomic_file **box = check_atomic(L);
    ml_atomic_file *f = *box;
    *box = NULL; /* commit frees it, whatever happens */
    if (ml_atomic_commit(f)) return mlL_raise(L);
    return 0;
}

static int atomic_abort(lua_State *L) {
    ml_atomic_file **box = luaL_checkudata(L, 1, MLL_ATOMIC_MT);
    ml_atomic_abort(*box);
    *box = NULL;
    return 0;
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

/* lock = mech.sys.lock(path), or nil and the holder's "host pid" (io/os.h: ml_lock_try) */
#define MLL_LOCK_MT "mech.Lock"

static int s_lock(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    int *fd = lua_newuserdatauv(L, sizeof *fd, 0);
    luaL_setmetatable(L, MLL_LOCK_MT);
    char holder[256];
    *fd = ml_lock_try(path, holder, sizeof holder);
    if (*fd == -2) return sys_raise(L);
    if (*fd == -1) return lua_pushnil(L), lua_pushstring(L, holder), 2;
    return 1;
}

static int lock_release(lua_State *L) {
    int *fd = luaL_checkudata(L, 1, MLL_LOCK_MT);
    if (*fd >= 0) close(*fd); /* closing the last descriptor releases the flock */
    *fd = -1;
    return 0;
}

static int lock_held(lua_State *L) {
    int *fd = luaL_checkudata(L, 1, MLL_LOCK_MT);
    lua_pushboolean(L, *fd >= 0);
    return 1;
}

/* The signal caught since catch_signals() (its name), else nil. */
static int s_interrupted(lua_State *L) {
    const char *name = ml_signal_name(ml_signal_caught());
    if (name) lua_pushstring(L, name);
    else lua_pushnil(L);
    return 1;
}

/* pid = mech.sys.spawn({exe, arg1, ...}, log_path): runs a program with stdout and stderr
 * appended to log_path (inherited when nil). */
static int s_spawn(lua_State *L) {
    const char *fn = "mech.sys.spawn";
    mlL_checktable(L, 1, fn, 1);
    const char *log = luaL_optstring(L, 2, NULL);
    lua_Integer n = luaL_len(L, 1);
    if (n < 1 || n > 1000) return mlL_argfail(L, fn, 1, "expected a list of 1..1000 strings, got %I entries", n);
    char **argv = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n + 1), 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 1, i);
        if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
            return mlL_argfail(L, fn, 1, "item %I expected a string, got %s", i, luaL_typename(L, -1));
        argv[i - 1] = (char *)lua_tostring(L, -1);
        lua_pop(L, 1); /* the table keeps the string alive; numbers were converted in place */
    }
    argv[n] = NULL;
    long pid;
    if (ml_spawn(argv, log, &pid)) return sys_raise(L);
    lua_pushinteger(L, pid);
    return 1;
}

/* pid, code, signal = mech.sys.wait([pid [, block]]): reaps a child (any when pid is nil or -1);
 * nil when none has ended and block is false. code is the exit status, or nil and signal the
 * name or number of the signal that ended it. */
static int s_wait(lua_State *L) {
    int code, sig;
    long pid = ml_wait_child((long)luaL_optinteger(L, 1, -1), lua_isnoneornil(L, 2) || lua_toboolean(L, 2), &code, &sig);
    if (pid <= 0) return 0;
    lua_pushinteger(L, pid);
    if (!sig) return lua_pushinteger(L, code), 2;
    lua_pushnil(L);
    if (ml_signal_name(sig)) lua_pushstring(L, ml_signal_name(sig));
    else lua_pushinteger(L, sig);
    return 3;
}

static int s_kill(lua_State *L) {
    const char *fn = "mech.sys.kill";
    lua_Integer pid = mlL_checkint(L, 1, fn);
    if (pid <= 0 || pid > 0x7fffffff) return mlL_argerror(L, fn, 1, "a process id > 0");
    const char *name = luaL_optstring(L, 2, "SIGTERM");
    int sig = ml_signal_find(name);
    if (!sig) return mlL_argerror(L, fn, 2, "SIGINT, SIGTERM, SIGKILL, SIGSTOP or SIGCONT");
    lua_pushboolean(L, kill((pid_t)pid, sig) == 0);
    return 1;
}

static int s_getpid(lua_State *L) {
    lua_pushinteger(L, getpid());
    return 1;
}

static int s_hostname(lua_State *L) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    lua_pushstring(L, host);
    return 1;
}

static int s_cores(lua_State *L) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    lua_pushinteger(L, n > 0 ? n : 1);
    return 1;
}

/* Which clone of the kernels runs here: a result's last bits depend on it. */
static int s_vector_unit(lua_State *L) {
    lua_pushstring(L, mlk_vector_unit());
    return 1;
}

/* The running program (children of a sweep run the same mechlab). */
static int s_executable(lua_State *L) {
    char buf[4096];
    if (ml_executable(buf, sizeof buf)) return sys_raise(L);
    lua_pushstring(L, buf);
    return 1;
}

static int s_sleep(lua_State *L) {
    const char *fn = "mech.sys.sleep";
    lua_Number s = mlL_checknum(L, 1, fn);
    if (!(s >= 0 && s <= 86400)) return mlL_argerror(L, fn, 1, "seconds in [0, 86400]");
    ml_sleep(s);
    return 0;
}

/* Wall-clock time as ISO 8601 UTC, for manifests. */
static int s_utc(lua_State *L) {
    char buf[32];
    ml_utc_now(buf);
    lua_pushstring(L, buf);
    return 1;
}

/* mech.sys.closest(name, names) -> the name of the list `names` nearest to `name` (nil for an
 * empty list): the one did-you-mean of mechlab, synonyms included, for the Lua library. */
static int s_closest(lua_State *L) {
    const char *fn = "mech.sys.closest";
    const char *name = luaL_checkstring(L, 1);
    mlL_checktable(L, 2, fn, 2);
    lua_Integer n = luaL_len(L, 2);
    if (n < 0 || n > 1000000) return mlL_argfail(L, fn, 2, "expected a list of names, got %I entries", n);
    const char **names = lua_newuserdatauv(L, sizeof *names * (size_t)(n + 1), 0);
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_rawgeti(L, 2, i) != LUA_TSTRING)
            return mlL_argfail(L, fn, 2, "expected a list of strings, entry %I is a %s", i, luaL_typename(L, -1));
        names[i - 1] = lua_tostring(L, -1); /* kept alive by the table */
        lua_pop(L, 1);
    }
    names[n] = NULL;
    const char *best = ml_closest(name, names);
    if (best) lua_pushstring(L, best);
    else lua_pushnil(L);
    return 1;
}

int mlL_open_sys(lua_State *L) {
    static const luaL_Reg mm[] = {{"append", metrics_append}, {"close", metrics_close}, {NULL, NULL}};
    static const luaL_Reg lm[] = {{"release", lock_release}, {"held", lock_held}, {NULL, NULL}};
    static const luaL_Reg am[] = {{"write", atomic_write}, {"commit", atomic_commit}, {"abort", atomic_abort}, {NULL, NULL}};
    mlL_new_class(L, MLL_ATOMIC_MT, am, (const luaL_Reg[]){{"__gc", atomic_abort}, {"__close", atomic_abort}, {NULL, NULL}});
    mlL_new_class(L, MLL_METRICS_MT, mm, (const luaL_Reg[]){{"__gc", metrics_close}, {"__close", metrics_close}, {NULL, NULL}});
    mlL_new_class(L, MLL_LOCK_MT, lm, (const luaL_Reg[]){{"__gc", lock_release}, {"__close", lock_release}, {NULL, NULL}});
    static const luaL_Reg funcs[] = {
        {"isatty", s_isatty},   {"mkdir", s_mkdir},       {"read_file", s_read_file},
        {"write_atomic", s_write_atomic}, {"metrics", s_metrics}, {"lock", s_lock},
        {"interrupted", s_interrupted}, {"spawn", s_spawn}, {"wait", s_wait},
        {"kill", s_kill},       {"getpid", s_getpid},     {"hostname", s_hostname},
        {"cores", s_cores},     {"vector_unit", s_vector_unit}, {"executable", s_executable}, {"sleep", s_sleep},
        {"utc", s_utc},         {"file_size", s_file_size}, {"realpath", s_realpath},
        {"lock_held", s_lock_held}, {"closest", s_closest}, {"redirect_output", s_redirect_output}, {"atomic", s_atomic},
        {NULL, NULL}};
    /* a monotonic clock in seconds; whether a path exists; signals caught as a flag between
     * catch_signals() and release_signals(), which long loops poll with interrupted() at a safe
     * point (a training step's end) to save and stop */
    static const mlL_Decl decls[] = {{"mech.sys.time", "", 'n', MLL_FN(ml_monotonic)},
                                     {"mech.sys.exists", "s", 'b', MLL_FN(ml_path_exists)},
                                     {"mech.sys.catch_signals", "", 'v', MLL_FN(ml_signals_catch)},
                                     {"mech.sys.release_signals", "", 'v', MLL_FN(ml_signals_release)},
                                     {NULL, NULL, 0, NULL}};
    luaL_newlib(L, funcs);
    mlL_setdecls(L, -1, decls);
    lua_setfield(L, -2, "sys");
    return 0;
}
