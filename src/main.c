/* mechlab: the host executable. It runs a Lua script, -e chunks, or an interactive REPL, with
 * the `mech` module preloaded. The command line follows the standalone `lua` interpreter
 * (lua.c) so that scripts see the same `arg` table and `...`; the REPL adds readline editing,
 * history, completion through metatables and Ctrl-C that also stops long C loops. */
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

#include <cblas.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "core/error.h"
#include "core/threads.h"
#include "lua/binding.h"

#ifndef MECHLAB_VERSION
#define MECHLAB_VERSION "unknown"
#endif
#ifndef MECHLAB_GIT
#define MECHLAB_GIT "unknown"
#endif
#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

enum { EXIT_USAGE = 2, HISTORY_MAX = 1000 };

static const char *progname = "mechlab";

/* ------------------------------------------------------------------------------------------ */
/* Command line                                                                                 */

typedef struct {
    int argc;
    char **argv;
    int script; /* index of the script in argv, 0 if none (as lua.c, for the arg table) */
    bool interactive, has_exec, version, help;
} options;

static void print_usage(FILE *f) {
    fprintf(f,
            "usage: %s [options] [script [args...]]\n"
            "       %s sweep run|status|aggregate|exec ...   (docs/sweeps.md; 'sweep help')\n"
            "Runs a Lua 5.4 script with the mech module loaded, or starts the REPL.\n"
            "Options:\n"
            "  -e code        execute the string 'code' (may be repeated)\n"
            "  -l [g=]mod     require module 'mod' into global 'g' (default 'mod')\n"
            "  -i             enter the REPL after running the script and -e code\n"
            "  -v, --version  print version information and exit\n"
            "  -h, --help     print this help and exit\n"
            "  --             stop handling options\n"
            "  -              run standard input as the script (arguments may follow)\n"
            "With no script and no -e, the REPL starts when standard input is a terminal;\n"
            "otherwise standard input is run as a script.\n"
            "Environment:\n"
            "  MECHLAB_LUA_PATH  directory of mechlab's Lua library (prepended to package.path)\n"
            "  MECHLAB_HISTORY   REPL history file (default ~/.mechlab_history; empty: none)\n"
            "  LUA_PATH, LUA_CPATH  module search paths, as for lua\n"
            "Exit status: 0 on success, 1 on a Lua error, 2 on a usage error.\n",
            progname, progname);
}

static void print_version(void) {
    /* openblas_get_config() already begins with "OpenBLAS" in current releases. */
    const char *cfg = openblas_get_config();
    if (!cfg) cfg = "(unknown)";
    size_t n = strlen(cfg);
    while (n > 0 && (cfg[n - 1] == ' ' || cfg[n - 1] == '\n')) n--;
    printf("mechlab %s (git %s), %s, %s%.*s\n", MECHLAB_VERSION, MECHLAB_GIT, LUA_RELEASE,
           strncmp(cfg, "OpenBLAS", 8) == 0 ? "" : "OpenBLAS ", (int)n, cfg);
}

static int usage_error(const char *fmt, const char *what) {
    fprintf(stderr, "%s: ", progname);
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\nusage: %s [options] [script [args...]]\n"
                    "Run '%s --help' for the options.\n", progname, progname);
    return -1;
}

/* Scans the options before the script. Returns 0, or -1 after printing a usage error. */
static int collect_args(options *o) {
    o->script = 0;
    for (int i = 1; i < o->argc; i++) {
        const char *a = o->argv[i];
        if (a[0] != '-' || a[1] == '\0') { /* the script, or "-" for stdin */
            o->script = i;
            return 0;
        }
        if (strcmp(a, "--") == 0) {
            o->script = i + 1 < o->argc ? i + 1 : 0;
            return 0;
        }
        if (strcmp(a, "-v") == 0 || strcmp(a, "--version") == 0) {
            o->version = true;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = true;
        } else if (strcmp(a, "-i") == 0) {
            o->interactive = true;
        } else if (a[1] == 'e' || a[1] == 'l') {
            if (a[1] == 'e') o->has_exec = true;
            /* "-e code" or "-ecode", as lua accepts both */
            if (a[2] == '\0' && ++i >= o->argc) return usage_error("'%s' needs an argument", a);
        } else {
            return usage_error("unrecognized option '%s'", a);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Running code, errors and Ctrl-C                                                              */

static lua_State *g_L; /* the one state, for the signal handler and the completer */
static volatile sig_atomic_t g_presses;
static volatile sig_atomic_t g_tty_repl; /* the REPL runs on a terminal (readline) */

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
    if (g_L) lua_sethook(g_L, stop_hook, LUA_MASKCOUNT, 1);
    g_presses++;
    if (g_presses == 1 && g_tty_repl) {
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

/* Calls the function below narg arguments with the traceback handler and Ctrl-C armed;
 * the previous SIGINT disposition is restored afterwards. */
static int docall(lua_State *L, int narg, int nres) {
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

/* Prints the error on top of the stack (if any) to stderr and pops it. */
static int report(lua_State *L, int status, bool prefixed) {
    if (status == LUA_OK) return status;
    const char *msg = lua_tostring(L, -1);
    if (msg == NULL) msg = "(error object is not a string)";
    /* The frames of the host itself say nothing to the user. */
    size_t n = strlen(msg);
    static const char tail[] = "\n\t[C]: in ?";
    while (n >= sizeof tail - 1 && memcmp(msg + n - (sizeof tail - 1), tail, sizeof tail - 1) == 0)
        n -= sizeof tail - 1;
    fflush(stdout);
    fprintf(stderr, "%s%s%.*s\n", prefixed ? progname : "", prefixed ? ": " : "", (int)n, msg);
    fflush(stderr);
    lua_pop(L, 1);
    return status;
}

static int dochunk(lua_State *L, int status) {
    if (status == LUA_OK) status = docall(L, 0, 0);
    return report(L, status, true);
}

static int dostring(lua_State *L, const char *code, const char *name) {
    return dochunk(L, luaL_loadbuffer(L, code, strlen(code), name));
}

/* -l [g=]mod: global g = require(mod). */
static int dolibrary(lua_State *L, const char *spec) {
    const char *eq = strchr(spec, '=');
    const char *mod = eq ? eq + 1 : spec;
    lua_getglobal(L, "require");
    lua_pushstring(L, mod);
    int status = docall(L, 1, 1);
    if (status == LUA_OK) {
        if (eq)
            lua_pushlstring(L, spec, (size_t)(eq - spec));
        else
            lua_pushstring(L, spec);
        lua_insert(L, -2);
        lua_setglobal(L, lua_tostring(L, -2));
        lua_pop(L, 1);
    }
    return report(L, status, true);
}

/* The global `arg`: arg[0] the script, arg[1..] its arguments, negative indices the
 * interpreter and its options (exactly as lua.c builds it). */
static void create_arg_table(lua_State *L, const options *o) {
    lua_createtable(L, o->argc - o->script - 1 > 0 ? o->argc - o->script - 1 : 0, o->script + 1);
    for (int i = 0; i < o->argc; i++) {
        lua_pushstring(L, o->argv[i]);
        lua_rawseti(L, -2, i - o->script);
    }
    lua_setglobal(L, "arg");
}

/* Runs -e and -l in command-line order. Returns false on the first error. */
static bool run_args(lua_State *L, const options *o) {
    int end = o->script > 0 ? o->script : o->argc;
    for (int i = 1; i < end; i++) {
        const char *a = o->argv[i];
        if (a[0] != '-' || (a[1] != 'e' && a[1] != 'l') || strcmp(a, "--") == 0) continue;
        const char *val = a[2] ? a + 2 : o->argv[++i];
        int status = a[1] == 'e' ? dostring(L, val, "=(command line)") : dolibrary(L, val);
        if (status != LUA_OK) return false;
    }
    return true;
}

/* Commands of the host ("mechlab sweep run ..."): each is the Lua module mech.<name>, whose
 * main(...) gets the remaining arguments. A file of the same name in the working directory wins. */
static const char *const commands[] = {"sweep", NULL};

static int load_command(lua_State *L, const char *name) {
    for (const char *const *c = commands; *c; c++)
        if (strcmp(name, *c) == 0 && access(name, F_OK) != 0) {
            lua_pushfstring(L, "return require('mech.%s').main(...)", name);
            int status = luaL_loadbuffer(L, lua_tostring(L, -1), lua_rawlen(L, -1), name);
            lua_remove(L, -2);
            return status;
        }
    return -1;
}

static int run_script(lua_State *L, const options *o) {
    const char *fname = o->argv[o->script];
    /* "-" is stdin unless it came after "--" (then it is a file named "-") */
    if (strcmp(fname, "-") == 0 && strcmp(o->argv[o->script - 1], "--") != 0) fname = NULL;
    int status = fname ? load_command(L, fname) : -1;
    if (status == -1) status = luaL_loadfile(L, fname);
    if (status == LUA_OK) {
        int n = o->argc - o->script - 1;
        luaL_checkstack(L, n + 3, "too many arguments to script");
        for (int i = 0; i < n; i++) lua_pushstring(L, o->argv[o->script + 1 + i]);
        status = docall(L, n, 0);
    }
    return report(L, status, true);
}

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

/* Formats REPL results: tostring for everything (so tensors show their summary) except plain
 * tables, which are shown compactly with a bounded depth and length. */
static const char formatter_src[] =
    "local maxdepth, maxitems = 2, 30\n"
    "local kw = {}\n"
    "for w in ('and break do else elseif end false for function goto if in local nil not or '\n"
    "  .. 'repeat return then true until while'):gmatch('%a+') do kw[w] = true end\n"
    "local function quote(s) return (('%q'):format(s):gsub('\\\\\\n', '\\\\n')) end\n"
    "local function plain(v)\n"
    "  if type(v) ~= 'table' then return false end\n"
    "  local mt = getmetatable(v)\n"
    "  return not (type(mt) == 'table' and rawget(mt, '__tostring'))\n"
    "end\n"
    "local function keyorder(a, b)\n"
    "  local ta, tb = type(a), type(b)\n"
    "  if ta ~= tb then return ta < tb end\n"
    "  if ta == 'number' or ta == 'string' then return a < b end\n"
    "  return tostring(a) < tostring(b)\n"
    "end\n"
    "local fmt\n"
    "local function fmttable(t, depth, seen)\n"
    "  if next(t) == nil then return '{}' end\n"
    "  if seen[t] then return '<cycle>' end\n"
    "  if depth >= maxdepth then return '{...}' end\n"
    "  seen[t] = true\n"
    "  local parts, len = {}, rawlen(t)\n"
    "  for i = 1, math.min(len, maxitems) do parts[#parts + 1] = fmt(rawget(t, i), depth + 1, seen) end\n"
    "  local keys = {}\n"
    "  for k in next, t do\n"
    "    if not (math.type(k) == 'integer' and k >= 1 and k <= len) then keys[#keys + 1] = k end\n"
    "  end\n"
    "  table.sort(keys, keyorder)\n"
    "  for i = 1, math.min(#keys, maxitems - #parts) do\n"
    "    local k = keys[i]\n"
    "    local ks = (type(k) == 'string' and k:match('^[%a_][%w_]*$') and not kw[k]) and k\n"
    "      or '[' .. fmt(k, depth + 1, seen) .. ']'\n"
    "    parts[#parts + 1] = ks .. ' = ' .. fmt(rawget(t, k), depth + 1, seen)\n"
    "  end\n"
    "  local rest = len + #keys - #parts\n"
    "  if rest > 0 then parts[#parts + 1] = '... (' .. rest .. ' more)' end\n"
    "  seen[t] = nil\n"
    "  return '{' .. table.concat(parts, ', ') .. '}'\n"
    "end\n"
    "fmt = function(v, depth, seen)\n"
    "  if plain(v) then return fmttable(v, depth, seen) end\n"
    "  if depth == 0 then return tostring(v) end\n"
    "  if type(v) == 'string' then return quote(v) end\n"
    "  local s = tostring(v)\n"
    "  local first = s:match('^[^\\n]*')\n"
    "  return #first < #s and first .. ' ...' or s\n"
    "end\n"
    "return function(...)\n"
    "  local out = {}\n"
    "  for i = 1, select('#', ...) do out[i] = fmt((select(i, ...)), 0, {}) end\n"
    "  return table.concat(out, '\\t')\n"
    "end\n";

static int g_formatter_ref = LUA_NOREF;

static void print_results(lua_State *L, int base) {
    int n = lua_gettop(L) - base;
    if (n <= 0) return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, g_formatter_ref);
    lua_insert(L, base + 1);
    int status = docall(L, n, 1);
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
        report(L, status, false);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* REPL: tab completion                                                                         */

static char **g_cands;
static size_t g_ncands, g_next_cand, g_cand_prefix;

static void free_cands(void) {
    for (size_t i = 0; i < g_ncands; i++) free(g_cands[i]);
    free(g_cands);
    g_cands = NULL;
    g_ncands = g_next_cand = 0;
}

static bool is_ident(const char *s, size_t n) {
    if (n == 0 || !(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return false;
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            return false;
    }
    return true;
}

/* Replaces the value on top with its field `name`, running no metamethods: raw lookups that
 * follow __index only where it is a table. Missing fields give nil. */
static void safe_field(lua_State *L, const char *name, size_t len) {
    for (int depth = 0; depth < 16 && !lua_isnil(L, -1); depth++) {
        if (lua_type(L, -1) == LUA_TTABLE) {
            lua_pushlstring(L, name, len);
            if (lua_rawget(L, -2) != LUA_TNIL) {
                lua_remove(L, -2);
                return;
            }
            lua_pop(L, 1);
        }
        if (!lua_getmetatable(L, -1)) break;
        lua_pushliteral(L, "__index");
        lua_rawget(L, -2);
        lua_remove(L, -2);
        lua_remove(L, -2); /* __index value replaces the value */
    }
    lua_pop(L, 1);
    lua_pushnil(L);
}

/* Adds "<prefix><key><suffix>" to the result set (table at `res`) for each string key of the
 * table on top that is an identifier starting with `part`. Names beginning with "__" are
 * metamethods and internals: shown only when asked for. */
static void add_keys(lua_State *L, int res, const char *prefix, size_t plen, const char *part,
                     bool methods_only) {
    size_t partlen = strlen(part);
    bool hidden_ok = part[0] == '_' && part[1] == '_';
    int t = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, t)) {
        size_t klen;
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &klen) : NULL;
        bool func = lua_type(L, -1) == LUA_TFUNCTION;
        if (k && is_ident(k, klen) && klen >= partlen && memcmp(k, part, partlen) == 0 &&
            (hidden_ok || strncmp(k, "__", 2) != 0) && (!methods_only || func)) {
            lua_pushlstring(L, prefix, plen);
            lua_pushvalue(L, -3);
            lua_pushstring(L, func ? "(" : "");
            lua_concat(L, 3);
            lua_pushboolean(L, 1);
            lua_rawset(L, res);
        }
        lua_pop(L, 1);
    }
}

/* Adds the fields of the value on top and what its metatable offers: the __index chain of
 * tables, the metatable's own functions (classes whose __index is a function dispatching to
 * the metatable), a __methods table, and for tensors the binding's method table. Pops it. */
static void add_members(lua_State *L, int res, const char *prefix, size_t plen, const char *part,
                        bool methods_only) {
    for (int depth = 0; depth < 16; depth++) {
        if (lua_type(L, -1) == LUA_TTABLE) add_keys(L, res, prefix, plen, part, methods_only);
        if (!lua_getmetatable(L, -1)) break;
        lua_remove(L, -2);
        lua_pushliteral(L, "__index");
        if (lua_rawget(L, -2) == LUA_TTABLE) {
            lua_remove(L, -2);
            continue; /* follow the __index table */
        }
        lua_pop(L, 1);
        add_keys(L, res, prefix, plen, part, true);
        lua_pushliteral(L, "__methods");
        if (lua_rawget(L, -2) == LUA_TTABLE) add_keys(L, res, prefix, plen, part, methods_only);
        lua_pop(L, 1);
        lua_pushliteral(L, "__name");
        lua_rawget(L, -2);
        const char *name = lua_tostring(L, -1);
        bool tensor = name && strcmp(name, MLL_TENSOR_MT) == 0;
        lua_pop(L, 1);
        if (tensor) {
            mlL_tensor_methods(L);
            add_keys(L, res, prefix, plen, part, methods_only);
            lua_pop(L, 1);
        }
        break;
    }
    lua_pop(L, 1);
}

/* The last '.' or ':' in s, or NULL. */
static const char *last_sep(const char *s) {
    const char *sep = NULL;
    for (; *s; s++)
        if (*s == '.' || *s == ':') sep = s;
    return sep;
}

/* Protected: collects the completions of the word at index 1 into a set table (returned).
 * "a.b.c" completes fields of a.b, "a.b:c" methods of a.b, a bare word globals and keywords. */
static int collect_completions(lua_State *L) {
    static const char *const keywords[] = {
        "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
        "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while"};
    const char *text = lua_tostring(L, 1);
    lua_newtable(L);
    int res = lua_gettop(L);
    const char *sep = last_sep(text);
    if (!sep) {
        lua_pushglobaltable(L);
        add_members(L, res, "", 0, text, false);
        for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++) {
            if (strncmp(keywords[i], text, strlen(text)) != 0) continue;
            lua_pushboolean(L, 1);
            lua_setfield(L, res, keywords[i]);
        }
        return 1;
    }
    /* "a:b.c" is not a path, and ".x" follows something we cannot see, like "f()" */
    if (sep == text || memchr(text, ':', (size_t)(sep - text))) return 1;
    lua_pushglobaltable(L);
    for (const char *p = text; p < sep;) {
        const char *e = memchr(p, '.', (size_t)(sep - p));
        if (!e) e = sep;
        if (!is_ident(p, (size_t)(e - p))) return 1;
        safe_field(L, p, (size_t)(e - p));
        p = e + 1;
    }
    if (lua_isnil(L, -1)) return 1;
    add_members(L, res, text, (size_t)(sep - text + 1), sep + 1, *sep == ':');
    lua_settop(L, res);
    return 1;
}

static char *next_completion(const char *text, int state) {
    (void)text;
    if (state == 0) g_next_cand = 0;
    return g_next_cand < g_ncands ? strdup(g_cands[g_next_cand++]) : NULL;
}

static char **complete(const char *text, int start, int end) {
    (void)start;
    (void)end;
    rl_attempted_completion_over = 1; /* never fall back to file names */
    rl_completion_append_character = '\0';
    free_cands();
    lua_State *L = g_L;
    int top = lua_gettop(L);
    lua_pushcfunction(L, collect_completions);
    lua_pushstring(L, text);
    if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
        size_t n = 0;
        lua_pushnil(L);
        while (lua_next(L, -2)) {
            n++;
            lua_pop(L, 1);
        }
        g_cands = calloc(n ? n : 1, sizeof *g_cands);
        lua_pushnil(L);
        while (g_cands && lua_next(L, -2)) {
            char *s = strdup(lua_tostring(L, -2));
            if (s) g_cands[g_ncands++] = s;
            lua_pop(L, 1);
        }
    }
    lua_settop(L, top);
    const char *sep = last_sep(text);
    g_cand_prefix = sep ? (size_t)(sep - text + 1) : 0; /* for display_matches */
    if (g_ncands == 0) return NULL;
    return rl_completion_matches(text, next_completion);
}

/* Lists candidates by their last component ("plot" rather than "mech.plot"). */
static void display_matches(char **matches, int n, int maxlen) {
    char **shown = malloc((size_t)(n + 2) * sizeof *shown);
    if (!shown) return;
    int width = 0;
    shown[0] = matches[0];
    for (int i = 1; i <= n; i++) {
        size_t len = strlen(matches[i]);
        shown[i] = matches[i] + (len >= g_cand_prefix ? g_cand_prefix : len);
        if ((int)strlen(shown[i]) > width) width = (int)strlen(shown[i]);
    }
    shown[n + 1] = NULL;
    (void)maxlen;
    rl_display_match_list(shown, n, width);
    free(shown);
    rl_forced_update_display();
}

/* ------------------------------------------------------------------------------------------ */
/* REPL loop                                                                                    */

static void repl(lua_State *L) {
    g_readline = isatty(STDIN_FILENO);
    g_tty_repl = g_readline && isatty(STDOUT_FILENO);
    if (g_readline) {
        rl_readline_name = "mechlab"; /* for $if mechlab in ~/.inputrc */
        rl_instream = stdin;
        /* prompts and editing belong on the terminal even when results are redirected */
        rl_outstream = isatty(STDOUT_FILENO) || !isatty(STDERR_FILENO) ? stdout : stderr;
        rl_catch_signals = 0;
        rl_catch_sigwinch = 0;
        rl_attempted_completion_function = complete;
        rl_completion_display_matches_hook = display_matches;
        rl_completer_word_break_characters = " \t\n\"\\'`><=;+-*/%^~#&|,{}()[]";
        history_start();
        fprintf(rl_outstream,
                "mechlab %s (git %s), %s. Tab completes, Ctrl-C interrupts, Ctrl-D exits.\n",
                MECHLAB_VERSION, MECHLAB_GIT, LUA_RELEASE);
    }
    if (luaL_loadstring(L, formatter_src) != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK)
        lua_error(L); /* cannot happen short of memory exhaustion */
    g_formatter_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    int base = lua_gettop(L);
    for (;;) {
        int status = LUA_OK;
        read_status rs = load_chunk(L, &status);
        if (rs == READ_EOF) break;
        if (rs == READ_INTR) continue;
        if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET);
        if (status == LUA_OK)
            print_results(L, base);
        else
            report(L, status, false);
        lua_settop(L, base);
        fflush(stdout);
    }
    if (g_readline) {
        history_end();
        free_cands();
    }
    luaL_unref(L, LUA_REGISTRYINDEX, g_formatter_ref);
}

/* ------------------------------------------------------------------------------------------ */
/* main                                                                                         */

/* Everything that touches Lua runs here, in protected mode, so even a memory error during
 * start-up is reported rather than aborting. Returns a boolean: success. */
static int pmain(lua_State *L) {
    options *o = lua_touserdata(L, 1);
    luaL_checkversion(L);
    luaL_openlibs(L);
    /* global mech and require "mech"; it also puts mechlab's lua/ first on package.path */
    luaL_requiref(L, "mech", luaopen_mech, 1);
    lua_pop(L, 1);
    create_arg_table(L, o);
    if (!run_args(L, o)) return 0;
    if (o->script > 0 && run_script(L, o) != LUA_OK) return 0;
    if (o->interactive) {
        repl(L);
    } else if (o->script == 0 && !o->has_exec) {
        if (isatty(STDIN_FILENO))
            repl(L);
        else if (dochunk(L, luaL_loadfile(L, NULL)) != LUA_OK)
            return 0;
    }
    lua_pushboolean(L, 1);
    return 1;
}

int main(int argc, char **argv) {
    ml_threads_exec_passive(argv); /* workers that sleep when idle (core/threads.h) */
    if (argc > 0 && argv[0][0]) {
        const char *slash = strrchr(argv[0], '/');
        progname = slash ? slash + 1 : argv[0];
    }
    options o = {.argc = argc, .argv = argv};
    if (collect_args(&o) != 0) return EXIT_USAGE;
    if (o.help) {
        print_usage(stdout);
        return 0;
    }
    if (o.version) {
        print_version();
        return 0;
    }
    lua_State *L = luaL_newstate();
    if (!L) {
        fprintf(stderr, "%s: cannot create the Lua state: not enough memory\n", progname);
        return 1;
    }
    g_L = L;
    lua_pushcfunction(L, pmain);
    lua_pushlightuserdata(L, &o);
    int status = lua_pcall(L, 1, 1, 0);
    bool ok = status == LUA_OK && lua_toboolean(L, -1);
    report(L, status, true);
    g_L = NULL;
    lua_close(L);
    return ok ? 0 : 1;
}
