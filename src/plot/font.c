#include "plot/font.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Glyph paths, in units with the baseline at y = 0, y up, cap height 10. Commands:
 *   M x,y            start a stroke          L x,y           line to
 *   Q cx,cy,x,y      quadratic curve to      A cx,cy,rx,ry,a0,a1  elliptical arc, degrees
 *   D x,y            a dot                   |               lift the pen
 * An arc continues the current stroke, or starts one at its first point. */
typedef struct {
    unsigned cp;
    float adv;
    const char *path;
} glyph;

static const glyph ascii[95] = {
    {' ', 3.5f, ""},
    {'!', 3, "M1.5,10 L1.5,3 | D1.5,0.6"},
    {'"', 4.5f, "M1.3,10 L1.3,7 | M3.2,10 L3.2,7"},
    {'#', 8.4f, "M3,0 L3.8,10 | M5.6,0 L6.4,10 | M1,3.3 L7.2,3.3 | M1.2,6.7 L7.4,6.7"},
    {'$', 7.6f, "A3.8,7.55,2.7,2.45,20,235 L5.46,4.64 A3.8,2.55,2.9,2.55,55,-160 | M3.8,11.2 L3.8,-1.2"},
    {'%', 9, "A2.3,7.7,1.4,2,0,360 | A6.7,2.3,1.4,2,0,360 | M7,10 L2,0"},
    {'&', 8, "M7.2,0 L2.4,6.2 A3.7,8.2,1.5,1.8,235,-55 L1.6,3.5 A3.5,2.3,2.2,2.3,150,360 L6.8,4.2"},
    {'\'', 3, "M1.5,10 L1.5,7"},
    {'(', 4, "A4.6,4,3.5,7,120,240"},
    {')', 4, "A-0.6,4,3.5,7,60,-60"},
    {'*', 6, "M3,10 L3,5 | M0.8,8.75 L5.2,6.25 | M0.8,6.25 L5.2,8.75"},
    {'+', 7, "M3.5,1.5 L3.5,7.5 | M0.5,4.5 L6.5,4.5"},
    {',', 3, "D1.5,0.6 | M2.1,0.6 L1.1,-1.8"},
    {'-', 6, "M1,4.3 L5,4.3"},
    {'.', 3, "D1.5,0.6"},
    {'/', 5, "M0.5,-1 L4.5,10.5"},
    {'0', 7, "A3.5,5,2.6,5,0,360"},
    {'1', 7, "M1.8,8.2 L4,10 L4,0"},
    {'2', 7, "A3.5,7.5,2.5,2.5,160,-40 L1,0 L6,0"},
    {'3', 7, "A3.4,7.6,2.3,2.4,150,-90 A3.4,2.6,2.6,2.6,90,-150"},
    {'4', 7, "M5,0 L5,10 L0.7,3 L6.5,3"},
    {'5', 7, "M5.8,10 L1.7,10 L1.3,5.5 Q2.3,6.2,3.4,6.2 A3.4,3.1,2.6,3.1,90,-150"},
    {'6', 7, "M5.4,9.4 Q4.6,10,3.6,10 Q1,10,1,5 L1,3.1 A3.5,3.1,2.5,3.1,180,540"},
    {'7', 7, "M1,10 L6,10 L2.6,0"},
    {'8', 7, "A3.5,7.7,2.2,2.3,0,360 | A3.5,2.7,2.6,2.7,0,360"},
    {'9', 7, "A3.5,6.9,2.5,3.1,0,360 L6,5 Q6,0,3.4,0 Q2.4,0,1.6,0.6"},
    {':', 3, "D1.5,0.6 | D1.5,6.2"},
    {';', 3, "D1.5,6.2 | D1.5,0.6 | M2.1,0.6 L1.1,-1.8"},
    {'<', 7, "M6,8 L1,4.5 L6,1"},
    {'=', 7, "M1,3 L6,3 | M1,6 L6,6"},
    {'>', 7, "M1,8 L6,4.5 L1,1"},
    {'?', 6.5f, "A3.3,7.6,2.4,2.4,160,-60 Q3.3,4.8,3.3,3 | D3.3,0.6"},
    {'@', 10, "A4.8,4.6,1.6,2,0,360 | M6.4,6.6 L6.4,3.4 Q6.4,2.2,7.4,2.2 Q9,2.2,9,4.6 A5,4.6,4,5.2,0,300"},
    {'A', 8, "M0.5,0 L4,10 L7.5,0 | M1.7,3.4 L6.3,3.4"},
    {'B', 7.8f, "M1,5.2 L4.5,5.2 A4.5,2.6,2.5,2.6,90,-90 L1,0 L1,10 L4.3,10 A4.3,7.6,2.2,2.4,90,-90"},
    {'C', 8, "A4.5,5,3.7,5,50,310"},
    {'D', 8, "M1,0 L1,10 L3.5,10 A3.5,5,3.5,5,90,-90 L1,0"},
    {'E', 7, "M6.3,10 L1,10 L1,0 L6.3,0 | M1,5.2 L5.5,5.2"},
    {'F', 6.8f, "M6.3,10 L1,10 L1,0 | M1,5.2 L5.5,5.2"},
    {'G', 8.8f, "A4.6,5,3.7,5,50,340 L8.2,4.6 L5.2,4.6"},
    {'H', 8, "M1,0 L1,10 | M7,0 L7,10 | M1,5.2 L7,5.2"},
    {'I', 3, "M1.5,0 L1.5,10"},
    {'J', 6, "M5,10 L5,2.8 Q5,0,2.8,0 Q1.2,0,0.6,1.6"},
    {'K', 7.4f, "M1,0 L1,10 | M6.8,10 L1,3.8 | M3,6 L7,0"},
    {'L', 6.4f, "M1,10 L1,0 L6,0"},
    {'M', 10, "M1,0 L1,10 L5,2.2 L9,10 L9,0"},
    {'N', 8, "M1,0 L1,10 L7,0 L7,10"},
    {'O', 9.2f, "A4.6,5,3.8,5,0,360"},
    {'P', 7.6f, "M1,0 L1,10 L4.5,10 A4.5,7.3,2.5,2.7,90,-90 L1,4.6"},
    {'Q', 9.2f, "A4.6,5,3.8,5,0,360 | M5.4,2.6 L8.4,-0.6"},
    {'R', 7.8f, "M1,0 L1,10 L4.5,10 A4.5,7.3,2.5,2.7,90,-90 L1,4.6 | M4.3,4.6 L7.2,0"},
    {'S', 7.6f, "A3.8,7.55,2.7,2.45,20,235 L5.46,4.64 A3.8,2.55,2.9,2.55,55,-160"},
    {'T', 7.6f, "M0.4,10 L7.2,10 | M3.8,10 L3.8,0"},
    {'U', 8, "M1,10 L1,3.6 A4,3.6,3,3.6,180,360 L7,10"},
    {'V', 8, "M0.5,10 L4,0 L7.5,10"},
    {'W', 11, "M0.5,10 L3,0 L5.5,10 L8,0 L10.5,10"},
    {'X', 8, "M0.8,10 L7.2,0 | M7.2,10 L0.8,0"},
    {'Y', 8, "M0.5,10 L4,5 L7.5,10 | M4,5 L4,0"},
    {'Z', 7.6f, "M1,10 L6.6,10 L1,0 L6.6,0"},
    {'[', 4, "M3.4,10.5 L1.4,10.5 L1.4,-2 L3.4,-2"},
    {'\\', 5, "M0.5,10.5 L4.5,-1"},
    {']', 4, "M0.6,10.5 L2.6,10.5 L2.6,-2 L0.6,-2"},
    {'^', 6, "M1,6.5 L3,10 L5,6.5"},
    {'_', 6, "M0,-1.6 L6,-1.6"},
    {'`', 4, "M1.2,10.5 L2.8,8.6"},
    {'a', 7, "M5.8,7 L5.8,0 | A3.4,3.5,2.4,3.5,0,360"},
    {'b', 7, "M1,10 L1,0 | A3.4,3.5,2.4,3.5,0,360"},
    {'c', 6.4f, "A3.6,3.5,2.7,3.5,45,315"},
    {'d', 7, "M5.8,10 L5.8,0 | A3.4,3.5,2.4,3.5,0,360"},
    {'e', 7, "M0.9,3.5 L6,3.5 A3.45,3.5,2.55,3.5,0,320"},
    {'f', 5, "M5,9.6 Q4.5,10,3.6,10 Q2.3,10,2.3,8.5 L2.3,0 | M0.6,7 L4.6,7"},
    {'g', 7, "M5.8,7 L5.8,-0.8 Q5.8,-3,3.4,-3 Q2,-3,1.2,-2.2 | A3.4,3.5,2.4,3.5,0,360"},
    {'h', 7, "M1,10 L1,0 | A3.4,4.2,2.4,2.8,180,0 L5.8,0"},
    {'i', 3, "M1.5,0 L1.5,7 | D1.5,9.3"},
    {'j', 3.4f, "M2.1,7 L2.1,-1.5 Q2.1,-3,0.4,-3 | D2.1,9.3"},
    {'k', 6.4f, "M1,10 L1,0 | M5.6,7 L1,2.6 | M2.7,4.2 L6,0"},
    {'l', 3, "M1.5,10 L1.5,0"},
    {'m', 10, "M1,0 L1,7 | A3,4.6,2,2.4,180,0 L5,0 | A7,4.6,2,2.4,180,0 L9,0"},
    {'n', 7, "M1,0 L1,7 | A3.4,4.2,2.4,2.8,180,0 L5.8,0"},
    {'o', 7, "A3.5,3.5,2.6,3.5,0,360"},
    {'p', 7, "M1,7 L1,-3 | A3.4,3.5,2.4,3.5,0,360"},
    {'q', 7, "M5.8,7 L5.8,-3 | A3.4,3.5,2.4,3.5,0,360"},
    {'r', 4.8f, "M1,0 L1,7 | M1,4 Q1.6,7,4.4,7"},
    {'s', 6.4f, "A3.2,5.25,2.2,1.75,20,235 L4.55,3.18 A3.2,1.75,2.35,1.75,55,-160"},
    {'t', 5.2f, "M2.4,9.2 L2.4,1.6 Q2.4,0,4,0 L4.8,0.2 | M0.6,7 L4.6,7"},
    {'u', 7, "M1,7 L1,2.8 A3.4,2.8,2.4,2.8,180,360 | M5.8,7 L5.8,0"},
    {'v', 6.6f, "M0.6,7 L3.3,0 L6,7"},
    {'w', 9.4f, "M0.5,7 L2.6,0 L4.7,7 L6.8,0 L8.9,7"},
    {'x', 6.6f, "M0.8,7 L5.8,0 | M5.8,7 L0.8,0"},
    {'y', 6.6f, "M0.6,7 L3.4,0.2 | M6.2,7 L2.6,-2 Q2.1,-3,1,-3"},
    {'z', 6.6f, "M1,7 L5.6,7 L1,0 L5.6,0"},
    {'{', 4.6f, "M4,10.5 Q2.5,10.5,2.5,9 L2.5,5.6 Q2.5,4.3,1.2,4.3 Q2.5,4.3,2.5,3 L2.5,-0.5 Q2.5,-2,4,-2"},
    {'|', 3, "M1.5,10.5 L1.5,-2.5"},
    {'}', 4.6f, "M0.6,10.5 Q2.1,10.5,2.1,9 L2.1,5.6 Q2.1,4.3,3.4,4.3 Q2.1,4.3,2.1,3 L2.1,-0.5 Q2.1,-2,0.6,-2"},
    {'~', 7, "M0.8,4.2 Q2,5.8,3.5,4.8 Q5,3.8,6.2,5.4"},
};

static const glyph extra[] = {
    {0x00B0, 4.4f, "A2.2,8.5,1.3,1.5,0,360"},                         /* ° */
    {0x00B1, 7, "M3.5,2.5 L3.5,8.5 | M0.8,5.5 L6.2,5.5 | M0.8,0.8 L6.2,0.8"}, /* ± */
    {0x00B7, 3, "D1.5,4.3"},                                          /* · */
    {0x00D7, 7, "M1.2,2.2 L5.8,6.8 | M5.8,2.2 L1.2,6.8"},             /* × */
    {0x0394, 8, "M0.6,0 L4,10 L7.4,0 L0.6,0"},                        /* Δ */
    {0x03A3, 7.6f, "M6.6,10 L1,10 L4.4,5 L1,0 L6.6,0"},               /* Σ */
    {0x03B1, 7.4f, "A3.1,3.5,2.3,3.5,0,360 | M6.2,7 Q5.2,3.5,5.4,1 Q5.6,0,6.6,0"}, /* α */
    {0x03BB, 6.6f, "M0.8,10 L1.8,10 L6,0 | M3.6,5.6 L0.6,0"},         /* λ */
    {0x03BC, 7, "M1,7 L1,-3 | M1,2.8 A3.4,2.8,2.4,2.8,180,360 | M5.8,7 L5.8,0"}, /* μ */
    {0x03C3, 7.4f, "M7,7 L3.4,7 A3.4,3.5,2.5,3.5,90,450"},            /* σ */
    {0x2013, 6, "M0.5,4.3 L5.5,4.3"},                                 /* – */
    {0x2014, 10, "M0.5,4.3 L9.5,4.3"},                                /* — */
    {0x2192, 9, "M1,4.5 L8,4.5 | M5.5,7 L8,4.5 L5.5,2"},              /* → */
    {0x2212, 7, "M1,4.5 L6,4.5"},                                     /* − */
    {0x2264, 7, "M6,9 L1,6 L6,3 | M1,1 L6,1"},                        /* ≤ */
    {0x2265, 7, "M1,9 L6,6 L1,3 | M1,1 L6,1"},                        /* ≥ */
};

static const glyph tofu = {0xFFFD, 7, "M1,0 L1,10 L6,10 L6,0 L1,0"};

static const glyph *lookup(unsigned cp) {
    if (cp >= 32 && cp < 127) return &ascii[cp - 32];
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
        if (extra[i].cp == cp) return &extra[i];
    return &tofu;
}

/* Decodes one UTF-8 character; malformed input yields U+FFFD and advances one byte. */
static unsigned next_cp(const char **ps) {
    const unsigned char *s = (const unsigned char *)*ps;
    unsigned c = s[0];
    int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (n < 0) {
        *ps += 1;
        return 0xFFFD;
    }
    unsigned cp = n == 0 ? c : c & (0x3F >> n);
    for (int i = 1; i <= n; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *ps += 1;
            return 0xFFFD;
        }
        cp = cp << 6 | (s[i] & 0x3F);
    }
    *ps += n + 1;
    return cp;
}

/* ---- geometry of one glyph ---- */

enum { MAXANCHOR = 24 };

/* Maps glyph units along one local axis to pixel offsets. When hinting, the axis' edges
 * (stems, bars, round extremes, metrics lines) land on the pixel grid and everything else is
 * interpolated between them. */
typedef struct {
    int n;
    double u[MAXANCHOR], p[MAXANCHOR];
} axis_fit;

typedef struct {
    pl_canvas *c;
    double s;                  /* pixels per unit */
    double ox, oy, ca, sa;     /* glyph origin on screen, rotation */
    double w;                  /* stroke width, pixels */
    int hint;
    axis_fit fx, fy;
    double px, py;             /* current point, units */
    int down;
} pen;

static void add_anchor(axis_fit *f, double u) {
    for (int i = 0; i < f->n; i++)
        if (f->u[i] == u) return;
    if (f->n < MAXANCHOR) f->u[f->n++] = u;
}

static double fit(const axis_fit *f, double s, double u) {
    if (f->n == 0) return u * s;
    if (u <= f->u[0]) return f->p[0] + (u - f->u[0]) * s;
    for (int i = 1; i < f->n; i++)
        if (u <= f->u[i]) return f->p[i - 1] + (f->p[i] - f->p[i - 1]) * (u - f->u[i - 1]) / (f->u[i] - f->u[i - 1]);
    return f->p[f->n - 1] + (u - f->u[f->n - 1]) * s;
}

/* Sorts the anchors and snaps each to the nearest pixel-grid line for this stroke width,
 * measured on the screen axis that the local axis runs along (base + dir * offset). */
static void snap_axis(axis_fit *f, double s, double base, double dir, double off) {
    for (int i = 1; i < f->n; i++)
        for (int j = i; j > 0 && f->u[j - 1] > f->u[j]; j--) {
            double t = f->u[j];
            f->u[j] = f->u[j - 1], f->u[j - 1] = t;
        }
    for (int i = 0; i < f->n; i++) {
        double scr = base + dir * f->u[i] * s;
        f->p[i] = ((floor(scr - off + 0.5) + off) - base) * dir;
    }
}

static void to_screen(const pen *p, double u, double v, double *X, double *Y) {
    double fu = p->hint ? fit(&p->fx, p->s, u) : u * p->s;
    double fv = p->hint ? fit(&p->fy, p->s, v) : v * p->s;
    *X = p->ox + fu * p->ca - fv * p->sa;
    *Y = p->oy - fu * p->sa - fv * p->ca;
}

static void seg_to(pen *p, double u, double v) {
    if (p->c && p->down) {
        double x0, y0, x1, y1;
        to_screen(p, p->px, p->py, &x0, &y0);
        to_screen(p, u, v, &x1, &y1);
        pl_mask_segment(p->c, x0, y0, x1, y1, p->w);
    } else if (!p->c && p->down) { /* anchor pass: horizontal and vertical strokes are edges */
        if (u == p->px) add_anchor(&p->fx, u);
        if (v == p->py) add_anchor(&p->fy, v);
    }
    p->px = u, p->py = v, p->down = 1;
}

static int covers(double a0, double a1, double t) {
    double lo = fmin(a0, a1), hi = fmax(a0, a1);
    for (double k = t - 720; k <= t + 720; k += 360)
        if (k >= lo && k <= hi) return 1;
    return 0;
}

/* Runs a glyph's path: with p->c NULL it collects anchors, otherwise it draws. */
static void run_path(pen *p, const char *path) {
    const char *s = path;
    p->down = 0;
    while (*s) {
        char cmd = *s++;
        if (cmd == ' ') continue;
        if (cmd == '|') {
            p->down = 0;
            continue;
        }
        int need = cmd == 'Q' ? 4 : cmd == 'A' ? 6 : 2;
        double a[6];
        for (int i = 0; i < need; i++) {
            char *end;
            a[i] = strtod(s, &end);
            s = end;
            if (*s == ',') s++;
        }
        switch (cmd) {
        case 'M':
            p->px = a[0], p->py = a[1], p->down = 1;
            break;
        case 'L':
            seg_to(p, a[0], a[1]);
            break;
        case 'D':
            if (p->c) {
                double X, Y;
                to_screen(p, a[0], a[1], &X, &Y);
                pl_mask_disc(p->c, X, Y, fmax(p->w * 0.72, 0.75 * p->s));
            } else {
                add_anchor(&p->fx, a[0]), add_anchor(&p->fy, a[1]);
            }
            p->down = 0;
            break;
        case 'Q': {
            double x0 = p->px, y0 = p->py;
            for (int i = 1; i <= 8; i++) {
                double t = i / 8.0, m = 1 - t;
                seg_to(p, m * m * x0 + 2 * m * t * a[0] + t * t * a[2], m * m * y0 + 2 * m * t * a[1] + t * t * a[3]);
            }
            break;
        }
        case 'A': {
            double cx = a[0], cy = a[1], rx = a[2], ry = a[3], a0 = a[4], a1 = a[5];
            if (!p->c) {
                if (covers(a0, a1, 0)) add_anchor(&p->fx, cx + rx);
                if (covers(a0, a1, 180)) add_anchor(&p->fx, cx - rx);
                if (covers(a0, a1, 90)) add_anchor(&p->fy, cy + ry);
                if (covers(a0, a1, 270)) add_anchor(&p->fy, cy - ry);
            }
            int n = (int)ceil(fabs(a1 - a0) / 10);
            if (n < 2) n = 2;
            for (int i = 0; i <= n; i++) {
                double t = (a0 + (a1 - a0) * i / n) * PL_PI / 180;
                double u = cx + rx * cos(t), v = cy + ry * sin(t);
                if (i == 0 && !p->down) {
                    p->px = u, p->py = v, p->down = 1;
                    continue;
                }
                /* Arc points are never edges, so the anchor pass must not see them as such. */
                if (!p->c) p->px = u, p->py = v;
                else seg_to(p, u, v);
            }
            break;
        }
        default:
            return; /* malformed path: stop rather than loop */
        }
    }
}

/* ---- text ---- */

static double base_width(const pl_font *f) { return f->size * (f->bold ? 0.155 : 0.1); }
static double tracking(const pl_font *f) { return f->size * (f->bold ? 0.09 : 0.04); } /* bold strokes need air */

double pl_text_width(const char *s, const pl_font *f) {
    double w = 0, s1 = f->size / 10;
    int n = 0;
    while (s && *s) {
        w += lookup(next_cp(&s))->adv * s1;
        n++;
    }
    return n ? w + tracking(f) * (n - 1) : 0;
}

double pl_text_height(const pl_font *f) { return f->size * 1.3; }

/* Local frame: the start of the baseline relative to the anchor, in pixels (v up). */
static void anchor_offset(const char *s, const pl_font *f, double *du, double *dv) {
    double w = pl_text_width(s, f);
    *du = f->halign == PL_CENTER ? -w / 2 : f->halign == PL_RIGHT ? -w : 0;
    *dv = f->valign == PL_TOP ? -f->size : f->valign == PL_MIDDLE ? -f->size / 2 : f->valign == PL_BOTTOM ? 0.3 * f->size : 0;
}

static void rotation(double angle, double *ca, double *sa, int *right) {
    double a = fmod(angle, 360);
    if (a < 0) a += 360;
    *right = fmod(a, 90) == 0;
    if (*right) { /* exact, so hinted text stays on the grid */
        int q = (int)(a / 90);
        *ca = q == 0 ? 1 : q == 2 ? -1 : 0;
        *sa = q == 1 ? 1 : q == 3 ? -1 : 0;
    } else {
        *ca = cos(a * PL_PI / 180);
        *sa = sin(a * PL_PI / 180);
    }
}

void pl_text_box(const char *s, const pl_font *f, double x, double y, double box[4]) {
    double du, dv, ca, sa;
    int right;
    anchor_offset(s, f, &du, &dv);
    rotation(f->angle, &ca, &sa, &right);
    double w = pl_text_width(s, f);
    double us[2] = {du, du + w}, vs[2] = {dv - 0.3 * f->size, dv + f->size};
    box[0] = box[1] = INFINITY, box[2] = box[3] = -INFINITY;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double X = x + us[i] * ca - vs[j] * sa, Y = y - us[i] * sa - vs[j] * ca;
            box[0] = fmin(box[0], X), box[2] = fmax(box[2], X);
            box[1] = fmin(box[1], Y), box[3] = fmax(box[3], Y);
        }
}

void pl_text(pl_canvas *c, const char *s, const pl_font *f, double x, double y, pl_color col) {
    if (!s || !*s || !(f->size > 0)) return;
    double du, dv, ca, sa;
    int right;
    anchor_offset(s, f, &du, &dv);
    rotation(f->angle, &ca, &sa, &right);
    pen p = {.s = f->size / 10, .ca = ca, .sa = sa};
    p.hint = right && f->size <= 64;
    p.w = base_width(f);
    if (p.hint) p.w = fmax(1, floor(p.w + 0.5));
    double off = fmod(p.w, 2) == 1 ? 0.5 : 0; /* odd widths centre on pixel centres */
    double pen_u = du;
    while (*s) {
        const glyph *g = lookup(next_cp(&s));
        p.ox = x + pen_u * ca - dv * sa;
        p.oy = y - pen_u * sa - dv * ca;
        if (p.hint) {
            p.fx.n = p.fy.n = 0;
            p.c = NULL;
            add_anchor(&p.fy, 0), add_anchor(&p.fy, 7), add_anchor(&p.fy, 10);
            run_path(&p, g->path);
            /* local u runs along screen x (ca != 0) or screen y; v likewise */
            if (ca != 0) {
                snap_axis(&p.fx, p.s, p.ox, ca, off);
                snap_axis(&p.fy, p.s, p.oy, -ca, off);
            } else {
                snap_axis(&p.fx, p.s, p.oy, -sa, off);
                snap_axis(&p.fy, p.s, p.ox, -sa, off);
            }
        }
        p.c = c;
        run_path(&p, g->path);
        pen_u += g->adv * p.s + tracking(f);
    }
    pl_paint(c, col);
}
