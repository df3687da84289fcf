/* Operating-system services of the Lua library's mech.sys (POSIX): directories, whole-file reads,
 * run-directory locks, SIGINT/SIGTERM caught as a flag, child processes, clocks, and the
 * executable's own path. Errors name the function as mech.sys spells it without "mech."
 * ("sys.mkdir: cannot create 'a/b': Permission denied"); the binding adds the prefix. */
#ifndef ML_OS_H
#define ML_OS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

/* mkdir -p: creates path and its missing parents; fails if path is not a directory after. */
ml_status ml_mkdir_p(const char *path);
/* Whether path names a file or directory (stat succeeds); ml_is_file: a regular file. */
bool ml_path_exists(const char *path);
bool ml_is_file(const char *path);
/* The whole file, NUL-terminated (*n without the NUL), malloc'd; NULL and an error when it cannot
 * be opened or read. */
char *ml_read_file(const char *path, size_t *n);

/* An exclusive flock on path (created if missing), released by the kernel when the holder dies;
 * the file then says "host pid". Returns the descriptor (close it to release), or -1 when another
 * process holds it (holder gets its "host pid", trimmed), or -2 and an error. */
int ml_lock_try(const char *path, char *holder, size_t cap);

/* Between catch and release (nested calls count; the outermost owns the handlers), SIGINT and
 * SIGTERM only set a flag: ml_signal_caught() returns that signal, else 0. */
void ml_signals_catch(void);
void ml_signals_release(void);
int ml_signal_caught(void);
/* "SIGINT", "SIGTERM", "SIGKILL", "SIGSTOP", "SIGCONT" <-> their numbers; NULL / 0 for others. */
const char *ml_signal_name(int sig);
int ml_signal_find(const char *name);

/* Runs argv[0] (a path; argv ends with NULL) with stdout and stderr appended to log (inherited when
 * NULL); *pid gets the child's id. */
ml_status ml_spawn(char *const argv[], const char *log, long *pid);
/* Reaps a child (any when want is -1): returns its pid with *code its exit status (or -1) and *sig
 * the signal that ended it (or 0); 0 when none has ended and !block, -1 when there is no child or a
 * caught signal interrupted the wait. */
long ml_wait_child(long want, bool block, int *code, int *sig);
/* Sleeps s seconds (0 <= s), ending early when a caught signal arrives. */
void ml_sleep(double s);
/* Seconds on a monotonic clock; the wall clock as ISO 8601 UTC ("2026-01-02T03:04:05Z"). */
double ml_monotonic(void);
void ml_utc_now(char buf[32]);
/* This process's executable (/proc/self/exe) into buf. */
ml_status ml_executable(char *buf, size_t cap);

#endif
