/* Writing figure files: parent directories made on demand, atomic replacement (temp file in the
 * same directory, fsync, rename), a figure and its CSV written both or neither, deterministic
 * PNG through libpng, and CSV rows. */
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

/* Makes the missing parent directories of `path` and refuses an existing file that is
 * read-only (no write permission bit) or not a regular file. */
ml_status pl_prepare_path(const char *path);
/* Opens a temporary file beside `path` (after pl_prepare_path). */
ml_status pl_file_open(pl_file *f, const char *path);
/* Flushes, syncs and closes the temporary file, keeping it; an error names the final path. */
ml_status pl_file_finish(pl_file *f);
/* Renames the finished temporary file over the final path; always releases f. */
ml_status pl_file_commit(pl_file *f);
/* Closes (if open) and removes the temporary file; always releases f. */
void pl_file_discard(pl_file *f);
/* finish + commit, or with ok = 0 discard. */
ml_status pl_file_close(pl_file *f, int ok);

/* The output format of a figure path by its extension (.svg, .pdf; case-insensitive); PNG
 * for .png and any other name, as before vector output existed. */
pl_format pl_format_of(const char *path);

/* Writes a raster canvas as PNG (RGB when fully opaque, else RGBA), with a pHYs chunk for
 * `dpi` and no time stamp, so equal canvases give equal bytes. `path` names the file in errors. */
ml_status pl_png_encode(const pl_canvas *c, FILE *fp, const char *path, double dpi);
ml_status pl_write_png(const pl_canvas *c, const char *path, double dpi);

/* Draws the figure for a target (NULL with ml_fail on bad input). */
typedef pl_canvas *(*pl_draw_fn)(const void *fig, const pl_target *t);
/* Writes the CSV rows of the figure's numbers. */
typedef void (*pl_csv_fn)(FILE *fp, const void *fig);
/* Writes `out` in the format its extension names and the CSV beside it: both or neither. */
ml_status pl_write_figure(const char *fn, const char *out, double scale, pl_draw_fn draw, pl_csv_fn csv, const void *fig);

/* CSV: writes one field, quoted when needed, followed by `sep` (',' or '\n'). */
void pl_csv_str(FILE *fp, const char *s, char sep);
/* Numbers with round-trip precision; NaN as "NaN" (R's and pandas' spelling: "NA"/"nan" are
 * read too, "NaN" is read by both); negative zero as "0". */
void pl_csv_num(FILE *fp, double v, char sep);
/* Replaces the extension of a .png, .svg or .pdf path by .csv (or appends .csv). Caller frees. */
char *pl_csv_path(const char *fig_path);

#endif
