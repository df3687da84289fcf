/* Tick selection: "nice" linear ticks on 1-2-5 steps and ticks at powers of a log base. */
#ifndef PL_TICKS_H
#define PL_TICKS_H

#include <stddef.h>

enum { PL_MAXTICKS = 32 };

/* Ticks inside [lo, hi] with a 1-2-5 x 10^k step giving about `target` of them. Returns the
 * count; *step gets the step (for label precision). */
int pl_nice_ticks(double lo, double hi, int target, double *ticks, double *step);
/* Powers of base inside [lo, hi] (both > 0), thinned to at most `target`+2 of them. */
int pl_log_ticks(double lo, double hi, double base, int target, double *ticks);
/* Label for a tick: as many decimals as the step needs, a true minus sign, "%g" for very large
 * or small magnitudes. step <= 0 means "shortest exact form". */
void pl_tick_label(double v, double step, char *buf, size_t n);

#endif
