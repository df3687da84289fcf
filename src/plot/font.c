#include "plot/font.h"

#include <cairo-ft.h>
#include <ft2build.h>
#include FT_FREETYPE_H
#include FT_ADVANCES_H
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const char *const font_file[2] = {PL_FONT_DIR "/P052-Roman.otf", PL_FONT_DIR "/P052-Bold.otf"};

/* Loaded once per process and kept: cairo needs the FreeType faces for as long as it draws. */
static struct {
    pthread_once_t once;
    const char *missing; /* the file that failed, or NULL */
    FT_Library lib;
    FT_Face face[2];
    cairo_font_face_t *cairo_face[2];
    double cap[2];  /* cap height, in ems */
    double desc[2]; /* descender below the baseline, in cap heights */
} F = {PTHREAD_ONCE_INIT, NULL, NULL, {NULL, NULL}, {NULL, NULL}, {0, 0}, {0, 0}};

/* The lowest point of a glyph below the baseline, in font units (0 if it has none). */
static double glyph_depth(FT_Face face, unsigned cp) {
    FT_UInt gi = FT_Get_Char_Index(face, cp);
    if (!gi || FT_Load_Glyph(face, gi, FT_LOAD_NO_SCALE)) return 0;
    FT_Glyph_Metrics *m = &face->glyph->metrics;
    return fmax(0, (double)(m->height - m->horiBearingY));
}

static void load_fonts(void) {
    if (FT_Init_FreeType(&F.lib)) {
        F.missing = "(FreeType could not start)";
        return;
    }
    for (int b = 0; b < 2; b++) {
        if (FT_New_Face(F.lib, font_file[b], 0, &F.face[b])) {
            F.missing = font_file[b];
            return;
        }
        FT_Face face = F.face[b];
        double upem = face->units_per_EM;
        FT_UInt h = FT_Get_Char_Index(face, 'H');
        double cap = h && !FT_Load_Glyph(face, h, FT_LOAD_NO_SCALE) ? face->glyph->metrics.horiBearingY : 0.7 * upem;
        double depth = 0;
        for (const char *s = "gjpqy"; *s; s++) depth = fmax(depth, glyph_depth(face, (unsigned char)*s));
        F.cap[b] = cap / upem;
        F.desc[b] = depth / cap;
        F.cairo_face[b] = cairo_ft_font_face_create_for_ft_face(face, FT_LOAD_NO_HINTING);
    }
}

ml_status pl_font_load(void) {
    pthread_once(&F.once, load_fonts);
    if (F.missing)
        return ml_fail(ML_ERR_IO, "plot: cannot load the figure font '%s' (install the Debian package %s)", F.missing,
                       PL_FONT_PACKAGE);
    return ML_OK;
}

static int ready(void) {
    pthread_once(&F.once, load_fonts);
    return !F.missing;
}

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

static int is_bold(const pl_font *f) { return f->bold ? 1 : 0; }
static double em_of(const pl_font *f) { return f->size / F.cap[is_bold(f)]; }

/* Glyph of one character (0: the font has none; control characters have none either) and
 * its advance in ems. */
static FT_UInt glyph_of(FT_Face face, unsigned cp, double *advance) {
    FT_UInt gi = cp < 0x20 || cp == 0x7F ? 0 : FT_Get_Char_Index(face, cp);
    FT_Fixed adv = 0;
    if (gi && FT_Get_Advance(face, gi, FT_LOAD_NO_SCALE, &adv) == 0) {
        *advance = (double)adv / face->units_per_EM;
        return gi;
    }
    *advance = 0.6; /* the box */
    return 0;
}

double pl_text_width(const char *s, const pl_font *f) {
    if (!s || !ready()) return 0;
    FT_Face face = F.face[is_bold(f)];
    double w = 0, adv;
    while (*s) {
        glyph_of(face, next_cp(&s), &adv);
        w += adv;
    }
    return w * em_of(f);
}

double pl_text_height(const pl_font *f) {
    double desc = ready() ? F.desc[is_bold(f)] : 0.3;
    return f->size * (1 + desc + 0.05);
}

static double descender(const pl_font *f) { return f->size * (ready() ? F.desc[is_bold(f)] : 0.3); }

/* Local frame: the start of the baseline relative to the anchor, in pixels (v up). */
static void anchor_offset(const char *s, const pl_font *f, double *du, double *dv) {
    double w = pl_text_width(s, f);
    *du = f->halign == PL_CENTER ? -w / 2 : f->halign == PL_RIGHT ? -w : 0;
    *dv = f->valign == PL_TOP ? -f->size : f->valign == PL_MIDDLE ? -f->size / 2 : f->valign == PL_BOTTOM ? descender(f) : 0;
}

void pl_text_box(const char *s, const pl_font *f, double x, double y, double box[4]) {
    double du, dv, a = f->angle * PL_PI / 180, ca = cos(a), sa = sin(a);
    anchor_offset(s, f, &du, &dv);
    double w = pl_text_width(s, f);
    double us[2] = {du, du + w}, vs[2] = {dv - descender(f), dv + f->size};
    box[0] = box[1] = INFINITY, box[2] = box[3] = -INFINITY;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double X = x + us[i] * ca - vs[j] * sa, Y = y - us[i] * sa - vs[j] * ca;
            box[0] = fmin(box[0], X), box[2] = fmax(box[2], X);
            box[1] = fmin(box[1], Y), box[3] = fmax(box[3], Y);
        }
}

void pl_text(pl_canvas *c, const char *s, const pl_font *f, double x, double y, pl_color col) {
    if (!s || !*s || !(f->size > 0) || !isfinite(x) || !isfinite(y) || !ready()) return;
    size_t n = strlen(s);
    cairo_glyph_t *g = malloc(sizeof *g * n);
    double *boxes = malloc(sizeof *boxes * n);
    if (!g || !boxes) {
        free(g), free(boxes);
        return;
    }
    int b = is_bold(f), ng = 0, nbox = 0;
    double em = em_of(f), du, dv, pen = 0, adv;
    anchor_offset(s, f, &du, &dv);
    while (*s) {
        FT_UInt gi = glyph_of(F.face[b], next_cp(&s), &adv);
        if (gi) g[ng++] = (cairo_glyph_t){gi, du + pen * em, -dv};
        else boxes[nbox++] = du + pen * em;
        pen += adv;
    }
    cairo_t *cr = c->cr;
    cairo_save(cr);
    cairo_translate(cr, x, y);
    cairo_rotate(cr, -f->angle * PL_PI / 180);
    cairo_set_source_rgba(cr, col.r, col.g, col.b, col.a);
    cairo_set_font_face(cr, F.cairo_face[b]);
    cairo_set_font_size(cr, em);
    cairo_font_options_t *o = cairo_font_options_create();
    cairo_font_options_set_hint_style(o, CAIRO_HINT_STYLE_NONE);
    cairo_font_options_set_hint_metrics(o, CAIRO_HINT_METRICS_OFF);
    cairo_font_options_set_antialias(o, CAIRO_ANTIALIAS_GRAY);
    cairo_set_font_options(cr, o);
    cairo_font_options_destroy(o);
    if (ng) cairo_show_glyphs(cr, g, ng);
    cairo_new_path(cr);
    double lw = 0.06 * em;
    for (int i = 0; i < nbox; i++)
        cairo_rectangle(cr, boxes[i] + 0.08 * em + lw / 2, -dv - f->size + lw / 2, 0.44 * em - lw, f->size - lw);
    cairo_set_line_width(cr, lw);
    cairo_stroke(cr);
    cairo_restore(cr);
    free(g), free(boxes);
}
