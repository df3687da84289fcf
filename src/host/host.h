/* The host's parts (src/host/): main.c reads the command line and runs scripts, -e chunks and
 * commands; run.c calls Lua code with a traceback and Ctrl-C armed and reports errors; repl.c
 * is the interactive loop (readline, continuation lines, history, printing results with the Lua
 * module mech.pp); complete.c is its tab completion. */
#ifndef MH_HOST_H
#define MH_HOST_H

#include <signal.h>
#include <stdbool.h>

#include <lua.h>

/* Set by the build (CMakeLists.txt); for a build without it: */
#ifndef MECHLAB_VERSION
#define MECHLAB_VERSION "unknown"
#endif
#ifndef MECHLAB_GIT
#define MECHLAB_GIT "unknown"
#endif

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

#endif
