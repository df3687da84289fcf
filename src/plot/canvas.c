#include "plot/canvas.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double clamp01(double v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

static pl_canvas *canvas_alloc(int w, int h) {
    if (w <= 0 || h <= 0 || w > 20000 || h > 20000) {
        ml_fail(ML_ERR_ARG, "plot: canvas size %dx%d is out of range (1..20000)", w, h);
        return NULL;
    }
    pl_canvas *c = calloc(1, sizeof *c);
    if (!c) ml_fail(ML_ERR_MEM, "plot: out of memory for a %dx%d canvas", w, h);
    else c->w = w, c->h = h;
    return c;
}

/* Takes the surface, makes the context and paints the background; frees c on failure. */
static pl_canvas *canvas_start(pl_canvas *c, cairo_surface_t *s, double units_per_px, pl_color bg) {
    c->surface = s;
    c->cr = cairo_create(s);
    if (cairo_status(c->cr) != CAIRO_STATUS_SUCCESS) {
        ml_fail(ML_ERR_MEM, "plot: cannot create a %dx%d canvas: %s", c->w, c->h, cairo_status_to_string(cairo_status(c->cr)));
        pl_canvas_free(c);
        return NULL;
    }
    cairo_scale(c->cr, units_per_px, units_per_px);
    cairo_set_line_join(c->cr, CAIRO_LINE_JOIN_ROUND);
    cairo_set_source_rgba(c->cr, bg.r, bg.g, bg.b, bg.a);
    cairo_set_operator(c->cr, CAIRO_OPERATOR_SOURCE);
    cairo_paint(c->cr);
    cairo_set_operator(c->cr, CAIRO_OPERATOR_OVER);
    return c;
}

pl_canvas *pl_canvas_new(int w, int h, pl_color bg) {
    pl_canvas *c = canvas_alloc(w, h);
    return c ? canvas_start(c, cairo_image_surface_create(CAIRO_FORMAT_ARGB32, w, h), 1, bg) : NULL;
}

static cairo_status_t write_stream(void *closure, const unsigned char *data, unsigned int n) {
    pl_canvas *c = closure;
    if (c->format == PL_SVG) {
        if (c->svg_len + n > c->svg_cap) {
            size_t cap = 2 * (c->svg_len + n);
            char *b = realloc(c->svg, cap);
            if (!b) {
                c->write_errno = ENOMEM;
                return CAIRO_STATUS_NO_MEMORY;
            }
            c->svg = b, c->svg_cap = cap;
        }
        memcpy(c->svg + c->svg_len, data, n);
        c->svg_len += n;
        return CAIRO_STATUS_SUCCESS;
    }
    if (fwrite(data, 1, n, c->fp) == n) return CAIRO_STATUS_SUCCESS;
    if (!c->write_errno) c->write_errno = errno ? errno : EIO;
    return CAIRO_STATUS_WRITE_ERROR;
}

/* The PDF's dates: SOURCE_DATE_EPOCH when set (reproducible builds' convention), else a fixed
 * date, so that equal figures are equal files. */
static void pdf_date(char buf[32]) {
    const char *e = getenv("SOURCE_DATE_EPOCH");
    char *end;
    long long t = e && *e ? strtoll(e, &end, 10) : 0;
    time_t tt = e && *e && !*end && t >= 0 ? (time_t)t : 0;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

pl_canvas *pl_target_canvas(const pl_target *t, double w, double h) {
    pl_color white = {1, 1, 1, 1};
    if (t->format == PL_PNG) return pl_canvas_new((int)w, (int)h, white);
    pl_canvas *c = canvas_alloc((int)w, (int)h);
    if (!c) return NULL;
    c->format = t->format, c->fp = t->fp;
    double pt = 0.72 / (t->scale > 0 ? t->scale : 1); /* points per pixel: 100 px per inch at scale 1 */
    cairo_surface_t *s;
    if (t->format == PL_SVG) {
        s = cairo_svg_surface_create_for_stream(write_stream, c, c->w * pt, c->h * pt);
    } else {
        s = cairo_pdf_surface_create_for_stream(write_stream, c, c->w * pt, c->h * pt);
        char date[32];
        pdf_date(date);
        cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_CREATE_DATE, date);
        cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_MOD_DATE, date);
        cairo_pdf_surface_set_metadata(s, CAIRO_PDF_METADATA_CREATOR, "mechlab");
    }
    return canvas_start(c, s, pt, white);
}

/* cairo numbers SVG surfaces ("surface87") by a counter global to the process, so the same
 * figure drawn twice would differ; the ids are renumbered 1, 2, ... in order of appearance. */
static void write_svg(pl_canvas *c) {
    enum { MAXIDS = 64 };
    unsigned long old[MAXIDS];
    int nids = 0;
    const char *s = c->svg, *end = c->svg + c->svg_len, *done = s;
    static const char key[] = "surface";
    for (; end - s >= (long)sizeof key - 1; s++) {
        if (memcmp(s, key, sizeof key - 1) != 0) continue;
        const char *d = s + sizeof key - 1, *e = d;
        unsigned long id = 0;
        while (e < end && *e >= '0' && *e <= '9' && e - d < 9) id = id * 10 + (unsigned long)(*e++ - '0');
        if (e == d || nids == MAXIDS) continue;
        int k = 0;
        while (k < nids && old[k] != id) k++;
        if (k == nids) old[nids++] = id;
        fwrite(done, 1, (size_t)(d - done), c->fp);
        fprintf(c->fp, "%d", k + 1);
        done = e, s = e - 1;
    }
    fwrite(done, 1, (size_t)(end - done), c->fp);
    if (ferror(c->fp) && !c->write_errno) c->write_errno = errno ? errno : EIO;
}

ml_status pl_canvas_finish(pl_canvas *c, const char *path) {
    cairo_status_t st = cairo_status(c->cr);
    cairo_surface_finish(c->surface);
    if (!st) st = cairo_surface_status(c->surface);
    if (!st && c->format == PL_SVG) write_svg(c);
    if (c->write_errno) return ml_fail(ML_ERR_IO, "plot: cannot write '%s': %s", path, strerror(c->write_errno));
    if (st) return ml_fail(ML_ERR_IO, "plot: cannot write '%s': %s", path, cairo_status_to_string(st));
    return ML_OK;
}

static void clear_mask(pl_canvas *c) {
    for (int i = 0; i < c->nmask; i++) cairo_path_destroy(c->mask[i].path);
    c->nmask = 0;
}

void pl_canvas_free(pl_canvas *c) {
    if (!c) return;
    clear_mask(c);
    free(c->mask);
    free(c->svg);
    if (c->cr) cairo_destroy(c->cr);
    if (c->surface) cairo_surface_destroy(c->surface);
    free(c);
}

void pl_clip(pl_canvas *c, double x0, double y0, double x1, double y1) {
    double a = round(x0), b = round(y0);
    cairo_reset_clip(c->cr);
    cairo_new_path(c->cr);
    cairo_rectangle(c->cr, a, b, fmax(0, round(x1) - a), fmax(0, round(y1) - b));
    cairo_clip(c->cr);
}

void pl_unclip(pl_canvas *c) { cairo_reset_clip(c->cr); }

/* Moves the context's current path into the pending shapes. */
static void keep_path(pl_canvas *c, double width, double on, double off, int round_cap) {
    if (c->nmask == c->capmask) {
        int cap = c->capmask ? 2 * c->capmask : 16;
        pl_shape *m = realloc(c->mask, sizeof *m * (size_t)cap);
        if (!m) { /* drop the shape rather than fail the figure half-drawn */
            cairo_new_path(c->cr);
            return;
        }
        c->mask = m, c->capmask = cap;
    }
    c->mask[c->nmask++] = (pl_shape){cairo_copy_path(c->cr), width, on, off, round_cap};
    cairo_new_path(c->cr);
}

static int finite2(double a, double b) { return isfinite(a) && isfinite(b); }

/* Far-off coordinates (data at 1e300) are pulled in to where they cannot overflow cairo's fixed
 * point, keeping their direction roughly; they lie outside every canvas anyway. */
static double tame(double v) { return fmax(-1e6, fmin(1e6, v)); }

static void path_polyline(pl_canvas *c, const double *xy, int n, int closed) {
    cairo_new_path(c->cr);
    for (int i = 0; i < n; i++) {
        if (!finite2(xy[2 * i], xy[2 * i + 1])) continue;
        cairo_line_to(c->cr, tame(xy[2 * i]), tame(xy[2 * i + 1]));
    }
    if (closed) cairo_close_path(c->cr);
}

void pl_mask_segment(pl_canvas *c, double x0, double y0, double x1, double y1, double width) {
    double xy[4] = {x0, y0, x1, y1};
    pl_mask_polyline(c, xy, 2, width, 0);
}

void pl_mask_polyline(pl_canvas *c, const double *xy, int n, double width, int closed) {
    if (n < 1 || !(width > 0)) return;
    path_polyline(c, xy, n, closed && n > 2);
    int dot = n == 1 || (n == 2 && xy[0] == xy[2] && xy[1] == xy[3]); /* a point shows as a round dot */
    keep_path(c, width, 0, 0, dot);
}

void pl_mask_dashed(pl_canvas *c, const double *xy, int n, double width, double on, double off) {
    if (!(on > 0) || !(off > 0)) {
        pl_mask_polyline(c, xy, n, width, 0);
        return;
    }
    if (n < 2 || !(width > 0)) return;
    path_polyline(c, xy, n, 0);
    keep_path(c, width, on, off, 0);
}

void pl_mask_disc(pl_canvas *c, double cx, double cy, double r) {
    if (!finite2(cx, cy) || !(r > 0)) return;
    cairo_new_path(c->cr);
    cairo_arc(c->cr, tame(cx), tame(cy), r, 0, 2 * PL_PI);
    keep_path(c, 0, 0, 0, 0);
}

void pl_mask_ring(pl_canvas *c, double cx, double cy, double r, double width) {
    if (!finite2(cx, cy) || !(r > 0) || !(width > 0)) return;
    cairo_new_path(c->cr);
    cairo_arc(c->cr, tame(cx), tame(cy), r, 0, 2 * PL_PI);
    cairo_close_path(c->cr);
    keep_path(c, width, 0, 0, 0);
}

void pl_mask_rect(pl_canvas *c, double x0, double y0, double x1, double y1) {
    if (isnan(x0) || isnan(y0) || isnan(x1) || isnan(y1) || x0 == x1 || y0 == y1) return;
    double a = tame(fmin(x0, x1)), b = tame(fmin(y0, y1));
    x1 = tame(fmax(x0, x1)), y1 = tame(fmax(y0, y1)), x0 = a, y0 = b;
    cairo_new_path(c->cr);
    cairo_rectangle(c->cr, x0, y0, x1 - x0, y1 - y0);
    keep_path(c, 0, 0, 0, 0);
}

void pl_mask_polygon(pl_canvas *c, const double *xy, int n) {
    if (n < 3) return;
    path_polyline(c, xy, n, 1);
    keep_path(c, 0, 0, 0, 0);
}

static void draw_shape(cairo_t *cr, const pl_shape *m) {
    cairo_new_path(cr);
    cairo_append_path(cr, m->path);
    if (m->width == 0) {
        cairo_fill(cr);
        return;
    }
    cairo_set_line_width(cr, m->width);
    cairo_set_line_cap(cr, m->round_cap ? CAIRO_LINE_CAP_ROUND : CAIRO_LINE_CAP_BUTT);
    double dash[2] = {m->on, m->off};
    cairo_set_dash(cr, dash, m->on > 0 ? 2 : 0, 0);
    cairo_stroke(cr);
}

/* Clips a raster to the pending shapes' bounding box, padded, so that a group is only as large as
 * the shapes: a group is otherwise the whole canvas, allocated, cleared and composited for each
 * translucent marker of a dense scatter. Nothing is drawn outside the box, so the pixels are
 * those of the unclipped group. Vector output keeps its plain groups. */
static void clip_to_mask(pl_canvas *c) {
    cairo_t *cr = c->cr;
    double x0 = INFINITY, y0 = INFINITY, x1 = -INFINITY, y1 = -INFINITY;
    for (int i = 0; i < c->nmask; i++) {
        const pl_shape *m = &c->mask[i];
        double a, b, e, f;
        cairo_new_path(cr);
        cairo_append_path(cr, m->path);
        if (m->width == 0) {
            cairo_fill_extents(cr, &a, &b, &e, &f);
        } else {
            cairo_set_line_width(cr, m->width);
            cairo_set_line_cap(cr, m->round_cap ? CAIRO_LINE_CAP_ROUND : CAIRO_LINE_CAP_BUTT);
            cairo_stroke_extents(cr, &a, &b, &e, &f);
        }
        x0 = fmin(x0, a), y0 = fmin(y0, b), x1 = fmax(x1, e), y1 = fmax(y1, f);
    }
    cairo_new_path(cr);
    if (x0 > x1) return; /* nothing covers a pixel */
    x0 = floor(x0) - 2, y0 = floor(y0) - 2, x1 = ceil(x1) + 2, y1 = ceil(y1) + 2;
    cairo_rectangle(cr, x0, y0, x1 - x0, y1 - y0);
    cairo_clip(cr);
}

void pl_paint(pl_canvas *c, pl_color col) {
    cairo_t *cr = c->cr;
    double a = clamp01(col.a);
    if (c->nmask > 1 && a < 1) { /* translucent union: draw opaque into a group, then fade it */
        cairo_save(cr);
        if (c->format == PL_PNG) clip_to_mask(c);
        cairo_push_group(cr);
        cairo_set_source_rgb(cr, clamp01(col.r), clamp01(col.g), clamp01(col.b));
        for (int i = 0; i < c->nmask; i++) draw_shape(cr, &c->mask[i]);
        cairo_pop_group_to_source(cr);
        cairo_paint_with_alpha(cr, a);
        cairo_restore(cr);
    } else {
        cairo_set_source_rgba(cr, clamp01(col.r), clamp01(col.g), clamp01(col.b), a);
        for (int i = 0; i < c->nmask; i++) draw_shape(cr, &c->mask[i]);
    }
    clear_mask(c);
}

void pl_fill_rect(pl_canvas *c, double x0, double y0, double x1, double y1, pl_color col) {
    pl_mask_rect(c, x0, y0, x1, y1);
    pl_paint(c, col);
}

void pl_stroke_rect(pl_canvas *c, double x0, double y0, double x1, double y1, double width, pl_color col) {
    double xy[8] = {x0, y0, x1, y0, x1, y1, x0, y1};
    pl_mask_polyline(c, xy, 4, width, 1);
    pl_paint(c, col);
}

void pl_line(pl_canvas *c, double x0, double y0, double x1, double y1, double width, pl_color col) {
    pl_mask_segment(c, x0, y0, x1, y1, width);
    pl_paint(c, col);
}

/* cairo's ARGB32: native-endian 32-bit words, premultiplied alpha. */
static void unpremultiply(uint32_t p, uint8_t out[4]) {
    unsigned a = p >> 24, ch[3] = {(p >> 16) & 255, (p >> 8) & 255, p & 255};
    for (int k = 0; k < 3; k++) out[k] = (uint8_t)(a ? (ch[k] * 255 + a / 2) / a : 0);
    out[3] = (uint8_t)a;
}

pl_color pl_pixel(const pl_canvas *c, int x, int y) {
    pl_color z = {0, 0, 0, 0};
    if (c->format != PL_PNG || x < 0 || y < 0 || x >= c->w || y >= c->h) return z;
    cairo_surface_flush(c->surface);
    const unsigned char *d = cairo_image_surface_get_data(c->surface);
    uint32_t p;
    memcpy(&p, d + (size_t)y * (size_t)cairo_image_surface_get_stride(c->surface) + 4 * (size_t)x, 4);
    uint8_t v[4];
    unpremultiply(p, v);
    return (pl_color){v[0] / 255.f, v[1] / 255.f, v[2] / 255.f, v[3] / 255.f};
}

void pl_canvas_row(const pl_canvas *c, int y, uint8_t *rgba) {
    cairo_surface_flush(c->surface);
    const unsigned char *d = cairo_image_surface_get_data(c->surface) + (size_t)y * (size_t)cairo_image_surface_get_stride(c->surface);
    for (int x = 0; x < c->w; x++) {
        uint32_t p;
        memcpy(&p, d + 4 * (size_t)x, 4);
        unpremultiply(p, rgba + 4 * (size_t)x);
    }
}
