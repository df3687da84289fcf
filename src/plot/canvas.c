#include "plot/canvas.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static inline double clamp01(double v) { return v < 0 ? 0 : v > 1 ? 1 : v; }
static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

pl_canvas *pl_canvas_new(int w, int h, pl_color bg) {
    if (w <= 0 || h <= 0 || w > 20000 || h > 20000) {
        ml_fail(ML_ERR_ARG, "plot: canvas size %dx%d is out of range (1..20000)", w, h);
        return NULL;
    }
    pl_canvas *c = calloc(1, sizeof *c);
    if (!c) goto oom;
    size_t n = (size_t)w * (size_t)h;
    c->px = malloc(n * 4);
    c->mask = calloc(n, sizeof *c->mask);
    c->row = calloc((size_t)w + 2, sizeof *c->row);
    if (!c->px || !c->mask || !c->row) {
        pl_canvas_free(c);
        goto oom;
    }
    c->w = w;
    c->h = h;
    uint8_t v[4] = {(uint8_t)lround(clamp01(bg.r) * 255), (uint8_t)lround(clamp01(bg.g) * 255),
                    (uint8_t)lround(clamp01(bg.b) * 255), (uint8_t)lround(clamp01(bg.a) * 255)};
    for (size_t i = 0; i < n; i++) memcpy(c->px + 4 * i, v, 4);
    c->dx0 = w, c->dy0 = h, c->dx1 = 0, c->dy1 = 0;
    pl_unclip(c);
    return c;
oom:
    ml_fail(ML_ERR_MEM, "plot: out of memory for a %dx%d canvas", w, h);
    return NULL;
}

void pl_canvas_free(pl_canvas *c) {
    if (!c) return;
    free(c->px);
    free(c->mask);
    free(c->row);
    free(c);
}

void pl_clip(pl_canvas *c, double x0, double y0, double x1, double y1) {
    c->cx0 = imax(0, (int)lround(x0));
    c->cy0 = imax(0, (int)lround(y0));
    c->cx1 = imin(c->w, (int)lround(x1));
    c->cy1 = imin(c->h, (int)lround(y1));
}

void pl_unclip(pl_canvas *c) {
    c->cx0 = 0, c->cy0 = 0, c->cx1 = c->w, c->cy1 = c->h;
}

/* Pixel box [*x0,*x1) x [*y0,*y1) covering the real box, clipped; false if empty. */
static int pixbox(pl_canvas *c, double x0, double y0, double x1, double y1, int *ix0, int *iy0, int *ix1,
                  int *iy1) {
    if (!(x0 <= x1 && y0 <= y1)) return 0; /* also rejects NaN */
    /* clamp as doubles first: far-off coordinates must not overflow an int */
    *ix0 = (int)fmin(fmax(floor(x0), c->cx0), c->cx1);
    *iy0 = (int)fmin(fmax(floor(y0), c->cy0), c->cy1);
    *ix1 = (int)fmax(fmin(ceil(x1), c->cx1), c->cx0);
    *iy1 = (int)fmax(fmin(ceil(y1), c->cy1), c->cy0);
    if (*ix0 >= *ix1 || *iy0 >= *iy1) return 0;
    c->dx0 = imin(c->dx0, *ix0), c->dy0 = imin(c->dy0, *iy0);
    c->dx1 = imax(c->dx1, *ix1), c->dy1 = imax(c->dy1, *iy1);
    return 1;
}

static inline void cover(pl_canvas *c, int x, int y, double v) {
    float *m = &c->mask[(size_t)y * (size_t)c->w + (size_t)x];
    if (v > *m) *m = (float)v;
}

/* Coverage of a pixel by a stroke whose centre line is at distance d: the stroke's
 * cross-section intersected with a unit-wide pixel footprint. Strokes thinner than a pixel are
 * drawn one pixel wide and faded in proportion, which keeps them from breaking up. */
static inline double stroke_cov(double d, double hw) {
    if (hw >= 0.5) return clamp01(hw + 0.5 - d);
    return clamp01(1.0 - d) * 2 * hw;
}

void pl_mask_segment(pl_canvas *c, double x0, double y0, double x1, double y1, double width) {
    double hw = width / 2, r = (hw < 0.5 ? 0.5 : hw) + 1;
    int ix0, iy0, ix1, iy1;
    if (!pixbox(c, fmin(x0, x1) - r, fmin(y0, y1) - r, fmax(x0, x1) + r, fmax(y0, y1) + r, &ix0, &iy0, &ix1, &iy1))
        return;
    double dx = x1 - x0, dy = y1 - y0, len2 = dx * dx + dy * dy;
    for (int y = iy0; y < iy1; y++)
        for (int x = ix0; x < ix1; x++) {
            double px = x + 0.5 - x0, py = y + 0.5 - y0;
            double t = len2 > 0 ? (px * dx + py * dy) / len2 : 0;
            t = t < 0 ? 0 : t > 1 ? 1 : t;
            double ex = px - t * dx, ey = py - t * dy;
            double v = stroke_cov(sqrt(ex * ex + ey * ey), hw);
            if (v > 0) cover(c, x, y, v);
        }
}

void pl_mask_polyline(pl_canvas *c, const double *xy, int n, double width, int closed) {
    if (n == 1) pl_mask_segment(c, xy[0], xy[1], xy[0], xy[1], width);
    for (int i = 0; i + 1 < n; i++) pl_mask_segment(c, xy[2 * i], xy[2 * i + 1], xy[2 * i + 2], xy[2 * i + 3], width);
    if (closed && n > 2) pl_mask_segment(c, xy[2 * n - 2], xy[2 * n - 1], xy[0], xy[1], width);
}

void pl_mask_dashed(pl_canvas *c, const double *xy, int n, double width, double on, double off) {
    if (!(on > 0) || !(off >= 0)) {
        pl_mask_polyline(c, xy, n, width, 0);
        return;
    }
    double phase = 0; /* position inside the current on+off period */
    for (int i = 0; i + 1 < n; i++) {
        double ax = xy[2 * i], ay = xy[2 * i + 1], bx = xy[2 * i + 2], by = xy[2 * i + 3];
        double len = hypot(bx - ax, by - ay), s = 0;
        if (!(len > 0)) continue;
        while (s < len) {
            double step = phase < on ? on - phase : on + off - phase;
            if (step < 1e-6) { /* rounding left a sliver of the current dash or gap: skip it */
                phase = phase < on ? on : 0;
                continue;
            }
            double e = fmin(len, s + step);
            if (!(e > s)) break;
            if (phase < on)
                pl_mask_segment(c, ax + (bx - ax) * s / len, ay + (by - ay) * s / len, ax + (bx - ax) * e / len,
                                ay + (by - ay) * e / len, width);
            phase += e - s;
            if (phase >= on + off - 1e-9) phase = 0;
            s = e;
        }
    }
}

void pl_mask_disc(pl_canvas *c, double cx, double cy, double r) {
    int ix0, iy0, ix1, iy1;
    if (!(r > 0) || !pixbox(c, cx - r - 1, cy - r - 1, cx + r + 1, cy + r + 1, &ix0, &iy0, &ix1, &iy1)) return;
    for (int y = iy0; y < iy1; y++)
        for (int x = ix0; x < ix1; x++) {
            double v = clamp01(r + 0.5 - hypot(x + 0.5 - cx, y + 0.5 - cy));
            if (r < 0.5) v *= 2 * r; /* tiny dots fade rather than vanish */
            if (v > 0) cover(c, x, y, v);
        }
}

void pl_mask_ring(pl_canvas *c, double cx, double cy, double r, double width) {
    double hw = width / 2, R = r + (hw < 0.5 ? 0.5 : hw) + 1;
    int ix0, iy0, ix1, iy1;
    if (!(r >= 0) || !pixbox(c, cx - R, cy - R, cx + R, cy + R, &ix0, &iy0, &ix1, &iy1)) return;
    for (int y = iy0; y < iy1; y++)
        for (int x = ix0; x < ix1; x++) {
            double v = stroke_cov(fabs(hypot(x + 0.5 - cx, y + 0.5 - cy) - r), hw);
            if (v > 0) cover(c, x, y, v);
        }
}

void pl_mask_rect(pl_canvas *c, double x0, double y0, double x1, double y1) {
    int ix0, iy0, ix1, iy1;
    if (!pixbox(c, fmin(x0, x1), fmin(y0, y1), fmax(x0, x1), fmax(y0, y1), &ix0, &iy0, &ix1, &iy1)) return;
    double ax = fmin(x0, x1), bx = fmax(x0, x1), ay = fmin(y0, y1), by = fmax(y0, y1);
    for (int y = iy0; y < iy1; y++) {
        double oy = fmin(by, y + 1.0) - fmax(ay, (double)y);
        for (int x = ix0; x < ix1; x++) {
            double ox = fmin(bx, x + 1.0) - fmax(ax, (double)x);
            if (ox > 0 && oy > 0) cover(c, x, y, clamp01(ox * oy));
        }
    }
}

/* Scan conversion with SUB sub-scanlines per pixel row and exact horizontal coverage. */
enum { SUB = 5, MAXPOLY = 64 };

void pl_mask_polygon(pl_canvas *c, const double *xy, int n) {
    if (n < 3 || n > MAXPOLY) return;
    double x0 = xy[0], x1 = xy[0], y0 = xy[1], y1 = xy[1];
    for (int i = 1; i < n; i++) {
        x0 = fmin(x0, xy[2 * i]), x1 = fmax(x1, xy[2 * i]);
        y0 = fmin(y0, xy[2 * i + 1]), y1 = fmax(y1, xy[2 * i + 1]);
    }
    int ix0, iy0, ix1, iy1;
    if (!pixbox(c, x0, y0, x1, y1, &ix0, &iy0, &ix1, &iy1)) return;
    double xs[MAXPOLY];
    int dir[MAXPOLY];
    for (int y = iy0; y < iy1; y++) {
        memset(c->row + ix0, 0, sizeof(float) * (size_t)(ix1 - ix0));
        for (int s = 0; s < SUB; s++) {
            double sy = y + (s + 0.5) / SUB;
            int k = 0;
            for (int i = 0; i < n; i++) {
                double ax = xy[2 * i], ay = xy[2 * i + 1];
                double bx = xy[2 * ((i + 1) % n)], by = xy[2 * ((i + 1) % n) + 1];
                if ((ay <= sy) == (by <= sy)) continue;
                double x = ax + (sy - ay) * (bx - ax) / (by - ay);
                int d = by > ay ? 1 : -1;
                int j = k++; /* insertion sort: a handful of crossings */
                while (j > 0 && xs[j - 1] > x) xs[j] = xs[j - 1], dir[j] = dir[j - 1], j--;
                xs[j] = x, dir[j] = d;
            }
            int wind = 0;
            for (int i = 0; i + 1 < k; i++) {
                wind += dir[i];
                if (!wind) continue;
                double a = fmax(xs[i], (double)ix0), b = fmin(xs[i + 1], (double)ix1);
                if (!(a < b)) continue;
                for (int x = (int)floor(a); x < ix1 && x < b; x++) {
                    double o = fmin(b, x + 1.0) - fmax(a, (double)x);
                    if (o > 0) c->row[x] += (float)(o / SUB);
                }
            }
        }
        for (int x = ix0; x < ix1; x++)
            if (c->row[x] > 0) cover(c, x, y, clamp01(c->row[x]));
    }
}

static inline uint8_t to8(double v) { return (uint8_t)lround(clamp01(v) * 255.0); }

void pl_paint(pl_canvas *c, pl_color col) {
    for (int y = c->dy0; y < c->dy1; y++) {
        float *m = c->mask + (size_t)y * (size_t)c->w;
        for (int x = c->dx0; x < c->dx1; x++) {
            double sa = m[x] * clamp01(col.a);
            m[x] = 0;
            if (sa <= 0) continue;
            uint8_t *p = c->px + 4 * ((size_t)y * (size_t)c->w + (size_t)x);
            double da = p[3] / 255.0, oa = sa + da * (1 - sa);
            double w = da * (1 - sa);
            p[0] = to8((col.r * sa + p[0] / 255.0 * w) / oa);
            p[1] = to8((col.g * sa + p[1] / 255.0 * w) / oa);
            p[2] = to8((col.b * sa + p[2] / 255.0 * w) / oa);
            p[3] = to8(oa);
        }
    }
    c->dx0 = c->w, c->dy0 = c->h, c->dx1 = 0, c->dy1 = 0;
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

pl_color pl_pixel(const pl_canvas *c, int x, int y) {
    if (x < 0 || y < 0 || x >= c->w || y >= c->h) return (pl_color){0, 0, 0, 0};
    const uint8_t *p = c->px + 4 * ((size_t)y * (size_t)c->w + (size_t)x);
    return (pl_color){p[0] / 255.f, p[1] / 255.f, p[2] / 255.f, p[3] / 255.f};
}
