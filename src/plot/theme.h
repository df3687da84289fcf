/* Internal: the shared look of all figures (sizes in pixels at scale 1). */
#ifndef PL_THEME_H
#define PL_THEME_H

#include "plot/color.h"
#include "plot/font.h"

#define PL_FS_TICK 8.0   /* cap heights */
#define PL_FS_LABEL 9.0
#define PL_FS_TITLE 11.0
#define PL_FS_STRIP 8.5
#define PL_FS_LEGEND 8.5
#define PL_PAD 8.0       /* outer margin */
#define PL_GAP 5.0       /* between a text and what it labels */
#define PL_TICKLEN 4.0

static inline pl_font pl_f(double size, double scale, int bold, double angle, int ha, int va) {
    return (pl_font){size * scale, bold, angle, ha, va};
}
#define PL_INK pl_grey(0.1, 1)     /* titles, labels */
#define PL_TICKINK pl_grey(0.3, 1) /* tick labels */
#define PL_BORDER pl_grey(0.2, 1)  /* panel border, ticks */
#define PL_GRID pl_grey(0.92, 1)
#define PL_STRIP pl_grey(0.85, 1)
#define PL_WHITE pl_grey(1, 1)

#endif
