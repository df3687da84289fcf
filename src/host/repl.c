/* The REPL: reads lines (readline on a terminal, plain lines otherwise), asks for more while a
 * chunk is unfinished, runs it and prints its results with mech.pp. Ctrl-C at the prompt
 * abandons the line; while code runs it interrupts it (run.c). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include <lauxlib.h>
#include <lua.h>

#include "host/host.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

enum { HISTORY_MAX = 1000 };
#define KEEP_LOCALS "__mechlab_keep_locals" /* see keep_locals */
#define VALUES "__mechlab_values"          /* returns its arguments (mh_load_cell) */
#define REPL_ENV "mechlab.repl_env"          /* registry key of E (complete.c completes its names too) */

/* ------------------------------------------------------------------------------------------ */
/* REPL: reading lines                                                                          */

typedef enum { READ_LINE, READ_EOF, READ_INTR } read_status;

static bool g_readline;             /* interactive terminal: readline; else plain lines */
static volatile sig_atomic_t g_prompt_sigint, g_winch;
static char *g_cb_line;
static bool g_cb_done;

static void on_sigint_prompt(int sig) { (void)sig; g_prompt_sigint = 1; }
static void on_sigwinch(int sig) { (void)sig; g_winch = 1; }

static void on_line(char *line) {
    g_cb_line = line;
    g_cb_done = true;
    rl_callback_handler_remove(); /* restores the terminal before the command runs */
}

/* Readline's callback interface with our own pselect loop: SIGINT only sets a flag (it stays
 * blocked except inside pselect, so no press is lost between the check and the wait) and the
 * loop abandons the line cleanly, which readline's own handler cannot do. */
static read_status read_readline(const char *prompt, char **out) {
    sigset_t block, old, wait_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGWINCH);
    sigprocmask(SIG_BLOCK, &block, &old);
    wait_mask = old;
    sigdelset(&wait_mask, SIGINT);
    sigdelset(&wait_mask, SIGWINCH);
    struct sigaction sa, saved_int, saved_winch;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_sigint_prompt;
    sigaction(SIGINT, &sa, &saved_int);
    sa.sa_handler = on_sigwinch;
    sigaction(SIGWINCH, &sa, &saved_winch);

    g_prompt_sigint = 0;
    g_cb_line = NULL;
    g_cb_done = false;
    rl_callback_handler_install(prompt, on_line);
    read_status st = READ_LINE;
    int fd = fileno(rl_instream);
    while (!g_cb_done) {
        fd_set fds;
        FD_ZERO(&fds);
        FD_SET(fd, &fds);
        int r = pselect(fd + 1, &fds, NULL, NULL, NULL, &wait_mask);
        if (g_winch) {
            g_winch = 0;
            rl_resize_terminal();
        }
        if (g_prompt_sigint) { /* Ctrl-C: drop the line, show ^C, start afresh */
            g_prompt_sigint = 0;
            rl_free_line_state();
            rl_callback_sigcleanup();
            rl_echo_signal_char(SIGINT);
            rl_replace_line("", 1);
            rl_callback_handler_remove();
            fputc('\n', rl_outstream);
            fflush(rl_outstream);
            st = READ_INTR;
            break;
        }
        if (r < 0) {
            if (errno == EINTR) continue;
            rl_callback_handler_remove();
            break; /* g_cb_line stays NULL: end of input */
        }
        if (r > 0) rl_callback_read_char();
    }
    sigaction(SIGINT, &saved_int, NULL);
    sigaction(SIGWINCH, &saved_winch, NULL);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (st == READ_INTR) return st;
    *out = g_cb_line;
    return g_cb_line ? READ_LINE : READ_EOF;
}

/* Piped or redirected input: plain lines, no prompt, so the output holds only results.
 * Ctrl-C still discards the pending chunk (the read is not restarted). */
static read_status read_plain(char **out) {
    struct sigaction sa, saved;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_sigint_prompt;
    g_prompt_sigint = 0;
    sigaction(SIGINT, &sa, &saved);
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n = getline(&buf, &cap, stdin);
    sigaction(SIGINT, &saved, NULL);
    if (n < 0) {
        free(buf);
        if (g_prompt_sigint) {
            clearerr(stdin);
            return READ_INTR;
        }
        return READ_EOF;
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = '\0';
    *out = buf;
    return READ_LINE;
}

/* History: kept in memory by readline, appended to the file line by line (so several sessions
 * and crashes lose nothing) and trimmed to HISTORY_MAX lines at start and exit. */
static char g_hist_path[PATH_MAX];
static bool g_hist_file;

static void history_start(void) {
    stifle_history(HISTORY_MAX);
    const char *env = getenv("MECHLAB_HISTORY");
    const char *home = getenv("HOME");
    int len;
    if (env)
        len = snprintf(g_hist_path, sizeof g_hist_path, "%s", env);
    else if (home && *home)
        len = snprintf(g_hist_path, sizeof g_hist_path, "%s/.mechlab_history", home);
    else
        return;
    if (len <= 0 || len >= (int)sizeof g_hist_path) return;
    int err = read_history(g_hist_path);
    if (err == ENOENT) err = write_history(g_hist_path); /* append_history needs the file */
    if (err == 0) err = history_truncate_file(g_hist_path, HISTORY_MAX);
    g_hist_file = err == 0;
}

static void history_keep(const char *line) {
    if (!g_readline || line[strspn(line, " \t")] == '\0') return;
    HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
    if (last && strcmp(last->line, line) == 0) return;
    add_history(line);
    if (g_hist_file && append_history(1, g_hist_path) != 0) g_hist_file = false;
}

static void history_end(void) {
    if (g_hist_file) history_truncate_file(g_hist_path, HISTORY_MAX);
}

static const char *prompt_string(lua_State *L, bool first) {
    lua_pushglobaltable(L);
    lua_pushstring(L, first ? "_PROMPT" : "_PROMPT2");
    lua_rawget(L, -2); /* raw: a strict-mode _G must not raise here */
    const char *p = lua_tostring(L, -1);
    lua_pop(L, 2); /* copied below while the global still holds it */
    static char buf[256];
    snprintf(buf, sizeof buf, "%s", p ? p : first ? "> " : ">> ");
    return buf;
}

static read_status read_line(lua_State *L, bool first, char **out) {
    if (g_readline) return read_readline(prompt_string(L, first), out);
    return read_plain(out);
}

/* ------------------------------------------------------------------------------------------ */
/* REPL: compiling, running and printing                                                        */

/* A syntax error at <eof> means the chunk is unfinished: ask for more lines (as lua.c). */
static bool incomplete(lua_State *L, int status) {
    if (status != LUA_ERRSYNTAX) return false;
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    static const char mark[] = "<eof>";
    return len >= sizeof mark - 1 && strcmp(msg + len - (sizeof mark - 1), mark) == 0;
}

/* Appends `line` to the malloc'd chunk *buf (with a newline between lines). */
static char *append_line(char *buf, const char *line) {
    size_t a = buf ? strlen(buf) : 0, b = strlen(line);
    char *r = realloc(buf, a + b + 2);
    if (!r) {
        free(buf);
        return NULL;
    }
    if (a) r[a++] = '\n';
    memcpy(r + a, line, b + 1);
    return r;
}

/* Reads one chunk. READ_LINE: a compiled function or a syntax error is on the stack, and
 * *status says which. Expressions are tried first as "return <line>" so they print. */
static read_status load_chunk(lua_State *L, int *status) {
    char *line;
    read_status rs = read_line(L, true, &line);
    if (rs != READ_LINE) return rs;
    history_keep(line);
    size_t len = strlen(line);
    char *ret = malloc(len + 8);
    if (ret) {
        memcpy(ret, "return ", 7);
        memcpy(ret + 7, line, len + 1);
        *status = luaL_loadbuffer(L, ret, len + 7, "=stdin");
        free(ret);
        if (*status == LUA_OK) {
            free(line);
            return READ_LINE;
        }
        lua_pop(L, 1);
    }
    char *chunk = append_line(NULL, line);
    free(line);
    for (;;) {
        if (!chunk) luaL_error(L, "not enough memory");
        *status = luaL_loadbuffer(L, chunk, strlen(chunk), "=stdin");
        if (*status == LUA_OK) { /* the same chunk keeping its top-level locals, when it compiles */
            char *kept = append_line(strdup(chunk), ";" KEEP_LOCALS "()");
            if (kept && luaL_loadbuffer(L, kept, strlen(kept), "=stdin") == LUA_OK) lua_remove(L, -2);
            else if (kept) lua_pop(L, 1);
            free(kept);
        }
        if (!incomplete(L, *status)) break;
        rs = read_line(L, false, &line);
        if (rs == READ_EOF) break; /* report the syntax error of the unfinished chunk */
        if (rs == READ_INTR) {
            lua_pop(L, 1);
            free(chunk);
            return READ_INTR;
        }
        lua_pop(L, 1);
        history_keep(line);
        chunk = append_line(chunk, line);
        free(line);
    }
    free(chunk);
    return READ_LINE;
}

/* Compiles one cell of the kernel (kernel.c) as the REPL compiles a chunk: an expression as
 * "return <code>" so that it has a value, else the statements keeping their top-level locals.
 * Pushes the function or the error message; returns the status. */
int mh_load_cell(lua_State *L, const char *code, size_t len, const char *name) {
    /* values(...) rather than a tail call, so that a traceback keeps the called function */
    lua_pushliteral(L, "return " VALUES "(");
    lua_pushlstring(L, code, len);
    lua_pushliteral(L, "\n)");
    lua_concat(L, 3);
    size_t rlen;
    const char *ret = lua_tolstring(L, -1, &rlen);
    int status = luaL_loadbuffer(L, ret, rlen, name);
    lua_remove(L, -2);
    if (status == LUA_OK) return status;
    lua_pop(L, 1);
    /* a notebook cell's last line, when it is an expression of its own, is the cell's value */
    size_t end = len;
    while (end > 0 && (code[end - 1] == '\n' || code[end - 1] == ' ' || code[end - 1] == '\t' || code[end - 1] == '\r')) end--;
    size_t last = end;
    while (last > 0 && code[last - 1] != '\n') last--;
    if (last > 0 && last < end) {
        lua_pushlstring(L, code, last);
        lua_pushliteral(L, ";" KEEP_LOCALS "() return " VALUES "("); /* on the last line's line */
        lua_pushlstring(L, code + last, end - last);
        lua_pushliteral(L, "\n)");
        lua_concat(L, 4);
        size_t n;
        const char *split = lua_tolstring(L, -1, &n);
        if (luaL_loadbuffer(L, split, n, name) == LUA_OK) {
            lua_remove(L, -2); /* the split cell's text */
            return LUA_OK;
        }
        lua_pop(L, 2);
    }
    status = luaL_loadbuffer(L, code, len, name);
    if (status != LUA_OK) return status;
    lua_pushlstring(L, code, len);
    lua_pushliteral(L, "\n;" KEEP_LOCALS "()");
    lua_concat(L, 2);
    size_t klen;
    const char *kept = lua_tolstring(L, -1, &klen);
    if (luaL_loadbuffer(L, kept, klen, name) == LUA_OK) {
        lua_remove(L, -2); /* the text */
        lua_remove(L, -2); /* the cell without its locals kept */
    } else {
        lua_pop(L, 2);
    }
    return status;
}

bool mh_incomplete(lua_State *L, int status) { return incomplete(L, status); }

static int g_formatter_ref = LUA_NOREF;

/* Locals that persist between lines: every chunk runs with _ENV = a table E whose __index and
 * __newindex are the globals, and a statement chunk ends with a call of KEEP_LOCALS, which copies
 * the chunk's top-level locals into E. So `local x = 1` on one line gives x on the next, a
 * global assignment still sets the global, and assigning a kept local updates E. */

static int keep_locals(lua_State *L) {
    lua_Debug ar;
    if (!lua_getstack(L, 1, &ar)) return 0;
    const char *name;
    for (int i = 1; (name = lua_getlocal(L, &ar, i)) != NULL; i++) {
        if (name[0] == '(') { /* temporaries and varargs */
            lua_pop(L, 1);
            continue;
        }
        lua_pushstring(L, name);
        lua_insert(L, -2);
        lua_rawset(L, lua_upvalueindex(1));
    }
    return 0;
}

static int values(lua_State *L) { return lua_gettop(L); }

void mh_make_env(lua_State *L) {
    lua_newtable(L);
    lua_createtable(L, 0, 2);
    lua_pushglobaltable(L);
    lua_setfield(L, -2, "__index");
    lua_pushglobaltable(L);
    lua_setfield(L, -2, "__newindex");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, keep_locals, 1);
    lua_setfield(L, -2, KEEP_LOCALS);
    lua_pushcfunction(L, values);
    lua_setfield(L, -2, VALUES);
    lua_setfield(L, LUA_REGISTRYINDEX, REPL_ENV);
}

/* Runs the compiled chunk on top with _ENV = E. */
void mh_use_env(lua_State *L) {
    lua_getfield(L, LUA_REGISTRYINDEX, REPL_ENV);
    if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
}

static void print_results(lua_State *L, int base) {
    int n = lua_gettop(L) - base;
    if (n <= 0) return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, g_formatter_ref);
    lua_insert(L, base + 1);
    int status = mh_docall(L, n, 1);
    if (status == LUA_OK) {
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        if (s) {
            fwrite(s, 1, len, stdout);
            fputc('\n', stdout);
        }
        lua_pop(L, 1);
    } else {
        lua_pushfstring(L, "error printing the result: %s", lua_tostring(L, -1));
        lua_remove(L, -2);
        mh_report(L, status, false);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* ------------------------------------------------------------------------------------------ */
/* REPL loop                                                                                    */

void mh_repl(lua_State *L) {
    g_readline = isatty(STDIN_FILENO);
    mh_tty_repl = g_readline && isatty(STDOUT_FILENO);
    if (g_readline) {
        rl_readline_name = "mechlab"; /* for $if mechlab in ~/.inputrc */
        rl_instream = stdin;
        /* prompts and editing belong on the terminal even when results are redirected */
        rl_outstream = isatty(STDOUT_FILENO) || !isatty(STDERR_FILENO) ? stdout : stderr;
        rl_catch_signals = 0;
        rl_catch_sigwinch = 0;
        mh_complete_start(L);
        history_start();
        fprintf(rl_outstream,
                "mechlab %s (git %s), %s. Tab completes, Ctrl-C interrupts, Ctrl-D exits.\n",
                MECHLAB_VERSION, mechlab_git, LUA_RELEASE);
    }
    /* results print through mech.pp (lua/mech/pp.lua) */
    lua_getglobal(L, "require");
    lua_pushstring(L, "mech.pp");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "format");
    lua_remove(L, -2);
    g_formatter_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    mh_make_env(L);
    lua_getglobal(L, "help"); /* help(x) as in Python's REPL, unless a script defined one */
    if (lua_isnil(L, -1)) {
        lua_getglobal(L, "mech");
        if (lua_istable(L, -1)) lua_getfield(L, -1, "help"), lua_setglobal(L, "help");
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    int base = lua_gettop(L);
    for (;;) {
        int status = LUA_OK;
        read_status rs = load_chunk(L, &status);
        if (rs == READ_EOF) break;
        if (rs == READ_INTR) continue;
        if (status == LUA_OK) {
            mh_use_env(L);
            status = mh_docall(L, 0, LUA_MULTRET);
        }
        if (status == LUA_OK)
            print_results(L, base);
        else
            mh_report(L, status, false);
        lua_settop(L, base);
        fflush(stdout);
    }
    if (g_readline) {
        history_end();
        mh_complete_end();
    }
    luaL_unref(L, LUA_REGISTRYINDEX, g_formatter_ref);
}

