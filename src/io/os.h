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
 * be opened or read, is not a regular file (a FIFO or device is never read: it is opened with
 * O_NONBLOCK and checked with fstat) or holds more than max bytes (*unopened, which may be NULL:
 * whether it could not be opened at all, a missing file say). ml_read_file bounds it by ML_READ_MAX. */
#define ML_READ_MAX ((size_t)1 << 31)
char *ml_read_file_bounded(const char *path, size_t max, size_t *n, bool *unopened);
char *ml_read_file(const char *path, size_t *n);
/* Whether path (followed) is a regular file, and its size; opens nothing. */
bool ml_regular_size(const char *path, long long *size);
/* A data file a record names (docs/security.md), whole and malloc'd (*n bytes, NUL-terminated), or
 * NULL and an error without a function name (the caller says whose file): with base (a directory,
 * or NULL) a relative path is taken from base and the file's real path (symlinks resolved) must
 * lie below base's; either way it must be a regular file (never a FIFO, device or directory:
 * opened without blocking, checked on the descriptor) of at most max bytes, unchanged while read. */
char *ml_read_data_file(const char *path, const char *base, long long max, size_t *n);
/* realpath(3) into buf (PATH_MAX bytes). */
ml_status ml_realpath(const char *path, char *buf);
/* A file to write in place (a lock, an appended log): opened with O_NOFOLLOW, created with
 * O_EXCL when missing, never blocking, kept only if it is a regular file. mode: O_RDWR or
 * O_WRONLY, with O_APPEND where wanted. Returns the descriptor, or -1 and an error naming fn. */
int ml_open_write_in_place(const char *path, int mode, const char *fn);

/* An exclusive flock on path (created if missing, never through a symlink: ml_open_write_in_place),
 * released by the kernel when the holder dies;
 * the file then says "host pid". Returns the descriptor (close it to release), or -1 when another
 * process holds it (holder gets its "host pid", trimmed), or -2 and an error. */
int ml_lock_try(const char *path, char *holder, size_t cap);
/* Whether another process holds path's lock, without creating or writing it: 1 held, 0 free or
 * missing, -2 and an error when it is a symlink or not a regular file. */
int ml_lock_probe(const char *path);

/* Between catch and release (nested calls count; the outermost owns the handlers), SIGINT and
 * SIGTERM only set a flag: ml_signal_caught() returns that signal, else 0. */
void ml_signals_catch(void);
void ml_signals_release(void);
int ml_signal_caught(void);
/* "SIGINT", "SIGTERM", "SIGKILL", "SIGSTOP", "SIGCONT" <-> their numbers; NULL / 0 for others. */
const char *ml_signal_name(int sig);
int ml_signal_find(const char *name);

/* Runs argv[0] (a path; argv ends with NULL) with stdout and stderr appended to log (inherited when
 * NULL; opened by ml_open_write_in_place); *pid gets the child's id. */
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
