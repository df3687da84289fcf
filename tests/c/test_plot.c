/* Figures: canvas primitives, font layout, colormaps, ticks, PNG/CSV output, figure layout. */
#include <dirent.h>
#include <math.h>
#include <png.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plot/color.h"
#include "plot/font.h"
#include "plot/output.h"
#include "plot/plot.h"
#include "plot/ticks.h"
#include "testutil.h"

static const pl_color WHITE = {1, 1, 1, 1}, RED = {1, 0, 0, 1}, BLACK = {0, 0, 0, 1};

static char dir[64];
static void setup(void) {
    strcpy(dir, "/tmp/mechlab_plot_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}
static void teardown(void) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' && rm -rf '%s'", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
}
/* Files in the test directory (not counting subdirectories' contents). */
static int count_files(void) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d))) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}
static void write_text(const char *file, const char *text) {
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}
static const char *path(const char *name) {
    static char p[4][256];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", dir, name);
    return p[i];
}

/* Reads a PNG back through libpng as 8-bit RGBA. */
typedef struct {
    int w, h;
    unsigned char *px;
} image;
static image read_png(const char *file) {
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    ck_assert_msg(png_image_begin_read_from_file(&im, file), "cannot read %s", file);
    im.format = PNG_FORMAT_RGBA;
    image r = {(int)im.width, (int)im.height, malloc(PNG_IMAGE_SIZE(im))};
    ck_assert(png_image_finish_read(&im, NULL, r.px, 0, NULL));
    return r;
}
static const unsigned char *at(const image *im, int x, int y) { return im->px + 4 * ((size_t)y * im->w + x); }

static int near8(double a, double b) { return fabs(a - b) <= 1.5 / 255; }
static int same_color(pl_color a, pl_color b) { return near8(a.r, b.r) && near8(a.g, b.g) && near8(a.b, b.b); }
static int is_white(pl_color a) { return a.r > 0.999 && a.g > 0.999 && a.b > 0.999; }

static char *slurp(const char *file, long *n) {
    FILE *f = fopen(file, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)*n + 1);
    ck_assert_int_eq(fread(b, 1, (size_t)*n, f), (size_t)*n);
    b[*n] = 0;
    fclose(f);
    return b;
}

/* ---------------------------------------------------------------- canvas */

START_TEST(test_rect_and_alpha) {
    pl_canvas *c = pl_canvas_new(20, 10, WHITE);
    pl_fill_rect(c, 2, 2, 6, 6, RED);
    ck_assert(same_color(pl_pixel(c, 3, 3), RED));
    ck_assert(is_white(pl_pixel(c, 7, 3)));
    pl_fill_rect(c, 10, 2, 14, 6, (pl_color){0, 0, 1, 0.5}); /* half blue over white */
    pl_color p = pl_pixel(c, 11, 3);
    ck_assert(near8(p.r, 0.5) && near8(p.g, 0.5) && near8(p.b, 1));
    pl_fill_rect(c, 2.5, 8, 3, 9, BLACK); /* half a pixel: half coverage */
    ck_assert(near8(pl_pixel(c, 2, 8).r, 0.5));
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_line_crisp_and_clip) {
    pl_canvas *c = pl_canvas_new(30, 30, WHITE);
    pl_line(c, 2, 10.5, 28, 10.5, 1, BLACK);
    ck_assert(same_color(pl_pixel(c, 15, 10), BLACK));
    ck_assert(is_white(pl_pixel(c, 15, 9)) && is_white(pl_pixel(c, 15, 11)));
    pl_clip(c, 5, 15, 10, 25);
    pl_fill_rect(c, 0, 0, 30, 30, RED);
    pl_unclip(c);
    ck_assert(same_color(pl_pixel(c, 5, 15), RED) && same_color(pl_pixel(c, 9, 24), RED));
    ck_assert(is_white(pl_pixel(c, 4, 20)) && is_white(pl_pixel(c, 10, 20)) && is_white(pl_pixel(c, 7, 25)));
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_polyline_joins_blend_once) {
    /* a translucent polyline must not darken where its segments overlap */
    pl_canvas *c = pl_canvas_new(40, 40, WHITE);
    double xy[6] = {5.5, 20.5, 20.5, 20.5, 20.5, 5.5};
    pl_mask_polyline(c, xy, 3, 3, 0);
    pl_paint(c, (pl_color){0, 0, 0, 0.5});
    ck_assert(near8(pl_pixel(c, 20, 20).r, pl_pixel(c, 12, 20).r));
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_translucent_union_is_its_opaque_drawing_faded) {
    /* a translucent union (discs, a ring, a dashed stroke with round caps, one disc partly off the
     * canvas) is its opaque drawing faded: each pixel, edges included, is white blended by alpha
     * times the opaque coverage. The group is clipped to the shapes' box, which must cut nothing */
    pl_canvas *c[2] = {pl_canvas_new(60, 40, WHITE), pl_canvas_new(60, 40, WHITE)};
    for (int k = 0; k < 2; k++) {
        pl_mask_disc(c[k], 20.3, 18.7, 7.2);
        pl_mask_ring(c[k], 40.6, 20.1, 9.4, 3.3);
        double xy[4] = {3.2, 36.4, 57.9, 31.1};
        pl_mask_dashed(c[k], xy, 2, 4.5, 9, 4);
        pl_mask_disc(c[k], 58, 2, 6);
        pl_paint(c[k], (pl_color){0, 0, 0, k ? 0.4f : 1});
    }
    int covered = 0;
    for (int y = 0; y < 40; y++)
        for (int x = 0; x < 60; x++) {
            double cov = 1 - pl_pixel(c[0], x, y).r;
            covered += cov > 0;
            ck_assert_msg(near8(pl_pixel(c[1], x, y).r, 1 - 0.4 * cov), "pixel (%d, %d)", x, y);
        }
    ck_assert_int_gt(covered, 400);
    /* under a clip of the caller's: nothing outside it, and the clip is the caller's to lift */
    pl_canvas *d = pl_canvas_new(40, 40, WHITE);
    pl_clip(d, 10, 10, 30, 30);
    pl_mask_disc(d, 10, 10, 8);
    pl_mask_disc(d, 30, 30, 8);
    pl_paint(d, (pl_color){0, 0, 1, 0.5});
    ck_assert(is_white(pl_pixel(d, 5, 5)) && is_white(pl_pixel(d, 34, 34)));
    ck_assert(near8(pl_pixel(d, 12, 12).r, 0.5) && near8(pl_pixel(d, 28, 28).r, 0.5));
    pl_fill_rect(d, 0, 0, 40, 40, RED); /* still clipped */
    ck_assert(is_white(pl_pixel(d, 2, 20)));
    pl_unclip(d);
    pl_fill_rect(d, 0, 0, 40, 40, RED);
    ck_assert(same_color(pl_pixel(d, 2, 20), RED));
    pl_canvas_free(c[0]);
    pl_canvas_free(c[1]);
    pl_canvas_free(d);
}
END_TEST

START_TEST(test_dashed_terminates) {
    /* many segments whose lengths are not multiples of the dash period: rounding of the dash
     * phase once made this loop forever */
    pl_canvas *c = pl_canvas_new(400, 200, WHITE);
    double xy[400];
    for (int i = 0; i < 200; i++) xy[2 * i] = 2 * i * 0.9973, xy[2 * i + 1] = 100 + 60 * sin(i * 0.731);
    pl_mask_dashed(c, xy, 200, 1.3, 4.5, 3);
    pl_paint(c, BLACK);
    double on[2] = {0, 0};
    pl_mask_dashed(c, on, 1, 1, 4.5, 0); /* degenerate input does not hang either */
    pl_paint(c, BLACK);
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_polygon_and_disc_coverage) {
    pl_canvas *c = pl_canvas_new(40, 40, WHITE);
    double tri[6] = {0, 0, 40, 0, 0, 40};
    pl_mask_polygon(c, tri, 3);
    pl_paint(c, BLACK);
    ck_assert(same_color(pl_pixel(c, 5, 5), BLACK));
    ck_assert(is_white(pl_pixel(c, 35, 35)));
    pl_color d = pl_pixel(c, 19, 20); /* on the diagonal: partly covered */
    ck_assert(d.r > 0.2 && d.r < 0.8);
    pl_canvas_free(c);
    c = pl_canvas_new(20, 20, WHITE);
    pl_mask_disc(c, 10, 10, 5);
    pl_paint(c, BLACK);
    ck_assert(same_color(pl_pixel(c, 10, 10), BLACK) && is_white(pl_pixel(c, 10, 17)));
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_bad_canvas) {
    ck_assert_ptr_null(pl_canvas_new(0, 10, WHITE));
    ck_assert_int_eq(ml_last_status(), ML_ERR_ARG);
    ck_assert_ptr_null(pl_canvas_new(10, 100000, WHITE));
}
END_TEST

/* ---------------------------------------------------------------- font */

static void check_text_inside(const char *s, double angle, int ha, int va) {
    pl_canvas *c = pl_canvas_new(200, 200, WHITE);
    pl_font f = {10, 0, angle, ha, va};
    double box[4];
    pl_text(c, s, &f, 100, 100, BLACK);
    pl_text_box(s, &f, 100, 100, box);
    int inked = 0;
    for (int y = 0; y < 200; y++)
        for (int x = 0; x < 200; x++) {
            if (is_white(pl_pixel(c, x, y))) continue;
            inked++;
            ck_assert_msg(x + 1 >= box[0] - 1.5 && x <= box[2] + 1.5 && y + 1 >= box[1] - 1.5 && y <= box[3] + 1.5,
                          "'%s' at %g deg inked (%d,%d) outside its box [%g,%g]x[%g,%g]", s, angle, x, y, box[0], box[2],
                          box[1], box[3]);
        }
    ck_assert_int_gt(inked, 20);
    pl_canvas_free(c);
}

START_TEST(test_text_inside_box) {
    check_text_inside("Attrib @ Value (q)", 0, PL_LEFT, PL_BASELINE);
    check_text_inside("layer 0 block_input", 0, PL_RIGHT, PL_MIDDLE);
    check_text_inside("<bos> k12 v7", 90, PL_RIGHT, PL_MIDDLE);
    check_text_inside("gjpqy|[]{}", 0, PL_CENTER, PL_TOP);
    check_text_inside("diagonal 45", 45, PL_LEFT, PL_BOTTOM);
    check_text_inside("\xce\xa3 \xce\xb1 \xe2\x88\x92 \xff bad utf8", 0, PL_LEFT, PL_BASELINE);
}
END_TEST

START_TEST(test_text_metrics) {
    pl_font f = {10, 0, 0, PL_LEFT, PL_BASELINE}, g = {20, 0, 0, PL_LEFT, PL_BASELINE};
    ck_assert(pl_text_width("ab", &f) > pl_text_width("a", &f));
    ck_assert_close(pl_text_width("abc", &g), 2 * pl_text_width("abc", &f), 1e-9, 0);
    ck_assert(pl_text_width("", &f) == 0);
    /* every printable ASCII character has its own glyph: none draws the fallback box */
    pl_canvas *box = pl_canvas_new(30, 30, WHITE);
    pl_text(box, "\x01", &g, 5, 25, BLACK);
    for (int ch = 32; ch < 127; ch++) {
        char s[2] = {(char)ch, 0};
        pl_canvas *c = pl_canvas_new(30, 30, WHITE);
        pl_text(c, s, &g, 5, 25, BLACK);
        int differ = 0;
        for (int y = 0; y < 30 && !differ; y++)
            for (int x = 0; x < 30 && !differ; x++) differ = !same_color(pl_pixel(c, x, y), pl_pixel(box, x, y));
        ck_assert_msg(differ, "char '%c' has no glyph", ch);
        pl_canvas_free(c);
    }
    pl_canvas_free(box);
}
END_TEST

/* ---------------------------------------------------------------- colour, ticks */

START_TEST(test_colormaps) {
    pl_color v0 = pl_cmap_at(PL_CMAP_VIRIDIS, 0), v1 = pl_cmap_at(PL_CMAP_VIRIDIS, 1);
    ck_assert(near8(v0.r, 0x44 / 255.) && near8(v0.g, 0x01 / 255.) && near8(v0.b, 0x54 / 255.));
    ck_assert(near8(v1.r, 0xfd / 255.) && near8(v1.g, 0xe7 / 255.) && near8(v1.b, 0x25 / 255.));
    pl_color mid = pl_cmap_at(PL_CMAP_RDBU, 0.5); /* the diverging map is neutral at its centre */
    ck_assert(fabs(mid.r - mid.b) < 0.01 && mid.r > 0.95);
    ck_assert(pl_cmap_at(PL_CMAP_RDBU, 0).r > 0.3 && pl_cmap_at(PL_CMAP_RDBU, 1).b > 0.3);
    ck_assert(same_color(pl_cmap_at(PL_CMAP_RDBU, 0.2), pl_cmap_at(PL_CMAP_RDBU_R, 0.8)));
    ck_assert(same_color(pl_cmap_at(PL_CMAP_BLUES, NAN), PL_NAN_COLOR));
    ck_assert_int_eq(pl_cmap_find("rdbu"), PL_CMAP_RDBU);
    ck_assert_int_eq(pl_cmap_find("jet"), -1);
    pl_color c;
    ck_assert(pl_parse_hex("#ff8000", &c) && near8(c.g, 128 / 255.));
    ck_assert(!pl_parse_hex("ff8000", &c) && !pl_parse_hex("#ff80zz", &c));
    ck_assert(pl_luminance(pl_palette_at(2, 4, 5)) < pl_luminance(pl_palette_at(2, 0, 5))); /* blues darken */
}
END_TEST

START_TEST(test_ticks) {
    double t[PL_MAXTICKS], step;
    int n = pl_nice_ticks(0, 1, 5, t, &step);
    ck_assert_int_eq(n, 6);
    ck_assert_close(step, 0.2, 1e-12, 0);
    ck_assert_close(t[5], 1, 1e-12, 0);
    n = pl_nice_ticks(-0.43, 1.72, 5, t, &step);
    ck_assert_close(step, 0.5, 1e-12, 0);
    ck_assert_close(t[0], 0, 1e-12, 0); /* first multiple of 0.5 above -0.43 */
    n = pl_log_ticks(14, 280, 2, 6, t);
    ck_assert_int_eq(n, 5);
    ck_assert(t[0] == 16 && t[4] == 256);
    char b[40];
    pl_tick_label(-0.5, 0.5, b, sizeof b);
    ck_assert_str_eq(b, "\xe2\x88\x92" "0.5");
    pl_tick_label(0.25, 0.25, b, sizeof b);
    ck_assert_str_eq(b, "0.25");
    pl_tick_label(64, 0, b, sizeof b);
    ck_assert_str_eq(b, "64");
    ck_assert_int_eq(pl_nice_ticks(NAN, 1, 5, t, &step), 0);
}
END_TEST

/* ---------------------------------------------------------------- output */

START_TEST(test_png_roundtrip_and_atomic) {
    pl_canvas *c = pl_canvas_new(7, 5, WHITE);
    pl_fill_rect(c, 1, 1, 3, 4, (pl_color){0.2f, 0.4f, 0.6f, 1});
    ck_assert_int_eq(pl_write_png(c, path("a.png"), 200), ML_OK);
    image im = read_png(path("a.png"));
    ck_assert_int_eq(im.w, 7);
    ck_assert_int_eq(im.h, 5);
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 7; x++) {
            pl_color q = pl_pixel(c, x, y);
            const unsigned char *v = at(&im, x, y);
            ck_assert(same_color(q, (pl_color){v[0] / 255.f, v[1] / 255.f, v[2] / 255.f, 1}) && v[3] == 255);
        }
    free(im.px);
    /* nothing but the file itself is left in the directory */
    DIR *d = opendir(dir);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            files++;
            ck_assert_str_eq(e->d_name, "a.png");
        }
    closedir(d);
    ck_assert_int_eq(files, 1);
    ck_assert_int_eq(pl_write_png(c, "/dev/null/x.png", 100), ML_ERR_IO); /* a path under a file */
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "/dev/null/x.png"));
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_csv_quoting) {
    pl_file f;
    ck_assert_int_eq(pl_file_open(&f, path("q.csv")), ML_OK);
    pl_csv_str(f.fp, "a,b", ',');
    pl_csv_str(f.fp, "say \"hi\"", ',');
    pl_csv_num(f.fp, NAN, ',');
    pl_csv_num(f.fp, 0.5, '\n');
    ck_assert_int_eq(pl_file_close(&f, 1), ML_OK);
    long n;
    char *s = slurp(path("q.csv"), &n);
    ck_assert_str_eq(s, "\"a,b\",\"say \"\"hi\"\"\",NaN,0.5\n");
    free(s);
    char *p = pl_csv_path("x/fig.png");
    ck_assert_str_eq(p, "x/fig.csv");
    free(p);
}
END_TEST

/* ---------------------------------------------------------------- heatmap */

static const char *toks[] = {"<bos>", "k12", "v7", "k3"};
static const char *sites[] = {"layer 0 block_input", "layer 0 block_output", "layer 1 block_input"};
static double hdata[12] = {0.0, 0.1, 0.9, -0.2, 0.05, -0.6, 0.3, NAN, 1.0, 0.2, -0.1, 0.4};

static pl_heatmap_spec spec(void) {
    pl_heatmap_spec h;
    pl_heatmap_init(&h);
    h.rows = 3, h.cols = 4, h.data = hdata, h.xlabels = toks, h.ylabels = sites;
    h.title = "Patching", h.xlabel = "position", h.ylabel = "site", h.center = 0, h.cbar_label = "Attrib";
    return h;
}

START_TEST(test_heatmap_cells_have_colormap_colour) {
    pl_heatmap_spec h = spec();
    h.out = path("h.png");
    ck_assert_int_eq(pl_heatmap(&h), ML_OK);
    pl_layout L;
    pl_canvas *c = pl_heatmap_render(&h, &L);
    ck_assert_ptr_nonnull(c);
    image im = read_png(h.out);
    ck_assert_int_eq(im.w, c->w);
    double cw = (L.panel[0].x1 - L.panel[0].x0) / 4, ch = (L.panel[0].y1 - L.panel[0].y0) / 3;
    ck_assert_close(cw, ch, 1e-9, 0);
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 4; k++) {
            int x = (int)(L.panel[0].x0 + (k + 0.5) * cw), y = (int)(L.panel[0].y0 + (r + 0.5) * ch);
            const unsigned char *p = at(&im, x, y);
            pl_color want = pl_heatmap_color(&h, hdata[r * 4 + k]);
            pl_color got = {p[0] / 255.f, p[1] / 255.f, p[2] / 255.f, 1};
            ck_assert_msg(same_color(got, want), "cell (%d,%d)", r, k);
        }
    /* NaN is grey; the centre value 0 is the neutral middle of RdBu */
    ck_assert(same_color(pl_heatmap_color(&h, NAN), PL_NAN_COLOR));
    ck_assert(same_color(pl_heatmap_color(&h, 0), pl_cmap_at(PL_CMAP_RDBU, 0.5)));
    /* the colour bar runs from the top colour to the bottom colour */
    int bx = (int)((L.colorbar[0] + L.colorbar[2]) / 2);
    const unsigned char *top = at(&im, bx, (int)L.colorbar[1] + 1), *bot = at(&im, bx, (int)L.colorbar[3] - 2);
    ck_assert(top[2] > top[0] && bot[0] > bot[2]); /* blue (high) on top, red (low) below */
    free(im.px);
    pl_canvas_free(c);
    /* a CSV in long form beside the PNG */
    long n;
    char *csv = slurp(path("h.csv"), &n);
    ck_assert_ptr_nonnull(strstr(csv, "row,col,ylabel,xlabel,value\n0,0,layer 0 block_input,<bos>,0\n"));
    ck_assert_ptr_nonnull(strstr(csv, "1,3,layer 0 block_output,k3,NaN\n"));
    free(csv);
}
END_TEST

START_TEST(test_heatmap_values_readable) {
    pl_heatmap_spec h = spec();
    h.values = 1, h.cmap = "viridis", h.center = NAN, h.cell = 40;
    pl_layout L;
    pl_canvas *c = pl_heatmap_render(&h, &L);
    ck_assert_ptr_nonnull(c);
    /* the dark (low) cell gets light text and the bright (high) cell dark text */
    int light = 0, dark = 0, x0 = (int)L.panel[0].x0, y0 = (int)L.panel[0].y0;
    for (int y = y0 + 2; y < y0 + 38; y++) /* row 0, col 0: 0.0, dark purple */
        for (int x = x0 + 2; x < x0 + 38; x++) light += pl_pixel(c, x, y).g > 0.9;
    for (int y = y0 + 82; y < y0 + 118; y++) /* row 2, col 0: 1.0, yellow */
        for (int x = x0 + 2; x < x0 + 38; x++) dark += pl_pixel(c, x, y).g < 0.3;
    ck_assert_int_gt(light, 5);
    ck_assert_int_gt(dark, 5);
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_heatmap_deterministic) {
    pl_heatmap_spec h = spec();
    h.values = 1, h.scale = 2;
    h.out = path("d1.png");
    ck_assert_int_eq(pl_heatmap(&h), ML_OK);
    h.out = path("d2.png");
    ck_assert_int_eq(pl_heatmap(&h), ML_OK);
    long n1, n2;
    char *a = slurp(path("d1.png"), &n1), *b = slurp(path("d2.png"), &n2);
    ck_assert_int_eq(n1, n2);
    ck_assert_mem_eq(a, b, (size_t)n1);
    for (long i = 0; i + 4 <= n1; i++) ck_assert_msg(memcmp(a + i, "tIME", 4) != 0, "PNG has a time chunk");
    free(a), free(b);
    image im = read_png(path("d1.png")); /* scale 2 doubles the pixel size */
    pl_heatmap_spec h1 = spec();
    pl_canvas *c = pl_heatmap_render(&h1, NULL);
    ck_assert(abs(im.w - 2 * c->w) <= 2 && abs(im.h - 2 * c->h) <= 2);
    free(im.px);
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_heatmap_errors) {
    pl_heatmap_spec h = spec();
    h.out = path("e.png");
    double nan4[4] = {NAN, NAN, NAN, NAN};
    h.rows = 2, h.cols = 2, h.data = nan4, h.xlabels = h.ylabels = NULL;
    ck_assert_int_eq(pl_heatmap(&h), ML_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "plot.heatmap: data has no finite value"));
    h.rows = 0;
    ck_assert_int_eq(pl_heatmap(&h), ML_ERR_SHAPE);
    h = spec(), h.out = path("e.png"), h.cmap = "jet";
    ck_assert_int_eq(pl_heatmap(&h), ML_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "unknown cmap 'jet'"));
    h = spec(), h.out = path("e.png"), h.vmin = 1, h.vmax = 0;
    ck_assert_int_eq(pl_heatmap(&h), ML_ERR_ARG);
    h = spec(), h.out = NULL;
    ck_assert_int_eq(pl_heatmap(&h), ML_ERR_ARG);
    ck_assert(access(path("e.png"), F_OK) != 0); /* nothing written on failure */
}
END_TEST

/* ---------------------------------------------------------------- figures */

static double xs[5] = {16, 32, 64, 128, 256}, ya[5] = {0.1, 0.5, 0.9, 1, 1}, yb[5] = {0.05, 0.1, 0.3, 0.6, 0.9};

START_TEST(test_lines_layout) {
    pl_series se[2] = {{.label = "attention", .n = 5, .x = xs, .y = ya, .marker = PL_MARKER_AUTO, .dashed = 0, .color = NULL},
                       {.label = "mamba", .n = 5, .x = xs, .y = yb, .marker = PL_MARKER_AUTO, .dashed = 1, .color = "#0000ff"}};
    pl_panel pan[2] = {{"AR", 2, se, 0}, {"ATR", 2, se, 0}};
    pl_plot p;
    pl_plot_init(&p);
    p.title = "Accuracy", p.xlabel = "width", p.ylabel = "accuracy", p.logx = 2, p.legend_title = "Arch.";
    p.ylim[0] = 0, p.ylim[1] = 1.05;
    pl_layout L;
    pl_canvas *c = pl_render(PL_LINES, &p, 2, pan, &L);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(L.npanels, 2);
    pl_box_px *b = &L.panel[0];
    /* panels side by side, inside the canvas, not overlapping the legend or each other */
    ck_assert(b->x0 > 20 && L.panel[1].x0 > b->x1 && L.panel[1].x1 <= L.legend[0] && L.legend[2] <= c->w);
    ck_assert(L.title[3] <= b->y0);
    /* the panel border is dark at its left edge, the inside of the panel is white or grid grey */
    int ymid = (int)((b->y0 + b->y1) / 2);
    ck_assert(pl_pixel(c, (int)b->x0, ymid).r < 0.3);
    /* log x: 64 sits halfway between 16 and 256 */
    ck_assert_close(pl_px_x(b, 64), (pl_px_x(b, 16) + pl_px_x(b, 256)) / 2, 1e-9, 0);
    ck_assert_close(pl_px_y(b, 0), b->y1, 1e-9, 0);
    /* a data point carries its series colour */
    pl_color blue = pl_pixel(c, (int)pl_px_x(b, 64), (int)pl_px_y(b, 0.3));
    ck_assert(blue.b > 0.9 && blue.r < 0.2);
    pl_color first = pl_pixel(c, (int)pl_px_x(b, 128), (int)pl_px_y(b, 1));
    ck_assert(same_color(first, pl_palette_at(0, 0, 2)));
    pl_canvas_free(c);
    p.out = path("l.png");
    ck_assert_int_eq(pl_figure(PL_LINES, &p, 2, pan), ML_OK);
    long n;
    char *csv = slurp(path("l.csv"), &n);
    ck_assert_ptr_nonnull(strstr(csv, "panel,series,x,y\nAR,attention,16,0.1\n"));
    free(csv);
}
END_TEST

START_TEST(test_extreme_ranges) {
    /* ranges near the limits of double: no hang, no overflow, and a line plot draws only lines */
    double x[2] = {0, 1e-300}, y[2] = {0, 1e-300}, hx[2] = {-1e308, 1e308}, hy[2] = {1e308, -1e308};
    pl_series se = {.label = "a", .n = 2, .x = x, .y = y, .marker = PL_MARKER_AUTO};
    pl_panel pan = {NULL, 1, &se, 0};
    pl_plot p;
    pl_plot_init(&p);
    p.legend = PL_LEGEND_NONE, p.markers = 0;
    pl_layout L;
    pl_canvas *c = pl_render(PL_LINES, &p, 1, &pan, &L);
    ck_assert_ptr_nonnull(c);
    /* below the diagonal line, the panel is white or grid grey (no bars, no fill) */
    pl_box_px *b = &L.panel[0];
    for (int yy = (int)b->y0 + 2; yy < b->y1 - 2; yy += 7) {
        pl_color q = pl_pixel(c, (int)(b->x1 - 4), yy + 0);
        if (yy > (b->y0 + b->y1) / 2) ck_assert_msg(q.r > 0.85 && q.g > 0.85 && q.b > 0.85, "ink at y %d", yy);
    }
    pl_canvas_free(c);
    se.x = hx, se.y = hy;
    c = pl_render(PL_SCATTER, &p, 1, &pan, NULL);
    ck_assert_ptr_nonnull(c);
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_scatter_alpha) {
    double x[1] = {0.5}, y[1] = {0.5};
    pl_series se = {.label = "a", .n = 1, .x = x, .y = y, .marker = PL_MARKER_SQUARE, .dashed = 0, .color = "#ff0000"};
    pl_panel pan = {NULL, 1, &se, 0};
    pl_plot p;
    pl_plot_init(&p);
    p.alpha = 0.5, p.marker_size = 6, p.xlim[0] = 0, p.xlim[1] = 1, p.ylim[0] = 0, p.ylim[1] = 1, p.legend = PL_LEGEND_NONE;
    pl_layout L;
    pl_canvas *c = pl_render(PL_SCATTER, &p, 1, &pan, &L);
    ck_assert_ptr_nonnull(c);
    pl_color m = pl_pixel(c, (int)pl_px_x(&L.panel[0], 0.5) + 2, (int)pl_px_y(&L.panel[0], 0.5) + 2);
    ck_assert(near8(m.r, 1) && fabs(m.g - 0.5) < 0.05); /* half red over white */
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_box_and_bar) {
    double v1[7] = {0, 0.1, 0.2, 0.3, 0.4, 0.5, 3.0}, v2[4] = {0.8, 0.9, 1.0, NAN};
    pl_series g[2] = {{.label = "attention", .n = 7, .x = NULL, .y = v1, .marker = PL_MARKER_AUTO, .dashed = 0, .color = NULL}, {.label = "mamba", .n = 4, .x = NULL, .y = v2, .marker = PL_MARKER_AUTO, .dashed = 0, .color = NULL}};
    pl_panel pan[3] = {{"@Key", 2, g, 0}, {"@Query", 2, g, 0}, {"@Value", 1, g, 0}};
    double hl[2] = {0, 1};
    pl_plot p;
    pl_plot_init(&p);
    p.hlines = hl, p.nhlines = 2, p.ncol = 2, p.free_y = 1, p.out = path("b.png");
    ck_assert_int_eq(pl_figure(PL_BOX, &p, 3, pan), ML_OK);
    pl_layout L;
    pl_canvas *c = pl_render(PL_BOX, &p, 3, pan, &L);
    ck_assert_ptr_nonnull(c);
    ck_assert(L.panel[2].y0 > L.panel[0].y1); /* second row below the first */
    ck_assert_close(L.panel[2].x0, L.panel[0].x0, 1e-9, 0);
    pl_canvas_free(c);
    const char *cats[3] = {"AR", "ATR", "ATR-split"};
    double b1[3] = {1, 0.5, 0.25}, b2[3] = {0.9, NAN, 0.1};
    pl_series s[2] = {{.label = "1 layer", .n = 3, .x = NULL, .y = b1, .marker = PL_MARKER_AUTO, .dashed = 0, .color = NULL}, {.label = "2 layers", .n = 3, .x = NULL, .y = b2, .marker = PL_MARKER_AUTO, .dashed = 0, .color = NULL}};
    pl_panel bp = {NULL, 2, s, 0};
    pl_plot_init(&p);
    p.categories = cats, p.ncat = 3, p.out = path("bar.png");
    ck_assert_int_eq(pl_figure(PL_BAR, &p, 1, &bp), ML_OK);
    c = pl_render(PL_BAR, &p, 1, &bp, &L);
    /* the first bar of category 0 reaches 1 and has the first palette colour */
    pl_box_px *b = &L.panel[0];
    double x = pl_px_x(b, 0) - (pl_px_x(b, 1) - pl_px_x(b, 0)) * 0.2;
    ck_assert(same_color(pl_pixel(c, (int)x, (int)pl_px_y(b, 0.5)), pl_palette_at(0, 0, 2)));
    ck_assert_close(pl_px_y(b, 0), b->y1, 1e-9, 0); /* bars stand on the floor */
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_figure_errors) {
    double x[2] = {0, 1}, y[2] = {NAN, NAN};
    pl_series se = {.label = "a", .n = 2, .x = x, .y = y, .marker = PL_MARKER_AUTO, .dashed = 0, .color = NULL};
    pl_panel pan = {NULL, 1, &se, 0};
    pl_plot p;
    pl_plot_init(&p);
    p.out = path("f.png");
    ck_assert_int_eq(pl_figure(PL_LINES, &p, 1, &pan), ML_ERR_ARG); /* no finite data */
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "plot.lines: no finite data"));
    double y2[2] = {1, 2};
    se.y = y2, p.logx = 10;
    ck_assert_int_eq(pl_figure(PL_LINES, &p, 1, &pan), ML_ERR_ARG); /* x = 0 on a log axis */
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "log axis"));
    p.logx = 0;
    ck_assert_int_eq(pl_figure(PL_LINES, &p, 0, &pan), ML_ERR_ARG); /* no panels */
    se.x = NULL;
    ck_assert_int_eq(pl_figure(PL_SCATTER, &p, 1, &pan), ML_ERR_ARG); /* no x array */
    se.x = x, p.palette = "rainbow";
    ck_assert_int_eq(pl_figure(PL_LINES, &p, 1, &pan), ML_ERR_ARG);
    p.palette = NULL, se.color = "red";
    ck_assert_int_eq(pl_figure(PL_LINES, &p, 1, &pan), ML_ERR_ARG);
    se.color = NULL;
    const char *cats[3] = {"a", "b", "c"};
    p.categories = cats, p.ncat = 3;
    ck_assert_int_eq(pl_figure(PL_BAR, &p, 1, &pan), ML_ERR_SHAPE); /* 2 values for 3 categories */
    p.width = 60, p.height = 60, p.title = "a long title", p.ylabel = "y";
    pl_panel many[12];
    for (int i = 0; i < 12; i++) many[i] = pan;
    ck_assert_int_eq(pl_figure(PL_LINES, &p, 12, many), ML_ERR_ARG); /* no room */
    ck_assert(access(path("f.png"), F_OK) != 0);
}
END_TEST


/* ---------------------------------------------------------------- vector output, determinism */

/* strstr over binary data (a PDF holds NUL bytes). */
static const char *find(const char *buf, long n, const char *str) {
    size_t k = strlen(str);
    for (long i = 0; i + (long)k <= n; i++)
        if (memcmp(buf + i, str, k) == 0) return buf + i;
    return NULL;
}

static int starts_with(const char *file, const char *magic) {
    long n;
    char *s = slurp(file, &n);
    int ok = n >= (long)strlen(magic) && memcmp(s, magic, strlen(magic)) == 0;
    free(s);
    return ok;
}

START_TEST(test_heatmap_vector_outputs_same_layout) {
    pl_heatmap_spec h = spec();
    h.values = 1;
    pl_layout L;
    pl_canvas *c = pl_heatmap_render(&h, &L);
    ck_assert_ptr_nonnull(c);
    h.out = path("v.svg");
    ck_assert_int_eq(pl_heatmap(&h), ML_OK);
    ck_assert(starts_with(path("v.svg"), "<?xml"));
    ck_assert(access(path("v.csv"), F_OK) == 0);
    h.out = path("v.PDF");
    ck_assert_int_eq(pl_heatmap(&h), ML_OK);
    ck_assert(starts_with(path("v.PDF"), "%PDF-"));
    /* the page is the PNG's size at 100 pixels per inch (72 points per inch) */
    long n;
    char *pdf = slurp(path("v.PDF"), &n);
    const char *mb = find(pdf, n, "/MediaBox [");
    ck_assert_ptr_nonnull(mb);
    double x0, y0, w, hh;
    ck_assert_int_eq(sscanf(mb, "/MediaBox [ %lf %lf %lf %lf", &x0, &y0, &w, &hh), 4);
    ck_assert_close(w, c->w * 0.72, 0.01, 0);
    ck_assert_close(hh, c->h * 0.72, 0.01, 0);
    free(pdf);
    char *svg = slurp(path("v.svg"), &n), want[64];
    snprintf(want, sizeof want, "width=\"%gpt\" height=\"%gpt\"", c->w * 0.72, c->h * 0.72);
    ck_assert_msg(strstr(svg, want), "SVG size: wanted %s", want);
    free(svg);
    pl_canvas_free(c);
    ck_assert_int_eq(pl_format_of("a/b.Svg"), PL_SVG);
    ck_assert_int_eq(pl_format_of("a.pdf/b"), PL_PNG);
}
END_TEST

/* Writes the same figure twice under two names and checks the bytes are equal. */
static void check_same_bytes(pl_heatmap_spec h, const char *a, const char *b) {
    h.out = path(a);
    ck_assert_int_eq(pl_heatmap(&h), ML_OK);
    h.out = path(b);
    ck_assert_int_eq(pl_heatmap(&h), ML_OK);
    long n1, n2;
    char *x = slurp(path(a), &n1), *y = slurp(path(b), &n2);
    ck_assert_int_eq(n1, n2);
    ck_assert_msg(memcmp(x, y, (size_t)n1) == 0, "%s and %s differ", a, b);
    free(x), free(y);
}

START_TEST(test_vector_outputs_deterministic) {
    pl_heatmap_spec h = spec();
    h.values = 1, h.title = "Patching \xce\xa3"; /* glyph subsets too */
    unsetenv("SOURCE_DATE_EPOCH");
    check_same_bytes(h, "a.svg", "b.svg");
    check_same_bytes(h, "a.pdf", "b.pdf");
    long n;
    char *pdf = slurp(path("a.pdf"), &n);
    ck_assert_ptr_nonnull(find(pdf, n, "/CreationDate (19700101000000Z)"));
    free(pdf);
    setenv("SOURCE_DATE_EPOCH", "86400", 1); /* the reproducible-builds convention is honoured */
    check_same_bytes(h, "c.pdf", "d.pdf");
    pdf = slurp(path("c.pdf"), &n);
    ck_assert_ptr_nonnull(find(pdf, n, "/CreationDate (19700102000000Z)"));
    free(pdf);
    unsetenv("SOURCE_DATE_EPOCH");
}
END_TEST

/* ---------------------------------------------------------------- tick gap, -0 */

START_TEST(test_colorbar_ticks_clear_of_labels) {
    for (double s = 1; s <= 3; s++) {
        pl_heatmap_spec h = spec();
        h.scale = s;
        pl_layout L;
        pl_canvas *c = pl_heatmap_render(&h, &L);
        ck_assert_ptr_nonnull(c);
        double tick_end = L.colorbar_ticks[0], label_x = L.colorbar_ticks[1];
        ck_assert_msg(label_x - tick_end >= 2.5 * s, "gap %g at scale %g", label_x - tick_end, s);
        /* between the marks and the labels the colour bar's right side is blank */
        int blank = 1;
        for (int y = (int)L.colorbar[1]; y < (int)L.colorbar[3]; y++)
            for (int x = (int)ceil(tick_end) + 1; x < (int)floor(label_x) - 1; x++) blank &= is_white(pl_pixel(c, x, y));
        ck_assert_msg(blank, "ink between tick marks and labels at scale %g", s);
        pl_canvas_free(c);
    }
}
END_TEST

START_TEST(test_csv_negative_zero) {
    double d[2] = {-0.0, -1e-300};
    pl_heatmap_spec h;
    pl_heatmap_init(&h);
    h.rows = 1, h.cols = 2, h.data = d, h.out = path("z.png");
    ck_assert_int_eq(pl_heatmap(&h), ML_OK);
    long n;
    char *csv = slurp(path("z.csv"), &n);
    ck_assert_str_eq(csv, "row,col,ylabel,xlabel,value\n0,0,0,0,0\n0,1,0,1,-1e-300\n");
    free(csv);
}
END_TEST

/* ---------------------------------------------------------------- writers */

START_TEST(test_writer_makes_parent_directories) {
    pl_heatmap_spec h = spec();
    h.out = path("a/b/c/fig.svg");
    ck_assert_int_eq(pl_heatmap(&h), ML_OK);
    ck_assert(access(path("a/b/c/fig.svg"), F_OK) == 0 && access(path("a/b/c/fig.csv"), F_OK) == 0);
}
END_TEST

START_TEST(test_writer_unwritable_paths) {
    pl_heatmap_spec h = spec();
    write_text(path("file"), "x");
    h.out = path("file/sub/fig.png"); /* under a file */
    ck_assert_int_eq(pl_heatmap(&h), ML_ERR_IO);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "fig.png"));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "Not a directory"));
    /* a directory that cannot be written: a read-only one, or /sys where root may not create */
    const char *ro = "/sys/mechlab_fig.png";
    if (geteuid() != 0) {
        ck_assert_int_eq(mkdir(path("ro"), 0555), 0);
        ro = path("ro/fig.png");
    }
    h.out = ro;
    ck_assert_int_eq(pl_heatmap(&h), ML_ERR_IO);
    ck_assert_msg(strstr(ml_last_error(), ro), "%s", ml_last_error());
    /* a read-only file is not replaced */
    write_text(path("keep.png"), "old");
    chmod(path("keep.png"), 0444);
    h.out = path("keep.png");
    ck_assert_int_eq(pl_heatmap(&h), ML_ERR_IO);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "read-only"));
    long n;
    char *s = slurp(path("keep.png"), &n);
    ck_assert_str_eq(s, "old");
    free(s);
    ck_assert(access(path("keep.csv"), F_OK) != 0);
}
END_TEST

START_TEST(test_writer_both_or_neither) {
    /* the CSV cannot be written: the figure keeps its old bytes and no temp file is left */
    pl_heatmap_spec h = spec();
    write_text(path("f.png"), "old figure");
    write_text(path("f.csv"), "old csv");
    chmod(path("f.csv"), 0444);
    h.out = path("f.png");
    ck_assert_int_eq(pl_heatmap(&h), ML_ERR_IO);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "f.csv"));
    long n;
    char *s = slurp(path("f.png"), &n);
    ck_assert_str_eq(s, "old figure");
    free(s);
    ck_assert_int_eq(count_files(), 2);
}
END_TEST

START_TEST(test_writer_full_disk) {
    /* /dev/full: every write fails with ENOSPC */
    pl_canvas *c = pl_canvas_new(300, 200, WHITE);
    FILE *full = fopen("/dev/full", "wb");
    if (full) {
        ck_assert_int_eq(pl_png_encode(c, full, "/x/fig.png", 100), ML_ERR_IO);
        ck_assert_msg(strstr(ml_last_error(), "cannot write '/x/fig.png': No space left on device"), "%s", ml_last_error());
        fclose(full);
    }
    pl_canvas_free(c);
    /* a file size limit makes the figure's own write fail (this test runs in its own process) */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {2000, 2000};
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    pl_heatmap_spec h = spec();
    h.values = 1, h.scale = 3, h.out = path("big.png");
    ck_assert_int_eq(pl_heatmap(&h), ML_ERR_IO);
    ck_assert_msg(strstr(ml_last_error(), "big.png") && !strstr(ml_last_error(), "PNG error"), "%s", ml_last_error());
    h.out = path("big.pdf");
    ck_assert_int_eq(pl_heatmap(&h), ML_ERR_IO);
    ck_assert_msg(strstr(ml_last_error(), "big.pdf"), "%s", ml_last_error());
    ck_assert_int_eq(count_files(), 0); /* no temp files left behind */
}
END_TEST

/* ---------------------------------------------------------------- option ranges, masks */

START_TEST(test_heatmap_tiny_scale_or_cell_is_an_error) {
    /* these once rounded the cell to 0 pixels and looped forever */
    pl_heatmap_spec h = spec();
    h.scale = 0.01;
    ck_assert_ptr_null(pl_heatmap_render(&h, NULL));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "scale must be in 0.1..10"));
    h = spec(), h.cell = 0.4;
    ck_assert_ptr_null(pl_heatmap_render(&h, NULL));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "cell must be 0 (automatic) or 1..200"));
    h = spec(), h.cell = 2, h.scale = 0.2;
    ck_assert_ptr_null(pl_heatmap_render(&h, NULL));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "at least 1 pixel"));
    h = spec(), h.scale = 0.1; /* the smallest scale still draws */
    pl_canvas *c = pl_heatmap_render(&h, NULL);
    ck_assert_ptr_nonnull(c);
    pl_canvas_free(c);
    double x[2] = {0, 1};
    pl_series se = {.label = "a", .n = 2, .x = x, .y = x, .marker = PL_MARKER_AUTO};
    pl_panel pan = {NULL, 1, &se, 0};
    pl_plot p;
    pl_plot_init(&p);
    p.scale = 0.01;
    ck_assert_ptr_null(pl_render(PL_LINES, &p, 1, &pan, NULL));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "scale must be in 0.1..10"));
}
END_TEST


/* Pixels of two canvases of one size: how many differ. */
static long canvas_diff(const pl_canvas *a, const pl_canvas *b) {
    ck_assert(a->w == b->w && a->h == b->h);
    long n = 0;
    for (int y = 0; y < a->h; y++)
        for (int x = 0; x < a->w; x++) {
            pl_color p = pl_pixel(a, x, y), q = pl_pixel(b, x, y);
            n += !(p.r == q.r && p.g == q.g && p.b == q.b);
        }
    return n;
}

START_TEST(test_scatter_jitter_seeded) {
    /* six points on one spot: without jitter one marker, with it six places; the same seed gives
     * the same picture, another seed another; the CSV keeps the true values */
    double x[6] = {1, 1, 1, 1, 1, 1}, y[6] = {0, 0, 0, 0, 0, 0};
    pl_series se = {.label = "a", .n = 6, .x = x, .y = y, .marker = PL_MARKER_CIRCLE, .color = "#ff0000"};
    pl_panel pan = {NULL, 1, &se, 0};
    pl_plot p;
    pl_plot_init(&p);
    p.xlim[0] = 0, p.xlim[1] = 2, p.ylim[0] = -1, p.ylim[1] = 1, p.legend = PL_LEGEND_NONE;
    pl_layout L;
    pl_canvas *c0 = pl_render(PL_SCATTER, &p, 1, &pan, &L);
    p.jitter = 10, p.jitter_seed = 7;
    pl_canvas *c1 = pl_render(PL_SCATTER, &p, 1, &pan, NULL), *c2 = pl_render(PL_SCATTER, &p, 1, &pan, NULL);
    p.jitter_seed = 8;
    pl_canvas *c3 = pl_render(PL_SCATTER, &p, 1, &pan, NULL);
    ck_assert(c0 && c1 && c2 && c3);
    ck_assert_int_gt(canvas_diff(c0, c1), 20);
    ck_assert_int_eq(canvas_diff(c1, c2), 0);
    ck_assert_int_gt(canvas_diff(c1, c3), 20);
    /* every point stays within the jitter of its place: nothing red beyond 10 px plus the marker */
    double cx = pl_px_x(&L.panel[0], 1), cy = pl_px_y(&L.panel[0], 0);
    for (int yy = 0; yy < c1->h; yy++)
        for (int xx = 0; xx < c1->w; xx++) {
            pl_color q = pl_pixel(c1, xx, yy);
            if (q.r > 0.9 && q.g < 0.6) ck_assert(fabs(xx - cx) <= 15 && fabs(yy - cy) <= 15);
        }
    p.out = path("j.png");
    ck_assert_int_eq(pl_figure(PL_SCATTER, &p, 1, &pan), ML_OK);
    long n;
    char *csv = slurp(path("j.csv"), &n);
    ck_assert_str_eq(csv, "panel,series,x,y\n1,a,1,0\n1,a,1,0\n1,a,1,0\n1,a,1,0\n1,a,1,0\n1,a,1,0\n");
    free(csv);
    p.jitter = -1;
    ck_assert_int_ne(pl_figure(PL_SCATTER, &p, 1, &pan), ML_OK);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "jitter must be in 0..100"));
    p.jitter = 3;
    ck_assert_ptr_null(pl_render(PL_LINES, &p, 1, &pan, NULL));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "jitter belongs to scatter plots"));
    pl_canvas_free(c0), pl_canvas_free(c1), pl_canvas_free(c2), pl_canvas_free(c3);
}
END_TEST

START_TEST(test_dodge_shifts_series) {
    /* two series on one spot: dodge = 20 puts the first 10 px left, the second 10 px right */
    double x[2] = {1, 4}, y[2] = {0.5, 0.5};
    pl_series se[2] = {{.label = "a", .n = 2, .x = x, .y = y, .marker = PL_MARKER_SQUARE, .color = "#ff0000"},
                       {.label = "b", .n = 2, .x = x, .y = y, .marker = PL_MARKER_SQUARE, .color = "#0000ff"}};
    pl_panel pan = {NULL, 2, se, 0};
    pl_plot p;
    pl_plot_init(&p);
    p.xlim[0] = 0, p.xlim[1] = 5, p.ylim[0] = 0, p.ylim[1] = 1, p.legend = PL_LEGEND_NONE, p.dodge = 20, p.line_width = 0.5;
    pl_layout L;
    pl_canvas *c = pl_render(PL_LINES, &p, 1, &pan, &L);
    ck_assert_ptr_nonnull(c);
    pl_box_px *b = &L.panel[0];
    int py = (int)pl_px_y(b, 0.5) - 2; /* above the line, inside the marker */
    pl_color l = pl_pixel(c, (int)pl_px_x(b, 1) - 10, py), r = pl_pixel(c, (int)pl_px_x(b, 1) + 10, py);
    ck_assert(l.r > 0.9 && l.b < 0.1);
    ck_assert(r.b > 0.9 && r.r < 0.1);
    pl_canvas_free(c);
    p.dodge = 101;
    ck_assert_ptr_null(pl_render(PL_LINES, &p, 1, &pan, NULL));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "dodge must be in 0..100"));
    p.dodge = 5;
    ck_assert_ptr_null(pl_render(PL_BOX, &p, 1, &pan, NULL));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "dodge belongs to line and scatter plots"));
}
END_TEST

START_TEST(test_box_of_few_values_is_points) {
    /* a group of two values is two points and no box: the middle between them is not filled;
     * a group of five is a box, filled at its median */
    double two[2] = {0.2, 0.8}, three[5] = {0.2, 0.35, 0.5, 0.65, 0.8};
    pl_series g[2] = {{.label = "two", .n = 2, .y = two, .marker = PL_MARKER_AUTO, .color = "#ff0000"},
                      {.label = "five", .n = 5, .y = three, .marker = PL_MARKER_AUTO, .color = "#ff0000"}};
    pl_panel pan = {NULL, 2, g, 0};
    pl_plot p;
    pl_plot_init(&p);
    p.ylim[0] = 0, p.ylim[1] = 1, p.alpha = 1;
    pl_layout L;
    pl_canvas *c = pl_render(PL_BOX, &p, 1, &pan, &L);
    ck_assert_ptr_nonnull(c);
    pl_box_px *b = &L.panel[0];
    pl_color mid2 = pl_pixel(c, (int)pl_px_x(b, 0), (int)pl_px_y(b, 0.5)), mid3 = pl_pixel(c, (int)pl_px_x(b, 1) + 3, (int)pl_px_y(b, 0.4));
    ck_assert(!(mid2.r > 0.9 && mid2.g < 0.1));
    ck_assert(mid3.r > 0.9 && mid3.g < 0.1);
    /* the two points, beside the group's x */
    pl_color p1 = pl_pixel(c, (int)pl_px_x(b, 0) - 3, (int)pl_px_y(b, 0.2)), p2 = pl_pixel(c, (int)pl_px_x(b, 0) + 4, (int)pl_px_y(b, 0.8));
    ck_assert(p1.r > 0.9 && p1.g < 0.1);
    ck_assert(p2.r > 0.9 && p2.g < 0.1);
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_caption_strips_and_own_labels) {
    /* a caption sits under everything, inside the figure; a long strip label stays inside its
     * panel; a panel with its own group labels gets its own x axis */
    double v[3] = {0.1, 0.5, 0.9};
    pl_series g1[1] = {{.label = "conv 2 (3)", .key = "conv 2", .n = 3, .y = v, .marker = PL_MARKER_AUTO}};
    pl_series g2[1] = {{.label = "conv 2 (1)", .key = "conv 2", .n = 1, .y = v, .marker = PL_MARKER_AUTO}};
    pl_panel pan[2] = {{"a facet label far too long to fit in the strip of its narrow panel", 1, g1, 0}, {"b", 1, g2, 0}};
    pl_plot p;
    pl_plot_init(&p);
    p.ncol = 1, p.width = 200, p.height = 300, p.caption = "runs passing the filter", p.xlabel = "group";
    pl_layout L;
    pl_canvas *c = pl_render(PL_BOX, &p, 2, pan, &L);
    ck_assert_ptr_nonnull(c);
    ck_assert(L.caption[2] > L.caption[0] && L.caption[3] <= c->h && L.caption[1] > L.panel[1].y1);
    /* the first panel's own x axis: the second panel starts below its tick labels, lower than
     * when both panels share their labels */
    pl_series same[1] = {{.label = "conv 2 (3)", .key = "conv 2", .n = 1, .y = v, .marker = PL_MARKER_AUTO}};
    pl_panel pan_same[2] = {pan[0], {"b", 1, same, 0}};
    pl_layout Ls;
    pl_canvas *cs = pl_render(PL_BOX, &p, 2, pan_same, &Ls);
    ck_assert_ptr_nonnull(cs);
    ck_assert((L.panel[1].y0 - L.panel[0].y1) - (Ls.panel[1].y0 - Ls.panel[0].y1) > 10);
    pl_canvas_free(cs);
    /* left of the first strip, nothing drawn at the strip's height */
    int sy = (int)(L.panel[0].y0 - 6);
    for (int x = 0; x < (int)L.panel[0].x0 - 1; x++) ck_assert(is_white(pl_pixel(c, x, sy)));
    for (int x = (int)L.panel[0].x1 + 1; x < c->w; x++) ck_assert(is_white(pl_pixel(c, x, sy)));
    pl_canvas_free(c);
    /* the CSV's group is the key */
    p.out = path("cap.png");
    ck_assert_int_eq(pl_figure(PL_BOX, &p, 2, pan), ML_OK);
    long n;
    char *csv = slurp(path("cap.csv"), &n);
    ck_assert_ptr_nonnull(strstr(csv, ",conv 2,0.1\n"));
    ck_assert_ptr_null(strstr(csv, "(3)"));
    free(csv);
}
END_TEST

START_TEST(test_heatmap_centred_under_wide_title_and_blues) {
    double d[2] = {0, 1};
    pl_heatmap_spec h;
    pl_heatmap_init(&h);
    h.rows = 1, h.cols = 2, h.data = d, h.cell = 20;
    pl_layout L0, L1;
    pl_canvas *c0 = pl_heatmap_render(&h, &L0);
    h.title = "a title very much wider than the map and its colour bar together";
    pl_canvas *c1 = pl_heatmap_render(&h, &L1);
    ck_assert(c0 && c1);
    ck_assert(c1->w > c0->w);
    /* the margins left of the map and right of the colour bar's labels are near equal */
    double left = L1.panel[0].x0, right = c1->w - (L1.colorbar[2] + (c0->w - L0.colorbar[2]));
    ck_assert(fabs((left - L0.panel[0].x0) - right) <= 2);
    pl_canvas_free(c0), pl_canvas_free(c1);
    /* the Blues palette's lightest series is a mid blue, not near-white */
    ck_assert(pl_luminance(pl_palette_at(2, 0, 5)) < 0.45);
}
END_TEST

START_TEST(test_heatmap_mask_marks_cells) {
    unsigned char masked[12] = {0};
    masked[2] = 1; /* row 0, col 2: 0.9, dark blue otherwise */
    pl_heatmap_spec h = spec();
    h.masked = masked, h.mask_note = "attrib_den \xe2\x89\xa4 0.01";
    pl_layout L;
    pl_canvas *c = pl_heatmap_render(&h, &L);
    ck_assert_ptr_nonnull(c);
    pl_box_px *b = &L.panel[0];
    double cw = (b->x1 - b->x0) / 4;
    int grey = 0, hatch = 0, blue = 0;
    for (int y = (int)b->y0 + 2; y < (int)(b->y0 + cw) - 2; y++)
        for (int x = (int)(b->x0 + 2 * cw) + 2; x < (int)(b->x0 + 3 * cw) - 2; x++) {
            pl_color q = pl_pixel(c, x, y);
            grey += fabs(q.r - q.b) < 0.02 && q.r > 0.85;
            hatch += fabs(q.r - q.b) < 0.02 && q.r < 0.8;
            blue += q.b > q.r + 0.2;
        }
    ck_assert_int_gt(grey, 20);
    ck_assert_int_gt(hatch, 10);
    ck_assert_int_eq(blue, 0);
    /* an unmasked cell keeps its colour; the note sits under the map, inside the figure */
    int x = (int)(b->x0 + 0.5 * cw), y = (int)(b->y0 + 2.5 * cw);
    ck_assert(same_color(pl_pixel(c, x, y), pl_heatmap_color(&h, 1.0)));
    ck_assert(L.mask_note[1] > b->y1 && L.mask_note[3] <= c->h && L.mask_note[2] <= c->w && L.mask_note[2] > L.mask_note[0]);
    pl_canvas_free(c);
    h.out = path("m.png");
    ck_assert_int_eq(pl_heatmap(&h), ML_OK);
    long n;
    char *csv = slurp(path("m.csv"), &n);
    ck_assert_ptr_nonnull(strstr(csv, "row,col,ylabel,xlabel,value,masked\n0,0,layer 0 block_input,<bos>,0,0\n"));
    ck_assert_ptr_nonnull(strstr(csv, "0,2,layer 0 block_input,v7,0.9,1\n"));
    free(csv);
    /* no cell masked: no note */
    memset(masked, 0, sizeof masked);
    c = pl_heatmap_render(&h, &L);
    ck_assert(L.mask_note[2] == 0);
    pl_canvas_free(c);
}
END_TEST


/* The mean x of the pixels of colour col in rows y0..y1 of panel b (0 pixels: NaN). */
static double ink_x(const pl_canvas *c, const pl_box_px *b, pl_color col, int y0, int y1) {
    double sum = 0;
    int n = 0;
    for (int y = y0; y <= y1; y++)
        for (int x = (int)b->x0; x < (int)b->x1; x++)
            if (same_color(pl_pixel(c, x, y), col)) sum += x + 0.5, n++;
    return n ? sum / n : NAN;
}

START_TEST(test_dodge_keeps_true_x_on_log_axis) {
    /* five series on one spot at d = 32 and a sixth alone at d = 256 (the last of six keys, which
     * a per-key shift moved 2.5 dodges right): the lone point sits on its tick, the five are
     * spread dodge apart around theirs */
    static const char *cols[6] = {"#ff0000", "#00ff00", "#0000ff", "#ff00ff", "#00ffff", "#ffaa00"};
    static const char *labs[6] = {"a", "b", "c", "d", "e", "f"};
    double x32[1] = {32}, x256[1] = {256}, y5[1] = {0.5}, y9[1] = {0.9}, xt[4] = {32, 64, 128, 256};
    pl_series se[6];
    for (int i = 0; i < 6; i++)
        se[i] = (pl_series){.label = labs[i], .n = 1, .x = i < 5 ? x32 : x256, .y = i < 5 ? y5 : y9, .marker = PL_MARKER_SQUARE, .color = cols[i]};
    pl_panel pan = {NULL, 6, se, 0};
    pl_plot p;
    pl_plot_init(&p);
    p.logx = 2, p.xticks = xt, p.nxticks = 4, p.xlim[0] = 24, p.xlim[1] = 340, p.ylim[0] = 0, p.ylim[1] = 1;
    p.legend = PL_LEGEND_NONE, p.dodge = 8, p.marker_size = 2, p.scale = 1;
    pl_layout L;
    pl_canvas *c = pl_render(PL_LINES, &p, 1, &pan, &L);
    ck_assert_ptr_nonnull(c);
    pl_box_px *b = &L.panel[0];
    pl_color col;
    ck_assert(pl_parse_hex(cols[5], &col));
    int y9p = (int)pl_px_y(b, 0.9), y5p = (int)pl_px_y(b, 0.5);
    double lone = ink_x(c, b, col, y9p - 5, y9p + 5);
    ck_assert_msg(fabs(lone - pl_px_x(b, 256)) < 0.6, "lone point at x %g px, its tick at %g", lone, pl_px_x(b, 256));
    double sum = 0, prev = -INFINITY;
    for (int i = 0; i < 5; i++) {
        ck_assert(pl_parse_hex(cols[i], &col));
        double cx = ink_x(c, b, col, y5p - 5, y5p + 5);
        ck_assert_msg(i == 0 || (cx - prev > 7 && cx - prev < 9), "series %d at %g, previous at %g", i, cx, prev);
        sum += cx, prev = cx;
    }
    ck_assert_msg(fabs(sum / 5 - pl_px_x(b, 32)) < 0.6, "cluster centred at %g, tick at %g", sum / 5, pl_px_x(b, 32));
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_caption_wraps_at_readable_size) {
    /* a caption four times the figure's width wraps into lines at the tick labels' size; its
     * capitals stand PL_FS_TICK * scale pixels high instead of shrinking to a fifth */
    char cap[600] = "";
    for (int i = 0; i < 12; i++) strcat(cap, "HHHH HH ");
    double x[2] = {0, 1}, y[2] = {0, 1};
    pl_series se = {.label = "a", .n = 2, .x = x, .y = y, .marker = PL_MARKER_AUTO};
    pl_panel pan = {NULL, 1, &se, 0};
    pl_plot p;
    pl_plot_init(&p);
    p.width = 240, p.height = 300, p.scale = 2, p.caption = cap, p.legend = PL_LEGEND_NONE;
    pl_layout L;
    pl_canvas *c = pl_render(PL_LINES, &p, 1, &pan, &L);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_ge(L.caption_lines, 4);
    ck_assert(L.caption[0] >= 0 && L.caption[2] <= c->w && L.caption[1] > L.panel[0].y1 && L.caption[3] <= c->h);
    /* the last line's ink: rows with a dark pixel, counted upwards from the bottom */
    int bottom = -1, top = -1;
    for (int yy = c->h - 1; yy > (int)L.panel[0].y1; yy--) {
        int ink = 0;
        for (int xx = 0; xx < c->w && !ink; xx++) ink = pl_pixel(c, xx, yy).r < 0.6;
        if (ink && bottom < 0) bottom = yy;
        if (!ink && bottom >= 0) { top = yy + 1; break; }
    }
    ck_assert(bottom >= 0 && top >= 0);
    int h = bottom - top + 1;
    ck_assert_msg(h >= 14 && h <= 18, "caption capitals %d px high at scale 2", h);
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_scatter_highlight_on_top_and_faint_cloud) {
    /* the path series comes first in the list yet is drawn over the opaque cloud; a point at
     * alpha 0.2 has no opaque outline */
    double hx[2] = {0.5, 0.7}, hy[2] = {0.5, 0.7}, cx[3] = {0.5, 0.5, 0.5}, cy[3] = {0.5, 0.5, 0.5}, fx[1] = {0.2}, fy[1] = {0.2};
    pl_series se[3] = {{.label = "best", .n = 2, .x = hx, .y = hy, .marker = PL_MARKER_SQUARE, .color = "#ff0000", .path = 1, .highlight = 1, .alpha = 1},
                       {.label = "cloud", .n = 3, .x = cx, .y = cy, .marker = PL_MARKER_SQUARE, .color = "#0000ff", .alpha = 1},
                       {.label = "faint", .n = 1, .x = fx, .y = fy, .marker = PL_MARKER_SQUARE, .color = "#00ff00", .alpha = 0.2}};
    pl_panel pan = {NULL, 3, se, 0};
    pl_plot p;
    pl_plot_init(&p);
    p.xlim[0] = 0, p.xlim[1] = 1, p.ylim[0] = 0, p.ylim[1] = 1, p.legend = PL_LEGEND_NONE, p.marker_size = 5;
    pl_layout L;
    pl_canvas *c = pl_render(PL_SCATTER, &p, 1, &pan, &L);
    ck_assert_ptr_nonnull(c);
    pl_box_px *b = &L.panel[0];
    pl_color mid = pl_pixel(c, (int)pl_px_x(b, 0.5) + 1, (int)pl_px_y(b, 0.5) + 2);
    ck_assert_msg(mid.r > 0.9 && mid.b < 0.1, "highlight under the cloud: %g %g %g", mid.r, mid.g, mid.b);
    double darkest = 1;
    for (int yy = (int)pl_px_y(b, 0.2) - 7; yy <= (int)pl_px_y(b, 0.2) + 7; yy++)
        for (int xx = (int)pl_px_x(b, 0.2) - 7; xx <= (int)pl_px_x(b, 0.2) + 7; xx++) darkest = fmin(darkest, pl_pixel(c, xx, yy).r);
    ck_assert_msg(darkest > 0.5 && darkest < 0.95, "faint point's darkest red channel %g", darkest);
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_legend_lists_series_with_data) {
    double x[2] = {1, 2}, y[2] = {0.1, 0.2}, nan2[2] = {NAN, NAN};
    pl_series se[3] = {{.label = "has data", .n = 2, .x = x, .y = y, .marker = PL_MARKER_AUTO},
                       {.label = "empty", .n = 0, .x = x, .y = y, .marker = PL_MARKER_AUTO},
                       {.label = "all NaN", .n = 2, .x = x, .y = nan2, .marker = PL_MARKER_AUTO}};
    pl_panel pan = {NULL, 3, se, 0};
    pl_plot p;
    pl_plot_init(&p);
    pl_layout L;
    for (int kind = PL_LINES; kind <= PL_SCATTER; kind++) {
        pl_canvas *c = pl_render((pl_kind)kind, &p, 1, &pan, &L);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(L.nlegend, 1);
        ck_assert_str_eq(L.legend_label[0], "has data");
        /* one entry tall: a row of text, not three */
        ck_assert(L.legend[3] - L.legend[1] < 2 * 13 + 1);
        pl_canvas_free(c);
    }
}
END_TEST

START_TEST(test_box_few_points_encode_tags) {
    /* a group of three runs (d = 32, 64, 64) is three points: d = 32 left of the group's x and
     * d = 64 right, in two shapes named by the legend; a group of six is a box */
    double v[3] = {0.2, 0.5, 0.8}, t[3] = {32, 64, 64}, six[6] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, t6[6] = {32, 32, 32, 64, 64, 64};
    pl_series g[2] = {{.label = "few", .n = 3, .y = v, .tag = t, .marker = PL_MARKER_AUTO, .color = "#ff0000"},
                      {.label = "many", .n = 6, .y = six, .tag = t6, .marker = PL_MARKER_AUTO, .color = "#0000ff"}};
    pl_panel pan = {NULL, 2, g, 0};
    pl_plot p;
    pl_plot_init(&p);
    p.ylim[0] = 0, p.ylim[1] = 1, p.alpha = 1, p.tag_title = "d";
    pl_layout L;
    pl_canvas *c = pl_render(PL_BOX, &p, 1, &pan, &L);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(L.nlegend, 2);
    ck_assert_str_eq(L.legend_label[0], "d = 32");
    ck_assert_str_eq(L.legend_label[1], "d = 64");
    pl_box_px *b = &L.panel[0];
    pl_color red = {1, 0, 0, 1};
    int y2 = (int)pl_px_y(b, 0.2), y5 = (int)pl_px_y(b, 0.5);
    double xc = pl_px_x(b, 0);
    ck_assert_msg(ink_x(c, b, red, y2 - 1, y2 + 1) < xc - 1, "d = 32 at %g, group at %g", ink_x(c, b, red, y2 - 1, y2 + 1), xc);
    ck_assert_msg(ink_x(c, b, red, y5 - 1, y5 + 1) > xc, "d = 64 at %g, group at %g", ink_x(c, b, red, y5 - 1, y5 + 1), xc);
    /* the six-run group is a box: filled at its median */
    pl_color blue = pl_pixel(c, (int)pl_px_x(b, 1) + 4, (int)pl_px_y(b, 0.3));
    ck_assert(blue.b > 0.9 && blue.r < 0.1);
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_short_panel_has_three_y_ticks) {
    /* a short panel from -0.5 to 1.75 gets ticks between 0 and 1, not 0 and 1 alone */
    double v[2] = {0, 1};
    pl_series g = {.label = "a", .n = 2, .y = v, .marker = PL_MARKER_AUTO};
    pl_panel pan = {NULL, 1, &g, 0};
    pl_plot p;
    pl_plot_init(&p);
    p.ylim[0] = -0.5, p.ylim[1] = 1.75, p.height = 130, p.scale = 1;
    pl_layout L;
    pl_canvas *c = pl_render(PL_BOX, &p, 1, &pan, &L);
    ck_assert_ptr_nonnull(c);
    pl_box_px *b = &L.panel[0];
    int ticks = 0, in = 0;
    for (int yy = (int)b->y0; yy < (int)b->y1; yy++) {
        int dark = pl_pixel(c, (int)b->x0 - 2, yy).r < 0.5;
        ticks += dark && !in, in = dark;
    }
    ck_assert_int_ge(ticks, 4);
    pl_canvas_free(c);
}
END_TEST

START_TEST(test_blank_facets_are_dropped) {
    /* a 2 x 2 grid whose lower-left slot cannot have data: nothing drawn there; the panel above it
     * carries its own x tick labels and the one right of it its own y tick labels */
    double v[3] = {0.1, 0.5, 0.9};
    pl_series g = {.label = "a", .n = 3, .y = v, .marker = PL_MARKER_AUTO};
    pl_panel pan[4] = {{"p0", 1, &g, 0}, {"p1", 1, &g, 0}, {"no layer 1", 0, NULL, 1}, {"p3", 1, &g, 0}};
    pl_plot p;
    pl_plot_init(&p);
    p.ncol = 2, p.width = 300, p.height = 300;
    pl_layout L;
    pl_canvas *c = pl_render(PL_BOX, &p, 4, pan, &L);
    ck_assert_ptr_nonnull(c);
    pl_box_px *b2 = &L.panel[2], *b0 = &L.panel[0], *b3 = &L.panel[3];
    for (int yy = (int)b2->y0 - 20; yy < (int)b2->y1; yy += 2)
        for (int xx = (int)b2->x0; xx < (int)b2->x1 - 20; xx += 2) ck_assert_msg(is_white(pl_pixel(c, xx, yy)), "ink at %d %d", xx, yy);
    int ink = 0;
    for (int yy = (int)b0->y1 + 5; yy < (int)b2->y0 - 20; yy++)
        for (int xx = (int)b0->x0; xx < (int)b0->x1; xx++) ink += pl_pixel(c, xx, yy).r < 0.8;
    ck_assert_int_gt(ink, 5);
    ink = 0;
    for (int yy = (int)b3->y0; yy < (int)b3->y1; yy++)
        for (int xx = (int)b3->x0 - 14; xx < (int)b3->x0 - 5; xx++) ink += pl_pixel(c, xx, yy).r < 0.5;
    ck_assert_int_gt(ink, 10);
    pl_canvas_free(c);
    pan[2].nseries = 1, pan[2].series = &g;
    ck_assert_ptr_null(pl_render(PL_BOX, &p, 4, pan, NULL));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "blank but has series"));
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("plot");
    TCase *tc = tcase_create("plot");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_rect_and_alpha);
    tcase_add_test(tc, test_translucent_union_is_its_opaque_drawing_faded);
    tcase_add_test(tc, test_line_crisp_and_clip);
    tcase_add_test(tc, test_polyline_joins_blend_once);
    tcase_add_test(tc, test_dashed_terminates);
    tcase_add_test(tc, test_polygon_and_disc_coverage);
    tcase_add_test(tc, test_bad_canvas);
    tcase_add_test(tc, test_text_inside_box);
    tcase_add_test(tc, test_text_metrics);
    tcase_add_test(tc, test_colormaps);
    tcase_add_test(tc, test_ticks);
    tcase_add_test(tc, test_png_roundtrip_and_atomic);
    tcase_add_test(tc, test_csv_quoting);
    tcase_add_test(tc, test_heatmap_cells_have_colormap_colour);
    tcase_add_test(tc, test_heatmap_values_readable);
    tcase_add_test(tc, test_heatmap_deterministic);
    tcase_add_test(tc, test_heatmap_errors);
    tcase_add_test(tc, test_lines_layout);
    tcase_add_test(tc, test_extreme_ranges);
    tcase_add_test(tc, test_scatter_alpha);
    tcase_add_test(tc, test_box_and_bar);
    tcase_add_test(tc, test_figure_errors);
    tcase_add_test(tc, test_heatmap_vector_outputs_same_layout);
    tcase_add_test(tc, test_vector_outputs_deterministic);
    tcase_add_test(tc, test_colorbar_ticks_clear_of_labels);
    tcase_add_test(tc, test_csv_negative_zero);
    tcase_add_test(tc, test_writer_makes_parent_directories);
    tcase_add_test(tc, test_writer_unwritable_paths);
    tcase_add_test(tc, test_writer_both_or_neither);
    tcase_add_test(tc, test_writer_full_disk);
    tcase_add_test(tc, test_heatmap_tiny_scale_or_cell_is_an_error);
    tcase_add_test(tc, test_heatmap_mask_marks_cells);
    tcase_add_test(tc, test_scatter_jitter_seeded);
    tcase_add_test(tc, test_dodge_shifts_series);
    tcase_add_test(tc, test_dodge_keeps_true_x_on_log_axis);
    tcase_add_test(tc, test_caption_wraps_at_readable_size);
    tcase_add_test(tc, test_scatter_highlight_on_top_and_faint_cloud);
    tcase_add_test(tc, test_legend_lists_series_with_data);
    tcase_add_test(tc, test_box_few_points_encode_tags);
    tcase_add_test(tc, test_short_panel_has_three_y_ticks);
    tcase_add_test(tc, test_blank_facets_are_dropped);
    tcase_add_test(tc, test_box_of_few_values_is_points);
    tcase_add_test(tc, test_caption_strips_and_own_labels);
    tcase_add_test(tc, test_heatmap_centred_under_wide_title_and_blues);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ml_test_run_forked(suite()); } /* test_writer_full_disk sets a file size limit */
