/* Files of a run directory: the long-format metrics CSV and atomic whole-file writes.
 *
 * Atomic writes go to a temporary file in the target's directory (<path>.tmp.<pid>.<n>, created
 * with O_EXCL and mode 0666 minus the umask), then fflush, fsync, rename over the target and fsync
 * of the directory. On any failure the temporary file is removed and the target is untouched:
 * readers see either the old file or the complete new one, never a half-written one. */
#ifndef ML_CSV_H
#define ML_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* ---- atomic writes ---- */
ml_status ml_write_file_atomic(const char *path, const void *data, size_t n);

/* Streaming form, for files written in pieces (safetensors checkpoints). After open, call write
 * any number of times, then exactly one of commit (publish) or abort (discard). Both free f; a
 * failed write or commit leaves f to be aborted (commit frees it and removes the temp file itself
 * when it fails). */
typedef struct ml_atomic_file ml_atomic_file;
ml_atomic_file *ml_atomic_open(const char *path);
ml_status ml_atomic_write(ml_atomic_file *f, const void *data, size_t n);
ml_status ml_atomic_commit(ml_atomic_file *f);
void ml_atomic_abort(ml_atomic_file *f); /* NULL is fine */

/* ---- metrics.csv: header "step,split,metric,value", one row per value ---- */
typedef struct ml_metrics ml_metrics;
/* Opens for appending (a resumed run keeps its rows). A new or empty file gets the header; an
 * existing file must start with it. A last row cut off by a crash is terminated first. */
ml_metrics *ml_metrics_open(const char *path);
/* Appends one row and flushes it. split and metric are quoted as RFC 4180 requires (commas,
 * quotes, line breaks, surrounding spaces); value is written with the shortest digits that read
 * back to the same double (ml_format_double in io/json.h). */
ml_status ml_metrics_append(ml_metrics *m, int64_t step, const char *split, const char *metric, double value);
ml_status ml_metrics_close(ml_metrics *m); /* NULL is fine; reports a failed final flush */

/* Writes field to out (size cap) quoted if needed; returns the length it needs (like snprintf). */
size_t ml_csv_quote(char *out, size_t cap, const char *field);

#endif
