/* Metrics CSV and atomic file writes (see csv.h). */
#include "io/csv.h"

#include "io/json.h"
#include "io/os.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ atomic writes */

struct ml_atomic_file {
    int fd;
    char *path; /* target */
    char *tmp;  /* temporary file next to it */
};

static atomic_uint tmp_counter;

ml_atomic_file *ml_atomic_open(const char *path) {
    if (!path || !*path) {
        ml_fail(ML_ERR_ARG, "write: empty file name");
        return NULL;
    }
    ml_atomic_file *f = calloc(1, sizeof *f);
    size_t n = strlen(path);
    char *p = malloc(n + 1), *tmp = malloc(n + 64);
    if (!f || !p || !tmp) {
        free(f);
        free(p);
        free(tmp);
        ml_fail(ML_ERR_MEM, "write: %s: out of memory", path);
        return NULL;
    }
    memcpy(p, path, n + 1);
    int fd = -1;
    /* O_EXCL with a fresh name per attempt: never clobbers another writer's temp file. */
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, n + 64, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&tmp_counter, 1u));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        ml_fail(ML_ERR_IO, "write: %s: cannot create a temporary file: %s", path, strerror(errno));
        free(f);
        free(p);
        free(tmp);
        return NULL;
    }
    f->fd = fd;
    f->path = p;
    f->tmp = tmp;
    return f;
}

ml_status ml_atomic_write(ml_atomic_file *f, const void *data, size_t n) {
    if (!f) return ml_fail(ML_ERR_ARG, "write: no open file");
    const char *d = data;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t w = write(f->fd, d, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            return ml_fail(ML_ERR_IO, "write: %s: %s", f->path, strerror(errno));
        }
        if (w == 0) return ml_fail(ML_ERR_IO, "write: %s: no progress writing", f->path);
        d += w;
        n -= (size_t)w;
    }
    return ML_OK;
}

void ml_atomic_abort(ml_atomic_file *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    unlink(f->tmp);
    free(f->path);
    free(f->tmp);
    free(f);
}

/* Makes the rename durable; failures are ignored (some file systems refuse fsync on dirs). */
static void fsync_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash) dir = strdup(".");
    else if (slash == path) dir = strdup("/");
    else {
        dir = malloc((size_t)(slash - path) + 1);
        if (dir) {
            memcpy(dir, path, (size_t)(slash - path));
            dir[slash - path] = 0;
        }
    }
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

ml_status ml_atomic_commit(ml_atomic_file *f) {
    if (!f) return ml_fail(ML_ERR_ARG, "write: no open file");
    ml_status st = ML_OK;
    if (fsync(f->fd) != 0) st = ml_fail(ML_ERR_IO, "write: %s: fsync: %s", f->path, strerror(errno));
    int fd = f->fd;
    f->fd = -1;
    if (close(fd) != 0 && st == ML_OK) st = ml_fail(ML_ERR_IO, "write: %s: close: %s", f->path, strerror(errno));
    if (st == ML_OK && rename(f->tmp, f->path) != 0)
        st = ml_fail(ML_ERR_IO, "write: %s: rename: %s", f->path, strerror(errno));
    if (st != ML_OK) {
        ml_atomic_abort(f);
        return st;
    }
    fsync_parent(f->path);
    free(f->path);
    free(f->tmp);
    free(f);
    return ML_OK;
}

ml_status ml_write_file_atomic(const char *path, const void *data, size_t n) {
    if (n > 0 && !data) return ml_fail(ML_ERR_ARG, "write: %s: NULL data", path ? path : "(null)");
    ml_atomic_file *f = ml_atomic_open(path);
    if (!f) return ml_last_status();
    ml_status st = ml_atomic_write(f, data, n);
    if (st != ML_OK) {
        ml_atomic_abort(f);
        return st;
    }
    return ml_atomic_commit(f);
}

/* ------------------------------------------------------------------ quoting */

size_t ml_csv_quote(char *out, size_t cap, const char *field) {
    size_t n = strlen(field), need = n;
    bool quote = n > 0 && (field[0] == ' ' || field[n - 1] == ' ');
    for (size_t i = 0; i < n; i++) {
        char c = field[i];
        if (c == ',' || c == '\n' || c == '\r') quote = true;
        if (c == '"') {
            quote = true;
            need++;
        }
    }
    if (quote) need += 2;
    if (cap == 0) return need;
    size_t o = 0;
#define PUT(ch)                      \
    do {                             \
        if (o + 1 < cap) out[o] = (ch); \
        o++;                         \
    } while (0)
    if (quote) PUT('"');
    for (size_t i = 0; i < n; i++) {
        if (field[i] == '"') PUT('"');
        PUT(field[i]);
    }
    if (quote) PUT('"');
#undef PUT
    out[o < cap ? o : cap - 1] = 0;
    return need;
}

/* ------------------------------------------------------------------ metrics.csv */

static const char metrics_header[] = "step,split,metric,value\n";

struct ml_metrics {
    FILE *fp;
    char *path;
};

ml_metrics *ml_metrics_open(const char *path) {
    if (!path || !*path) {
        ml_fail(ML_ERR_ARG, "metrics: empty file name");
        return NULL;
    }
    /* A new file is created whole (the header) by the atomic rename; then appended to in place,
     * never through a symlink nor into a FIFO or device (ml_open_write_in_place). */
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT &&
        ml_write_file_atomic(path, metrics_header, sizeof metrics_header - 1) != ML_OK)
        return NULL;
    int fd = ml_open_write_in_place(path, O_RDWR | O_APPEND, "metrics");
    if (fd < 0) return NULL;
    FILE *fp = fdopen(fd, "a+b");
    if (!fp) {
        ml_fail(ML_ERR_IO, "metrics: %s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    /* "a+" reads from anywhere and always writes at the end. */
    if (fseek(fp, 0, SEEK_END) != 0) goto io_fail;
    long size = ftell(fp);
    if (size < 0) goto io_fail;
    if (size == 0) {
        if (fputs(metrics_header, fp) == EOF) goto io_fail;
    } else {
        size_t hl = sizeof metrics_header - 1;
        char head[sizeof metrics_header];
        rewind(fp);
        size_t got = fread(head, 1, hl, fp);
        if (got != hl || memcmp(head, metrics_header, hl) != 0) {
            fclose(fp);
            ml_fail(ML_ERR_FORMAT, "metrics: %s exists and does not start with the header 'step,split,metric,value'",
                    path);
            return NULL;
        }
        if (fseek(fp, -1, SEEK_END) != 0) goto io_fail;
        int last = fgetc(fp);
        if (last == EOF) goto io_fail;
        /* A row cut off by a crash: end it so new rows start on their own line. */
        if (fseek(fp, 0, SEEK_END) != 0) goto io_fail;
        if (last != '\n' && fputc('\n', fp) == EOF) goto io_fail;
    }
    if (fflush(fp) != 0) goto io_fail;
    ml_metrics *m = calloc(1, sizeof *m);
    char *p = strdup(path);
    if (!m || !p) {
        free(m);
        free(p);
        fclose(fp);
        ml_fail(ML_ERR_MEM, "metrics: out of memory");
        return NULL;
    }
    m->fp = fp;
    m->path = p;
    return m;
io_fail:
    ml_fail(ML_ERR_IO, "metrics: %s: %s", path, strerror(errno));
    fclose(fp);
    return NULL;
}

ml_status ml_metrics_append(ml_metrics *m, int64_t step, const char *split, const char *metric, double value) {
    if (!m || !m->fp) return ml_fail(ML_ERR_STATE, "metrics: file is not open");
    if (!split || !metric) return ml_fail(ML_ERR_ARG, "metrics: NULL split or metric name");
    char num[32];
    size_t ls = ml_csv_quote(NULL, 0, split), lm = ml_csv_quote(NULL, 0, metric);
    char *qs = malloc(ls + 1), *qm = malloc(lm + 1);
    if (!qs || !qm) {
        free(qs);
        free(qm);
        return ml_fail(ML_ERR_MEM, "metrics: out of memory");
    }
    ml_csv_quote(qs, ls + 1, split);
    ml_csv_quote(qm, lm + 1, metric);
    int rc = fprintf(m->fp, "%" PRId64 ",%s,%s,%s\n", step, qs, qm, ml_format_double(num, value));
    free(qs);
    free(qm);
    if (rc < 0 || fflush(m->fp) != 0) return ml_fail(ML_ERR_IO, "metrics: %s: %s", m->path, strerror(errno));
    return ML_OK;
}

ml_status ml_metrics_close(ml_metrics *m) {
    if (!m) return ML_OK;
    ml_status st = ML_OK;
    if (m->fp && fclose(m->fp) != 0) st = ml_fail(ML_ERR_IO, "metrics: %s: %s", m->path, strerror(errno));
    free(m->path);
    free(m);
    return st;
}
