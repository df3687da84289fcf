/* The host's parts (src/host/): main.c reads the command line and runs scripts, -e chunks and
 * commands; run.c calls Lua code with a traceback and Ctrl-C armed and reports errors; repl.c
 * is the interactive loop (readline, continuation lines, history, printing results with the Lua
 * module mech.pp); complete.c is its tab completion. */
#ifndef MH_HOST_H
#define MH_HOST_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include <lua.h>

#include "core/version.h"


extern const char *mh_progname;      /* "mechlab", or how the program was called */
extern lua_State *mh_state;          /* the one state, for the SIGINT handler */
extern volatile sig_atomic_t mh_tty_repl; /* the REPL runs on a terminal (readline) */

/* Calls the function below narg arguments with the traceback handler and Ctrl-C armed;
 * the previous SIGINT disposition is restored afterwards. */
int mh_docall(lua_State *L, int narg, int nres);
/* Prints the error on top of the stack (if any) to stderr and pops it; `prefixed` puts the
 * program's name first. Returns status. */
int mh_report(lua_State *L, int status, bool prefixed);

/* The interactive loop, until end of input. */
void mh_repl(lua_State *L);

/* Tab completion through readline for the state L; mh_complete_end frees what it kept. */
void mh_complete_start(lua_State *L);
void mh_complete_end(void);

/* Shared by the REPL and the Jupyter kernel (kernel.c). */
/* The environment cells run in: its top-level locals persist from one chunk to the next. */
void mh_make_env(lua_State *L);
void mh_use_env(lua_State *L); /* sets it as _ENV of the compiled chunk on top */
/* Compiles a cell as the REPL does (an expression returns its value; locals are kept). */
int mh_load_cell(lua_State *L, const char *code, size_t len, const char *name);
/* Whether the syntax error on top (status) only says that the chunk is unfinished. */
bool mh_incomplete(lua_State *L, int status);
/* Completion of the word `text` that starts at byte `start` of `line`: pushes a sorted list of
 * the full candidates. Returns whether the word is inside a string key (cache["...). */
int mh_completions(lua_State *L, const char *line, int start, const char *text);
extern const char mh_word_breaks[]; /* the characters that end a word to complete */
/* Pushes the value at path "a.b.c" of the REPL's environment, running no code; nil if none. */
void mh_lookup_path(lua_State *L, const char *path, size_t len);

/* The Jupyter kernel (kernel.c): runs until shutdown; returns the exit status. */
int mh_kernel(lua_State *L, const char *connection_file);
/* Writes the kernel spec (kernel_spec.c) under dir/share/jupyter/kernels/mechlab; 0 on success. */
int mh_install_kernel(lua_State *L, const char *prefix, bool user);

#endif
