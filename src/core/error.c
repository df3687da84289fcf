#include "core/error.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

volatile sig_atomic_t ml_interrupt_flag = 0;

static _Thread_local char err_msg[1024];
static _Thread_local ml_status err_code = ML_OK;

ml_status ml_fail(ml_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    err_code = code;
    return code;
}

ml_status ml_fail_context(ml_status code, const char *prefix) {
    char old[sizeof err_msg];
    memcpy(old, err_msg, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof err_msg / 2) n = sizeof err_msg / 2; /* keep room for the original message */
    memcpy(err_msg, prefix, n);
    memcpy(err_msg + n, ": ", 2);
    size_t rest = sizeof err_msg - n - 3;
    strncpy(err_msg + n + 2, old, rest);
    err_msg[sizeof err_msg - 1] = 0;
    err_code = code;
    return code;
}

const char *ml_last_error(void) { return err_msg[0] ? err_msg : "unknown error"; }
ml_status ml_last_status(void) { return err_code; }

void ml_clear_error(void) {
    err_msg[0] = 0;
    err_code = ML_OK;
}

const char *ml_shape_str(char buf[ML_SHAPE_STR], int ndim, const int64_t *shape) {
    int n = snprintf(buf, ML_SHAPE_STR, "[");
    for (int i = 0; i < ndim && n < ML_SHAPE_STR; i++)
        n += snprintf(buf + n, (size_t)(ML_SHAPE_STR - n), i ? ",%" PRId64 : "%" PRId64, shape[i]);
    if (n < ML_SHAPE_STR) snprintf(buf + n, (size_t)(ML_SHAPE_STR - n), "]");
    return buf;
}

ml_status ml_check_interrupt(const char *where) {
    if (!ml_interrupt_flag) return ML_OK;
    ml_interrupt_flag = 0;
    return ml_fail(ML_ERR_INTERRUPT, "%s: interrupted", where);
}
