/* Running Lua code from the host: a traceback on errors, and Ctrl-C that stops Lua code and the
 * library's long C loops (ml_interrupt_flag, core/error.h). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

#include "core/error.h"
#include "host/host.h"

const char *mh_progname = "mechlab";
lua_State *mh_state;
volatile sig_atomic_t mh_tty_repl;

static volatile sig_atomic_t g_presses;

/* Count hook installed by the SIGINT handler: stops Lua code at the next instruction. After
 * one press it fires once, so pcall and <close> handlers written in Lua still run; after a
 * second press it stays armed, so a loop that catches errors cannot swallow it (docall
 * removes it). */
static void stop_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    if (g_presses < 2) lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted");
}

/* SIGINT while code runs: C loops see ml_interrupt_flag, Lua code the hook (lua_sethook is
 * async-signal-safe). The second press makes the hook persistent; a third gives up on
 * cooperative stopping and kills the process, for C code that never polls the flag. */
static void on_sigint_running(int sig) {
    ml_interrupt_flag = 1;
    /* Count hook only: a call hook would also fire on the message handler and replace a C
     * function's own "fn: interrupted" error. */
    if (mh_state) lua_sethook(mh_state, stop_hook, LUA_MASKCOUNT, 1);
    g_presses++;
    if (g_presses == 1 && mh_tty_repl) {
        /* the terminal echoed "^C"; put the error message on a line of its own */
        ssize_t r = write(STDOUT_FILENO, "\n", 1);
        (void)r;
    } else if (g_presses == 2) {
        static const char msg[] = "\nmechlab: interrupting harder; one more Ctrl-C quits\n";
        ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)r;
    } else if (g_presses >= 3) {
        signal(sig, SIG_DFL);
        raise(sig); /* delivered once this handler returns */
    }
}

static void clear_interrupt(lua_State *L) {
    if (lua_gethook(L) == stop_hook) lua_sethook(L, NULL, 0, 0);
    ml_interrupt_flag = 0;
    g_presses = 0;
}

/* Message handler: appends a traceback to string errors (lua.c's msghandler). */
static int msghandler(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) {
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int mh_docall(lua_State *L, int narg, int nres) {
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    clear_interrupt(L);
    struct sigaction sa, saved;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint_running;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocking read returns so the hook can fire */
    sigaction(SIGINT, &sa, &saved);
    int status = lua_pcall(L, narg, nres, base);
    sigaction(SIGINT, &saved, NULL);
    clear_interrupt(L);
    lua_remove(L, base);
    return status;
}

int mh_report(lua_State *L, int status, bool prefixed) {
    if (status == LUA_OK) return status;
    const char *msg = lua_tostring(L, -1);
    if (msg == NULL) msg = "(error object is not a string)";
    /* The frames of the host itself say nothing to the user. */
    size_t n = strlen(msg);
    static const char tail[] = "\n\t[C]: in ?";
    while (n >= sizeof tail - 1 && memcmp(msg + n - (sizeof tail - 1), tail, sizeof tail - 1) == 0)
        n -= sizeof tail - 1;
    fflush(stdout);
    fprintf(stderr, "%s%s%.*s\n", prefixed ? mh_progname : "", prefixed ? ": " : "", (int)n, msg);
    fflush(stderr);
    lua_pop(L, 1);
    return status;
}

