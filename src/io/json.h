/* A small strict JSON (RFC 8259) reader and writer for safetensors headers and manifest.json.
 *
 * Reader: the whole grammar, nothing more (no comments, no trailing commas, no NaN, no leading
 * zeros, no duplicate keys in one object); strings must be valid UTF-8 without raw control
 * characters, \uXXXX escapes must pair surrogates. Nesting is limited to ML_JSON_MAX_DEPTH and a
 * number token to ML_JSON_MAX_NUMBER characters; numbers beyond the double range are refused.
 * Errors come back as NULL with ml_fail(ML_ERR_FORMAT, "json: <what> at byte <offset>") and the
 * offset in *err_offset; malformed input never crashes or reads outside [text, text+len).
 *
 * Values form a tree owned by its root: ml_json_free(root) frees everything below it. */
#ifndef ML_JSON_H
#define ML_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

enum { ML_JSON_MAX_DEPTH = 128, ML_JSON_MAX_NUMBER = 1000 };

typedef enum {
    ML_JSON_NULL = 0,
    ML_JSON_BOOL,
    ML_JSON_NUMBER,
    ML_JSON_STRING,
    ML_JSON_ARRAY,
    ML_JSON_OBJECT
} ml_json_type;

typedef struct ml_json ml_json;
struct ml_json {
    ml_json_type type;
    bool boolean;        /* BOOL */
    double number;       /* NUMBER: the value (rounded to double) */
    bool is_int;         /* NUMBER written as an integer (no '.', no exponent) that fits int64 */
    int64_t integer;     /* ... and its exact value */
    char *str;           /* STRING: decoded UTF-8, NUL-terminated; may contain "\u0000" as a 0 byte */
    size_t len;          /* STRING: length in bytes without the terminator */
    size_t count;        /* ARRAY / OBJECT: number of elements / members, in document order */
    ml_json **items;     /* ARRAY elements / OBJECT values */
    char **keys;         /* OBJECT keys (NUL-terminated) */
    size_t *key_lens;    /* OBJECT key lengths (a key with an embedded 0 byte has strlen < len) */
    size_t cap;
};

/* ---- reading ---- */
/* Parses text[0..len). err_offset (may be NULL) receives the byte offset of an error. */
ml_json *ml_json_parse(const char *text, size_t len, size_t *err_offset);
void ml_json_free(ml_json *v); /* NULL is fine */
/* The member `key` of an object (first match), or NULL when absent or v is not an object. */
const ml_json *ml_json_get(const ml_json *v, const char *key);
const char *ml_json_type_name(ml_json_type t);

/* ---- building (all return NULL / an error status on allocation failure) ---- */
ml_json *ml_json_null(void);
ml_json *ml_json_bool(bool b);
ml_json *ml_json_number(double x); /* written with the shortest round-tripping digits */
ml_json *ml_json_int(int64_t x);
ml_json *ml_json_string(const char *s);            /* copies s */
ml_json *ml_json_string_n(const char *s, size_t n); /* copies n bytes (may contain 0) */
ml_json *ml_json_array(void);
ml_json *ml_json_object(void);
/* Take ownership of item (freed here on failure, so chains need no cleanup of the item). */
ml_status ml_json_append(ml_json *array, ml_json *item);
ml_status ml_json_set(ml_json *object, const char *key, ml_json *item); /* replaces an existing key */

/* ---- writing ---- */
/* Serialises v. indent 0: compact ({"a":[1,2]}); indent > 0: one member per line, indented by
 * that many spaces. NaN and infinities are written null, as lua/mech/json.lua writes them (JSON has
 * no form for them). Returns a malloc'd NUL-terminated string (length in *len if non-NULL), or NULL
 * with an error (invalid UTF-8 in a string, nesting beyond the limit). */
char *ml_json_write(const ml_json *v, int indent, size_t *len);

/* The shortest decimal text of x that strtod reads back to the same double, in plain notation
 * when the decimal exponent is in [-5, 16) ("100", "0.001", "1e-06", "1e+16"), '.' whatever the
 * locale; "nan", "inf", "-inf" for non-finite x (not JSON: the JSON writer writes null for those). */
const char *ml_format_double(char buf[32], double x);

#endif
