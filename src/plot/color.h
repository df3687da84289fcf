/* Colour: colormaps (sequential viridis and Blues, diverging RdBu), qualitative palettes,
 * hex parsing, and the grey levels of the figure theme. */
#ifndef PL_COLOR_H
#define PL_COLOR_H

#include "plot/canvas.h"

typedef enum { PL_CMAP_VIRIDIS, PL_CMAP_RDBU, PL_CMAP_RDBU_R, PL_CMAP_BLUES, PL_CMAP_COUNT } pl_cmap;

/* Colormap by name ("viridis", "RdBu", "RdBu_r", "Blues"; case-insensitive); -1 if unknown. */
int pl_cmap_find(const char *name);
const char *pl_cmap_names(void); /* "viridis, RdBu, RdBu_r, Blues" for error messages */
int pl_cmap_diverging(pl_cmap m);
/* Colour at t in [0, 1] (clamped); NaN gives the NaN colour. */
pl_color pl_cmap_at(pl_cmap m, double t);
extern const pl_color PL_NAN_COLOR;

/* Qualitative palettes: "set2" (ColorBrewer Set2, the paper's), "tab10", and "blues" (n shades
 * of a sequential palette, for ordered series). -1 if unknown. */
int pl_palette_find(const char *name);
const char *pl_palette_names(void);
pl_color pl_palette_at(int palette, int i, int n);

/* "#rrggbb" or "#rrggbbaa"; returns 0 on malformed input. */
int pl_parse_hex(const char *s, pl_color *out);
pl_color pl_grey(double level, double alpha);
/* Relative luminance (for choosing a readable text colour over a cell). */
double pl_luminance(pl_color c);
/* Darker shade of c (outlines of filled markers and boxes). */
pl_color pl_darken(pl_color c, double f);

#endif
