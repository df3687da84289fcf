/* mech.sys: the operating-system services the Lua library needs (terminal detection, a
 * monotonic clock, directories, atomic file writes, the metrics CSV) and those of run records
 * and sweeps (run-directory locks, signals caught as a flag, child processes). */
#define _DEFAULT_SOURCE /* flock */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* text = mech.sys.read_file(path): the whole file, or nil and a message (as io.open) */
static int s_read_file(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    FILE *f = fopen(path, "rb");
    if (!f) {
        luaL_pushfail(L);
        lua_pushfstring(L, "mech.sys.read_file: cannot open '%s': %s", path, strerror(errno));
        return 2;
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    size_t n;
    do {
        n = fread(luaL_prepbuffer(&b), 1, LUAL_BUFFERSIZE, f);
        luaL_addsize(&b, n);
    } while (n == LUAL_BUFFERSIZE);
    int failed = ferror(f), err = errno;
    fclose(f);
    luaL_pushresult(&b);
    if (failed) {
        luaL_pushfail(L);
        lua_pushfstring(L, "mech.sys.read_file: cannot read '%s': %s", path, strerror(err));
        return 2;
    }
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


/* ------------------------------------------------------------------------------------------ */
/* Locks: lock = mech.sys.lock(path) or nil, holder. flock on the file, so the kernel releases it
 * when the holder dies (no stale claims after a kill); the file says "host pid" for messages. */

#define MLL_LOCK_MT "mech.Lock"

static int s_lock(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    int *fd = lua_newuserdatauv(L, sizeof *fd, 0);
    *fd = -1;
    luaL_setmetatable(L, MLL_LOCK_MT);
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (f < 0) return luaL_error(L, "mech.sys.lock: cannot open '%s': %s", path, strerror(errno));
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        char holder[256];
        ssize_t n = pread(f, holder, sizeof holder - 1, 0);
        close(f);
        while (n > 0 && (holder[n - 1] == '\n' || holder[n - 1] == ' ')) n--;
        lua_pushnil(L);
        lua_pushlstring(L, holder, n > 0 ? (size_t)n : 0);
        return 2;
    }
    *fd = f;
    char host[128] = "?", text[200];
    gethostname(host, sizeof host - 1);
    int n = snprintf(text, sizeof text, "%s %ld\n", host, (long)getpid());
    if (ftruncate(f, 0) != 0 || pwrite(f, text, (size_t)n, 0) != n)
        return luaL_error(L, "mech.sys.lock: cannot write '%s': %s", path, strerror(errno));
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

/* ------------------------------------------------------------------------------------------ */
/* Signals as a flag: between catch_signals() and release_signals(), SIGINT and SIGTERM only set
 * a flag that long loops poll at a safe point (a training step's end) to save and stop. */

static volatile sig_atomic_t g_caught;
static struct sigaction g_saved_int, g_saved_term;
static int g_catching;

static void on_signal(int sig) { g_caught = sig; }

static int s_catch_signals(lua_State *L) {
    if (g_catching++ > 0) return 0; /* nested: the outermost call owns the handlers */
    g_caught = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &g_saved_int);
    sigaction(SIGTERM, &sa, &g_saved_term);
    return 0;
}

static int s_release_signals(lua_State *L) {
    if (g_catching == 0 || --g_catching > 0) return 0;
    sigaction(SIGINT, &g_saved_int, NULL);
    sigaction(SIGTERM, &g_saved_term, NULL);
    return 0;
}

static int s_interrupted(lua_State *L) {
    if (g_caught == SIGINT) lua_pushliteral(L, "SIGINT");
    else if (g_caught == SIGTERM) lua_pushliteral(L, "SIGTERM");
    else lua_pushnil(L);
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Processes: the local sweep executor's workers. */

static const struct { const char *name; int sig; } signals[] = {
    {"SIGINT", SIGINT}, {"SIGTERM", SIGTERM}, {"SIGKILL", SIGKILL}, {"SIGSTOP", SIGSTOP}, {"SIGCONT", SIGCONT}};

static int check_signal(lua_State *L, int arg) {
    const char *name = luaL_optstring(L, arg, "SIGTERM");
    for (size_t i = 0; i < sizeof signals / sizeof *signals; i++)
        if (strcmp(name, signals[i].name) == 0) return signals[i].sig;
    return luaL_error(L, "mech.sys.kill: argument %d expected SIGINT, SIGTERM, SIGKILL, SIGSTOP or SIGCONT, got '%s'",
                      arg, name);
}

/* pid = mech.sys.spawn({exe, arg1, ...}, log_path): runs a program with stdout and stderr
 * appended to log_path (inherited when nil). */
static int s_spawn(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    const char *log = luaL_optstring(L, 2, NULL);
    lua_Integer n = luaL_len(L, 1);
    if (n < 1 || n > 1000) return luaL_error(L, "mech.sys.spawn: argument 1 expected a list of 1..1000 strings, got %d", (int)n);
    char **argv = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n + 1), 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, 1, i);
        if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
            return luaL_error(L, "mech.sys.spawn: argument 1 item %d expected a string, got %s", (int)i, luaL_typename(L, -1));
        argv[i - 1] = (char *)lua_tostring(L, -1);
        lua_pop(L, 1); /* the table keeps the string alive; numbers were converted in place */
    }
    argv[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (log) {
        posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0666);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    extern char **environ;
    pid_t pid;
    int err = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err) return luaL_error(L, "mech.sys.spawn: cannot run '%s': %s", argv[0], strerror(err));
    lua_pushinteger(L, pid);
    return 1;
}

/* pid, code, signal = mech.sys.wait([pid [, block]]): reaps a child (any when pid is nil or -1);
 * nil when none has ended and block is false. code is the exit status, or nil and signal the
 * name or number of the signal that ended it. */
static int s_wait(lua_State *L) {
    pid_t want = (pid_t)luaL_optinteger(L, 1, -1);
    int block = lua_isnoneornil(L, 2) ? 1 : lua_toboolean(L, 2);
    int status;
    pid_t pid;
    do pid = waitpid(want, &status, block ? 0 : WNOHANG);
    while (pid < 0 && errno == EINTR && !g_caught);
    if (pid <= 0) return 0;
    lua_pushinteger(L, pid);
    if (WIFEXITED(status)) {
        lua_pushinteger(L, WEXITSTATUS(status));
        return 2;
    }
    lua_pushnil(L);
    int sig = WTERMSIG(status);
    for (size_t i = 0; i < sizeof signals / sizeof *signals; i++)
        if (signals[i].sig == sig) return lua_pushstring(L, signals[i].name), 3;
    lua_pushinteger(L, sig);
    return 3;
}

static int s_kill(lua_State *L) {
    lua_Integer pid = luaL_checkinteger(L, 1);
    if (pid <= 0 || pid > 0x7fffffff) return luaL_error(L, "mech.sys.kill: argument 1 expected a process id > 0, got %d", (int)pid);
    lua_pushboolean(L, kill((pid_t)pid, check_signal(L, 2)) == 0);
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

/* The running program (children of a sweep run the same mechlab). */
static int s_executable(lua_State *L) {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return luaL_error(L, "mech.sys.executable: cannot read /proc/self/exe: %s", strerror(errno));
    lua_pushlstring(L, buf, (size_t)n);
    return 1;
}

static int s_sleep(lua_State *L) {
    lua_Number s = luaL_checknumber(L, 1);
    if (!(s >= 0 && s <= 86400)) return luaL_error(L, "mech.sys.sleep: argument 1 expected seconds in [0, 86400], got %f", (double)s);
    struct timespec ts = {(time_t)s, (long)((s - (lua_Number)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !g_caught) {}
    return 0;
}

/* Wall-clock time as ISO 8601 UTC, for manifests. */
static int s_utc(lua_State *L) {
    time_t t = time(NULL);
    struct tm tm;
    char buf[32];
    gmtime_r(&t, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    lua_pushstring(L, buf);
    return 1;
}


/* A userdata class: its methods as __index, and `close` run by the collector and by a to-be-closed variable. */
static void new_class(lua_State *L, const char *mt, const luaL_Reg *methods, lua_CFunction close) {
    luaL_newmetatable(L, mt);
    lua_newtable(L);
    luaL_setfuncs(L, methods, 0);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, close), lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, close), lua_setfield(L, -2, "__close");
    lua_pop(L, 1);
}

int mlL_open_sys(lua_State *L) {
    static const luaL_Reg mm[] = {{"append", metrics_append}, {"close", metrics_close}, {NULL, NULL}};
    static const luaL_Reg lm[] = {{"release", lock_release}, {"held", lock_held}, {NULL, NULL}};
    new_class(L, MLL_METRICS_MT, mm, metrics_close);
    new_class(L, MLL_LOCK_MT, lm, lock_release);
    static const luaL_Reg funcs[] = {
        {"isatty", s_isatty},   {"time", s_time},         {"mkdir", s_mkdir},
        {"exists", s_exists},   {"read_file", s_read_file}, {"write_atomic", s_write_atomic},
        {"metrics", s_metrics},
        {"lock", s_lock},       {"catch_signals", s_catch_signals}, {"release_signals", s_release_signals},
        {"interrupted", s_interrupted}, {"spawn", s_spawn}, {"wait", s_wait},
        {"kill", s_kill},       {"getpid", s_getpid},     {"hostname", s_hostname},
        {"cores", s_cores},     {"executable", s_executable}, {"sleep", s_sleep},
        {"utc", s_utc},         {NULL, NULL}};
    luaL_newlib(L, funcs);
    lua_setfield(L, -2, "sys");
    return 0;
}
