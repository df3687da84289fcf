/* Canvas for figures: one cairo drawing path for every output format, so a figure has the same
 * layout as PNG (a raster image surface), SVG and PDF (cairo's vector surfaces).
 *
 * Drawing is two-phase. Shapes are collected as a pending mask (a list of paths, each filled or
 * stroked), then pl_paint() draws them in one colour and clears the list. A translucent colour
 * is applied to the union of the shapes (a group), so a polyline's joins or overlapping shapes
 * are not blended twice. All coordinates are in pixels at the figure's scale, y down; pixel
 * (i, j) of a raster covers [i, i+1) x [j, j+1), so its centre is (i + 0.5, j + 0.5). */
#ifndef PL_CANVAS_H
#define PL_CANVAS_H

#include <cairo.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"

#define PL_PI 3.14159265358979323846

typedef struct { float r, g, b, a; } pl_color; /* straight alpha, components in 0..1 */

typedef enum { PL_PNG, PL_SVG, PL_PDF } pl_format;

typedef struct {
    cairo_path_t *path;
    double width;      /* 0: filled; else stroked with this width */
    double on, off;    /* dash pattern (on = 0: solid) */
    int round_cap;
} pl_shape;

typedef struct {
    int w, h;
    pl_format format;
    cairo_surface_t *surface;
    cairo_t *cr;
    pl_shape *mask; /* pending shapes */
    int nmask, capmask;
    FILE *fp;       /* vector output stream */
    int write_errno;
    char *svg;      /* SVG is held here until finished, to renumber cairo's surface ids */
    size_t svg_len, svg_cap;
} pl_canvas;

/* Where a figure is drawn: a raster canvas (PNG) or a vector stream (SVG, PDF). */
typedef struct {
    pl_format format;
    FILE *fp;     /* SVG, PDF: the stream the document goes to */
    double scale; /* pixels per 1/100 inch; vector pages are (w / scale) / 100 inches wide */
} pl_target;

/* Raster canvas; NULL (with ml_fail) if the size is not positive or too large. */
pl_canvas *pl_canvas_new(int w, int h, pl_color bg);
/* A white canvas of w x h pixels for the target. */
pl_canvas *pl_target_canvas(const pl_target *t, double w, double h);
/* Vector canvases: writes the rest of the document; the status names `path` on a write error. */
ml_status pl_canvas_finish(pl_canvas *c, const char *path);
void pl_canvas_free(pl_canvas *c);

/* Restricts drawing to the pixels inside [x0, x1) x [y0, y1) (rounded); pl_unclip() lifts it. */
void pl_clip(pl_canvas *c, double x0, double y0, double x1, double y1);
void pl_unclip(pl_canvas *c);

/* ---- pending shapes ---- */
void pl_mask_segment(pl_canvas *c, double x0, double y0, double x1, double y1, double width);
void pl_mask_polyline(pl_canvas *c, const double *xy, int n, double width, int closed);
/* Dashed polyline: dash pattern on, off (pixels) along the arc length. */
void pl_mask_dashed(pl_canvas *c, const double *xy, int n, double width, double on, double off);
void pl_mask_disc(pl_canvas *c, double cx, double cy, double r);
void pl_mask_ring(pl_canvas *c, double cx, double cy, double r, double width);
void pl_mask_rect(pl_canvas *c, double x0, double y0, double x1, double y1);
/* Filled polygon (nonzero winding) of n points xy[2n]. */
void pl_mask_polygon(pl_canvas *c, const double *xy, int n);

/* Draws the pending shapes in `col` and clears them. */
void pl_paint(pl_canvas *c, pl_color col);

/* ---- one-shot conveniences (mask + paint) ---- */
void pl_fill_rect(pl_canvas *c, double x0, double y0, double x1, double y1, pl_color col);
void pl_stroke_rect(pl_canvas *c, double x0, double y0, double x1, double y1, double width, pl_color col);
void pl_line(pl_canvas *c, double x0, double y0, double x1, double y1, double width, pl_color col);

/* Pixel of a raster canvas, straight alpha (0s outside it or on a vector canvas). */
pl_color pl_pixel(const pl_canvas *c, int x, int y);
/* Row y of a raster canvas as 8-bit RGBA, straight alpha (w * 4 bytes). */
void pl_canvas_row(const pl_canvas *c, int y, uint8_t *rgba);

#endif
