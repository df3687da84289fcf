#include "plot/ticks.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int pl_nice_ticks(double lo, double hi, int target, double *ticks, double *step) {
    if (!(hi > lo) || !isfinite(lo) || !isfinite(hi)) {
        *step = 0;
        if (!isfinite(lo)) return 0;
        ticks[0] = lo;
        return 1;
    }
    if (target < 2) target = 2;
    double raw = (hi - lo) / target, mag = pow(10, floor(log10(raw))), r = raw / mag;
    double s = (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
    double first = ceil(lo / s - 1e-9);
    int n = 0;
    for (double k = first; n < PL_MAXTICKS; k++) {
        double v = k * s;
        if (v > hi + s * 1e-9) break;
        ticks[n++] = fabs(v) < s * 1e-9 ? 0 : v; /* no "-0" */
    }
    *step = s;
    return n;
}

int pl_log_ticks(double lo, double hi, double base, int target, double *ticks) {
    if (!(lo > 0) || !(hi >= lo) || !(base > 1)) return 0;
    double lb = log(base);
    int k0 = (int)ceil(log(lo) / lb - 1e-9), k1 = (int)floor(log(hi) / lb + 1e-9);
    int every = 1;
    while ((k1 - k0) / every + 1 > target + 2) every++;
    int n = 0;
    for (int k = k0; k <= k1 && n < PL_MAXTICKS; k++)
        if ((k - k0) % every == 0) ticks[n++] = pow(base, k);
    return n;
}

void pl_tick_label(double v, double step, char *buf, size_t n) {
    char tmp[64];
    double a = fabs(v);
    if (a != 0 && (a >= 1e6 || a < 1e-4)) {
        snprintf(tmp, sizeof tmp, "%.3g", a);
    } else if (step > 0) {
        int dec = (int)ceil(-log10(step) - 1e-9);
        if (dec < 0) dec = 0;
        if (dec > 6) dec = 6;
        /* steps such as 0.25 need one more digit than their magnitude suggests */
        if (fabs(step * pow(10, dec) - round(step * pow(10, dec))) > 1e-6) dec++;
        snprintf(tmp, sizeof tmp, "%.*f", dec, a);
    } else {
        snprintf(tmp, sizeof tmp, "%.6g", a);
    }
    snprintf(buf, n, "%s%s", v < 0 && strspn(tmp, "0.") != strlen(tmp) ? "\xe2\x88\x92" : "", tmp);
}
