/* The embedded stroke font: hand-designed glyphs on a grid (cap height 10 units, x-height 7,
 * descender -3), drawn as antialiased polylines so they scale to any size and rotate. At
 * angles that are multiples of 90 degrees the glyph's stems, bars and round extremes are
 * snapped to the pixel grid (a small autohinter), which keeps small text crisp.
 * Covers printable ASCII plus a few symbols used in labels (Σ Δ α λ μ σ × · – — − ≤ ≥ → ° ±).
 * Strings are UTF-8; unknown characters draw as a box. */
#ifndef PL_FONT_H
#define PL_FONT_H

#include "plot/canvas.h"

enum { PL_LEFT = 0, PL_CENTER = 1, PL_RIGHT = 2 };             /* horizontal anchor */
enum { PL_BASELINE = 0, PL_TOP = 1, PL_MIDDLE = 2, PL_BOTTOM = 3 }; /* vertical anchor */

typedef struct {
    double size;  /* cap height in pixels */
    int bold;
    double angle; /* degrees, counter-clockwise; 90 reads bottom to top */
    int halign, valign;
} pl_font;

/* Advance width of s in pixels. */
double pl_text_width(const char *s, const pl_font *f);
/* Line height in pixels (cap height + descender + leading). */
double pl_text_height(const pl_font *f);
/* Screen box [x0,x1] x [y0,y1] of the text's layout cell (cap top to descender, advance
 * width) when anchored at (x, y); rotated text gives the box of the rotated cell. */
void pl_text_box(const char *s, const pl_font *f, double x, double y, double box[4]);
/* Draws s anchored at (x, y). */
void pl_text(pl_canvas *c, const char *s, const pl_font *f, double x, double y, pl_color col);

#endif
