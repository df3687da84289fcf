/* mechlab: the host executable. It runs a Lua script, -e chunks, or an interactive REPL, with
 * the `mech` module preloaded. The command line follows the standalone `lua` interpreter
 * (lua.c) so that scripts see the same `arg` table and `...`; the REPL adds readline editing,
 * history, completion through metatables and Ctrl-C that also stops long C loops. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "host/host.h"
#include "host/process.h"
#include "lua/binding.h"

enum { EXIT_USAGE = 2 };

/* ------------------------------------------------------------------------------------------ */
/* Command line                                                                                 */

typedef struct {
    int argc;
    char **argv;
    int script; /* index of the script in argv, 0 if none (as lua.c, for the arg table) */
    bool interactive, has_exec, version, help;
    const char *kernel;          /* --kernel CONNECTION_FILE: the Jupyter kernel (kernel.c) */
    bool install_kernel, user;   /* --install-kernel [--user | --prefix P] (kernel_spec.c) */
    const char *prefix;
} options;

static void print_usage(FILE *f) {
    fprintf(f,
            "usage: %s [options] [script [args...]]\n"
            "       %s sweep run|status|aggregate|exec ...   (docs/sweeps.md; 'sweep --help')\n"
            "Runs a Lua 5.4 script with the mech module loaded, or starts the REPL.\n"
            "Options:\n"
            "  -e code        execute the string 'code' (may be repeated)\n"
            "  -l [g=]mod     require module 'mod' into global 'g' (default 'mod')\n"
            "  -i             enter the REPL after running the script and -e code\n"
            "  -v, --version  print version information and exit\n"
            "  -h, --help     print this help and exit\n"
            "  --kernel FILE  serve Jupyter on the connection file FILE (docs/notebook.md)\n"
            "  --install-kernel [--user | --prefix P]  register the Jupyter kernel spec\n"
            "                 (default prefix /usr/local)\n"
            "  --             stop handling options\n"
            "  -              run standard input as the script (arguments may follow)\n"
            "With no script and no -e, the REPL starts when standard input is a terminal;\n"
            "otherwise standard input is run as a script.\n"
            "Environment:\n"
            "  MECHLAB_LUA_PATH  directory of mechlab's Lua library (prepended to package.path)\n"
            "  MECHLAB_HISTORY   REPL history file (default ~/.mechlab_history; empty: none)\n"
            "  LUA_PATH, LUA_CPATH  module search paths, as for lua\n"
            "Exit status: 0 on success, 1 on a Lua error, 2 on a usage error.\n",
            mh_progname, mh_progname);
}

static void print_version(void) {
    /* openblas_get_config() already begins with "OpenBLAS" in current releases. */
    const char *cfg = openblas_get_config();
    if (!cfg) cfg = "(unknown)";
    size_t n = strlen(cfg);
    while (n > 0 && (cfg[n - 1] == ' ' || cfg[n - 1] == '\n')) n--;
    printf("mechlab %s (git %s), %s, %s%.*s\n", MECHLAB_VERSION, mechlab_git, LUA_RELEASE,
           strncmp(cfg, "OpenBLAS", 8) == 0 ? "" : "OpenBLAS ", (int)n, cfg);
}

static int usage_error(const char *fmt, const char *what) {
    fprintf(stderr, "%s: ", mh_progname);
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\nusage: %s [options] [script [args...]]\n"
                    "Run '%s --help' for the options.\n", mh_progname, mh_progname);
    return -1;
}

/* The Jupyter modes take the whole command line: --kernel FILE, --install-kernel [--user |
 * --prefix P]. Returns 1 when argv is one of them, 0 when not, -1 after a usage error. */
static int collect_kernel_args(options *o) {
    if (o->argc < 2) return 0;
    if (strcmp(o->argv[1], "--kernel") == 0) {
        if (o->argc != 3) return usage_error("'%s' needs one argument, the connection file", o->argv[1]);
        o->kernel = o->argv[2];
        return 1;
    }
    if (strcmp(o->argv[1], "--install-kernel") != 0) return 0;
    o->install_kernel = true;
    for (int i = 2; i < o->argc; i++) {
        if (strcmp(o->argv[i], "--user") == 0 && !o->prefix) o->user = true;
        else if (strcmp(o->argv[i], "--prefix") == 0 && i + 1 < o->argc && !o->user && !o->prefix) o->prefix = o->argv[++i];
        else return usage_error("--install-kernel takes --user or --prefix P, not '%s'", o->argv[i]);
    }
    return 1;
}

/* Scans the options before the script. Returns 0, or -1 after printing a usage error. */
static int collect_args(options *o) {
    o->script = 0;
    int k = collect_kernel_args(o);
    if (k != 0) return k < 0 ? -1 : 0;
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

static int dochunk(lua_State *L, int status) {
    if (status == LUA_OK) status = mh_docall(L, 0, 0);
    return mh_report(L, status, true);
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
    int status = mh_docall(L, 1, 1);
    if (status == LUA_OK) {
        if (eq)
            lua_pushlstring(L, spec, (size_t)(eq - spec));
        else
            lua_pushstring(L, spec);
        lua_insert(L, -2);
        lua_setglobal(L, lua_tostring(L, -2));
        lua_pop(L, 1);
    }
    return mh_report(L, status, true);
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

/* A script that names no file here is looked up in mechlab's home (mech.find), so the
 * experiments of an installation run from any directory. Returns fname or, found there, buf. */
static const char *find_script(lua_State *L, const char *fname, char *buf, size_t size) {
    if (access(fname, F_OK) == 0) return fname;
    lua_getglobal(L, "mech");
    lua_getfield(L, -1, "find");
    lua_pushstring(L, fname);
    if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING &&
        (size_t)snprintf(buf, size, "%s", lua_tostring(L, -1)) < size)
        fname = buf;
    lua_pop(L, 2);
    return fname;
}

/* Inserts `entries` (";"-terminated) into package.path after mechlab's own library (its first two
 * entries, put there by luaopen_mech), so that nothing shadows the library. */
static void insert_module_path(lua_State *L, const char *entries) {
    lua_getglobal(L, "package");
    if (lua_istable(L, -1) && lua_getfield(L, -1, "path") == LUA_TSTRING) {
        const char *path = lua_tostring(L, -1);
        const char *cut = strchr(path, ';');
        cut = cut ? strchr(cut + 1, ';') : NULL;
        size_t own = cut ? (size_t)(cut - path) + 1 : 0;
        lua_pushlstring(L, path, own);
        lua_pushstring(L, entries);
        lua_pushstring(L, path + own);
        lua_concat(L, 3);
        lua_setfield(L, -3, "path");
    }
    lua_pop(L, 2);
}

/* Where `require` looks, in this order (docs/repl.md): mechlab's library, the script's directory,
 * the working directory, mech.home (so `require "experiments.own_mixer"` works from anywhere and
 * from an installation), then LUA_PATH (or Lua's default). This sets the last three; run_script
 * adds the script's directory. */
static void set_module_path(lua_State *L) {
    lua_getglobal(L, "mech");
    lua_getfield(L, -1, "home");
    const char *home = lua_tostring(L, -1);
    if (home) lua_pushfstring(L, "./?.lua;./?/init.lua;%s/?.lua;%s/?/init.lua;", home, home);
    else lua_pushliteral(L, "./?.lua;./?/init.lua;");
    insert_module_path(L, lua_tostring(L, -1));
    lua_pop(L, 3);
}

static void add_script_dir(lua_State *L, const char *script) {
    const char *slash = strrchr(script, '/');
    if (!slash) return; /* the working directory, already there */
    const char *dir = lua_pushlstring(L, script, (size_t)(slash - script));
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", dir, dir);
    insert_module_path(L, lua_tostring(L, -1));
    lua_pop(L, 2);
}

static int run_script(lua_State *L, const options *o) {
    const char *fname = o->argv[o->script];
    /* "-" is stdin unless it came after "--" (then it is a file named "-") */
    if (strcmp(fname, "-") == 0 && strcmp(o->argv[o->script - 1], "--") != 0) fname = NULL;
    int status = fname ? load_command(L, fname) : -1;
    char found[4096];
    if (status == -1) {
        if (fname) fname = find_script(L, fname, found, sizeof found);
        if (fname) add_script_dir(L, fname);
        status = luaL_loadfile(L, fname);
    }
    if (status == LUA_OK) {
        int n = o->argc - o->script - 1;
        luaL_checkstack(L, n + 3, "too many arguments to script");
        for (int i = 0; i < n; i++) lua_pushstring(L, o->argv[o->script + 1 + i]);
        status = mh_docall(L, n, 0);
    }
    return mh_report(L, status, true);
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
    /* mech.display (lua/mech/display.lua): notebook display, a file and its path elsewhere */
    lua_getglobal(L, "require");
    lua_pushliteral(L, "mech.display");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "display");
    lua_remove(L, -2);
    lua_setfield(L, -2, "display");
    lua_pop(L, 1);
    set_module_path(L);
    if (o->kernel || o->install_kernel) {
        lua_pushboolean(L, (o->kernel ? mh_kernel(L, o->kernel) : mh_install_kernel(L, o->prefix, o->user)) == 0);
        return 1;
    }
    create_arg_table(L, o);
    if (!run_args(L, o)) return 0;
    if (o->script > 0 && run_script(L, o) != LUA_OK) return 0;
    if (o->interactive) {
        mh_repl(L);
    } else if (o->script == 0 && !o->has_exec) {
        if (isatty(STDIN_FILENO))
            mh_repl(L);
        else if (dochunk(L, luaL_loadfile(L, NULL)) != LUA_OK)
            return 0;
    }
    lua_pushboolean(L, 1);
    return 1;
}

int main(int argc, char **argv) {
    mh_exec_passive(argv); /* workers that sleep when idle (host/process.h) */
    mh_tune_malloc();
    if (argc > 0 && argv[0][0]) {
        const char *slash = strrchr(argv[0], '/');
        mh_progname = slash ? slash + 1 : argv[0];
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
        fprintf(stderr, "%s: cannot create the Lua state: not enough memory\n", mh_progname);
        return 1;
    }
    mh_state = L;
    lua_pushcfunction(L, pmain);
    lua_pushlightuserdata(L, &o);
    int status = lua_pcall(L, 1, 1, 0);
    bool ok = status == LUA_OK && lua_toboolean(L, -1);
    mh_report(L, status, true);
    mh_state = NULL;
    lua_close(L);
    return ok ? 0 : 1;
}
