/* Raster canvas for figures: 8-bit RGBA pixels plus a float coverage mask.
 *
 * Drawing is two-phase. Shapes add antialiased coverage to the mask (taking the maximum, so a
 * polyline's joins or a glyph's crossing strokes are not blended twice), then pl_paint()
 * composites one colour through the mask and clears it. All coordinates are in pixels, y down;
 * pixel (i, j) covers [i, i+1) x [j, j+1), so its centre is (i + 0.5, j + 0.5). */
#ifndef PL_CANVAS_H
#define PL_CANVAS_H

#include <stdint.h>

#define PL_PI 3.14159265358979323846

typedef struct { float r, g, b, a; } pl_color; /* straight alpha, components in 0..1 */

typedef struct {
    int w, h;
    uint8_t *px;           /* w*h*4 bytes, RGBA, straight alpha */
    float *mask;           /* w*h coverage values in 0..1 */
    float *row;            /* scratch row for polygon scan conversion */
    int dx0, dy0, dx1, dy1; /* dirty box of the mask, half-open */
    int cx0, cy0, cx1, cy1; /* clip box, half-open */
} pl_canvas;

/* NULL (with ml_fail) if the size is not positive or too large. */
pl_canvas *pl_canvas_new(int w, int h, pl_color bg);
void pl_canvas_free(pl_canvas *c);

/* Restricts drawing to the pixels inside [x0, x1) x [y0, y1) (rounded); pl_unclip() lifts it. */
void pl_clip(pl_canvas *c, double x0, double y0, double x1, double y1);
void pl_unclip(pl_canvas *c);

/* ---- coverage ---- */
void pl_mask_segment(pl_canvas *c, double x0, double y0, double x1, double y1, double width);
void pl_mask_polyline(pl_canvas *c, const double *xy, int n, double width, int closed);
/* Dashed polyline: dash pattern on, off (pixels) along the arc length. */
void pl_mask_dashed(pl_canvas *c, const double *xy, int n, double width, double on, double off);
void pl_mask_disc(pl_canvas *c, double cx, double cy, double r);
void pl_mask_ring(pl_canvas *c, double cx, double cy, double r, double width);
void pl_mask_rect(pl_canvas *c, double x0, double y0, double x1, double y1);
/* Filled polygon (nonzero winding) of n points xy[2n]. */
void pl_mask_polygon(pl_canvas *c, const double *xy, int n);

/* Composites `col` through the mask onto the pixels and clears the mask. */
void pl_paint(pl_canvas *c, pl_color col);

/* ---- one-shot conveniences (mask + paint) ---- */
void pl_fill_rect(pl_canvas *c, double x0, double y0, double x1, double y1, pl_color col);
void pl_stroke_rect(pl_canvas *c, double x0, double y0, double x1, double y1, double width, pl_color col);
void pl_line(pl_canvas *c, double x0, double y0, double x1, double y1, double width, pl_color col);

/* Pixel access for tests and colour pickers (no bounds check beyond returning 0s). */
pl_color pl_pixel(const pl_canvas *c, int x, int y);

#endif
