#include "plot/output.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

ml_status pl_file_open(pl_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    if (!path || !*path) return ml_fail(ML_ERR_ARG, "plot: output path is empty");
    size_t n = strlen(path);
    f->path = dup_str(path);
    f->tmp = malloc(n + 16);
    if (!f->path || !f->tmp) {
        free(f->path), free(f->tmp);
        return ml_fail(ML_ERR_MEM, "plot: out of memory");
    }
    snprintf(f->tmp, n + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(f->tmp);
    if (fd >= 0) fchmod(fd, 0644); /* mkstemp's 0600 would survive the rename */
    if (fd < 0 || !(f->fp = fdopen(fd, "wb"))) {
        int e = errno;
        if (fd >= 0) close(fd), unlink(f->tmp);
        free(f->path), free(f->tmp);
        return ml_fail(ML_ERR_IO, "plot: cannot create '%s': %s", path, strerror(e));
    }
    return ML_OK;
}

ml_status pl_file_close(pl_file *f, int ok) {
    ml_status st = ML_OK;
    int e = 0;
    if (ok && (fflush(f->fp) != 0 || ferror(f->fp) || fsync(fileno(f->fp)) != 0)) e = errno ? errno : EIO;
    if (fclose(f->fp) != 0 && !e) e = errno;
    if (ok && !e && rename(f->tmp, f->path) != 0) e = errno;
    if (!ok || e) unlink(f->tmp);
    if (ok && e) st = ml_fail(ML_ERR_IO, "plot: cannot write '%s': %s", f->path, strerror(e));
    free(f->tmp), free(f->path);
    memset(f, 0, sizeof *f);
    return st;
}

static void png_err(png_structp png, png_const_charp msg) {
    ml_fail(ML_ERR_IO, "plot: PNG error: %s", msg);
    png_longjmp(png, 1);
}
static void png_warn(png_structp png, png_const_charp msg) {}

/* Separate from pl_write_png so that no automatic variable is live across setjmp. */
static int png_encode(FILE *fp, const pl_canvas *c, double dpi, int opaque, unsigned char *row) {
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
    png_init_io(png, fp);
    png_set_compression_level(png, 9);
    png_set_IHDR(png, info, (png_uint_32)c->w, (png_uint_32)c->h, 8, opaque ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGBA,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_uint_32 ppm = (png_uint_32)lround(dpi / 0.0254);
    png_set_pHYs(png, info, ppm, ppm, PNG_RESOLUTION_METER);
    png_write_info(png, info);
    for (int y = 0; y < c->h; y++) {
        const unsigned char *src = c->px + (size_t)y * (size_t)c->w * 4;
        if (opaque)
            for (int x = 0; x < c->w; x++) memcpy(row + 3 * x, src + 4 * x, 3);
        else
            memcpy(row, src, (size_t)c->w * 4);
        png_write_row(png, row);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return 1;
}

ml_status pl_write_png(const pl_canvas *c, const char *path, double dpi) {
    int opaque = 1;
    for (size_t i = 0, n = (size_t)c->w * (size_t)c->h; i < n && opaque; i++) opaque = c->px[4 * i + 3] == 255;
    unsigned char *row = malloc((size_t)c->w * 4);
    if (!row) return ml_fail(ML_ERR_MEM, "plot: out of memory");
    pl_file f;
    ml_status st = pl_file_open(&f, path);
    if (st) {
        free(row);
        return st;
    }
    int ok = png_encode(f.fp, c, dpi, opaque, row);
    free(row);
    st = pl_file_close(&f, ok);
    return ok ? st : ml_last_status();
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
    else fprintf(fp, "%.9g", v);
    fputc(sep, fp);
}

char *pl_csv_path(const char *png_path) {
    size_t n = strlen(png_path);
    char *p = malloc(n + 5);
    if (!p) return NULL;
    memcpy(p, png_path, n + 1);
    if (n >= 4 && strcmp(p + n - 4, ".png") == 0) p[n - 4] = 0;
    strcat(p, ".csv");
    return p;
}
