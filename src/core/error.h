/* Error reporting of the core library: status codes plus a thread-local message.
 * Convention: a failing function sets the message with ml_fail() and returns a status
 * (or NULL for constructors). Messages name the function and the 1-based argument as a
 * Lua caller would see it, e.g. "matmul: argument 2 has shape [3,4], expected [5,*]". */
#ifndef ML_ERROR_H
#define ML_ERROR_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum {
    ML_OK = 0,
    ML_ERR_ARG,       /* bad value of an argument */
    ML_ERR_SHAPE,     /* shape mismatch */
    ML_ERR_INDEX,     /* index out of range */
    ML_ERR_DTYPE,     /* wrong element type */
    ML_ERR_MEM,       /* allocation failed or size overflow */
    ML_ERR_IO,        /* file system error */
    ML_ERR_FORMAT,    /* malformed file contents */
    ML_ERR_STATE,     /* operation not valid in the current state */
    ML_ERR_INTERRUPT  /* stopped by Ctrl-C */
} ml_status;

#if defined(__GNUC__)
#define ML_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ML_PRINTF(a, b)
#endif

/* Set the thread's error message and return `code`. */
ml_status ml_fail(ml_status code, const char *fmt, ...) ML_PRINTF(2, 3);
/* Prefix the current message with "prefix: " (adds context while propagating). */
ml_status ml_fail_context(ml_status code, const char *prefix);
const char *ml_last_error(void);
ml_status ml_last_status(void);
void ml_clear_error(void);

/* Formats a shape as "[2,3,4]" into buf (at least 8*21+3 bytes is always enough). */
enum { ML_SHAPE_STR = 200 };
const char *ml_shape_str(char buf[ML_SHAPE_STR], int ndim, const int64_t *shape);

/* Ctrl-C: the host's SIGINT handler sets the flag; long C loops poll it through
 * ml_check_interrupt and return ML_ERR_INTERRUPT so control goes back to the REPL. */
extern volatile sig_atomic_t ml_interrupt_flag;
/* Returns ML_ERR_INTERRUPT with message "<where>: interrupted" and clears the flag if set. */
ml_status ml_check_interrupt(const char *where);

#endif
