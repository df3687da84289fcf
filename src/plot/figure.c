/* Line plots, scatter plots, box plots and bar charts on a grid of facets. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot/font.h"
#include "plot/output.h"
#include "plot/plot.h"
#include "plot/theme.h"
#include "plot/ticks.h"

static const char *const kind_fn[] = {"plot.lines", "plot.scatter", "plot.box", "plot.bar"};
const char *const pl_marker_names[PL_MARKER_COUNT + 1] = {"none", "circle", "triangle", "square", "diamond",
                                                          "triangle_down", "plus", "cross", NULL};

int pl_marker_find(const char *name) {
    for (int i = 0; name && i < PL_MARKER_COUNT; i++)
        if (strcmp(name, pl_marker_names[i]) == 0) return i;
    return -1;
}

void pl_plot_init(pl_plot *p) {
    memset(p, 0, sizeof *p);
    p->xlim[0] = p->xlim[1] = p->ylim[0] = p->ylim[1] = NAN;
    p->alpha = NAN;
    p->markers = 1;
}

static double tx(const pl_box_px *b, double x) { return b->logx > 1 ? log(x) : x; }
double pl_px_x(const pl_box_px *b, double x) {
    return b->x0 + (tx(b, x) - tx(b, b->xmin)) / (tx(b, b->xmax) - tx(b, b->xmin)) * (b->x1 - b->x0);
}
double pl_px_y(const pl_box_px *b, double y) { return b->y1 - (y - b->ymin) / (b->ymax - b->ymin) * (b->y1 - b->y0); }

/* ---- markers ---- */

/* Marker of "radius" r (shapes scaled to similar areas), filled, with an optional edge. */
static void pl_draw_marker(pl_canvas *c, int m, double x, double y, double r, pl_color fill, pl_color edge, double ew) {
    double xy[8];
    int n = 0;
    switch (m) {
    case PL_MARKER_CIRCLE:
        pl_mask_disc(c, x, y, r);
        pl_paint(c, fill);
        if (ew > 0) pl_mask_ring(c, x, y, r - ew / 2, ew), pl_paint(c, edge);
        return;
    case PL_MARKER_PLUS:
    case PL_MARKER_CROSS: {
        double d = m == PL_MARKER_PLUS ? r * 1.2 : r * 0.9, w = fmax(1, r * 0.45);
        if (m == PL_MARKER_PLUS) pl_mask_segment(c, x - d, y, x + d, y, w), pl_mask_segment(c, x, y - d, x, y + d, w);
        else pl_mask_segment(c, x - d, y - d, x + d, y + d, w), pl_mask_segment(c, x - d, y + d, x + d, y - d, w);
        fill.a = 1; /* strokes have no inside to be translucent */
        pl_paint(c, ew > 0 ? edge : fill);
        return;
    }
    case PL_MARKER_SQUARE: {
        double h = r * 0.886;
        double q[8] = {x - h, y - h, x + h, y - h, x + h, y + h, x - h, y + h};
        memcpy(xy, q, sizeof q), n = 4;
        break;
    }
    case PL_MARKER_DIAMOND: {
        double h = r * 1.2;
        double q[8] = {x, y - h, x + h, y, x, y + h, x - h, y};
        memcpy(xy, q, sizeof q), n = 4;
        break;
    }
    case PL_MARKER_TRIANGLE:
    case PL_MARKER_TRIANGLE_DOWN: {
        double h = r * 1.3, d = m == PL_MARKER_TRIANGLE ? 1 : -1;
        double q[6] = {x, y - d * h, x + h * 0.866, y + d * h * 0.5, x - h * 0.866, y + d * h * 0.5};
        memcpy(xy, q, sizeof q), n = 3;
        break;
    }
    default:
        return;
    }
    pl_mask_polygon(c, xy, n);
    pl_paint(c, fill);
    if (ew > 0) pl_mask_polyline(c, xy, n, ew, 1), pl_paint(c, edge);
}

/* ---- figure state ---- */

enum { MAXKEYS = 256 };

typedef struct {
    pl_kind kind;
    const char *fn;
    const pl_plot *p;
    int np;
    const pl_panel *pan;
    double s;
    int pal;
    int nkeys;
    const char *keys[MAXKEYS]; /* colour identities in order of appearance */
    int ncat;
    const char *cats[MAXKEYS];    /* x categories (box: group keys; bar: p->categories) */
    const char *cat_lab[MAXKEYS]; /* their tick labels (box: the group's label) */
    int nleg;
    const pl_series *leg[MAXKEYS]; /* first series with data of each legend label */
    int ntag;                      /* box: the distinct tag values, ascending; the legend lists them */
    double tags[MAXKEYS];
    char tag_lab[MAXKEYS][32];
} fig;

static const char *skey(const pl_series *se) { return se->key ? se->key : se->label ? se->label : ""; }

static int find_str(const char *const *a, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (strcmp(a[i], s) == 0) return i;
    return -1;
}

static pl_color series_color(const fig *f, const pl_series *se) {
    pl_color c;
    if (se->color && pl_parse_hex(se->color, &c)) return c;
    return pl_palette_at(f->pal, find_str(f->keys, f->nkeys, skey(se)), f->nkeys);
}

static const int marker_cycle[] = {PL_MARKER_CIRCLE, PL_MARKER_TRIANGLE, PL_MARKER_SQUARE, PL_MARKER_DIAMOND,
                                   PL_MARKER_TRIANGLE_DOWN, PL_MARKER_PLUS, PL_MARKER_CROSS};

static int series_marker(const fig *f, const pl_series *se) {
    const int *cycle = marker_cycle;
    if (se->marker >= 0) return se->marker;
    return cycle[find_str(f->keys, f->nkeys, skey(se)) % 7];
}

static ml_status validate(fig *f) {
    const pl_plot *p = f->p;
    const char *fn = f->fn;
    if (f->np < 1 || f->np > PL_MAXPANELS || !f->pan)
        return ml_fail(ML_ERR_ARG, "%s: expected 1 to %d panels, got %d", fn, PL_MAXPANELS, f->np);
    if (!(p->scale == 0 || (p->scale >= 0.1 && p->scale <= 10))) return ml_fail(ML_ERR_ARG, "%s: scale must be in 0.1..10, got %g", fn, p->scale);
    if ((p->width && !(p->width >= 60 && p->width <= 5000)) || (p->height && !(p->height >= 60 && p->height <= 5000)))
        return ml_fail(ML_ERR_ARG, "%s: width and height must be in 60..5000 pixels, got %g x %g", fn, p->width, p->height);
    if (p->logx != 0 && !(p->logx > 1)) return ml_fail(ML_ERR_ARG, "%s: logx must be a base > 1 (2 or 10), got %g", fn, p->logx);
    if (p->logx && (f->kind == PL_BOX || f->kind == PL_BAR)) return ml_fail(ML_ERR_ARG, "%s: logx needs a numeric x axis", fn);
    if ((p->nxticks && !p->xticks) || (p->nyticks && !p->yticks) || (p->nhlines && !p->hlines) || p->nxticks < 0 ||
        p->nyticks < 0 || p->nhlines < 0 || p->nxticks > PL_MAXTICKS || p->nyticks > PL_MAXTICKS)
        return ml_fail(ML_ERR_ARG, "%s: bad tick or reference line arrays (at most %d ticks)", fn, PL_MAXTICKS);
    if (!isnan(p->alpha) && !(p->alpha >= 0 && p->alpha <= 1)) return ml_fail(ML_ERR_ARG, "%s: alpha must be in 0..1, got %g", fn, p->alpha);
    if (!(p->jitter >= 0 && p->jitter <= 100)) return ml_fail(ML_ERR_ARG, "%s: jitter must be in 0..100 pixels, got %g", fn, p->jitter);
    if (p->jitter > 0 && f->kind != PL_SCATTER) return ml_fail(ML_ERR_ARG, "%s: jitter belongs to scatter plots", fn);
    if (!(p->dodge >= 0 && p->dodge <= 100)) return ml_fail(ML_ERR_ARG, "%s: dodge must be in 0..100 pixels, got %g", fn, p->dodge);
    if (p->dodge > 0 && f->kind != PL_SCATTER && f->kind != PL_LINES)
        return ml_fail(ML_ERR_ARG, "%s: dodge belongs to line and scatter plots", fn);
    f->pal = pl_palette_find(p->palette ? p->palette : "set2");
    if (f->pal < 0) return ml_fail(ML_ERR_ARG, "%s: unknown palette '%s' (known: %s)", fn, p->palette, pl_palette_names());
    /* bars need their categories; boxes may fix the order of theirs (default: first appearance) */
    if (f->kind == PL_BAR || (f->kind == PL_BOX && p->categories)) {
        if (p->ncat < 1 || !p->categories || p->ncat > MAXKEYS)
            return ml_fail(ML_ERR_ARG, "%s: expected 1 to %d categories, got %d", fn, MAXKEYS, p->ncat);
        for (int i = 0; i < p->ncat; i++) f->cats[i] = f->cat_lab[i] = p->categories[i] ? p->categories[i] : "";
        f->ncat = p->ncat;
    }
    int finite = 0;
    for (int i = 0; i < f->np; i++) {
        const pl_panel *pa = &f->pan[i];
        if (pa->nseries < 0 || (pa->nseries && !pa->series))
            return ml_fail(ML_ERR_ARG, "%s: panel %d has a bad series array", fn, i + 1);
        if (pa->blank && pa->nseries) return ml_fail(ML_ERR_ARG, "%s: panel %d is blank but has series", fn, i + 1);
        for (int j = 0; j < pa->nseries; j++) {
            const pl_series *se = &pa->series[j];
            if (se->n < 0 || (se->n && !se->y) || (se->n && !se->x && (f->kind == PL_LINES || f->kind == PL_SCATTER)))
                return ml_fail(ML_ERR_ARG, "%s: series %d of panel %d has no data arrays", fn, j + 1, i + 1);
            if (f->kind == PL_BAR && se->n != p->ncat)
                return ml_fail(ML_ERR_SHAPE, "%s: series %d of panel %d has %d values for %d categories", fn, j + 1, i + 1, se->n, p->ncat);
            if (se->marker < -1 || se->marker >= PL_MARKER_COUNT)
                return ml_fail(ML_ERR_ARG, "%s: series %d of panel %d has an unknown marker %d", fn, j + 1, i + 1, se->marker);
            if (se->alpha < 0 || se->alpha > 1)
                return ml_fail(ML_ERR_ARG, "%s: series %d of panel %d has alpha %g, expected 0..1", fn, j + 1, i + 1, se->alpha);
            pl_color dummy;
            if (se->color && !pl_parse_hex(se->color, &dummy))
                return ml_fail(ML_ERR_ARG, "%s: colour '%s' is not of the form #rrggbb", fn, se->color);
            if (se->tag && f->kind != PL_BOX) return ml_fail(ML_ERR_ARG, "%s: tags belong to box plots", fn);
            int has_data = 0;
            for (int k = 0; k < se->n; k++) {
                int ok = isfinite(se->y[k]) && (f->kind == PL_BOX || f->kind == PL_BAR || isfinite(se->x[k]));
                if (ok && p->logx && se->x[k] <= 0)
                    return ml_fail(ML_ERR_ARG, "%s: x value %g of series %d is not > 0 on a log axis", fn, se->x[k], j + 1);
                has_data += ok;
                if (ok && se->tag && isfinite(se->tag[k])) {
                    int t = 0;
                    while (t < f->ntag && f->tags[t] < se->tag[k]) t++;
                    if (t < f->ntag && f->tags[t] == se->tag[k]) continue;
                    if (f->ntag == MAXKEYS) return ml_fail(ML_ERR_ARG, "%s: more than %d distinct tags", fn, MAXKEYS);
                    memmove(&f->tags[t + 1], &f->tags[t], sizeof(double) * (size_t)(f->ntag - t));
                    f->tags[t] = se->tag[k], f->ntag++;
                }
            }
            finite += has_data;
            const char *k = skey(se);
            if (find_str(f->keys, f->nkeys, k) < 0) {
                if (f->nkeys == MAXKEYS) return ml_fail(ML_ERR_ARG, "%s: more than %d distinct series", fn, MAXKEYS);
                f->keys[f->nkeys++] = k;
            }
            if (f->kind == PL_BOX) {
                int at = find_str(f->cats, f->ncat, k);
                if (at < 0 && p->categories)
                    return ml_fail(ML_ERR_ARG, "%s: group '%s' of panel %d is not among the categories", fn, k, i + 1);
                if (at < 0) {
                    at = f->ncat++;
                    f->cats[at] = f->cat_lab[at] = k;
                }
                /* the tick shows the first label given for the key (it may add a run count) */
                if (f->cat_lab[at] == f->cats[at] && se->label && se->label[0]) f->cat_lab[at] = se->label;
            }
            if (has_data && se->label && se->label[0] && f->nleg < MAXKEYS) { /* a series without points has no entry */
                int seen = 0;
                for (int l = 0; l < f->nleg && !seen; l++) seen = strcmp(f->leg[l]->label, se->label) == 0;
                if (!seen) f->leg[f->nleg++] = se;
            }
        }
    }
    if (!finite) return ml_fail(ML_ERR_ARG, "%s: no finite data to plot", fn);
    for (int t = 0; t < f->ntag; t++)
        snprintf(f->tag_lab[t], sizeof f->tag_lab[t], "%s%s%g", p->tag_title && p->tag_title[0] ? p->tag_title : "",
                 p->tag_title && p->tag_title[0] ? " = " : "", f->tags[t]);
    return ML_OK;
}

/* Data range [lo, hi] expanded like ggplot (5% each side), or the explicit limits. */
static void expand(double *lo, double *hi, const double lim[2], int logx) {
    if (!isfinite(*lo)) *lo = 0, *hi = 1;
    if (logx) *lo = log(*lo), *hi = log(*hi);
    if (*hi == *lo) {
        double d = fabs(*lo) > 0 ? fabs(*lo) * 0.1 : 1;
        *lo -= d, *hi += d;
    } else {
        double d = (*hi - *lo) * 0.05;
        *lo -= d, *hi += d;
    }
    if (logx) *lo = exp(*lo), *hi = exp(*hi);
    if (isfinite(lim[0])) *lo = lim[0];
    if (isfinite(lim[1])) *hi = lim[1];
}

static void yrange_of(const fig *f, const pl_panel *pa, double *lo, double *hi) {
    for (int j = 0; j < pa->nseries; j++) {
        const pl_series *se = &pa->series[j];
        for (int k = 0; k < se->n; k++)
            if (isfinite(se->y[k]) && (f->kind == PL_BOX || f->kind == PL_BAR || isfinite(se->x[k])))
                *lo = fmin(*lo, se->y[k]), *hi = fmax(*hi, se->y[k]);
    }
}

typedef struct {
    int n;
    double v[PL_MAXTICKS], step;
    char lab[PL_MAXTICKS][40];
} tickset;

static void make_ticks(tickset *t, const double *given, int ngiven, double lo, double hi, double logx, int target) {
    t->step = 0;
    if (ngiven) {
        t->n = 0;
        for (int i = 0; i < ngiven; i++)
            if (given[i] >= fmin(lo, hi) && given[i] <= fmax(lo, hi)) t->v[t->n++] = given[i];
    } else if (logx) {
        t->n = pl_log_ticks(lo, hi, logx, target, t->v);
        if (t->n < 2) t->n = pl_nice_ticks(lo, hi, target, t->v, &t->step);
    } else {
        t->n = pl_nice_ticks(lo, hi, target, t->v, &t->step);
    }
    for (int i = 0; i < t->n; i++) pl_tick_label(t->v[i], t->step, t->lab[i], sizeof t->lab[i]);
}

/* Type-7 quantile (R's default) of sorted v[0..n-1]. */
static double quantile(const double *v, int n, double q) {
    double h = (n - 1) * q;
    int i = (int)floor(h);
    return i + 1 < n ? v[i] + (h - i) * (v[i + 1] - v[i]) : v[n - 1];
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- drawing of the data in one panel ---- */

/* A number in [-1, 1) fixed by (seed, panel, series, point, axis): splitmix64 of their mix, so
 * that jitter is the same on every run and machine. */
static double jitter_unit(unsigned seed, int panel, int series, int k, int axis) {
    unsigned long long z = ((unsigned long long)seed << 32) ^ ((unsigned long long)panel << 48) ^
                           ((unsigned long long)series << 24) ^ ((unsigned long long)k << 1) ^ (unsigned long long)axis;
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 * 2 - 1;
}

/* Dodging, in screen space: at each x of a panel, the series (by key) whose markers would overlap
 * there form a cluster, spread `dodge` pixels apart and centred on that x; a series alone at an x
 * stays on it, so its point reads at its true x on any axis scale. A cluster never spreads wider
 * than 0.6 of the gap to the next x. Points of one key (a mean and its seeds) move together.
 * Returns one offset per point (base[j] + k for series j's point k), or NULL without dodge. */
typedef struct {
    double px, py;
    int key, j, k;
} dodge_pt;

static int cmp_dodge_pt(const void *a, const void *b) {
    const dodge_pt *x = a, *y = b;
    if (x->px != y->px) return x->px < y->px ? -1 : 1;
    if (x->key != y->key) return x->key - y->key;
    return (x->py > y->py) - (x->py < y->py);
}

typedef struct {
    int key;
    double lo, hi;
} dodge_span;

static int cmp_span_lo(const void *a, const void *b) {
    const dodge_span *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}
static int cmp_span_key(const void *a, const void *b) { return ((const dodge_span *)a)->key - ((const dodge_span *)b)->key; }

static double *dodge_offsets(const fig *f, const pl_panel *pa, const pl_box_px *b, int *base, double ms) {
    if (!(f->p->dodge > 0) || (f->kind != PL_LINES && f->kind != PL_SCATTER)) return NULL;
    int total = 0;
    for (int j = 0; j < pa->nseries; j++) base[j] = total, total += pa->series[j].n;
    double *off = calloc((size_t)(total ? total : 1), sizeof *off);
    dodge_pt *pt = malloc(sizeof *pt * (size_t)(total ? total : 1));
    dodge_span *sp = malloc(sizeof *sp * (size_t)(total ? total : 1));
    if (!off || !pt || !sp) {
        free(pt), free(sp);
        return off;
    }
    int n = 0;
    for (int j = 0; j < pa->nseries; j++) {
        const pl_series *se = &pa->series[j];
        int key = find_str(f->keys, f->nkeys, skey(se));
        for (int k = 0; k < se->n; k++)
            if (isfinite(se->x[k]) && isfinite(se->y[k]))
                pt[n++] = (dodge_pt){round(pl_px_x(b, se->x[k]) * 64) / 64, pl_px_y(b, se->y[k]), key, j, k};
    }
    qsort(pt, (size_t)n, sizeof *pt, cmp_dodge_pt);
    double gap = INFINITY; /* the smallest distance between two x that carry points */
    for (int i = 1; i < n; i++)
        if (pt[i].px - pt[i - 1].px > 0.5) gap = fmin(gap, pt[i].px - pt[i - 1].px);
    double step0 = f->p->dodge * f->s, near = 2 * ms + f->s; /* markers closer than this touch */
    for (int a = 0, e; a < n; a = e) {
        for (e = a; e < n && pt[e].px - pt[a].px <= 0.5;) e++;
        int m = 0; /* each key's vertical extent at this x */
        for (int i = a; i < e; i++) {
            if (m && sp[m - 1].key == pt[i].key) sp[m - 1].hi = fmax(sp[m - 1].hi, pt[i].py);
            else sp[m++] = (dodge_span){pt[i].key, pt[i].py, pt[i].py};
        }
        qsort(sp, (size_t)m, sizeof *sp, cmp_span_lo);
        for (int c0 = 0, c1; c0 < m; c0 = c1) {
            double hi = sp[c0].hi;
            for (c1 = c0 + 1; c1 < m && sp[c1].lo <= hi + near; c1++) hi = fmax(hi, sp[c1].hi);
            int cm = c1 - c0;
            if (cm < 2) continue;
            qsort(sp + c0, (size_t)cm, sizeof *sp, cmp_span_key); /* the figure's key order, left to right */
            double step = isfinite(gap) ? fmin(step0, 0.6 * gap / (cm - 1)) : step0;
            for (int q = 0; q < cm; q++)
                for (int i = a; i < e; i++)
                    if (pt[i].key == sp[c0 + q].key) off[base[pt[i].j] + pt[i].k] = (q - (cm - 1) / 2.0) * step;
        }
    }
    free(pt), free(sp);
    return off;
}

/* The fill opacity of a scatter series' points. */
static double point_alpha(const fig *f, const pl_series *se) {
    return se->alpha > 0 ? fmin(1, se->alpha) : isnan(f->p->alpha) ? 0.45 : f->p->alpha;
}

/* A scatter point's outline: darker than its fill and twice as opaque (at most solid), so that
 * a faint point (alpha 0.2 in a dense cloud) stays faint instead of an opaque ring. */
static pl_color point_edge(pl_color col, double alpha) {
    pl_color e = pl_darken(col, 0.8);
    e.a = (float)fmin(1, 2 * alpha);
    return e;
}

static void draw_data(fig *f, pl_canvas *c, const pl_panel *pa, const pl_box_px *b) {
    int ip = (int)(pa - f->pan);
    const pl_plot *p = f->p;
    double s = f->s, lw = (p->line_width > 0 ? p->line_width : 1.3) * s;
    double ms = (p->marker_size > 0 ? p->marker_size : 3.0) * s;
    double slot = (b->x1 - b->x0) / (b->xmax - b->xmin); /* pixels per category */
    int *base = malloc(sizeof(int) * (size_t)(pa->nseries ? pa->nseries : 1));
    if (!base) return;
    double *off = dodge_offsets(f, pa, b, base, ms);
    /* two passes: a scatter's series joined by a path or highlighted go on top of the cloud */
    for (int pass = 0; pass < 2; pass++)
    for (int j = 0; j < pa->nseries; j++) {
        const pl_series *se = &pa->series[j];
        if (pass != (f->kind == PL_SCATTER && (se->path || se->highlight))) continue;
        pl_color col = series_color(f, se);
        int mk = series_marker(f, se);
#define DX(k) (off ? off[base[j] + (k)] : 0)
        if (f->kind == PL_LINES || (f->kind == PL_SCATTER && se->path)) {
            double *xy = malloc(sizeof(double) * 2 * (size_t)(se->n ? se->n : 1));
            if (!xy) return;
            int m = 0;
            for (int k = 0; k <= se->n; k++) { /* NaN breaks the line */
                int ok = k < se->n && isfinite(se->x[k]) && isfinite(se->y[k]);
                if (ok) xy[2 * m] = pl_px_x(b, se->x[k]) + DX(k), xy[2 * m + 1] = pl_px_y(b, se->y[k]), m++;
                if (!ok && m) {
                    if (se->highlight) { /* a white halo lifts the highlighted path off the cloud */
                        pl_mask_polyline(c, xy, m, 1.5 * lw + 2 * s, 0);
                        pl_paint(c, pl_grey(1, 0.85f));
                    }
                    double w = se->highlight ? 1.5 * lw : lw; /* a highlighted path reads over its cloud */
                    if (se->dashed) pl_mask_dashed(c, xy, m, w, 4.5 * s, 3 * s);
                    else pl_mask_polyline(c, xy, m, w, 0);
                    pl_paint(c, se->highlight ? pl_darken(col, 0.8) : col);
                    m = 0;
                }
            }
            free(xy);
            if (f->kind == PL_LINES && p->markers && mk)
                for (int k = 0; k < se->n; k++)
                    if (isfinite(se->x[k]) && isfinite(se->y[k]))
                        pl_draw_marker(c, mk, pl_px_x(b, se->x[k]) + DX(k), pl_px_y(b, se->y[k]), ms, col, col, 0);
        }
        if (f->kind == PL_SCATTER) {
            double alpha = point_alpha(f, se);
            pl_color fill = col, edge = point_edge(col, alpha);
            fill.a *= (float)alpha;
            double jit = p->jitter * s;
            for (int k = 0; k < se->n; k++)
                if (isfinite(se->x[k]) && isfinite(se->y[k])) {
                    double px = pl_px_x(b, se->x[k]) + DX(k), py = pl_px_y(b, se->y[k]);
                    /* a path joins the unjittered points: jitter only the points drawn alone */
                    if (jit > 0 && !se->path)
                        px += jit * jitter_unit(p->jitter_seed, ip, j, k, 0), py += jit * jitter_unit(p->jitter_seed, ip, j, k, 1);
                    if (se->highlight) /* the figure's point: larger, with a solid dark outline */
                        pl_draw_marker(c, mk ? mk : PL_MARKER_CIRCLE, px, py, 1.35 * ms, fill, pl_darken(col, 0.55), 1.2 * s);
                    else
                        pl_draw_marker(c, mk ? mk : PL_MARKER_CIRCLE, px, py, ms, fill, edge, 0.9 * s);
                }
        } else if (f->kind == PL_LINES) {
            continue;
        } else if (f->kind == PL_BOX) {
            double *v = malloc(sizeof(double) * 2 * (size_t)(se->n ? se->n : 1));
            if (!v) break;
            double *tg = v + (se->n ? se->n : 1);
            int m = 0;
            for (int k = 0; k < se->n; k++)
                if (isfinite(se->y[k])) tg[m] = se->tag ? se->tag[k] : NAN, v[m++] = se->y[k];
            double xc = pl_px_x(b, find_str(f->cats, f->ncat, skey(se)));
            if (m && m < PL_BOX_MIN_N) { /* a few runs: their points, side by side; a box would invent a spread */
                pl_color fill = col;
                fill.a *= (float)(isnan(p->alpha) ? 0.85 : p->alpha);
                int places = f->ntag ? f->ntag : m; /* with tags, one place (and shape) per tag value */
                double sp = fmin(7 * s, slot * 0.7 / places);
                for (int k = 0; k < m; k++) {
                    int rank = -1, same = 0, before = 0;
                    for (int t = 0; t < f->ntag; t++)
                        if (f->tags[t] == tg[k]) rank = t;
                    double x = xc + (k - (m - 1) / 2.0) * sp;
                    if (f->ntag) {
                        for (int q = 0; q < m; q++) same += tg[q] == tg[k] || (isnan(tg[q]) && isnan(tg[k])), before += q < k && (tg[q] == tg[k] || (isnan(tg[q]) && isnan(tg[k])));
                        x = xc + (rank >= 0 ? rank - (f->ntag - 1) / 2.0 : 0) * sp + (before - (same - 1) / 2.0) * sp * 0.4;
                    }
                    pl_draw_marker(c, rank >= 0 ? marker_cycle[rank % 7] : PL_MARKER_CIRCLE, x, pl_px_y(b, v[k]), 3 * s, fill,
                                   pl_grey(0.2, 1), fmax(1, 0.9 * s));
                }
            } else if (m) {
                qsort(v, (size_t)m, sizeof *v, cmp_double);
                double q1 = quantile(v, m, 0.25), med = quantile(v, m, 0.5), q3 = quantile(v, m, 0.75);
                double lo = q1 - 1.5 * (q3 - q1), hi = q3 + 1.5 * (q3 - q1), wlo = med, whi = med;
                for (int k = 0; k < m; k++)
                    if (v[k] >= lo) wlo = fmin(wlo, v[k]), whi = fmax(whi, v[k] <= hi ? v[k] : whi);
                double x = xc, hw = fmin(slot * 0.3, 40 * s);
                pl_color edge = pl_grey(0.2, 1), fill = col;
                fill.a *= (float)(isnan(p->alpha) ? 0.85 : p->alpha);
                double ew = fmax(1, 0.9 * s);
                pl_line(c, x, pl_px_y(b, whi), x, pl_px_y(b, q3), ew, edge);
                pl_line(c, x, pl_px_y(b, q1), x, pl_px_y(b, wlo), ew, edge);
                pl_fill_rect(c, x - hw, pl_px_y(b, q3), x + hw, pl_px_y(b, q1), fill);
                pl_stroke_rect(c, x - hw, pl_px_y(b, q3), x + hw, pl_px_y(b, q1), ew, edge);
                pl_line(c, x - hw, pl_px_y(b, med), x + hw, pl_px_y(b, med), 2 * ew, edge);
                for (int k = 0; k < m; k++)
                    if (v[k] < wlo || v[k] > whi) pl_draw_marker(c, PL_MARKER_CIRCLE, x, pl_px_y(b, v[k]), 1.6 * s, edge, edge, 0);
            }
            free(v);
        } else { /* bars: series j of nseries side by side within each category slot */
            double bw = slot * 0.8 / pa->nseries;
            pl_color fill = col;
            fill.a *= (float)(isnan(p->alpha) ? 1 : p->alpha);
            for (int k = 0; k < se->n; k++) {
                if (!isfinite(se->y[k])) continue;
                double x0 = pl_px_x(b, k) - slot * 0.4 + j * bw;
                double y0 = pl_px_y(b, fmax(b->ymin, fmin(0, b->ymax))), y1 = pl_px_y(b, se->y[k]);
                pl_fill_rect(c, x0 + 0.5 * s, y0, x0 + bw - 0.5 * s, y1, fill);
            }
        }
#undef DX
    }
    free(off);
    free(base);
}

/* The legend's entries: a box plot with tags lists the tag values (their marker shapes), any
 * other figure its labelled series that have data. */
static int legend_n(const fig *f) { return f->kind == PL_BOX && f->ntag ? f->ntag : f->nleg; }
static const char *legend_label(const fig *f, int l) { return f->kind == PL_BOX && f->ntag ? f->tag_lab[l] : f->leg[l]->label; }

/* Legend key glyph for a series, centred at (x, y). */
static void draw_key(fig *f, pl_canvas *c, const pl_series *se, double x, double y) {
    double s = f->s;
    pl_color col = series_color(f, se);
    int mk = series_marker(f, se);
    if (f->kind == PL_LINES) {
        double xy[4] = {x - 9 * s, y, x + 9 * s, y};
        if (se->dashed) pl_mask_dashed(c, xy, 2, 1.3 * s, 4.5 * s, 3 * s);
        else pl_mask_polyline(c, xy, 2, 1.3 * s, 0);
        pl_paint(c, col);
        if (f->p->markers && mk) pl_draw_marker(c, mk, x, y, 3 * s, col, col, 0);
    } else if (f->kind == PL_SCATTER) { /* a faint cloud's key would be unreadable: at least 0.45 */
        double alpha = fmax(0.45, point_alpha(f, se));
        pl_color fill = col;
        fill.a *= (float)alpha;
        pl_draw_marker(c, mk ? mk : PL_MARKER_CIRCLE, x, y, 3.4 * s, fill, point_edge(col, alpha), 0.9 * s);
    } else {
        pl_fill_rect(c, x - 5 * s, y - 5 * s, x + 5 * s, y + 5 * s, col);
        if (f->kind == PL_BOX) pl_stroke_rect(c, x - 5 * s, y - 5 * s, x + 5 * s, y + 5 * s, fmax(1, 0.9 * s), pl_grey(0.2, 1));
    }
}

/* Snaps a coordinate to a pixel centre, so 1-pixel rules are crisp. */
static double crisp(double v) { return floor(v) + 0.5; }

/* ---- layout: data ranges, ticks, legend and margins ---- */

enum { PL_CAPLINES = 8 };

typedef struct {
    double W, H;
    int ncol, nrow, cat, legend, xrot, every_xaxis; /* every_xaxis: panels' category labels differ */
    double xlo, xhi, ylo[PL_MAXPANELS], yhi[PL_MAXPANELS];
    tickset *yt; /* per panel */
    tickset xt;
    double strip_h, xaxis_h, pw, ph, colgap, rowgap[PL_MAXPANELS];
    double left, top, keyw, rowh, lw_right, lw_bottom, lh_right, cap_h;
    const char *ltitle;
    pl_font ft, fl, fti, fs, fg, fgt, fc;
    char *cap_text; /* the caption, cut into lines at spaces */
    int cap_n;
    const char *cap_line[PL_CAPLINES];
} frame;

/* The shared x range and each panel's y range (shared unless free_y). */
static ml_status data_ranges(const fig *f, frame *fr) {
    const pl_plot *p = f->p;
    double xlo = INFINITY, xhi = -INFINITY, glo = INFINITY, ghi = -INFINITY;
    if (fr->cat) {
        xlo = -0.6, xhi = f->ncat - 0.4;
    } else {
        for (int i = 0; i < f->np; i++)
            for (int j = 0; j < f->pan[i].nseries; j++) {
                const pl_series *se = &f->pan[i].series[j];
                for (int k = 0; k < se->n; k++)
                    if (isfinite(se->x[k]) && isfinite(se->y[k])) xlo = fmin(xlo, se->x[k]), xhi = fmax(xhi, se->x[k]);
            }
        expand(&xlo, &xhi, p->xlim, p->logx > 1);
    }
    if (!(xhi > xlo) || (p->logx && !(xlo > 0))) return ml_fail(ML_ERR_ARG, "%s: empty x range [%g, %g]", f->fn, xlo, xhi);
    fr->xlo = xlo, fr->xhi = xhi;
    for (int i = 0; i < f->np; i++) {
        fr->ylo[i] = INFINITY, fr->yhi[i] = -INFINITY;
        yrange_of(f, &f->pan[i], &fr->ylo[i], &fr->yhi[i]);
        for (int k = 0; k < p->nhlines; k++)
            if (isfinite(p->hlines[k])) fr->ylo[i] = fmin(fr->ylo[i], p->hlines[k]), fr->yhi[i] = fmax(fr->yhi[i], p->hlines[k]);
        if (f->kind == PL_BAR && isfinite(fr->ylo[i])) fr->ylo[i] = fmin(fr->ylo[i], 0), fr->yhi[i] = fmax(fr->yhi[i], 0);
        glo = fmin(glo, fr->ylo[i]), ghi = fmax(ghi, fr->yhi[i]);
    }
    for (int i = 0; i < f->np; i++) {
        if (!p->free_y) fr->ylo[i] = glo, fr->yhi[i] = ghi;
        int bar0 = f->kind == PL_BAR && fr->ylo[i] == 0; /* bars stand on the panel floor */
        expand(&fr->ylo[i], &fr->yhi[i], p->ylim, 0);
        if (bar0 && isnan(p->ylim[0])) fr->ylo[i] = 0;
        if (!(fr->yhi[i] > fr->ylo[i])) return ml_fail(ML_ERR_ARG, "%s: empty y range [%g, %g]", f->fn, fr->ylo[i], fr->yhi[i]);
    }
    return ML_OK;
}

/* Legend placement and size: right of the panels, or one row at the bottom when it fits. */
static void plan_legend(const fig *f, frame *fr) {
    double s = f->s;
    int legend = f->p->legend;
    int tags = f->kind == PL_BOX && f->ntag, nl = legend_n(f);
    if (legend == PL_LEGEND_AUTO)
        legend = nl == 0 || (f->kind == PL_BOX && !tags) || (f->kind == PL_BAR && nl < 2) ? PL_LEGEND_NONE : PL_LEGEND_RIGHT;
    if (nl == 0) legend = PL_LEGEND_NONE;
    fr->ltitle = tags ? NULL : f->p->legend_title && f->p->legend_title[0] ? f->p->legend_title : NULL;
    fr->keyw = (f->kind == PL_LINES ? 20 : 12) * s, fr->rowh = fmax(pl_text_height(&fr->fg), 13 * s);
    fr->lw_right = fr->lw_bottom = 0;
    for (int l = 0; l < nl; l++) {
        double tw = pl_text_width(legend_label(f, l), &fr->fg);
        fr->lw_right = fmax(fr->lw_right, fr->keyw + PL_GAP * s + tw);
        fr->lw_bottom += fr->keyw + PL_GAP * s + tw + 12 * s;
    }
    if (fr->ltitle) {
        fr->lw_right = fmax(fr->lw_right, pl_text_width(fr->ltitle, &fr->fgt));
        fr->lw_bottom += pl_text_width(fr->ltitle, &fr->fgt) + 10 * s;
    }
    fr->lh_right = fr->rowh * (nl + (fr->ltitle ? 1 : 0));
    if (legend == PL_LEGEND_BOTTOM && fr->lw_bottom > fr->W - 2 * PL_PAD * s) legend = PL_LEGEND_RIGHT;
    fr->legend = legend;
}

/* x ticks and their labels (categories rotate when they do not fit their slot). */
static void plan_xticks(const fig *f, frame *fr) {
    const pl_plot *p = f->p;
    double s = f->s, xt_h = pl_text_height(&fr->ft);
    tickset *xt = &fr->xt;
    fr->xrot = 0;
    if (fr->cat) {
        xt->n = f->ncat, xt->step = 0;
        double maxw = 0;
        for (int k = 0; k < f->ncat; k++) {
            xt->v[k] = k;
            snprintf(xt->lab[k], sizeof xt->lab[k], "%s", f->cat_lab[k]);
            maxw = fmax(maxw, pl_text_width(xt->lab[k], &fr->ft));
        }
        if (f->ncat > PL_MAXTICKS) xt->n = PL_MAXTICKS;
        fr->every_xaxis = 0;
        for (int i = 0; i < f->np; i++) /* a panel's own labels (e.g. with its run counts) */
            for (int j = 0; j < f->pan[i].nseries; j++) {
                const pl_series *se = &f->pan[i].series[j];
                if (!se->label || !se->label[0]) continue;
                maxw = fmax(maxw, pl_text_width(se->label, &fr->ft));
                if (f->kind == PL_BOX && strcmp(se->label, f->cat_lab[find_str(f->cats, f->ncat, skey(se))]) != 0) fr->every_xaxis = 1;
            }
        if (maxw > fr->pw / f->ncat - 4 * s) fr->xrot = 1, xt_h = maxw + 2 * s;
    } else {
        make_ticks(xt, p->xticks, p->nxticks, fr->xlo, fr->xhi, p->logx, (int)fmax(2, fmin(8, fr->pw / ((p->logx ? 32 : 55) * s))));
    }
    fr->xaxis_h = PL_TICKLEN * s + 3 * s + xt_h;
}

/* The caption at the tick labels' size (readable wherever the figure is), broken at spaces into
 * lines that fit the figure's width; only a word wider than the figure, or a ninth line, makes
 * a line shrink when drawn. */
static ml_status wrap_caption(const fig *f, frame *fr) {
    const char *cap = f->p->caption;
    fr->cap_n = 0;
    if (!cap || !cap[0]) return ML_OK;
    fr->fc = pl_f(PL_FS_TICK, f->s, 0, 0, PL_LEFT, PL_BOTTOM);
    if (!(fr->cap_text = malloc(strlen(cap) + 1))) return ml_fail(ML_ERR_MEM, "plot: out of memory");
    strcpy(fr->cap_text, cap);
    double room = fr->W - 2 * PL_PAD * f->s;
    char *line = fr->cap_text;
    while (line) {
        fr->cap_line[fr->cap_n++] = line;
        if (fr->cap_n == PL_CAPLINES || pl_text_width(line, &fr->fc) <= room) break;
        char *cut = NULL; /* the last space before which the line fits, else the first */
        for (char *sp = strchr(line, ' '); sp; sp = strchr(sp + 1, ' ')) {
            *sp = 0;
            int fits = pl_text_width(line, &fr->fc) <= room;
            *sp = ' ';
            if (!fits && cut) break;
            cut = sp;
            if (!fits) break;
        }
        if (!cut) break;
        *cut = 0;
        line = cut + 1;
    }
    return ML_OK;
}

/* Fonts, ticks, legend, margins and the panels' size. */
static ml_status plan_layout(fig *f, frame *fr) {
    const pl_plot *p = f->p;
    double s = f->s;
    int np = f->np;
    fr->W = round((p->width > 0 ? p->width : 480) * s), fr->H = round((p->height > 0 ? p->height : 340) * s);
    fr->cat = f->kind == PL_BOX || f->kind == PL_BAR;
    fr->ncol = p->ncol > 0 ? (p->ncol < np ? p->ncol : np) : np <= 4 ? np : (int)ceil(sqrt(np));
    fr->nrow = (np + fr->ncol - 1) / fr->ncol;
    if (data_ranges(f, fr)) return ml_last_status();

    fr->ft = pl_f(PL_FS_TICK, s, 0, 0, PL_RIGHT, PL_MIDDLE), fr->fl = pl_f(PL_FS_LABEL, s, 0, 0, PL_CENTER, PL_TOP);
    fr->fti = pl_f(PL_FS_TITLE, s, 1, 0, PL_LEFT, PL_TOP), fr->fs = pl_f(PL_FS_STRIP, s, 0, 0, PL_CENTER, PL_MIDDLE);
    fr->fg = pl_f(PL_FS_LEGEND, s, 0, 0, PL_LEFT, PL_MIDDLE), fr->fgt = pl_f(PL_FS_LEGEND, s, 1, 0, PL_LEFT, PL_MIDDLE);
    double lh_label = pl_text_height(&fr->fl), lh_title = pl_text_height(&fr->fti);
    int strips = 0;
    for (int i = 0; i < np; i++) strips |= f->pan[i].title && f->pan[i].title[0];
    fr->strip_h = strips ? round(pl_text_height(&fr->fs) + 6 * s) : 0;

    double est_h = (fr->H - 2 * PL_PAD * s - 60 * s) / fr->nrow - fr->strip_h;
    int ytarget = (int)fmax(3, fmin(8, est_h / (40 * s)));
    fr->yt = calloc((size_t)np, sizeof *fr->yt);
    if (!fr->yt) return ml_fail(ML_ERR_MEM, "plot: out of memory");
    double ytw = 0;
    for (int i = 0; i < np; i++) {
        make_ticks(&fr->yt[i], p->yticks, p->nyticks, fr->ylo[i], fr->yhi[i], 0, ytarget);
        /* at least three ticks: a short panel's axis must still show its scale between 0 and 1 */
        for (int t = ytarget + 1; !p->nyticks && fr->yt[i].n < 3 && t <= 10; t++)
            make_ticks(&fr->yt[i], NULL, 0, fr->ylo[i], fr->yhi[i], 0, t);
        for (int k = 0; k < fr->yt[i].n; k++) ytw = fmax(ytw, pl_text_width(fr->yt[i].lab[k], &fr->ft));
    }
    double yaxis_w = ytw + PL_TICKLEN * s + 3 * s; /* tick labels plus ticks */
    plan_legend(f, fr);

    fr->left = PL_PAD * s + (p->ylabel && p->ylabel[0] ? lh_label + PL_GAP * s : 0) + yaxis_w;
    double right = PL_PAD * s + (fr->legend == PL_LEGEND_RIGHT ? fr->lw_right + 12 * s : 0);
    fr->top = PL_PAD * s + (p->title && p->title[0] ? lh_title + 6 * s : 0);
    fr->colgap = p->free_y ? yaxis_w + 6 * s : 8 * s;
    fr->pw = (fr->W - fr->left - right - (fr->ncol - 1) * fr->colgap) / fr->ncol;
    plan_xticks(f, fr);
    if (wrap_caption(f, fr)) return ml_last_status();
    fr->cap_h = fr->cap_n ? fr->cap_n * pl_text_height(&fr->fc) + 8 * s : 0;
    double bottom = PL_PAD * s + fr->xaxis_h + (p->xlabel && p->xlabel[0] ? lh_label + PL_GAP * s : 0) +
                    (fr->legend == PL_LEGEND_BOTTOM ? fr->rowh + 8 * s : 0) + fr->cap_h;
    /* a panel with no panel below it carries x tick labels, so its row needs their room */
    double gaps = 0;
    for (int r = 0; r < fr->nrow - 1; r++) {
        int need = (np % fr->ncol && r == fr->nrow - 2) || fr->every_xaxis;
        for (int i = (r + 1) * fr->ncol; i < (r + 2) * fr->ncol && i < np; i++) need |= f->pan[i].blank; /* axis over a blank */
        fr->rowgap[r] = need ? fr->xaxis_h + 6 * s : 8 * s;
        gaps += fr->rowgap[r];
    }
    fr->ph = (fr->H - fr->top - bottom - gaps - fr->nrow * fr->strip_h) / fr->nrow;
    if (fr->pw < 30 * s || fr->ph < 30 * s)
        return ml_fail(ML_ERR_ARG, "%s: a %gx%g figure leaves no room for %d panels with these labels; make it larger", f->fn,
                       fr->W / s, fr->H / s, np);
    return ML_OK;
}

/* ---- drawing ---- */

static void draw_strip(pl_canvas *c, const frame *fr, const char *title, double x0, double y, double x1, double y0, double ew) {
    pl_fill_rect(c, x0, y, x1, y0, PL_STRIP);
    pl_stroke_rect(c, crisp(x0), crisp(y), crisp(x1 - 1), crisp(y0), ew, PL_BORDER);
    pl_font fs = fr->fs;
    double room = x1 - x0 - 6 * fs.size / PL_FS_STRIP, w = pl_text_width(title, &fs);
    if (w > room && room > 0) fs.size *= room / w; /* a long label shrinks to fit its panel */
    pl_text(c, title, &fs, (x0 + x1) / 2, (y + y0) / 2, PL_INK);
}

/* Grid: minor lines halfway between major ones, as theme_bw; then the reference lines. */
static void draw_grid(const fig *f, pl_canvas *c, const frame *fr, const tickset *ty, const pl_box_px *b, double ew) {
    const pl_plot *p = f->p;
    double s = f->s;
    for (int k = 0; k + 1 < ty->n; k++) {
        double m = crisp(pl_px_y(b, (ty->v[k] + ty->v[k + 1]) / 2));
        pl_mask_segment(c, b->x0, m, b->x1, m, fmax(1, 0.5 * s));
    }
    if (!fr->cat)
        for (int k = 0; k + 1 < fr->xt.n; k++) {
            double mid = p->logx ? sqrt(fr->xt.v[k] * fr->xt.v[k + 1]) : (fr->xt.v[k] + fr->xt.v[k + 1]) / 2;
            double m = crisp(pl_px_x(b, mid));
            pl_mask_segment(c, m, b->y0, m, b->y1, fmax(1, 0.5 * s));
        }
    pl_paint(c, pl_grey(0.95, 1));
    for (int k = 0; k < ty->n; k++) {
        double m = crisp(pl_px_y(b, ty->v[k]));
        pl_mask_segment(c, b->x0, m, b->x1, m, ew);
    }
    for (int k = 0; k < fr->xt.n; k++) {
        double m = crisp(pl_px_x(b, fr->xt.v[k]));
        pl_mask_segment(c, m, b->y0, m, b->y1, ew);
    }
    pl_paint(c, PL_GRID);
    for (int k = 0; k < p->nhlines; k++) {
        double m = crisp(pl_px_y(b, p->hlines[k])), xy[4] = {b->x0, m, b->x1, m};
        pl_mask_dashed(c, xy, 2, ew, 4 * s, 3 * s);
    }
    pl_paint(c, pl_grey(0.35, 1));
}

static void draw_yaxis(const fig *f, pl_canvas *c, const frame *fr, const tickset *ty, const pl_box_px *b, double ew) {
    double s = f->s;
    for (int k = 0; k < ty->n; k++) {
        double m = crisp(pl_px_y(b, ty->v[k]));
        pl_mask_segment(c, b->x0 - PL_TICKLEN * s, m, b->x0, m, ew);
    }
    pl_paint(c, PL_BORDER);
    for (int k = 0; k < ty->n; k++) pl_text(c, ty->lab[k], &fr->ft, b->x0 - PL_TICKLEN * s - 3 * s, pl_px_y(b, ty->v[k]), PL_TICKINK);
}

/* A category's tick label in panel pa: the label of the panel's own series of that key, else the
 * figure's (the first series of that key). */
static const char *cat_label(const fig *f, const pl_panel *pa, int k, const char *dflt) {
    if (f->kind != PL_BOX) return dflt;
    for (int j = 0; j < pa->nseries; j++)
        if (pa->series[j].label && pa->series[j].label[0] && strcmp(skey(&pa->series[j]), f->cats[k]) == 0) return pa->series[j].label;
    return dflt;
}

static void draw_xaxis(const fig *f, pl_canvas *c, const frame *fr, const pl_panel *pa, const pl_box_px *b, double ew) {
    double s = f->s;
    const tickset *xt = &fr->xt;
    for (int k = 0; k < xt->n; k++) {
        double m = crisp(pl_px_x(b, xt->v[k]));
        pl_mask_segment(c, m, b->y1, m, b->y1 + PL_TICKLEN * s, ew);
    }
    pl_paint(c, PL_BORDER);
    pl_font fx = pl_f(PL_FS_TICK, s, 0, fr->xrot ? 90 : 0, fr->xrot ? PL_RIGHT : PL_CENTER, fr->xrot ? PL_MIDDLE : PL_TOP);
    for (int k = 0; k < xt->n; k++)
        pl_text(c, fr->cat ? cat_label(f, pa, k, xt->lab[k]) : xt->lab[k], &fx, pl_px_x(b, xt->v[k]), b->y1 + PL_TICKLEN * s + 3 * s,
                PL_TICKINK);
}

/* Panel i at row r, column col, whose strip starts at y: strip, grid, data, border, axes. */
static void draw_panel(fig *f, pl_canvas *c, const frame *fr, pl_layout *L, int i, int col, double y) {
    const pl_plot *p = f->p;
    double ew = fmax(1, round(0.8 * f->s)); /* rules */
    double x0 = round(fr->left + col * (fr->pw + fr->colgap)), x1 = round(x0 + fr->pw);
    double y0 = round(y + fr->strip_h), y1 = round(y0 + fr->ph);
    pl_box_px *b = &L->panel[i];
    *b = (pl_box_px){x0, y0, x1, y1, fr->xlo, fr->xhi, fr->ylo[i], fr->yhi[i], p->logx};
    if (f->pan[i].blank) return; /* a slot that cannot have data stays white */
    const char *title = f->pan[i].title;
    if (title && title[0] && fr->strip_h > 0) draw_strip(c, fr, title, x0, y, x1, y0, ew);
    pl_clip(c, x0, y0, x1, y1);
    draw_grid(f, c, fr, &fr->yt[i], b, ew);
    draw_data(f, c, &f->pan[i], b);
    pl_unclip(c);
    pl_stroke_rect(c, crisp(x0), crisp(y0), crisp(x1 - 1), crisp(y1 - 1), ew, PL_BORDER);
    if (col == 0 || p->free_y || f->pan[i - 1].blank) draw_yaxis(f, c, fr, &fr->yt[i], b, ew); /* first in its row, or free scales */
    if (i + fr->ncol >= f->np || fr->every_xaxis || f->pan[i + fr->ncol].blank)
        draw_xaxis(f, c, fr, &f->pan[i], b, ew); /* nothing below, or own labels */
}

static void draw_titles(const fig *f, pl_canvas *c, const frame *fr, pl_layout *L, const double g[4]) {
    const pl_plot *p = f->p;
    double s = f->s;
    if (p->title && p->title[0]) { /* a title wider than the figure shrinks to fit */
        pl_font ft = fr->fti;
        double room = fr->W - PL_PAD * s - g[0], w = pl_text_width(p->title, &ft);
        if (w > room && room > 0) ft.size *= room / w;
        pl_text(c, p->title, &ft, g[0], PL_PAD * s, PL_INK);
        pl_text_box(p->title, &ft, g[0], PL_PAD * s, L->title);
    }
    if (p->xlabel && p->xlabel[0]) pl_text(c, p->xlabel, &fr->fl, (g[0] + g[2]) / 2, g[3] + fr->xaxis_h + PL_GAP * s, PL_INK);
    if (p->ylabel && p->ylabel[0]) {
        pl_font fy = pl_f(PL_FS_LABEL, s, 0, 90, PL_CENTER, PL_TOP);
        pl_text(c, p->ylabel, &fy, PL_PAD * s, (g[1] + g[3]) / 2, PL_INK);
    }
    if (fr->cap_n) { /* left-aligned at the bottom, line by line */
        double room = fr->W - 2 * PL_PAD * s, lh = pl_text_height(&fr->fc);
        L->caption[0] = L->caption[1] = INFINITY, L->caption[2] = L->caption[3] = -INFINITY;
        for (int i = 0; i < fr->cap_n; i++) {
            pl_font fc = fr->fc;
            double w = pl_text_width(fr->cap_line[i], &fc), y = fr->H - PL_PAD * s - (fr->cap_n - 1 - i) * lh, box[4];
            if (w > room) fc.size *= room / w;
            pl_text(c, fr->cap_line[i], &fc, PL_PAD * s, y, PL_TICKINK);
            pl_text_box(fr->cap_line[i], &fc, PL_PAD * s, y, box);
            L->caption[0] = fmin(L->caption[0], box[0]), L->caption[1] = fmin(L->caption[1], box[1]);
            L->caption[2] = fmax(L->caption[2], box[2]), L->caption[3] = fmax(L->caption[3], box[3]);
        }
        L->caption_lines = fr->cap_n;
    }
}

/* Legend entry l's key: a tag's marker shape in grey, or the series' key glyph. */
static void draw_entry_key(fig *f, pl_canvas *c, int l, double x, double y) {
    if (f->kind == PL_BOX && f->ntag)
        pl_draw_marker(c, marker_cycle[l % 7], x, y, 3.4 * f->s, pl_grey(0.6, 1), pl_grey(0.2, 1), fmax(1, 0.9 * f->s));
    else
        draw_key(f, c, f->leg[l], x, y);
}

/* The legend beside (right) or under (bottom) the panels' box g. */
static void draw_legend(fig *f, pl_canvas *c, const frame *fr, pl_layout *L, const double g[4]) {
    double s = f->s, keyw = fr->keyw, rowh = fr->rowh;
    if (fr->legend == PL_LEGEND_RIGHT) {
        double lx = g[2] + 12 * s, ly = round((g[1] + g[3]) / 2 - fr->lh_right / 2);
        L->legend[0] = lx, L->legend[1] = ly, L->legend[2] = lx + fr->lw_right, L->legend[3] = ly + fr->lh_right;
        if (fr->ltitle) pl_text(c, fr->ltitle, &fr->fgt, lx, ly + rowh / 2, PL_INK), ly += rowh;
        for (int l = 0; l < legend_n(f); l++, ly += rowh) {
            draw_entry_key(f, c, l, lx + keyw / 2, crisp(ly + rowh / 2));
            pl_text(c, legend_label(f, l), &fr->fg, lx + keyw + PL_GAP * s, ly + rowh / 2, PL_INK);
        }
    } else if (fr->legend == PL_LEGEND_BOTTOM) {
        double lx = round((g[0] + g[2]) / 2 - (fr->lw_bottom - 12 * s) / 2), ly = fr->H - PL_PAD * s - fr->cap_h - rowh / 2;
        L->legend[0] = lx, L->legend[1] = ly - rowh / 2, L->legend[2] = lx + fr->lw_bottom - 12 * s, L->legend[3] = ly + rowh / 2;
        if (fr->ltitle) pl_text(c, fr->ltitle, &fr->fgt, lx, ly, PL_INK), lx += pl_text_width(fr->ltitle, &fr->fgt) + 10 * s;
        for (int l = 0; l < legend_n(f); l++) {
            draw_entry_key(f, c, l, lx + keyw / 2, crisp(ly));
            pl_text(c, legend_label(f, l), &fr->fg, lx + keyw + PL_GAP * s, ly, PL_INK);
            lx += keyw + PL_GAP * s + pl_text_width(legend_label(f, l), &fr->fg) + 12 * s;
        }
    }
    if (fr->legend == PL_LEGEND_RIGHT || fr->legend == PL_LEGEND_BOTTOM) {
        L->nlegend = legend_n(f);
        for (int l = 0; l < L->nlegend && l < 32; l++) snprintf(L->legend_label[l], sizeof L->legend_label[l], "%s", legend_label(f, l));
    }
}

static pl_canvas *draw_figure(fig *f, const frame *fr, pl_layout *lay, const pl_target *t) {
    pl_canvas *c = pl_target_canvas(t, fr->W, fr->H);
    if (!c) return NULL;
    pl_layout L;
    memset(&L, 0, sizeof L);
    L.npanels = f->np;
    double y = fr->top;
    for (int r = 0; r < fr->nrow; r++) {
        for (int col = 0; col < fr->ncol && r * fr->ncol + col < f->np; col++) draw_panel(f, c, fr, &L, r * fr->ncol + col, col, y);
        y += fr->strip_h + fr->ph + (r < fr->nrow - 1 ? fr->rowgap[r] : 0);
    }
    /* the box around all panels (strips included) */
    double g[4] = {L.panel[0].x0, L.panel[0].y0 - fr->strip_h, L.panel[fr->ncol - 1].x1, L.panel[f->np - 1].y1};
    for (int i = 0; i < f->np; i++) g[2] = fmax(g[2], L.panel[i].x1), g[3] = fmax(g[3], L.panel[i].y1);
    draw_titles(f, c, fr, &L, g);
    draw_legend(f, c, fr, &L, g);
    if (lay) *lay = L;
    return c;
}

pl_canvas *pl_render_to(pl_kind kind, const pl_plot *p, int np, const pl_panel *pan, pl_layout *lay, const pl_target *t) {
    if ((unsigned)kind > PL_BAR || !p) {
        ml_fail(ML_ERR_ARG, "plot: bad figure kind");
        return NULL;
    }
    fig *f = calloc(1, sizeof *f);
    frame *fr = calloc(1, sizeof *fr);
    pl_canvas *c = NULL;
    if (!f || !fr) {
        ml_fail(ML_ERR_MEM, "plot: out of memory");
    } else {
        *f = (fig){.kind = kind, .fn = kind_fn[kind], .p = p, .np = np, .pan = pan};
        f->s = p->scale > 0 ? p->scale : 1;
        if (!validate(f) && !pl_font_load() && !plan_layout(f, fr)) c = draw_figure(f, fr, lay, t);
        free(fr->yt);
        free(fr->cap_text);
    }
    free(fr);
    free(f);
    return c;
}

pl_canvas *pl_render(pl_kind kind, const pl_plot *p, int np, const pl_panel *pan, pl_layout *lay) {
    pl_target t = {PL_PNG, NULL, p ? p->scale : 1};
    return pl_render_to(kind, p, np, pan, lay, &t);
}

static const char *panel_name(const pl_panel *pa, int i, char buf[16]) {
    if (pa->title && pa->title[0]) return pa->title;
    snprintf(buf, 16, "%d", i + 1);
    return buf;
}

typedef struct {
    pl_kind kind;
    const pl_plot *p;
    int np;
    const pl_panel *pan;
} figure_args;

static void figure_csv(FILE *fp, const void *arg) {
    const figure_args *a = arg;
    pl_kind kind = a->kind;
    fputs(kind == PL_BOX ? "panel,group,value\n" : kind == PL_BAR ? "panel,category,series,value\n" : "panel,series,x,y\n", fp);
    char buf[16];
    for (int i = 0; i < a->np; i++)
        for (int j = 0; j < a->pan[i].nseries; j++) {
            const pl_series *se = &a->pan[i].series[j];
            for (int k = 0; k < se->n; k++) {
                pl_csv_str(fp, panel_name(&a->pan[i], i, buf), ',');
                if (kind == PL_BAR) pl_csv_str(fp, a->p->categories[k], ',');
                pl_csv_str(fp, skey(se), ',');
                if (kind == PL_LINES || kind == PL_SCATTER) pl_csv_num(fp, se->x[k], ',');
                pl_csv_num(fp, se->y[k], '\n');
            }
        }
}

static pl_canvas *figure_draw(const void *arg, const pl_target *t) {
    const figure_args *a = arg;
    return pl_render_to(a->kind, a->p, a->np, a->pan, NULL, t);
}

ml_status pl_figure(pl_kind kind, const pl_plot *p, int np, const pl_panel *pan) {
    const char *fn = kind <= PL_BAR ? kind_fn[kind] : "plot";
    if (!p || !p->out || !p->out[0]) return ml_fail(ML_ERR_ARG, "%s: no output path", fn);
    figure_args a = {kind, p, np, pan};
    return pl_write_figure(fn, p->out, p->scale, figure_draw, figure_csv, &a);
}
