#include "plot/color.h"

#include <ctype.h>
#include <math.h>
#include <string.h>
#include <strings.h>

/* Anchor colours, evenly spaced in t, interpolated linearly. Viridis: the published colormap
 * sampled at 16 points; RdBu and Blues: ColorBrewer's 11- and 9-class schemes. */
static const unsigned viridis[] = {0x440154, 0x481a6c, 0x472f7d, 0x414487, 0x39568c, 0x31688e,
                                   0x2a788e, 0x23888e, 0x1f988b, 0x22a884, 0x35b779, 0x54c568,
                                   0x7ad151, 0xa5db36, 0xd2e21b, 0xfde725};
static const unsigned rdbu[] = {0x67001f, 0xb2182b, 0xd6604d, 0xf4a582, 0xfddbc7, 0xf7f7f7,
                                0xd1e5f0, 0x92c5de, 0x4393c3, 0x2166ac, 0x053061};
static const unsigned blues[] = {0xf7fbff, 0xdeebf7, 0xc6dbef, 0x9ecae1, 0x6baed6,
                                 0x4292c6, 0x2171b5, 0x08519c, 0x08306b};
static const unsigned set2[] = {0x66c2a5, 0xfc8d62, 0x8da0cb, 0xe78ac3, 0xa6d854, 0xffd92f, 0xe5c494, 0xb3b3b3};
static const unsigned tab10[] = {0x4e79a7, 0xf28e2b, 0xe15759, 0x76b7b2, 0x59a14f,
                                 0xedc948, 0xb07aa1, 0xff9da7, 0x9c755f, 0xbab0ac};

const pl_color PL_NAN_COLOR = {0.85f, 0.85f, 0.85f, 1};

static pl_color rgb(unsigned v) {
    return (pl_color){((v >> 16) & 255) / 255.f, ((v >> 8) & 255) / 255.f, (v & 255) / 255.f, 1};
}

static pl_color ramp(const unsigned *a, int n, double t) {
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    double x = t * (n - 1);
    int i = (int)x;
    if (i >= n - 1) return rgb(a[n - 1]);
    double f = x - i;
    pl_color p = rgb(a[i]), q = rgb(a[i + 1]);
    return (pl_color){(float)(p.r + (q.r - p.r) * f), (float)(p.g + (q.g - p.g) * f), (float)(p.b + (q.b - p.b) * f), 1};
}

#define N(a) ((int)(sizeof(a) / sizeof(a)[0]))

static const char *const cmap_name[PL_CMAP_COUNT] = {"viridis", "RdBu", "RdBu_r", "Blues"};

int pl_cmap_find(const char *name) {
    for (int i = 0; name && i < PL_CMAP_COUNT; i++)
        if (strcasecmp(name, cmap_name[i]) == 0) return i;
    return -1;
}
const char *pl_cmap_names(void) { return "viridis, RdBu, RdBu_r, Blues"; }
int pl_cmap_diverging(pl_cmap m) { return m == PL_CMAP_RDBU || m == PL_CMAP_RDBU_R; }

pl_color pl_cmap_at(pl_cmap m, double t) {
    if (isnan(t)) return PL_NAN_COLOR;
    switch (m) {
    case PL_CMAP_RDBU: return ramp(rdbu, N(rdbu), t);
    case PL_CMAP_RDBU_R: return ramp(rdbu, N(rdbu), 1 - t);
    case PL_CMAP_BLUES: return ramp(blues, N(blues), t);
    default: return ramp(viridis, N(viridis), t);
    }
}

static const char *const pal_name[] = {"set2", "tab10", "blues"};

int pl_palette_find(const char *name) {
    for (int i = 0; name && i < 3; i++)
        if (strcasecmp(name, pal_name[i]) == 0) return i;
    return -1;
}
const char *pl_palette_names(void) { return "set2, tab10, blues"; }

pl_color pl_palette_at(int palette, int i, int n) {
    if (i < 0) i = 0;
    switch (palette) {
    case 1: return rgb(tab10[i % N(tab10)]);
    case 2: return ramp(blues, N(blues), n <= 1 ? 0.75 : 0.45 + 0.55 * i / (n - 1)); /* skip the light end: lines and markers stay readable on white */
    default: return rgb(set2[i % N(set2)]);
    }
}

static int hexval(int c) { return isdigit(c) ? c - '0' : isxdigit(c) ? tolower(c) - 'a' + 10 : -1; }

int pl_parse_hex(const char *s, pl_color *out) {
    if (!s || s[0] != '#') return 0;
    size_t n = strlen(s + 1);
    if (n != 6 && n != 8) return 0;
    float v[4] = {0, 0, 0, 1};
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hexval((unsigned char)s[1 + 2 * i]), lo = hexval((unsigned char)s[2 + 2 * i]);
        if (hi < 0 || lo < 0) return 0;
        v[i] = (hi * 16 + lo) / 255.f;
    }
    *out = (pl_color){v[0], v[1], v[2], v[3]};
    return 1;
}

pl_color pl_grey(double level, double alpha) { return (pl_color){(float)level, (float)level, (float)level, (float)alpha}; }

static double lin(double c) { return c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4); }
double pl_luminance(pl_color c) { return 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b); }

pl_color pl_darken(pl_color c, double f) {
    return (pl_color){(float)(c.r * f), (float)(c.g * f), (float)(c.b * f), c.a};
}
