/* Operating-system services of mech.sys (io/os.h). */
#define _DEFAULT_SOURCE /* flock */
#include "io/os.h"

#include <errno.h>
#include <limits.h>
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

ml_status ml_mkdir_p(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return ml_fail(ML_ERR_ARG, "sys.mkdir: argument 1 expected a path of 1..4095 bytes");
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        char c = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return ml_fail(ML_ERR_IO, "sys.mkdir: cannot create '%s': %s", buf, strerror(errno));
        buf[i] = c;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return ml_fail(ML_ERR_IO, "sys.mkdir: '%s' is not a directory", path);
    return ML_OK;
}

bool ml_path_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

bool ml_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Opens path for reading without blocking on a FIFO or device (O_NONBLOCK), then keeps it only
 * when fstat says it is a regular file of at most max bytes. Returns the descriptor, -1 when it
 * cannot be opened (errno set, no error recorded), -2 with an error when it is not a regular
 * file or too large. */
static int open_regular(const char *path, size_t max, int extra_flags, const char *fn, struct stat *st) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | extra_flags);
    if (fd < 0) return -1;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        ml_fail(ML_ERR_IO, "%s: cannot read '%s': not a regular file", fn, path);
        return -2;
    }
    if ((unsigned long long)st->st_size > (unsigned long long)max) {
        close(fd);
        ml_fail(ML_ERR_IO, "%s: cannot read '%s': it has %lld bytes, more than the bound of %zu", fn, path,
                (long long)st->st_size, max);
        return -2;
    }
    return fd;
}

char *ml_read_file_bounded(const char *path, size_t max, size_t *n, bool *unopened) {
    struct stat st;
    if (unopened) *unopened = false;
    int fd = open_regular(path, max, 0, "sys.read_file", &st);
    if (fd == -1) {
        if (unopened) *unopened = true;
        ml_fail(ML_ERR_IO, "sys.read_file: cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    if (fd < 0) return NULL;
    /* the size fstat gave, plus one byte to notice a file that grew past the bound meanwhile */
    size_t cap = (size_t)st.st_size + 1, len = 0;
    char *s = malloc(cap + 1);
    if (!s) {
        close(fd);
        ml_fail(ML_ERR_MEM, "sys.read_file: cannot read '%s': out of memory", path);
        return NULL;
    }
    for (;;) {
        if (len == cap) {
            if (cap > max) break;
            size_t grown = cap * 2 > max + 1 ? max + 1 : cap * 2;
            char *t = realloc(s, grown + 1);
            if (!t) {
                free(s);
                close(fd);
                ml_fail(ML_ERR_MEM, "sys.read_file: cannot read '%s': out of memory", path);
                return NULL;
            }
            s = t, cap = grown;
        }
        ssize_t got = read(fd, s + len, cap - len);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int err = errno;
            free(s);
            close(fd);
            ml_fail(ML_ERR_IO, "sys.read_file: cannot read '%s': %s", path, strerror(err));
            return NULL;
        }
        if (got == 0) break;
        len += (size_t)got;
    }
    close(fd);
    if (len > max) {
        free(s);
        ml_fail(ML_ERR_IO, "sys.read_file: cannot read '%s': it grew past the bound of %zu bytes", path, max);
        return NULL;
    }
    s[len] = 0;
    *n = len;
    return s;
}

char *ml_read_file(const char *path, size_t *n) { return ml_read_file_bounded(path, ML_READ_MAX, n, NULL); }

bool ml_regular_size(const char *path, long long *size) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
    *size = (long long)st.st_size;
    return true;
}

/* The real path of the data file `path` (from base, and below it, when base is given) into real. */
static ml_status data_path(const char *path, const char *base, char real[PATH_MAX], char full[PATH_MAX]) {
    char real_base[PATH_MAX];
    if (base && path[0] != '/') {
        if (snprintf(full, PATH_MAX, "%s/%s", base, path) >= PATH_MAX)
            return ml_fail(ML_ERR_IO, "the path '%s' is too long", path);
    } else {
        snprintf(full, PATH_MAX, "%s", path);
    }
    if (!realpath(full, real)) return ml_fail(ML_ERR_IO, "cannot read %s: %s", full, strerror(errno));
    if (!base) return ML_OK;
    if (!realpath(base, real_base)) return ml_fail(ML_ERR_IO, "cannot read the directory %s: %s", base, strerror(errno));
    size_t n = strlen(real_base);
    if (!strncmp(real, real_base, n) && (real[n] == '/' || (n == 1 && real_base[0] == '/'))) return ML_OK;
    return ml_fail(ML_ERR_IO, "'%s' is not a file below %s (it is %s; a record may only name a file in its own directory)",
                   path, base, real);
}

char *ml_read_data_file(const char *path, const char *base, long long max, size_t *n) {
    char full[PATH_MAX], real[PATH_MAX];
    if (data_path(path, base, real, full) != ML_OK) return NULL;
    int fd = open(real, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return ml_fail(ML_ERR_IO, "cannot read %s: %s", full, strerror(errno)), NULL;
    struct stat st;
    char *out = NULL;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode))
        ml_fail(ML_ERR_IO, "%s is not a regular file (a FIFO, device or directory is never read as data)", full);
    else if (st.st_size > max)
        ml_fail(ML_ERR_IO, "%s holds %lld bytes, more than the %lld a data file may hold", full, (long long)st.st_size, max);
    else if (!(out = malloc((size_t)st.st_size + 2)))
        ml_fail(ML_ERR_MEM, "cannot read %s: out of memory", full);
    size_t got = 0;
    for (; out;) { /* a file that grows while read stops one byte past its size */
        ssize_t r = read(fd, out + got, (size_t)st.st_size + 1 - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
        if (got > (size_t)st.st_size) break;
    }
    close(fd);
    if (out && got != (size_t)st.st_size) {
        free(out), out = NULL;
        ml_fail(ML_ERR_IO, "%s changed while it was read", full);
    }
    if (out) out[got] = 0, *n = got;
    return out;
}

ml_status ml_realpath(const char *path, char *buf) {
    if (!realpath(path, buf)) return ml_fail(ML_ERR_IO, "sys.realpath: '%s': %s", path, strerror(errno));
    return ML_OK;
}

/* Opens (creating it if missing) a file to write in place: never through a symlink (O_NOFOLLOW),
 * created only as a new file (O_EXCL) so that a link put there meanwhile is refused, never
 * blocking on a FIFO, and kept only when it is a regular file. mode: O_RDWR or O_WRONLY, with
 * O_APPEND where wanted. */
int ml_open_write_in_place(const char *path, int mode, const char *fn) {
    int fd = open(path, mode | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) fd = open(path, mode | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        return ml_fail(ML_ERR_IO, "%s: cannot open '%s': %s", fn, path,
                       err == ELOOP ? "it is a symbolic link" : strerror(err)),
               -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ml_fail(ML_ERR_IO, "%s: '%s' is not a regular file", fn, path), -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int ml_lock_try(const char *path, char *holder, size_t cap) {
    int f = ml_open_write_in_place(path, O_RDWR, "sys.lock");
    if (f < 0) return -2;
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        ssize_t n = pread(f, holder, cap - 1, 0);
        close(f);
        while (n > 0 && (holder[n - 1] == '\n' || holder[n - 1] == ' ')) n--;
        holder[n > 0 ? n : 0] = 0;
        return -1;
    }
    char host[128] = "?", text[200];
    gethostname(host, sizeof host - 1);
    int n = snprintf(text, sizeof text, "%s %ld\n", host, (long)getpid());
    if (ftruncate(f, 0) != 0 || pwrite(f, text, (size_t)n, 0) != n) {
        ml_fail(ML_ERR_IO, "sys.lock: cannot write '%s': %s", path, strerror(errno));
        close(f);
        return -2;
    }
    return f;
}

int ml_lock_probe(const char *path) {
    struct stat st;
    int f = open_regular(path, ML_READ_MAX, O_NOFOLLOW, "sys.lock_held", &st);
    if (f == -1 && (errno == ENOENT || errno == ENOTDIR)) return 0;
    if (f == -1)
        return ml_fail(ML_ERR_IO, "sys.lock_held: cannot open '%s': %s", path,
                       errno == ELOOP ? "it is a symbolic link" : strerror(errno)),
               -2;
    if (f < 0) return -2;
    /* a shared lock is refused while a holder has its exclusive one; the file is not written */
    int held = flock(f, LOCK_SH | LOCK_NB) != 0;
    close(f);
    return held;
}

static volatile sig_atomic_t g_caught;
static struct sigaction g_saved_int, g_saved_term;
static int g_catching;

static void on_signal(int sig) { g_caught = sig; }

void ml_signals_catch(void) {
    if (g_catching++ > 0) return;
    g_caught = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &g_saved_int);
    sigaction(SIGTERM, &sa, &g_saved_term);
}

void ml_signals_release(void) {
    if (g_catching == 0 || --g_catching > 0) return;
    sigaction(SIGINT, &g_saved_int, NULL);
    sigaction(SIGTERM, &g_saved_term, NULL);
}

int ml_signal_caught(void) { return g_caught; }

static const struct {
    const char *name;
    int sig;
} signals[] = {{"SIGINT", SIGINT}, {"SIGTERM", SIGTERM}, {"SIGKILL", SIGKILL}, {"SIGSTOP", SIGSTOP}, {"SIGCONT", SIGCONT}};

const char *ml_signal_name(int sig) {
    for (size_t i = 0; i < sizeof signals / sizeof *signals; i++)
        if (signals[i].sig == sig) return signals[i].name;
    return NULL;
}

int ml_signal_find(const char *name) {
    for (size_t i = 0; i < sizeof signals / sizeof *signals; i++)
        if (strcmp(name, signals[i].name) == 0) return signals[i].sig;
    return 0;
}

ml_status ml_spawn(char *const argv[], const char *log, long *pid) {
    int logfd = -1;
    if (log && (logfd = ml_open_write_in_place(log, O_WRONLY | O_APPEND, "sys.spawn")) < 0) return ML_ERR_IO;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (log) {
        posix_spawn_file_actions_adddup2(&fa, logfd, 1);
        posix_spawn_file_actions_adddup2(&fa, logfd, 2);
    }
    extern char **environ;
    pid_t p;
    int err = posix_spawn(&p, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (logfd >= 0) close(logfd);
    if (err) return ml_fail(ML_ERR_IO, "sys.spawn: cannot run '%s': %s", argv[0], strerror(err));
    *pid = p;
    return ML_OK;
}

long ml_wait_child(long want, bool block, int *code, int *sig) {
    int status;
    pid_t pid;
    do pid = waitpid((pid_t)want, &status, block ? 0 : WNOHANG);
    while (pid < 0 && errno == EINTR && !g_caught);
    if (pid <= 0) return pid;
    *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    *sig = WIFEXITED(status) ? 0 : WTERMSIG(status);
    return pid;
}

void ml_sleep(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !g_caught) {}
}

double ml_monotonic(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ml_utc_now(char buf[32]) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

ml_status ml_executable(char *buf, size_t cap) {
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0) return ml_fail(ML_ERR_IO, "sys.executable: cannot read /proc/self/exe: %s", strerror(errno));
    buf[n] = 0;
    return ML_OK;
}
