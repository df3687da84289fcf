/* Operating-system services of mech.sys (io/os.h). */
#define _DEFAULT_SOURCE /* flock */
#include "io/os.h"

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

char *ml_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        ml_fail(ML_ERR_IO, "sys.read_file: cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0, got;
    char *s = malloc(cap);
    /* grow by doubling: pipes and /proc files have no size to ask for */
    while (s && (got = fread(s + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        char *t = len + 1 == cap ? realloc(s, cap *= 2) : s;
        if (!t) free(s);
        s = t;
    }
    int failed = ferror(f), err = errno;
    fclose(f);
    if (!s || failed) {
        free(s);
        ml_fail(s ? ML_ERR_IO : ML_ERR_MEM, "sys.read_file: cannot read '%s': %s", path, strerror(s ? err : ENOMEM));
        return NULL;
    }
    s[len] = 0;
    *n = len;
    return s;
}

int ml_lock_try(const char *path, char *holder, size_t cap) {
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (f < 0) return ml_fail(ML_ERR_IO, "sys.lock: cannot open '%s': %s", path, strerror(errno)), -2;
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
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (log) {
        posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0666);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    extern char **environ;
    pid_t p;
    int err = posix_spawn(&p, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
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
