/* Strict JSON reader and writer (see json.h). Recursive descent; every read is bounds-checked
 * against the end of the input, and the recursion depth is capped. */
#include "io/json.h"

#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ values */

static ml_json *json_new(ml_json_type t) {
    ml_json *v = calloc(1, sizeof *v);
    if (!v) {
        ml_fail(ML_ERR_MEM, "json: out of memory");
        return NULL;
    }
    v->type = t;
    return v;
}

void ml_json_free(ml_json *v) {
    if (!v) return;
    for (size_t i = 0; i < v->count; i++) {
        ml_json_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->key_lens);
    free(v->str);
    free(v);
}

const char *ml_json_type_name(ml_json_type t) {
    switch (t) {
    case ML_JSON_NULL: return "null";
    case ML_JSON_BOOL: return "boolean";
    case ML_JSON_NUMBER: return "number";
    case ML_JSON_STRING: return "string";
    case ML_JSON_ARRAY: return "array";
    case ML_JSON_OBJECT: return "object";
    }
    return "?";
}

ml_json *ml_json_null(void) { return json_new(ML_JSON_NULL); }

ml_json *ml_json_bool(bool b) {
    ml_json *v = json_new(ML_JSON_BOOL);
    if (v) v->boolean = b;
    return v;
}

ml_json *ml_json_number(double x) {
    ml_json *v = json_new(ML_JSON_NUMBER);
    if (v) v->number = x;
    return v;
}

ml_json *ml_json_int(int64_t x) {
    ml_json *v = json_new(ML_JSON_NUMBER);
    if (v) {
        v->number = (double)x;
        v->is_int = true;
        v->integer = x;
    }
    return v;
}

ml_json *ml_json_string_n(const char *s, size_t n) {
    if (n == SIZE_MAX) {
        ml_fail(ML_ERR_MEM, "json: string too long");
        return NULL;
    }
    ml_json *v = json_new(ML_JSON_STRING);
    if (!v) return NULL;
    v->str = malloc(n + 1);
    if (!v->str) {
        free(v);
        ml_fail(ML_ERR_MEM, "json: out of memory");
        return NULL;
    }
    if (n) memcpy(v->str, s, n);
    v->str[n] = 0;
    v->len = n;
    return v;
}

ml_json *ml_json_string(const char *s) { return ml_json_string_n(s ? s : "", s ? strlen(s) : 0); }
ml_json *ml_json_array(void) { return json_new(ML_JSON_ARRAY); }
ml_json *ml_json_object(void) { return json_new(ML_JSON_OBJECT); }

/* Makes room for one more element (and key, for objects). */
static ml_status json_grow(ml_json *v) {
    if (v->count < v->cap) return ML_OK;
    size_t cap = v->cap ? v->cap * 2 : 4;
    if (cap > SIZE_MAX / sizeof(void *) / 2) return ml_fail(ML_ERR_MEM, "json: too many elements");
    ml_json **items = realloc(v->items, cap * sizeof *items);
    if (!items) return ml_fail(ML_ERR_MEM, "json: out of memory");
    v->items = items;
    if (v->type == ML_JSON_OBJECT) {
        char **keys = realloc(v->keys, cap * sizeof *keys);
        if (!keys) return ml_fail(ML_ERR_MEM, "json: out of memory");
        v->keys = keys;
        size_t *lens = realloc(v->key_lens, cap * sizeof *lens);
        if (!lens) return ml_fail(ML_ERR_MEM, "json: out of memory");
        v->key_lens = lens;
    }
    v->cap = cap;
    return ML_OK;
}

ml_status ml_json_append(ml_json *array, ml_json *item) {
    if (!item) return ml_last_status() != ML_OK ? ml_last_status() : ML_ERR_MEM;
    if (!array || array->type != ML_JSON_ARRAY) {
        ml_json_free(item);
        return ml_fail(ML_ERR_ARG, "json: append to a non-array");
    }
    ml_status st = json_grow(array);
    if (st != ML_OK) {
        ml_json_free(item);
        return st;
    }
    array->items[array->count++] = item;
    return ML_OK;
}

/* Adds a member without looking for an existing key; key has length klen (copied). */
static ml_status json_add_member(ml_json *obj, const char *key, size_t klen, ml_json *item) {
    ml_status st = json_grow(obj);
    if (st != ML_OK) return st;
    char *k = malloc(klen + 1);
    if (!k) return ml_fail(ML_ERR_MEM, "json: out of memory");
    memcpy(k, key, klen);
    k[klen] = 0;
    obj->keys[obj->count] = k;
    obj->key_lens[obj->count] = klen;
    obj->items[obj->count] = item;
    obj->count++;
    return ML_OK;
}

ml_status ml_json_set(ml_json *object, const char *key, ml_json *item) {
    if (!item) return ml_last_status() != ML_OK ? ml_last_status() : ML_ERR_MEM;
    if (!object || object->type != ML_JSON_OBJECT || !key) {
        ml_json_free(item);
        return ml_fail(ML_ERR_ARG, "json: set on a non-object");
    }
    size_t klen = strlen(key);
    for (size_t i = 0; i < object->count; i++)
        if (object->key_lens[i] == klen && memcmp(object->keys[i], key, klen) == 0) {
            ml_json_free(object->items[i]);
            object->items[i] = item;
            return ML_OK;
        }
    ml_status st = json_add_member(object, key, klen, item);
    if (st != ML_OK) ml_json_free(item);
    return st;
}

const ml_json *ml_json_get(const ml_json *v, const char *key) {
    if (!v || v->type != ML_JSON_OBJECT || !key) return NULL;
    size_t klen = strlen(key);
    for (size_t i = 0; i < v->count; i++)
        if (v->key_lens[i] == klen && memcmp(v->keys[i], key, klen) == 0) return v->items[i];
    return NULL;
}

/* ------------------------------------------------------------------ UTF-8 */

/* Length of the valid UTF-8 sequence at s[0..n) (1-4), or 0 when invalid: rejects overlong
 * forms, surrogates (U+D800..DFFF) and code points above U+10FFFF, as RFC 3629 requires. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) { len = 3; lo = 0xA0; }
    else if (c == 0xED) { len = 3; hi = 0x9F; }
    else if (c >= 0xE1 && c <= 0xEF) len = 3;
    else if (c == 0xF0) { len = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) { len = 4; hi = 0x8F; }
    else return 0;
    if (n < len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return len;
}

static size_t utf8_put(char *out, uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ------------------------------------------------------------------ parser */

typedef struct {
    const unsigned char *s;
    size_t n, i;
    size_t err_at;
    bool failed;
} parser;

static ml_json *perr(parser *p, size_t at, const char *what) {
    if (!p->failed) {
        p->failed = true;
        p->err_at = at;
        ml_fail(ML_ERR_FORMAT, "json: %s at byte %zu", what, at);
    }
    return NULL;
}

static void skip_ws(parser *p) {
    while (p->i < p->n) {
        unsigned char c = p->s[p->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->i++;
    }
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads 4 hex digits at p->i (after "\u"). Returns -1 on error (reported). */
static long read_hex4(parser *p) {
    if (p->n - p->i < 4) {
        perr(p, p->i, "truncated \\u escape");
        return -1;
    }
    long v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(p->s[p->i + (size_t)k]);
        if (h < 0) {
            perr(p, p->i + (size_t)k, "bad hex digit in \\u escape");
            return -1;
        }
        v = v * 16 + h;
    }
    p->i += 4;
    return v;
}

/* Parses a string starting at the opening quote; returns a malloc'd decoded copy. The decoded
 * form is never longer than the source, so one allocation of the source length suffices. */
static char *parse_string_raw(parser *p, size_t *out_len) {
    size_t start = p->i;
    p->i++; /* opening quote */
    /* Find the closing quote first to size the buffer. */
    size_t j = p->i;
    while (j < p->n && p->s[j] != '"') j += (p->s[j] == '\\' && j + 1 < p->n) ? 2 : 1;
    if (j >= p->n) {
        perr(p, start, "unterminated string");
        return NULL;
    }
    char *out = malloc(j - p->i + 1);
    if (!out) {
        p->failed = true;
        p->err_at = start;
        ml_fail(ML_ERR_MEM, "json: out of memory");
        return NULL;
    }
    size_t o = 0;
    while (p->i < j) {
        unsigned char c = p->s[p->i];
        if (c < 0x20) {
            perr(p, p->i, "control character in string");
            goto fail;
        }
        if (c != '\\') {
            size_t k = utf8_seq(p->s + p->i, j - p->i);
            if (!k) {
                perr(p, p->i, "invalid UTF-8 in string");
                goto fail;
            }
            memcpy(out + o, p->s + p->i, k);
            o += k;
            p->i += k;
            continue;
        }
        size_t esc_at = p->i;
        p->i++;
        /* p->i < j holds: the scan above paired every backslash with the next byte. */
        unsigned char e = p->s[p->i++];
        switch (e) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case '/': out[o++] = '/'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            long cp = read_hex4(p);
            if (cp < 0) goto fail;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                perr(p, esc_at, "lone low surrogate in \\u escape");
                goto fail;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (p->n - p->i < 2 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') {
                    perr(p, esc_at, "high surrogate not followed by a low surrogate");
                    goto fail;
                }
                p->i += 2;
                long lo = read_hex4(p);
                if (lo < 0) goto fail;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    perr(p, esc_at, "high surrogate not followed by a low surrogate");
                    goto fail;
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            /* A \u escape (6 or 12 source bytes) decodes to at most 4 bytes. */
            o += utf8_put(out + o, (uint32_t)cp);
            break;
        }
        default:
            perr(p, esc_at, "bad escape in string");
            goto fail;
        }
        if (p->i > j) { /* an escape ran past the closing quote found by the scan */
            perr(p, esc_at, "bad escape in string");
            goto fail;
        }
    }
    p->i = j + 1;
    out[o] = 0;
    *out_len = o;
    return out;
fail:
    free(out);
    return NULL;
}

/* strtod and printf follow LC_NUMERIC; JSON always uses '.', so swap in the locale's decimal
 * point when it differs (a host that called setlocale must not break checkpoints). */
static double locale_strtod(char *buf, size_t len) {
    char *end;
    double x = strtod(buf, &end);
    if (end != buf + len) {
        const char *dp = localeconv()->decimal_point;
        char *dot = strchr(buf, '.');
        if (dot && dp && strlen(dp) == 1) {
            *dot = dp[0];
            x = strtod(buf, NULL);
            *dot = '.';
        }
    }
    return x;
}

static void to_c_locale(char *buf) {
    const char *dp = localeconv()->decimal_point;
    if (dp && dp[0] && dp[0] != '.' && !dp[1]) {
        char *c = strchr(buf, dp[0]);
        if (c) *c = '.';
    }
}

static ml_json *parse_number(parser *p) {
    size_t start = p->i, i = p->i;
    bool neg = false, integral = true;
    if (i < p->n && p->s[i] == '-') {
        neg = true;
        i++;
    }
    if (i >= p->n || p->s[i] < '0' || p->s[i] > '9') return perr(p, i, "expected a digit");
    if (p->s[i] == '0') {
        i++;
        if (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') return perr(p, i, "leading zero in number");
    } else {
        while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    size_t int_end = i;
    if (i < p->n && p->s[i] == '.') {
        integral = false;
        i++;
        if (i >= p->n || p->s[i] < '0' || p->s[i] > '9') return perr(p, i, "expected a digit after '.'");
        while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    if (i < p->n && (p->s[i] == 'e' || p->s[i] == 'E')) {
        integral = false;
        i++;
        if (i < p->n && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (i >= p->n || p->s[i] < '0' || p->s[i] > '9') return perr(p, i, "expected a digit in exponent");
        while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    size_t len = i - start;
    if (len > ML_JSON_MAX_NUMBER) return perr(p, start, "number too long");
    char buf[ML_JSON_MAX_NUMBER + 1];
    memcpy(buf, p->s + start, len);
    buf[len] = 0;
    double x = locale_strtod(buf, len);
    if (isinf(x)) return perr(p, start, "number out of range");
    ml_json *v = json_new(ML_JSON_NUMBER);
    if (!v) {
        p->failed = true;
        p->err_at = start;
        return NULL;
    }
    v->number = x;
    if (integral) {
        /* Exact value when it fits int64; magnitude accumulated as uint64 with overflow checks. */
        uint64_t mag = 0;
        bool fits = true;
        for (size_t k = start + (neg ? 1 : 0); k < int_end; k++) {
            unsigned d = (unsigned)(p->s[k] - '0');
            if (mag > (UINT64_MAX - d) / 10) {
                fits = false;
                break;
            }
            mag = mag * 10 + d;
        }
        if (fits && (neg ? mag <= (uint64_t)INT64_MAX + 1 : mag <= (uint64_t)INT64_MAX)) {
            v->is_int = true;
            v->integer = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
        }
    }
    p->i = i;
    return v;
}

static ml_json *parse_value(parser *p, int depth);

/* A new array or object for the one opening at p->i, read past its bracket and any space; *empty
 * (and read past too) when `close` follows at once. NULL when out of memory. */
static ml_json *open_container(parser *p, ml_json_type type, char close, bool *empty) {
    ml_json *c = json_new(type);
    if (!c) {
        p->failed = true;
        return NULL;
    }
    p->i++; /* '[' or '{' */
    skip_ws(p);
    *empty = p->i < p->n && p->s[p->i] == close;
    if (*empty) p->i++;
    return c;
}

/* After an item of an array or object: past the ',' before the next (0) or the closing bracket
 * (1); -1 with the error set at the end of the text (`unterminated`) or at anything else (`bad`). */
static int after_item(parser *p, char close, const char *unterminated, const char *bad) {
    skip_ws(p);
    if (p->i >= p->n) return perr(p, p->i, unterminated), -1;
    char c = p->s[p->i];
    if (c != ',' && c != close) return perr(p, p->i, bad), -1;
    p->i++;
    return c == close;
}

static ml_json *parse_array(parser *p, int depth) {
    bool empty;
    ml_json *a = open_container(p, ML_JSON_ARRAY, ']', &empty);
    if (!a || empty) return a;
    for (;;) {
        ml_json *item = parse_value(p, depth + 1);
        if (!item) goto fail;
        if (ml_json_append(a, item) != ML_OK) {
            p->failed = true;
            p->err_at = p->i;
            goto fail;
        }
        int end = after_item(p, ']', "unterminated array", "expected ',' or ']' in array");
        if (end < 0) goto fail;
        if (end) return a;
    }
fail:
    ml_json_free(a);
    return NULL;
}

/* Orders member indices by key bytes, to find duplicates in O(n log n). qsort has no context
 * argument in C11, hence the thread-local. */
static _Thread_local const ml_json *cmp_obj;
static int cmp_keys(const void *a, const void *b) {
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    size_t li = cmp_obj->key_lens[i], lj = cmp_obj->key_lens[j];
    int c = memcmp(cmp_obj->keys[i], cmp_obj->keys[j], li < lj ? li : lj);
    if (c) return c;
    return li < lj ? -1 : li > lj ? 1 : (i < j ? -1 : i > j);
}

/* Returns the index of a member whose key repeats an earlier one, or SIZE_MAX. */
static size_t find_duplicate(const ml_json *o) {
    if (o->count < 2) return SIZE_MAX;
    if (o->count <= 8) {
        for (size_t i = 1; i < o->count; i++)
            for (size_t j = 0; j < i; j++)
                if (o->key_lens[i] == o->key_lens[j] && memcmp(o->keys[i], o->keys[j], o->key_lens[i]) == 0)
                    return i;
        return SIZE_MAX;
    }
    size_t *idx = malloc(o->count * sizeof *idx);
    if (!idx) return SIZE_MAX - 1;
    for (size_t i = 0; i < o->count; i++) idx[i] = i;
    cmp_obj = o;
    qsort(idx, o->count, sizeof *idx, cmp_keys);
    size_t dup = SIZE_MAX;
    for (size_t k = 1; k < o->count; k++) {
        size_t i = idx[k - 1], j = idx[k];
        if (o->key_lens[i] == o->key_lens[j] && memcmp(o->keys[i], o->keys[j], o->key_lens[i]) == 0) {
            size_t later = i > j ? i : j;
            if (dup == SIZE_MAX || later < dup) dup = later;
        }
    }
    free(idx);
    return dup;
}

static ml_json *parse_object(parser *p, int depth) {
    bool empty;
    ml_json *o = open_container(p, ML_JSON_OBJECT, '}', &empty);
    if (!o || empty) return o;
    size_t *key_at = NULL; /* byte offsets of the keys, for the duplicate-key message */
    size_t key_at_cap = 0;
    for (;;) {
        skip_ws(p);
        if (p->i >= p->n) {
            perr(p, p->i, "unterminated object");
            goto fail;
        }
        if (p->s[p->i] != '"') {
            perr(p, p->i, "expected a string key in object");
            goto fail;
        }
        size_t kat = p->i, klen = 0;
        char *key = parse_string_raw(p, &klen);
        if (!key) goto fail;
        skip_ws(p);
        if (p->i >= p->n || p->s[p->i] != ':') {
            free(key);
            perr(p, p->i, "expected ':' after object key");
            goto fail;
        }
        p->i++;
        ml_json *val = parse_value(p, depth + 1);
        if (!val) {
            free(key);
            goto fail;
        }
        if (o->count >= key_at_cap) {
            size_t cap = key_at_cap ? key_at_cap * 2 : 8;
            size_t *ka = realloc(key_at, cap * sizeof *ka);
            if (!ka) {
                free(key);
                ml_json_free(val);
                p->failed = true;
                ml_fail(ML_ERR_MEM, "json: out of memory");
                goto fail;
            }
            key_at = ka;
            key_at_cap = cap;
        }
        key_at[o->count] = kat;
        ml_status st = json_add_member(o, key, klen, val);
        free(key);
        if (st != ML_OK) {
            ml_json_free(val);
            p->failed = true;
            goto fail;
        }
        int end = after_item(p, '}', "unterminated object", "expected ',' or '}' in object");
        if (end < 0) goto fail;
        if (end) break;
    }
    size_t dup = find_duplicate(o);
    if (dup == SIZE_MAX - 1) {
        p->failed = true;
        ml_fail(ML_ERR_MEM, "json: out of memory");
        goto fail;
    }
    if (dup != SIZE_MAX) {
        char msg[160];
        snprintf(msg, sizeof msg, "duplicate key \"%.100s\" in object", o->keys[dup]);
        perr(p, key_at[dup], msg);
        goto fail;
    }
    free(key_at);
    return o;
fail:
    free(key_at);
    ml_json_free(o);
    return NULL;
}

static bool match_lit(parser *p, const char *lit) {
    size_t k = strlen(lit);
    if (p->n - p->i < k || memcmp(p->s + p->i, lit, k) != 0) return false;
    p->i += k;
    return true;
}

static ml_json *parse_value(parser *p, int depth) {
    if (depth > ML_JSON_MAX_DEPTH) return perr(p, p->i, "nesting too deep");
    skip_ws(p);
    if (p->i >= p->n) return perr(p, p->i, "unexpected end of input");
    unsigned char c = p->s[p->i];
    switch (c) {
    case '{': return parse_object(p, depth);
    case '[': return parse_array(p, depth);
    case '"': {
        size_t at = p->i, len = 0;
        char *s = parse_string_raw(p, &len);
        if (!s) return NULL;
        ml_json *v = json_new(ML_JSON_STRING);
        if (!v) {
            free(s);
            p->failed = true;
            p->err_at = at;
            return NULL;
        }
        v->str = s;
        v->len = len;
        return v;
    }
    case 't':
        if (match_lit(p, "true")) return ml_json_bool(true);
        break;
    case 'f':
        if (match_lit(p, "false")) return ml_json_bool(false);
        break;
    case 'n':
        if (match_lit(p, "null")) return ml_json_null();
        break;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p);
        break;
    }
    return perr(p, p->i, "unexpected character");
}

ml_json *ml_json_parse(const char *text, size_t len, size_t *err_offset) {
    parser p = {(const unsigned char *)text, len, 0, 0, false};
    if (!text && len) {
        ml_fail(ML_ERR_ARG, "json: NULL input");
        if (err_offset) *err_offset = 0;
        return NULL;
    }
    ml_json *v = parse_value(&p, 1);
    if (v) {
        skip_ws(&p);
        if (p.i != p.n) {
            ml_json_free(v);
            v = perr(&p, p.i, "trailing characters after the value");
        }
    }
    if (!v) {
        if (!p.failed) { /* an allocation failure reported without a position */
            p.err_at = p.i;
        }
        if (err_offset) *err_offset = p.err_at;
    }
    return v;
}

/* ------------------------------------------------------------------ writer */

typedef struct {
    char *buf;
    size_t len, cap;
    bool failed;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (n > SIZE_MAX - b->len - 1) {
        b->failed = true;
        ml_fail(ML_ERR_MEM, "json: output too large");
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap = cap > SIZE_MAX / 2 ? b->len + n + 1 : cap * 2;
        char *nb = realloc(b->buf, cap);
        if (!nb) {
            b->failed = true;
            ml_fail(ML_ERR_MEM, "json: out of memory");
            return;
        }
        b->buf = nb;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = 0;
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void write_string(sbuf *b, const char *s, size_t n) {
    sb_put(b, "\"", 1);
    size_t run = 0; /* start of the pending run of bytes copied as they are */
    for (size_t i = 0; i < n && !b->failed;) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) {
            snprintf(u, sizeof u, "\\u%04x", c);
            esc = u;
        }
        if (esc) {
            sb_put(b, s + run, i - run);
            sb_puts(b, esc);
            i++;
            run = i;
            continue;
        }
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (!k) {
            b->failed = true;
            ml_fail(ML_ERR_FORMAT, "json: invalid UTF-8 in string at byte %zu", i);
            return;
        }
        i += k;
    }
    sb_put(b, s + run, n - run);
    sb_put(b, "\"", 1);
}

const char *ml_format_double(char buf[32], double x) {
    if (isnan(x)) return strcpy(buf, "nan");
    if (isinf(x)) return strcpy(buf, x > 0 ? "inf" : "-inf");
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    /* %g switches to an exponent when it is >= the precision; widen the precision (trailing
     * zeros are dropped) so that 100 prints as "100", not "1e+02". */
    char e[32];
    snprintf(e, sizeof e, "%.0e", x);
    const char *ep = strchr(e, 'e');
    int exp10 = ep ? atoi(ep + 1) : 0;
    if (exp10 >= prec && exp10 < 16) prec = exp10 + 1;
    snprintf(buf, 32, "%.*g", prec, x);
    to_c_locale(buf);
    return buf;
}

static void write_number(sbuf *b, const ml_json *v) {
    char buf[40];
    if (v->is_int) {
        snprintf(buf, sizeof buf, "%" PRId64, v->integer);
        sb_puts(b, buf);
        return;
    }
    if (!isfinite(v->number)) { /* no JSON form: null, as json.lua writes it (docs/ARCHITECTURE.md) */
        sb_puts(b, "null");
        return;
    }
    sb_puts(b, ml_format_double(buf, v->number));
}

static void write_indent(sbuf *b, int indent, int depth) {
    if (indent <= 0) return;
    sb_put(b, "\n", 1);
    for (int i = 0; i < indent * depth && !b->failed; i++) sb_put(b, " ", 1);
}

static void write_value(sbuf *b, const ml_json *v, int indent, int depth) {
    if (b->failed) return;
    if (depth > ML_JSON_MAX_DEPTH) {
        b->failed = true;
        ml_fail(ML_ERR_ARG, "json: nesting deeper than %d", ML_JSON_MAX_DEPTH);
        return;
    }
    switch (v->type) {
    case ML_JSON_NULL: sb_puts(b, "null"); break;
    case ML_JSON_BOOL: sb_puts(b, v->boolean ? "true" : "false"); break;
    case ML_JSON_NUMBER: write_number(b, v); break;
    case ML_JSON_STRING: write_string(b, v->str ? v->str : "", v->str ? v->len : 0); break;
    case ML_JSON_ARRAY:
    case ML_JSON_OBJECT: {
        bool obj = v->type == ML_JSON_OBJECT;
        sb_put(b, obj ? "{" : "[", 1);
        for (size_t i = 0; i < v->count; i++) {
            if (i) sb_put(b, ",", 1);
            write_indent(b, indent, depth);
            if (obj) {
                write_string(b, v->keys[i], v->key_lens[i]);
                sb_puts(b, indent > 0 ? ": " : ":");
            }
            write_value(b, v->items[i], indent, depth + 1);
        }
        if (v->count) write_indent(b, indent, depth - 1);
        sb_put(b, obj ? "}" : "]", 1);
        break;
    }
    }
}

char *ml_json_write(const ml_json *v, int indent, size_t *len) {
    if (!v) {
        ml_fail(ML_ERR_ARG, "json: write of a NULL value");
        return NULL;
    }
    sbuf b = {0};
    write_value(&b, v, indent, 1);
    if (!b.failed && !b.buf) sb_put(&b, "", 0);
    if (b.failed) {
        free(b.buf);
        return NULL;
    }
    if (len) *len = b.len;
    return b.buf;
}
