/* Text in a real typeface: P052 (URW's Palatino clone, Debian fonts-urw-base35; the paper's
 * figure font), loaded from its font file with FreeType and drawn by cairo, so PNG, SVG and PDF
 * get the same glyphs at the same places. Layout uses the font's unhinted advance widths, which
 * do not depend on the output. Strings are UTF-8; characters the font lacks (and malformed
 * UTF-8) draw as a box. */
#ifndef PL_FONT_H
#define PL_FONT_H

#include "core/error.h"
#include "plot/canvas.h"

#define PL_FONT_DIR "/usr/share/fonts/opentype/urw-base35"
#define PL_FONT_PACKAGE "fonts-urw-base35"

enum { PL_LEFT = 0, PL_CENTER = 1, PL_RIGHT = 2 };             /* horizontal anchor */
enum { PL_BASELINE = 0, PL_TOP = 1, PL_MIDDLE = 2, PL_BOTTOM = 3 }; /* vertical anchor */

typedef struct {
    double size;  /* cap height in pixels */
    int bold;
    double angle; /* degrees, counter-clockwise; 90 reads bottom to top */
    int halign, valign;
} pl_font;

/* Loads the font files once; an error names the missing file and the package to install.
 * Text calls draw nothing and measure 0 until this has succeeded. */
ml_status pl_font_load(void);
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
