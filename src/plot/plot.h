/* Figures for papers, from plain C arrays: heatmaps, line plots with facets, scatter plots,
 * box plots and grouped bar charts, in a theme_bw look (white panels, grey grid, dark panel
 * border, grey facet strips). Each call writes the figure as PNG, SVG or PDF (by the output
 * path's extension, with one layout for all three) and, beside it, a CSV of the plotted numbers
 * (same path with .csv): both files or neither, each replaced atomically.
 *
 * Sizes are in pixels at scale 1 (100 dpi: a 2.5 in wide figure is 250 px); `scale` multiplies
 * every length for high-resolution output. Errors return a status with a message from
 * core/error.h ("plot.heatmap: ..."); nothing is written then. */
#ifndef PL_PLOT_H
#define PL_PLOT_H

#include "core/error.h"
#include "plot/canvas.h"

enum { PL_MAXPANELS = 64 };

typedef enum {
    PL_MARKER_NONE = 0, PL_MARKER_CIRCLE, PL_MARKER_TRIANGLE, PL_MARKER_SQUARE, PL_MARKER_DIAMOND,
    PL_MARKER_TRIANGLE_DOWN, PL_MARKER_PLUS, PL_MARKER_CROSS, PL_MARKER_COUNT,
    PL_MARKER_AUTO = -1 /* by the series' key, so colour and shape both encode it */
} pl_marker;
/* "none", "circle", "triangle", "square", "diamond", "triangle_down", "plus", "cross"; -1 if unknown. */
int pl_marker_find(const char *name);
extern const char *const pl_marker_names[]; /* those names in pl_marker order, NULL-terminated */

typedef struct {
    const char *label;   /* legend text; series with equal labels share one legend entry */
    const char *key;     /* identity for colour and marker; NULL: the label */
    int n;
    const double *x;     /* lines, scatter: n x values; box, bar: unused */
    const double *y;     /* lines, scatter: n y values; box: n observations; bar: one per category */
    int marker;          /* pl_marker */
    int dashed;
    const char *color;   /* "#rrggbb[aa]" overriding the palette, or NULL */
    int path;            /* scatter: also join the points in order (e.g. best checkpoint per d) */
    int highlight;       /* scatter: the figure's point: drawn larger, outlined, its path haloed; with
                            `path`, these series are drawn after (over) all others */
    double alpha;        /* scatter: fill opacity of this series; 0 or NaN: the figure's */
    const double *tag;   /* box: n numbers (e.g. each run's model width) or NULL; a group drawn as
                            points gives each tag value its own marker shape and place, in a legend */
} pl_series;

typedef struct {
    const char *title;   /* facet strip text, or NULL */
    int nseries;
    const pl_series *series;
    int blank;           /* an empty slot of the grid (a facet that cannot have data): nothing drawn */
} pl_panel;

typedef enum { PL_LEGEND_AUTO = 0, PL_LEGEND_RIGHT, PL_LEGEND_BOTTOM, PL_LEGEND_NONE } pl_legend_pos;
typedef enum { PL_LINES, PL_SCATTER, PL_BOX, PL_BAR } pl_kind;

typedef struct {
    const char *out;                   /* .png, .svg or .pdf path (required to write; NULL to only render) */
    const char *title, *xlabel, *ylabel, *legend_title;
    double width, height, scale;       /* 0: defaults (480 x 340, scale 1) */
    int ncol;                          /* facet columns; 0: one row up to 4 panels */
    int free_y;                        /* each facet gets its own y range */
    double logx;                       /* 0, or the log base of the x axis (2, 10) */
    double xlim[2], ylim[2];           /* NaN: from the data */
    int nxticks, nyticks;              /* explicit ticks (0: automatic) */
    const double *xticks, *yticks;
    int nhlines;                       /* dashed horizontal reference lines */
    const double *hlines;
    const char *palette;               /* "set2" (default), "tab10", "blues" */
    int legend;                        /* pl_legend_pos */
    double alpha;                      /* fill opacity of points, boxes and bars; NaN: default */
    double line_width, marker_size;    /* 0: defaults */
    double jitter;                     /* scatter: each point moved by up to this many pixels (at scale 1)
                                          in x and y, so that coinciding points show; 0: none */
    unsigned jitter_seed;              /* the jitter's seed: the same seed gives the same offsets */
    double dodge;                      /* lines, scatter: where markers of several series overlap at one
                                          x, they are spread by this many pixels apart, centred on
                                          that x; a point nothing overlaps stays at its x */
    const char *caption;               /* small text under the figure, wrapped to its width, or NULL */
    const char *tag_title;             /* box: the legend title of the groups' tags (e.g. "d") */
    int markers;                       /* lines: 0 hides the markers */
    int ncat;                          /* bar: category names along x */
    const char *const *categories;
} pl_plot;

/* Fills in the defaults (NaN limits, markers on, ...); set fields after calling it. */
void pl_plot_init(pl_plot *p);

typedef struct {
    double x0, y0, x1, y1;             /* pixel rectangle */
    double xmin, xmax, ymin, ymax;     /* data range it shows */
    double logx;
} pl_box_px;

/* Where things were drawn, for tests and callers that annotate. */
typedef struct {
    int npanels;
    pl_box_px panel[PL_MAXPANELS];
    double legend[4];                  /* x0 y0 x1 y1; all 0 when there is no legend */
    double colorbar[4];
    double colorbar_ticks[2];          /* x where the colour bar's tick marks end, x where their labels start */
    double mask_note[4];               /* heatmap: the box of the masked-cell note; all 0 when none */
    double title[4];
    double caption[4];                 /* the caption's box; all 0 when there is none */
    int caption_lines;                 /* lines the caption was wrapped to */
    int nlegend;                       /* the legend's entries (series with data, or tags) */
    char legend_label[32][48];         /* the first 32 entries' texts */
} pl_layout;

/* Pixel position of a data point in a panel. */
double pl_px_x(const pl_box_px *b, double x);
double pl_px_y(const pl_box_px *b, double y);

/* Box plots draw a group of fewer than PL_BOX_MIN_N finite values as its points (no box): a
 * box of four runs shows quartiles that four runs cannot estimate. */
enum { PL_BOX_MIN_N = 5 };

/* Renders a raster without writing (NULL on bad input). lay may be NULL. */
pl_canvas *pl_render(pl_kind kind, const pl_plot *p, int npanels, const pl_panel *panels, pl_layout *lay);
/* Renders for a target (a raster, or an SVG/PDF stream). */
pl_canvas *pl_render_to(pl_kind kind, const pl_plot *p, int npanels, const pl_panel *panels, pl_layout *lay,
                        const pl_target *t);
/* Renders and writes p->out and its CSV. */
ml_status pl_figure(pl_kind kind, const pl_plot *p, int npanels, const pl_panel *panels);

typedef struct {
    const char *out, *title, *xlabel, *ylabel;   /* out: .png, .svg or .pdf */
    const char *cbar_label;            /* colour bar title, or NULL */
    int rows, cols;
    const double *data;                /* rows*cols values, row-major; NaN shows as grey */
    const char *const *xlabels;        /* cols names (x, bottom), or NULL for 0..cols-1 */
    const char *const *ylabels;        /* rows names (y, left), or NULL */
    const char *cmap;                  /* NULL: viridis, or RdBu when center is given */
    double center, vmin, vmax;         /* NaN: automatic; diverging maps centre on `center` (0) */
    int values;                        /* print each cell's value */
    int digits;                        /* decimals of printed values (default 2) */
    double cell, scale;                /* cell size in pixels: 0 (automatic) or 1..200; scale 0.1..10 */
    int colorbar;                      /* 0 hides the colour bar */
    const unsigned char *masked;       /* rows*cols flags, or NULL: nonzero cells failed a filter and
                                          are drawn greyed and hatched, with a note below the map */
    const char *mask_note;             /* the note's text; NULL: "filtered out" */
} pl_heatmap_spec;

void pl_heatmap_init(pl_heatmap_spec *h);
pl_canvas *pl_heatmap_render(const pl_heatmap_spec *h, pl_layout *lay);
pl_canvas *pl_heatmap_render_to(const pl_heatmap_spec *h, pl_layout *lay, const pl_target *t);
ml_status pl_heatmap(const pl_heatmap_spec *h);
/* The colour a heatmap gives value v (tests use it to check cells). */
pl_color pl_heatmap_color(const pl_heatmap_spec *h, double v);

#endif
