/* Writing figure files: atomic replacement (temp file in the same directory, fsync, rename),
 * deterministic PNG through libpng, and CSV rows. */
#ifndef PL_OUTPUT_H
#define PL_OUTPUT_H

#include <stdio.h>

#include "core/error.h"
#include "plot/canvas.h"

typedef struct {
    FILE *fp;
    char *tmp;  /* temporary path */
    char *path; /* final path */
} pl_file;

/* Opens a temporary file beside `path`. */
ml_status pl_file_open(pl_file *f, const char *path);
/* Flushes, syncs and renames over the final path; on any earlier failure pass ok = 0 to
 * remove the temporary file instead. Always releases f. */
ml_status pl_file_close(pl_file *f, int ok);

/* Writes the canvas as PNG (RGB when fully opaque, else RGBA), with a pHYs chunk for `dpi`
 * and no time stamp, so equal canvases give equal bytes. */
ml_status pl_write_png(const pl_canvas *c, const char *path, double dpi);

/* CSV: writes one field, quoted when needed, followed by `sep` (',' or '\n'). */
void pl_csv_str(FILE *fp, const char *s, char sep);
/* Numbers with round-trip precision; NaN as "NaN" (R's and pandas' spelling: "NA"/"nan" are
 * read too, "NaN" is read by both). */
void pl_csv_num(FILE *fp, double v, char sep);
/* Replaces the extension of a .png path by .csv (or appends .csv). Caller frees. */
char *pl_csv_path(const char *png_path);

#endif
