/* Heatmaps: patching maps (layer x position), attention patterns (query x key). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot/output.h"
#include "plot/plot.h"
#include "plot/theme.h"
#include "plot/ticks.h"

void pl_heatmap_init(pl_heatmap_spec *h) {
    memset(h, 0, sizeof *h);
    h->center = h->vmin = h->vmax = NAN;
    h->digits = 2;
    h->colorbar = 1;
}

static pl_cmap cmap_of(const pl_heatmap_spec *h) {
    int m = h->cmap ? pl_cmap_find(h->cmap) : isfinite(h->center) ? PL_CMAP_RDBU : PL_CMAP_VIRIDIS;
    return m < 0 ? PL_CMAP_VIRIDIS : (pl_cmap)m;
}

/* The value range [lo, hi] the colours span, and the centre for diverging maps. */
static void value_range(const pl_heatmap_spec *h, double *lo, double *hi, double *mid) {
    double dlo = INFINITY, dhi = -INFINITY;
    for (long i = 0; i < (long)h->rows * h->cols; i++)
        if (isfinite(h->data[i])) dlo = fmin(dlo, h->data[i]), dhi = fmax(dhi, h->data[i]);
    if (!isfinite(dlo)) dlo = 0, dhi = 1;
    if (pl_cmap_diverging(cmap_of(h))) {
        double c = isfinite(h->center) ? h->center : 0;
        double m = fmax(fabs(dhi - c), fabs(dlo - c));
        if (!(m > 0)) m = 1;
        *lo = isfinite(h->vmin) ? h->vmin : c - m;
        *hi = isfinite(h->vmax) ? h->vmax : c + m;
        *mid = c;
    } else {
        *lo = isfinite(h->vmin) ? h->vmin : dlo;
        *hi = isfinite(h->vmax) ? h->vmax : dhi;
        if (*hi == *lo) *lo -= 0.5, *hi += 0.5;
        *mid = NAN;
    }
}

static double norm(double v, double lo, double hi, double mid) {
    if (isnan(v)) return NAN;
    double t;
    if (isfinite(mid) && mid > lo && mid < hi) /* two slopes meeting at the centre */
        t = v < mid ? 0.5 * (v - lo) / (mid - lo) : 0.5 + 0.5 * (v - mid) / (hi - mid);
    else
        t = (v - lo) / (hi - lo);
    return t < 0 ? 0 : t > 1 ? 1 : t;
}

pl_color pl_heatmap_color(const pl_heatmap_spec *h, double v) {
    double lo, hi, mid;
    value_range(h, &lo, &hi, &mid);
    return pl_cmap_at(cmap_of(h), norm(v, lo, hi, mid));
}

static ml_status check(const pl_heatmap_spec *h) {
    const char *fn = "plot.heatmap";
    if (h->rows < 1 || h->cols < 1 || h->rows > 4096 || h->cols > 4096)
        return ml_fail(ML_ERR_SHAPE, "%s: data must have 1..4096 rows and columns, got %d x %d", fn, h->rows, h->cols);
    if (!h->data) return ml_fail(ML_ERR_ARG, "%s: no data", fn);
    if (h->cmap && pl_cmap_find(h->cmap) < 0)
        return ml_fail(ML_ERR_ARG, "%s: unknown cmap '%s' (known: %s)", fn, h->cmap, pl_cmap_names());
    if (isfinite(h->vmin) && isfinite(h->vmax) && !(h->vmin < h->vmax))
        return ml_fail(ML_ERR_ARG, "%s: vmin (%g) must be below vmax (%g)", fn, h->vmin, h->vmax);
    if (h->scale < 0 || h->scale > 10 || isnan(h->scale)) return ml_fail(ML_ERR_ARG, "%s: scale must be in (0, 10], got %g", fn, h->scale);
    if (h->cell < 0 || h->cell > 200 || isnan(h->cell)) return ml_fail(ML_ERR_ARG, "%s: cell must be in 0..200 pixels, got %g", fn, h->cell);
    if (h->digits < 0 || h->digits > 6) return ml_fail(ML_ERR_ARG, "%s: digits must be in 0..6, got %d", fn, h->digits);
    long finite = 0;
    for (long i = 0; i < (long)h->rows * h->cols; i++) finite += isfinite(h->data[i]) != 0;
    if (!finite) return ml_fail(ML_ERR_ARG, "%s: data has no finite value", fn);
    return ML_OK;
}

static const char *label(const char *const *names, int i, char buf[16]) {
    if (names && names[i]) return names[i];
    snprintf(buf, 16, "%d", i);
    return buf;
}


static void fmt_value(double v, int digits, char *buf, size_t n) {
    char tmp[48];
    snprintf(tmp, sizeof tmp, "%.*f", digits, fabs(v));
    int zero = strspn(tmp, "0.") == strlen(tmp);
    snprintf(buf, n, "%s%s", v < 0 && !zero ? "\xe2\x88\x92" : "", tmp);
}

pl_canvas *pl_heatmap_render(const pl_heatmap_spec *h, pl_layout *lay) {
    if (!h) {
        ml_fail(ML_ERR_ARG, "plot.heatmap: no spec");
        return NULL;
    }
    if (check(h)) return NULL;
    double s = h->scale > 0 ? h->scale : 1;
    int R = h->rows, C = h->cols;
    double cell = h->cell > 0 ? h->cell * s : s * fmax(4, floor(fmin(fmin(36, 440.0 / C), fmin(36, 360.0 / R))));
    if (h->values && !(h->cell > 0)) { /* automatic cells grow to fit their printed values */
        pl_font f0 = pl_f(PL_FS_TICK, s, 0, 0, PL_CENTER, PL_MIDDLE);
        char vb[64];
        double vw = 0;
        for (long i = 0; i < (long)R * C; i++)
            if (isfinite(h->data[i])) fmt_value(h->data[i], h->digits, vb, sizeof vb), vw = fmax(vw, pl_text_width(vb, &f0));
        cell = fmax(cell, fmin(60 * s, vw + 6 * s));
    }
    cell = round(cell);
    pl_font ft = pl_f(PL_FS_TICK, s, 0, 0, PL_RIGHT, PL_MIDDLE), fl = pl_f(PL_FS_LABEL, s, 0, 0, PL_CENTER, PL_TOP);
    pl_font fti = pl_f(PL_FS_TITLE, s, 1, 0, PL_LEFT, PL_TOP);
    double lh_tick = pl_text_height(&ft), lh_label = pl_text_height(&fl);
    char buf[64];

    /* labels: thin them out when cells are smaller than a line of text */
    int ystep = (int)ceil(lh_tick * 1.15 / cell), xstep = 1;
    double ylw = 0, xlw = 0;
    for (int r = 0; r < R; r += ystep) ylw = fmax(ylw, pl_text_width(label(h->ylabels, r, buf), &ft));
    for (int k = 0; k < C; k++) xlw = fmax(xlw, pl_text_width(label(h->xlabels, k, buf), &ft));
    int xrot = xlw > cell - 3 * s;
    if (xrot) xstep = (int)ceil(lh_tick * 1.15 / cell);
    double xlab_h = xrot ? xlw : lh_tick;

    /* colour bar */
    double lo, hi, mid, step;
    value_range(h, &lo, &hi, &mid);
    double ticks[PL_MAXTICKS];
    char tl[PL_MAXTICKS][40];
    double ph = R * cell, barh = fmax(ph, 90 * s);
    int nt = pl_nice_ticks(lo, hi, (int)fmax(3, fmin(6, barh / (30 * s))), ticks, &step);
    double tlw = 0;
    for (int k = 0; k < nt; k++) {
        pl_tick_label(ticks[k], step, tl[k], sizeof tl[k]);
        tlw = fmax(tlw, pl_text_width(tl[k], &ft));
    }
    int cb = h->colorbar;
    double barw = 12 * s;
    double right = PL_PAD * s + (cb ? 14 * s + barw + 3 * s + tlw + (h->cbar_label && h->cbar_label[0] ? 6 * s + lh_label : 0) : 0);
    double left = PL_PAD * s + (h->ylabel && h->ylabel[0] ? lh_label + PL_GAP * s : 0) + ylw + 4 * s;
    double top = PL_PAD * s + (h->title && h->title[0] ? pl_text_height(&fti) + 6 * s : 0);
    double bottom = PL_PAD * s + 4 * s + xlab_h + (h->xlabel && h->xlabel[0] ? PL_GAP * s + lh_label : 0);
    double pw = C * cell;
    double W = ceil(left + pw + right), H = ceil(top + fmax(ph, cb ? barh : 0) + bottom);
    double cbar_label_x = W - PL_PAD * s; /* the colour bar's title stays beside it when a long title widens W */
    if (h->title) W = fmax(W, ceil(left + 1.05 * pl_text_width(h->title, &fti) + 2 * PL_PAD * s));
    if (W > 20000 || H > 20000) {
        ml_fail(ML_ERR_ARG, "plot.heatmap: the figure would be %.0f x %.0f pixels (at most 20000); use smaller cells, scale or labels", W, H);
        return NULL;
    }
    pl_canvas *c = pl_canvas_new((int)W, (int)H, PL_WHITE);
    if (!c) return NULL;
    double x0 = round(left), y0 = round(top), x1 = x0 + pw, y1 = y0 + ph;
    pl_cmap cm = cmap_of(h);

    /* cells, then values in a colour that reads on each cell */
    int digits = h->digits;
    pl_font fv = pl_f(PL_FS_TICK, s, 0, 0, PL_CENTER, PL_MIDDLE);
    if (h->values) {
        double vw = 0;
        for (long i = 0; i < (long)R * C; i++)
            if (isfinite(h->data[i])) fmt_value(h->data[i], digits, buf, sizeof buf), vw = fmax(vw, pl_text_width(buf, &fv));
        double fit = fmin(1, (cell - 6 * s) / (1.1 * vw)); /* a margin for the glyphs' side bearings */
        fit = fmin(fit, (cell - 2 * s) / pl_text_height(&fv));
        fv.size *= fit;
    }
    for (int r = 0; r < R; r++)
        for (int k = 0; k < C; k++) {
            double v = h->data[(long)r * C + k];
            pl_color col = pl_cmap_at(cm, norm(v, lo, hi, mid));
            pl_fill_rect(c, x0 + k * cell, y0 + r * cell, x0 + (k + 1) * cell, y0 + (r + 1) * cell, col);
            if (h->values && isfinite(v) && fv.size >= 5 * s) {
                fmt_value(v, digits, buf, sizeof buf);
                pl_color ink = pl_luminance(col) > 0.36 ? pl_grey(0.1, 1) : PL_WHITE;
                pl_text(c, buf, &fv, x0 + (k + 0.5) * cell, y0 + (r + 0.5) * cell, ink);
            }
        }
    pl_stroke_rect(c, x0 - 0.5, y0 - 0.5, x1 + 0.5, y1 + 0.5, fmax(1, round(0.8 * s)), PL_BORDER);

    for (int r = 0; r < R; r += ystep)
        pl_text(c, label(h->ylabels, r, buf), &ft, x0 - 4 * s, y0 + (r + 0.5) * cell, PL_TICKINK);
    pl_font fx = pl_f(PL_FS_TICK, s, 0, xrot ? 90 : 0, xrot ? PL_RIGHT : PL_CENTER, xrot ? PL_MIDDLE : PL_TOP);
    for (int k = 0; k < C; k += xstep)
        pl_text(c, label(h->xlabels, k, buf), &fx, x0 + (k + 0.5) * cell, y1 + 4 * s, PL_TICKINK);
    if (h->title && h->title[0]) pl_text(c, h->title, &fti, x0, PL_PAD * s, PL_INK);
    if (h->xlabel && h->xlabel[0]) pl_text(c, h->xlabel, &fl, (x0 + x1) / 2, y1 + 4 * s + xlab_h + PL_GAP * s, PL_INK);
    if (h->ylabel && h->ylabel[0]) {
        pl_font fy = pl_f(PL_FS_LABEL, s, 0, 90, PL_CENTER, PL_TOP);
        pl_text(c, h->ylabel, &fy, PL_PAD * s, (y0 + y1) / 2, PL_INK);
    }

    pl_layout L;
    memset(&L, 0, sizeof L);
    L.npanels = 1;
    L.panel[0] = (pl_box_px){x0, y0, x1, y1, -0.5, C - 0.5, R - 0.5, -0.5, 0}; /* row 0 at the top */
    if (cb) {
        double bx0 = x1 + 14 * s, bx1 = bx0 + barw, by0 = y0, by1 = y0 + barh;
        for (int j = 0; j < (int)(by1 - by0); j++) {
            double v = hi - (hi - lo) * (j + 0.5) / (by1 - by0);
            pl_fill_rect(c, bx0, by0 + j, bx1, by0 + j + 1, pl_cmap_at(cm, norm(v, lo, hi, mid)));
        }
        pl_stroke_rect(c, bx0 - 0.5, by0 - 0.5, bx1 + 0.5, by1 + 0.5, fmax(1, round(0.8 * s)), PL_BORDER);
        pl_font fc = pl_f(PL_FS_TICK, s, 0, 0, PL_LEFT, PL_MIDDLE);
        for (int k = 0; k < nt; k++) {
            double ty = floor(by1 - (ticks[k] - lo) / (hi - lo) * (by1 - by0)) + 0.5;
            pl_line(c, bx1 - 3 * s, ty, bx1 + 2 * s, ty, fmax(1, round(0.8 * s)), PL_BORDER);
            pl_text(c, tl[k], &fc, bx1 + 3 * s, ty, PL_TICKINK);
        }
        if (h->cbar_label && h->cbar_label[0]) {
            pl_font fcl = pl_f(PL_FS_LABEL, s, 0, 90, PL_CENTER, PL_BOTTOM);
            pl_text(c, h->cbar_label, &fcl, cbar_label_x, (by0 + by1) / 2, PL_INK);
        }
        L.colorbar[0] = bx0, L.colorbar[1] = by0, L.colorbar[2] = bx1, L.colorbar[3] = by1;
    }
    if (lay) *lay = L;
    return c;
}

ml_status pl_heatmap(const pl_heatmap_spec *h) {
    if (!h || !h->out || !h->out[0]) return ml_fail(ML_ERR_ARG, "plot.heatmap: no output path");
    pl_canvas *c = pl_heatmap_render(h, NULL);
    if (!c) return ml_last_status();
    ml_status st = pl_write_png(c, h->out, 100 * (h->scale > 0 ? h->scale : 1));
    pl_canvas_free(c);
    if (st) return st;
    char *path = pl_csv_path(h->out);
    if (!path) return ml_fail(ML_ERR_MEM, "plot: out of memory");
    pl_file f;
    st = pl_file_open(&f, path);
    free(path);
    if (st) return st;
    char b1[16], b2[16];
    fputs("row,col,ylabel,xlabel,value\n", f.fp);
    for (int r = 0; r < h->rows; r++)
        for (int k = 0; k < h->cols; k++) {
            fprintf(f.fp, "%d,%d,", r, k);
            pl_csv_str(f.fp, label(h->ylabels, r, b1), ',');
            pl_csv_str(f.fp, label(h->xlabels, k, b2), ',');
            pl_csv_num(f.fp, h->data[(long)r * h->cols + k], '\n');
        }
    return pl_file_close(&f, 1);
}
