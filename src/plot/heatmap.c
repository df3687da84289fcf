/* Heatmaps: patching maps (layer x position), attention patterns (query x key). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot/font.h"
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
    if (!(h->scale == 0 || (h->scale >= 0.1 && h->scale <= 10)))
        return ml_fail(ML_ERR_ARG, "%s: scale must be in 0.1..10, got %g", fn, h->scale);
    if (!(h->cell == 0 || (h->cell >= 1 && h->cell <= 200)))
        return ml_fail(ML_ERR_ARG, "%s: cell must be 0 (automatic) or 1..200 pixels, got %g", fn, h->cell);
    if (h->cell > 0 && h->cell * (h->scale > 0 ? h->scale : 1) < 1)
        return ml_fail(ML_ERR_ARG, "%s: cell x scale is %g pixels; cells need at least 1 pixel", fn,
                       h->cell * h->scale);
    if (h->digits < 0 || h->digits > 6) return ml_fail(ML_ERR_ARG, "%s: digits must be in 0..6, got %d", fn, h->digits);
    long finite = 0;
    for (long i = 0; i < (long)h->rows * h->cols; i++) finite += isfinite(h->data[i]) != 0;
    if (!finite) return ml_fail(ML_ERR_ARG, "%s: data has no finite value", fn);
    return pl_font_load();
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

static int is_masked(const pl_heatmap_spec *h, long i) { return h->masked && h->masked[i]; }

static int any_masked(const pl_heatmap_spec *h) {
    for (long i = 0; h->masked && i < (long)h->rows * h->cols; i++)
        if (h->masked[i]) return 1;
    return 0;
}

#define MASK_FILL pl_grey(0.9, 1)
#define MASK_HATCH pl_grey(0.7, 1)
#define MASK_INK pl_grey(0.4, 1)

/* Diagonal hatching inside [x0,x1] x [y0,y1], one line every `gap` pixels. */
static void hatch(pl_canvas *c, double x0, double y0, double x1, double y1, double gap, double width) {
    pl_clip(c, x0, y0, x1, y1);
    for (double d = -(y1 - y0); d < x1 - x0; d += gap) pl_mask_segment(c, x0 + d, y1, x0 + d + (y1 - y0), y0, width);
    pl_paint(c, MASK_HATCH);
    pl_unclip(c);
}

/* Where everything goes, in pixels. */
typedef struct {
    double s, cell, lo, hi, mid;
    int xrot, xstep, ystep, nt, note;
    double ticks[PL_MAXTICKS];
    char tl[PL_MAXTICKS][40];
    double W, H, x0, y0, x1, y1, xlab_h, barw, barh, cbar_label_x;
    pl_font ft, fl, fti, fv;
} heat_geom;

static double auto_cell(const pl_heatmap_spec *h, double s) {
    double cell = h->cell > 0 ? h->cell * s : s * fmax(4, floor(fmin(fmin(36, 440.0 / h->cols), fmin(36, 360.0 / h->rows))));
    if (h->values && !(h->cell > 0)) { /* automatic cells grow to fit their printed values */
        pl_font f0 = pl_f(PL_FS_TICK, s, 0, 0, PL_CENTER, PL_MIDDLE);
        char vb[64];
        double vw = 0;
        for (long i = 0; i < (long)h->rows * h->cols; i++)
            if (isfinite(h->data[i])) fmt_value(h->data[i], h->digits, vb, sizeof vb), vw = fmax(vw, pl_text_width(vb, &f0));
        cell = fmax(cell, fmin(60 * s, vw + 6 * s));
    }
    return fmax(1, round(cell));
}

static ml_status geometry(const pl_heatmap_spec *h, heat_geom *g) {
    double s = g->s = h->scale > 0 ? h->scale : 1;
    int R = h->rows, C = h->cols;
    double cell = g->cell = auto_cell(h, s);
    g->ft = pl_f(PL_FS_TICK, s, 0, 0, PL_RIGHT, PL_MIDDLE), g->fl = pl_f(PL_FS_LABEL, s, 0, 0, PL_CENTER, PL_TOP);
    g->fti = pl_f(PL_FS_TITLE, s, 1, 0, PL_LEFT, PL_TOP);
    double lh_tick = pl_text_height(&g->ft), lh_label = pl_text_height(&g->fl);
    char buf[64];

    /* labels: thin them out when cells are smaller than a line of text */
    g->ystep = (int)ceil(lh_tick * 1.15 / cell), g->xstep = 1;
    double ylw = 0, xlw = 0;
    for (int r = 0; r < R; r += g->ystep) ylw = fmax(ylw, pl_text_width(label(h->ylabels, r, buf), &g->ft));
    for (int k = 0; k < C; k++) xlw = fmax(xlw, pl_text_width(label(h->xlabels, k, buf), &g->ft));
    g->xrot = xlw > cell - 3 * s;
    if (g->xrot) g->xstep = (int)ceil(lh_tick * 1.15 / cell);
    g->xlab_h = g->xrot ? xlw : lh_tick;

    /* colour bar */
    double step;
    value_range(h, &g->lo, &g->hi, &g->mid);
    double ph = R * cell;
    g->barh = fmax(ph, 90 * s);
    g->nt = pl_nice_ticks(g->lo, g->hi, (int)fmax(3, fmin(6, g->barh / (30 * s))), g->ticks, &step);
    double tlw = 0;
    for (int k = 0; k < g->nt; k++) {
        pl_tick_label(g->ticks[k], step, g->tl[k], sizeof g->tl[k]);
        tlw = fmax(tlw, pl_text_width(g->tl[k], &g->ft));
    }
    int cb = h->colorbar;
    g->barw = 12 * s;
    g->note = any_masked(h);
    const char *note = h->mask_note ? h->mask_note : "filtered out";
    double note_h = g->note ? fmax(lh_tick, 10 * s) + PL_GAP * s : 0;
    double right = PL_PAD * s + (cb ? 14 * s + g->barw + 5 * s + tlw + (h->cbar_label && h->cbar_label[0] ? 6 * s + lh_label : 0) : 0);
    double left = PL_PAD * s + (h->ylabel && h->ylabel[0] ? lh_label + PL_GAP * s : 0) + ylw + 4 * s;
    double top = PL_PAD * s + (h->title && h->title[0] ? pl_text_height(&g->fti) + 6 * s : 0);
    double bottom = PL_PAD * s + 4 * s + g->xlab_h + (h->xlabel && h->xlabel[0] ? PL_GAP * s + lh_label : 0) + note_h;
    double pw = C * cell;
    g->W = ceil(left + pw + right), g->H = ceil(top + fmax(ph, cb ? g->barh : 0) + bottom);
    g->cbar_label_x = g->W - PL_PAD * s; /* the colour bar's title stays beside it when a long title widens W */
    if (h->title && h->title[0]) {
        /* a title wider than the map and its colour bar: the figure is as wide as the title and
         * the map moves to the middle, so that no empty margin is left on one side */
        double wide = ceil(1.05 * pl_text_width(h->title, &g->fti) + 2 * PL_PAD * s);
        if (wide > g->W) {
            double shift = floor((wide - g->W) / 2);
            left += shift, g->cbar_label_x += shift, g->W = wide;
        }
    }
    if (g->note) g->W = fmax(g->W, ceil(left + 10 * s + PL_GAP * s + pl_text_width(note, &g->ft) + PL_PAD * s));
    if (g->W > 20000 || g->H > 20000)
        return ml_fail(ML_ERR_ARG, "plot.heatmap: the figure would be %.0f x %.0f pixels (at most 20000); use smaller cells, scale or labels",
                       g->W, g->H);
    g->x0 = round(left), g->y0 = round(top), g->x1 = g->x0 + pw, g->y1 = g->y0 + ph;

    /* printed values shrink to fit their cells */
    g->fv = pl_f(PL_FS_TICK, s, 0, 0, PL_CENTER, PL_MIDDLE);
    if (h->values) {
        double vw = 0;
        for (long i = 0; i < (long)R * C; i++)
            if (isfinite(h->data[i])) fmt_value(h->data[i], h->digits, buf, sizeof buf), vw = fmax(vw, pl_text_width(buf, &g->fv));
        double fit = fmin(1, (cell - 6 * s) / (1.1 * vw)); /* a margin for the glyphs' side bearings */
        fit = fmin(fit, (cell - 2 * s) / pl_text_height(&g->fv));
        g->fv.size *= fit;
    }
    return ML_OK;
}

/* Cells, then values in a colour that reads on each cell; masked cells greyed and hatched. */
static void draw_cells(pl_canvas *c, const pl_heatmap_spec *h, const heat_geom *g) {
    double s = g->s, cell = g->cell;
    pl_cmap cm = cmap_of(h);
    char buf[64];
    for (int r = 0; r < h->rows; r++)
        for (int k = 0; k < h->cols; k++) {
            long i = (long)r * h->cols + k;
            double v = h->data[i], cx0 = g->x0 + k * cell, cy0 = g->y0 + r * cell;
            int m = is_masked(h, i);
            pl_color col = m ? MASK_FILL : pl_cmap_at(cm, norm(v, g->lo, g->hi, g->mid));
            pl_fill_rect(c, cx0, cy0, cx0 + cell, cy0 + cell, col);
            if (m) hatch(c, cx0, cy0, cx0 + cell, cy0 + cell, fmax(2, 5 * s), fmax(0.5, 0.7 * s));
            if (h->values && isfinite(v) && g->fv.size >= 5 * s) {
                fmt_value(v, h->digits, buf, sizeof buf);
                pl_color ink = m ? MASK_INK : pl_luminance(col) > 0.36 ? pl_grey(0.1, 1) : PL_WHITE;
                pl_text(c, buf, &g->fv, cx0 + 0.5 * cell, cy0 + 0.5 * cell, ink);
            }
        }
    pl_stroke_rect(c, g->x0 - 0.5, g->y0 - 0.5, g->x1 + 0.5, g->y1 + 0.5, fmax(1, round(0.8 * s)), PL_BORDER);
}

static void draw_labels(pl_canvas *c, const pl_heatmap_spec *h, const heat_geom *g) {
    double s = g->s;
    char buf[64];
    for (int r = 0; r < h->rows; r += g->ystep)
        pl_text(c, label(h->ylabels, r, buf), &g->ft, g->x0 - 4 * s, g->y0 + (r + 0.5) * g->cell, PL_TICKINK);
    pl_font fx = pl_f(PL_FS_TICK, s, 0, g->xrot ? 90 : 0, g->xrot ? PL_RIGHT : PL_CENTER, g->xrot ? PL_MIDDLE : PL_TOP);
    for (int k = 0; k < h->cols; k += g->xstep)
        pl_text(c, label(h->xlabels, k, buf), &fx, g->x0 + (k + 0.5) * g->cell, g->y1 + 4 * s, PL_TICKINK);
    if (h->title && h->title[0]) /* over the map's left edge, kept inside the figure */
        pl_text(c, h->title, &g->fti, fmax(PL_PAD * s, fmin(g->x0, g->W - PL_PAD * s - pl_text_width(h->title, &g->fti))),
                PL_PAD * s, PL_INK);
    if (h->xlabel && h->xlabel[0])
        pl_text(c, h->xlabel, &g->fl, (g->x0 + g->x1) / 2, g->y1 + 4 * s + g->xlab_h + PL_GAP * s, PL_INK);
    if (h->ylabel && h->ylabel[0]) {
        pl_font fy = pl_f(PL_FS_LABEL, s, 0, 90, PL_CENTER, PL_TOP);
        pl_text(c, h->ylabel, &fy, PL_PAD * s, (g->y0 + g->y1) / 2, PL_INK);
    }
}

/* The note under the map: a hatched swatch and what it means. */
static void draw_mask_note(pl_canvas *c, const pl_heatmap_spec *h, const heat_geom *g, pl_layout *L) {
    double s = g->s, sw = 10 * s, y1 = g->H - PL_PAD * s, y0 = y1 - sw, x0 = g->x0;
    pl_fill_rect(c, x0, y0, x0 + sw, y1, MASK_FILL);
    hatch(c, x0, y0, x0 + sw, y1, fmax(2, 5 * s), fmax(0.5, 0.7 * s));
    pl_stroke_rect(c, x0, y0, x0 + sw, y1, fmax(0.5, 0.6 * s), PL_BORDER);
    const char *note = h->mask_note ? h->mask_note : "filtered out";
    pl_font fn = pl_f(PL_FS_TICK, s, 0, 0, PL_LEFT, PL_MIDDLE);
    pl_text(c, note, &fn, x0 + sw + PL_GAP * s, (y0 + y1) / 2, PL_INK);
    L->mask_note[0] = x0, L->mask_note[1] = y0, L->mask_note[2] = x0 + sw + PL_GAP * s + pl_text_width(note, &fn);
    L->mask_note[3] = y1;
}

static void draw_colorbar(pl_canvas *c, const pl_heatmap_spec *h, const heat_geom *g, pl_layout *L) {
    double s = g->s, bx0 = g->x1 + 14 * s, bx1 = bx0 + g->barw, by0 = g->y0, by1 = g->y0 + g->barh;
    double rule = fmax(1, round(0.8 * s));
    pl_cmap cm = cmap_of(h);
    for (int j = 0; j < (int)(by1 - by0); j++) {
        double v = g->hi - (g->hi - g->lo) * (j + 0.5) / (by1 - by0);
        pl_fill_rect(c, bx0, by0 + j, bx1, by0 + j + 1, pl_cmap_at(cm, norm(v, g->lo, g->hi, g->mid)));
    }
    pl_stroke_rect(c, bx0 - 0.5, by0 - 0.5, bx1 + 0.5, by1 + 0.5, rule, PL_BORDER);
    /* a clear gap between a tick mark and its label, so that "0.5" never reads as "−0.5" */
    double tick_end = bx1 + 2 * s, label_x = tick_end + 3 * s;
    pl_font fc = pl_f(PL_FS_TICK, s, 0, 0, PL_LEFT, PL_MIDDLE);
    for (int k = 0; k < g->nt; k++) {
        double ty = floor(by1 - (g->ticks[k] - g->lo) / (g->hi - g->lo) * (by1 - by0)) + 0.5;
        pl_line(c, bx1 - 3 * s, ty, tick_end, ty, rule, PL_BORDER);
        pl_text(c, g->tl[k], &fc, label_x, ty, PL_TICKINK);
    }
    if (h->cbar_label && h->cbar_label[0]) {
        pl_font fcl = pl_f(PL_FS_LABEL, s, 0, 90, PL_CENTER, PL_BOTTOM);
        pl_text(c, h->cbar_label, &fcl, g->cbar_label_x, (by0 + by1) / 2, PL_INK);
    }
    L->colorbar[0] = bx0, L->colorbar[1] = by0, L->colorbar[2] = bx1, L->colorbar[3] = by1;
    L->colorbar_ticks[0] = tick_end, L->colorbar_ticks[1] = label_x;
}

pl_canvas *pl_heatmap_render_to(const pl_heatmap_spec *h, pl_layout *lay, const pl_target *t) {
    if (!h) {
        ml_fail(ML_ERR_ARG, "plot.heatmap: no spec");
        return NULL;
    }
    heat_geom g;
    if (check(h) || geometry(h, &g)) return NULL;
    pl_canvas *c = pl_target_canvas(t, g.W, g.H);
    if (!c) return NULL;
    pl_layout L;
    memset(&L, 0, sizeof L);
    L.npanels = 1;
    L.panel[0] = (pl_box_px){g.x0, g.y0, g.x1, g.y1, -0.5, h->cols - 0.5, h->rows - 0.5, -0.5, 0}; /* row 0 at the top */
    draw_cells(c, h, &g);
    draw_labels(c, h, &g);
    if (g.note) draw_mask_note(c, h, &g, &L);
    if (h->colorbar) draw_colorbar(c, h, &g, &L);
    if (lay) *lay = L;
    return c;
}

pl_canvas *pl_heatmap_render(const pl_heatmap_spec *h, pl_layout *lay) {
    pl_target t = {PL_PNG, NULL, h ? h->scale : 1};
    return pl_heatmap_render_to(h, lay, &t);
}

static pl_canvas *draw_heatmap(const void *fig, const pl_target *t) { return pl_heatmap_render_to(fig, NULL, t); }

static void heatmap_csv(FILE *fp, const void *fig) {
    const pl_heatmap_spec *h = fig;
    char b1[16], b2[16];
    fputs(h->masked ? "row,col,ylabel,xlabel,value,masked\n" : "row,col,ylabel,xlabel,value\n", fp);
    for (int r = 0; r < h->rows; r++)
        for (int k = 0; k < h->cols; k++) {
            long i = (long)r * h->cols + k;
            fprintf(fp, "%d,%d,", r, k);
            pl_csv_str(fp, label(h->ylabels, r, b1), ',');
            pl_csv_str(fp, label(h->xlabels, k, b2), ',');
            pl_csv_num(fp, h->data[i], h->masked ? ',' : '\n');
            if (h->masked) fputs(h->masked[i] ? "1\n" : "0\n", fp);
        }
}

ml_status pl_heatmap(const pl_heatmap_spec *h) {
    if (!h || !h->out || !h->out[0]) return ml_fail(ML_ERR_ARG, "plot.heatmap: no output path");
    if (check(h)) return ml_last_status();
    return pl_write_figure("plot.heatmap", h->out, h->scale, draw_heatmap, heatmap_csv, h);
}
