#include "plot/output.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

ml_status pl_prepare_path(const char *path) {
    if (!path || !*path) return ml_fail(ML_ERR_ARG, "plot: output path is empty");
    char *dir = dup_str(path);
    if (!dir) return ml_fail(ML_ERR_MEM, "plot: out of memory");
    /* every proper prefix ending before a '/' is a directory to make */
    for (char *p = strchr(dir + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = 0;
        struct stat st;
        if (stat(dir, &st) != 0 && mkdir(dir, 0777) != 0 && errno != EEXIST) {
            ml_status e = ml_fail(ML_ERR_IO, "plot: cannot create the directory '%s' for '%s': %s", dir, path, strerror(errno));
            free(dir);
            return e;
        }
        *p = '/';
    }
    free(dir);
    struct stat st;
    if (stat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) return ml_fail(ML_ERR_IO, "plot: cannot write '%s': it exists and is not a regular file", path);
        if (!(st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)))
            return ml_fail(ML_ERR_IO, "plot: '%s' is read-only; not replacing it", path);
    }
    return ML_OK;
}

ml_status pl_file_open(pl_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    if (!path || !*path) return ml_fail(ML_ERR_ARG, "plot: output path is empty");
    size_t n = strlen(path);
    f->path = dup_str(path);
    f->tmp = malloc(n + 16);
    if (!f->path || !f->tmp) {
        free(f->path), free(f->tmp);
        memset(f, 0, sizeof *f);
        return ml_fail(ML_ERR_MEM, "plot: out of memory");
    }
    snprintf(f->tmp, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(f->tmp);
    if (fd >= 0) fchmod(fd, 0644); /* mkstemp's 0600 would survive the rename */
    if (fd < 0 || !(f->fp = fdopen(fd, "wb"))) {
        int e = errno;
        if (fd >= 0) close(fd), unlink(f->tmp);
        free(f->path), free(f->tmp);
        memset(f, 0, sizeof *f);
        return ml_fail(ML_ERR_IO, "plot: cannot create '%s': %s", path, strerror(e));
    }
    return ML_OK;
}

ml_status pl_file_finish(pl_file *f) {
    int e = 0;
    errno = 0;
    if (fflush(f->fp) != 0 || ferror(f->fp) || fsync(fileno(f->fp)) != 0) e = errno ? errno : EIO;
    if (fclose(f->fp) != 0 && !e) e = errno ? errno : EIO;
    f->fp = NULL;
    return e ? ml_fail(ML_ERR_IO, "plot: cannot write '%s': %s", f->path, strerror(e)) : ML_OK;
}

static void release(pl_file *f) {
    free(f->tmp), free(f->path);
    memset(f, 0, sizeof *f);
}

ml_status pl_file_commit(pl_file *f) {
    ml_status st = ML_OK;
    if (rename(f->tmp, f->path) != 0) {
        st = ml_fail(ML_ERR_IO, "plot: cannot write '%s': %s", f->path, strerror(errno));
        unlink(f->tmp);
    }
    release(f);
    return st;
}

void pl_file_discard(pl_file *f) {
    if (f->fp) fclose(f->fp);
    if (f->tmp) unlink(f->tmp);
    release(f);
}

ml_status pl_file_close(pl_file *f, int ok) {
    if (!ok) {
        pl_file_discard(f);
        return ML_OK;
    }
    ml_status st = pl_file_finish(f);
    if (st) {
        pl_file_discard(f);
        return st;
    }
    return pl_file_commit(f);
}

pl_format pl_format_of(const char *path) {
    const char *dot = strrchr(path, '.');
    if (dot && strchr(dot, '/') == NULL) {
        if (strcasecmp(dot, ".svg") == 0) return PL_SVG;
        if (strcasecmp(dot, ".pdf") == 0) return PL_PDF;
    }
    return PL_PNG;
}

/* libpng writes through this, so a failed write reports errno rather than "Write Error". */
typedef struct {
    FILE *fp;
    int err;
} png_sink;

static void png_write_data(png_structp png, png_bytep data, size_t n) {
    png_sink *s = png_get_io_ptr(png);
    errno = 0;
    if (fwrite(data, 1, n, s->fp) != n) {
        s->err = errno ? errno : EIO;
        png_error(png, "write failed");
    }
}
static void png_flush_data(png_structp png) { (void)png; }

static void png_err(png_structp png, png_const_charp msg) {
    ml_fail(ML_ERR_IO, "plot: PNG error: %s", msg);
    png_longjmp(png, 1);
}
static void png_warn(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

/* Separate from pl_png_encode so that no automatic variable is live across setjmp. */
static int png_encode(png_sink *sink, const pl_canvas *c, double dpi, int opaque, unsigned char *row) {
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, png_err, png_warn);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, &info);
        ml_fail(ML_ERR_MEM, "plot: out of memory in libpng");
        return 0;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return 0;
    }
    png_set_write_fn(png, sink, png_write_data, png_flush_data);
    png_set_compression_level(png, 9);
    png_set_IHDR(png, info, (png_uint_32)c->w, (png_uint_32)c->h, 8, opaque ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGBA,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_uint_32 ppm = (png_uint_32)lround(dpi / 0.0254);
    png_set_pHYs(png, info, ppm, ppm, PNG_RESOLUTION_METER);
    png_write_info(png, info);
    for (int y = 0; y < c->h; y++) {
        pl_canvas_row(c, y, row);
        if (opaque)
            for (int x = 0; x < c->w; x++) memmove(row + 3 * x, row + 4 * x, 3);
        png_write_row(png, row);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return 1;
}

ml_status pl_png_encode(const pl_canvas *c, FILE *fp, const char *path, double dpi) {
    if (c->format != PL_PNG) return ml_fail(ML_ERR_ARG, "plot: '%s': only a raster canvas makes a PNG", path);
    unsigned char *row = malloc((size_t)c->w * 4);
    if (!row) return ml_fail(ML_ERR_MEM, "plot: out of memory");
    int opaque = 1;
    for (int y = 0; y < c->h && opaque; y++) {
        pl_canvas_row(c, y, row);
        for (int x = 0; x < c->w && opaque; x++) opaque = row[4 * x + 3] == 255;
    }
    png_sink sink = {fp, 0};
    int ok = png_encode(&sink, c, dpi, opaque, row);
    free(row);
    errno = 0;
    if (ok && fflush(fp) != 0) sink.err = errno ? errno : EIO; /* a full disk shows here at the latest */
    if (sink.err) return ml_fail(ML_ERR_IO, "plot: cannot write '%s': %s", path, strerror(sink.err));
    return ok ? ML_OK : ml_last_status();
}

ml_status pl_write_png(const pl_canvas *c, const char *path, double dpi) {
    ml_status st = pl_prepare_path(path);
    pl_file f;
    if (!st) st = pl_file_open(&f, path);
    if (st) return st;
    st = pl_png_encode(c, f.fp, path, dpi);
    if (st) {
        pl_file_discard(&f);
        return st;
    }
    return pl_file_close(&f, 1);
}

/* Draws the figure into the open temporary file of its format. */
static ml_status write_drawing(pl_file *f, const char *out, double scale, pl_draw_fn draw, const void *fig) {
    pl_target t = {pl_format_of(out), f->fp, scale};
    pl_canvas *c = draw(fig, &t);
    if (!c) return ml_last_status();
    ml_status st = t.format == PL_PNG ? pl_png_encode(c, f->fp, out, 100 * scale) : pl_canvas_finish(c, out);
    pl_canvas_free(c);
    return st;
}

ml_status pl_write_figure(const char *fn, const char *out, double scale, pl_draw_fn draw, pl_csv_fn csv, const void *fig) {
    if (!out || !*out) return ml_fail(ML_ERR_ARG, "%s: no output path", fn);
    char *csv_path = pl_csv_path(out);
    if (!csv_path) return ml_fail(ML_ERR_MEM, "plot: out of memory");
    pl_file ff = {0}, fc = {0};
    ml_status st = pl_prepare_path(out);
    if (!st) st = pl_prepare_path(csv_path);
    if (!st) st = pl_file_open(&ff, out);
    if (!st) st = write_drawing(&ff, out, scale > 0 ? scale : 1, draw, fig);
    if (!st) st = pl_file_finish(&ff);
    if (!st) st = pl_file_open(&fc, csv_path);
    if (!st) {
        csv(fc.fp, fig);
        st = pl_file_finish(&fc);
    }
    free(csv_path);
    if (st) { /* neither file is replaced */
        if (ff.path) pl_file_discard(&ff);
        if (fc.path) pl_file_discard(&fc);
        return st;
    }
    st = pl_file_commit(&ff);
    if (st) {
        pl_file_discard(&fc);
        return st;
    }
    return pl_file_commit(&fc);
}

void pl_csv_str(FILE *fp, const char *s, char sep) {
    if (!s) s = "";
    if (strpbrk(s, ",\"\n\r")) {
        fputc('"', fp);
        for (; *s; s++) {
            if (*s == '"') fputc('"', fp);
            fputc(*s, fp);
        }
        fputc('"', fp);
    } else {
        fputs(s, fp);
    }
    fputc(sep, fp);
}

void pl_csv_num(FILE *fp, double v, char sep) {
    if (isnan(v)) fputs("NaN", fp);
    else if (isinf(v)) fputs(v > 0 ? "Inf" : "-Inf", fp);
    else if (v == 0) fputc('0', fp); /* also -0 */
    else fprintf(fp, "%.9g", v);
    fputc(sep, fp);
}

char *pl_csv_path(const char *fig_path) {
    size_t n = strlen(fig_path);
    char *p = malloc(n + 5);
    if (!p) return NULL;
    memcpy(p, fig_path, n + 1);
    if (n >= 4 && (strcasecmp(p + n - 4, ".png") == 0 || strcasecmp(p + n - 4, ".svg") == 0 || strcasecmp(p + n - 4, ".pdf") == 0))
        p[n - 4] = 0;
    strcat(p, ".csv");
    return p;
}
