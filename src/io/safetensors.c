/* safetensors reader and writer (see safetensors.h). */
#include "io/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autograd/views.h"
#include "io/csv.h"
#include "io/json.h"

typedef struct {
    char *name;
    ml_dtype dtype;
    int ndim;
    int64_t shape[ML_MAX_DIMS];
    uint64_t begin, end; /* data_offsets, relative to the data section */
} st_entry;

struct ml_safetensors {
    unsigned char *buf; /* the whole file */
    size_t size;
    size_t data_start;  /* 8 + header length */
    int n;
    st_entry *e;        /* in file order (by begin) */
    int *by_name;       /* indices sorted by name, for lookups */
    int n_meta;
    char **meta_keys, **meta_values;
};

/* ------------------------------------------------------------------ byte order */

static bool host_le(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static uint64_t load_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void store_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Copies n 4-byte elements between file order (little-endian) and host order. */
static void copy4_le(void *dst, const void *src, size_t n) {
    if (host_le()) {
        memcpy(dst, src, n * 4);
        return;
    }
    const unsigned char *s = src;
    unsigned char *d = dst;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 4; k++) d[4 * i + (size_t)k] = s[4 * i + 3 - (size_t)k];
}

static const char *st_dtype_name(ml_dtype d) { return d == ML_F32 ? "F32" : "I32"; }

/* ------------------------------------------------------------------ reading */

void ml_safetensors_close(ml_safetensors *st) {
    if (!st) return;
    for (int i = 0; i < st->n; i++) free(st->e[i].name);
    for (int i = 0; i < st->n_meta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_values[i]);
    }
    free(st->e);
    free(st->by_name);
    free(st->meta_keys);
    free(st->meta_values);
    free(st->buf);
    free(st);
}

static _Thread_local const ml_safetensors *sort_st;

static int cmp_begin(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_name_idx(const void *a, const void *b) {
    return strcmp(sort_st->e[*(const int *)a].name, sort_st->e[*(const int *)b].name);
}

/* A non-negative integer that fits int64 (what the reference's usize fields accept, within
 * what mechlab can address). */
static bool json_uint(const ml_json *v, uint64_t *out) {
    if (!v || v->type != ML_JSON_NUMBER || !v->is_int || v->integer < 0) return false;
    *out = (uint64_t)v->integer;
    return true;
}

#define FAIL(...)                                      \
    do {                                               \
        ml_fail(ML_ERR_FORMAT, "load: %s: " __VA_ARGS__); \
        goto fail;                                     \
    } while (0)

/* Validates one tensor entry into e; `what` is the source name for messages. */
static ml_status parse_entry(const char *what, const char *name, const ml_json *v, st_entry *e) {
    if (v->type != ML_JSON_OBJECT)
        return ml_fail(ML_ERR_FORMAT, "load: %s: tensor '%s' is described by a %s, expected an object", what, name,
                       ml_json_type_name(v->type));
    const ml_json *dt = ml_json_get(v, "dtype"), *sh = ml_json_get(v, "shape"), *off = ml_json_get(v, "data_offsets");
    if (!dt || !sh || !off)
        return ml_fail(ML_ERR_FORMAT, "load: %s: tensor '%s' lacks '%s'", what, name,
                       !dt ? "dtype" : !sh ? "shape" : "data_offsets");
    if (dt->type != ML_JSON_STRING)
        return ml_fail(ML_ERR_FORMAT, "load: %s: tensor '%s' has a non-string dtype", what, name);
    if (strcmp(dt->str, "F32") == 0 && dt->len == 3) e->dtype = ML_F32;
    else if (strcmp(dt->str, "I32") == 0 && dt->len == 3) e->dtype = ML_I32;
    else
        return ml_fail(ML_ERR_FORMAT, "load: %s: tensor '%s' has dtype '%.20s', mechlab reads only F32 and I32",
                       what, name, dt->str);
    if (sh->type != ML_JSON_ARRAY)
        return ml_fail(ML_ERR_FORMAT, "load: %s: tensor '%s' has a shape that is not an array", what, name);
    if (sh->count > ML_MAX_DIMS)
        return ml_fail(ML_ERR_FORMAT, "load: %s: tensor '%s' has %zu dimensions, at most %d are supported", what,
                       name, sh->count, ML_MAX_DIMS);
    e->ndim = (int)sh->count;
    /* extent: the product of the non-zero sizes, which an empty tensor's strides still multiply;
     * bounded as ml_check_shape bounds it, so a 0 never hides [2^40, 0, 2^40] (or sizes above
     * int64) behind an element count of 0. Without a 0, the byte count below says it. */
    uint64_t numel = 1, extent = 1;
    bool overflow = false, has_zero = false;
    size_t too_far = SIZE_MAX; /* the shape entry where the extent passes 2^62 */
    for (size_t k = 0; k < sh->count; k++) {
        uint64_t d;
        if (!json_uint(sh->items[k], &d))
            return ml_fail(ML_ERR_FORMAT, "load: %s: tensor '%s' has shape entry %zu that is not a non-negative integer",
                           what, name, k);
        e->shape[k] = (int64_t)d;
        has_zero = has_zero || d == 0;
        if (d != 0 && too_far == SIZE_MAX) {
            if (extent > (uint64_t)ML_MAX_EXTENT / d) too_far = k;
            else extent *= d;
        }
        if (d != 0 && numel > (uint64_t)INT64_MAX / d) overflow = true;
        else numel *= d;
    }
    if (has_zero && too_far != SIZE_MAX)
        return ml_fail(ML_ERR_FORMAT,
                       "load: %s: tensor '%s' has shape entry %zu of %" PRIu64
                       ": the product of its non-zero sizes exceeds 2^62",
                       what, name, too_far, (uint64_t)e->shape[too_far]);
    if (off->type != ML_JSON_ARRAY || off->count != 2 || !json_uint(off->items[0], &e->begin) ||
        !json_uint(off->items[1], &e->end))
        return ml_fail(ML_ERR_FORMAT, "load: %s: tensor '%s' needs data_offsets [begin, end] of non-negative integers",
                       what, name);
    char sb[ML_SHAPE_STR];
    if (e->end < e->begin)
        return ml_fail(ML_ERR_FORMAT, "load: %s: tensor '%s' has data_offsets [%" PRIu64 ", %" PRIu64 "] with end < begin",
                       what, name, e->begin, e->end);
    /* A shape whose byte size overflows can never match the (int64) offsets. */
    if (overflow || numel > (uint64_t)INT64_MAX / 4 || numel * 4 != e->end - e->begin)
        return ml_fail(ML_ERR_FORMAT,
                       "load: %s: tensor '%s' of shape %s %s needs %s bytes, data_offsets [%" PRIu64 ", %" PRIu64
                       "] hold %" PRIu64,
                       what, name, ml_shape_str(sb, e->ndim, e->shape), st_dtype_name(e->dtype),
                       overflow ? "more than 2^63" : "a different number of", e->begin, e->end, e->end - e->begin);
    return ML_OK;
}

/* Takes ownership of buf (size bytes, the whole file). */
static ml_safetensors *parse_owned(unsigned char *buf, size_t size, const char *what) {
    ml_json *root = NULL;
    ml_safetensors *st = calloc(1, sizeof *st);
    if (!st) {
        free(buf);
        ml_fail(ML_ERR_MEM, "load: %s: out of memory", what);
        return NULL;
    }
    st->buf = buf;
    st->size = size;
    if (size < 8) FAIL("file has %zu bytes, too few for the 8-byte header length (truncated or not safetensors)", what, size);
    uint64_t hlen = load_le64(buf);
    if (hlen > ML_SAFETENSORS_MAX_HEADER)
        FAIL("header length %" PRIu64 " exceeds the limit of %llu bytes (corrupt or not safetensors)", what, hlen,
             ML_SAFETENSORS_MAX_HEADER);
    if (hlen > size - 8)
        FAIL("header length %" PRIu64 " exceeds the %zu bytes after the length field (truncated file?)", what, hlen,
             size - 8);
    if (hlen == 0 || buf[8] != '{') FAIL("header does not start with '{' (not a safetensors file)", what);
    st->data_start = 8 + (size_t)hlen;
    size_t err_at = 0;
    root = ml_json_parse((const char *)buf + 8, (size_t)hlen, &err_at);
    if (!root) {
        if (ml_last_status() == ML_ERR_FORMAT) {
            char msg[600];
            snprintf(msg, sizeof msg, "%s", ml_last_error());
            ml_fail(ML_ERR_FORMAT, "load: %s: malformed header (%s; file byte %zu)", what, msg, err_at + 8);
        } else {
            ml_fail_context(ml_last_status(), "load");
        }
        goto fail;
    }
    if (root->type != ML_JSON_OBJECT) FAIL("header is a %s, expected an object", what, ml_json_type_name(root->type));
    if (root->count > (size_t)INT32_MAX) FAIL("too many tensors", what);
    st->e = calloc(root->count ? root->count : 1, sizeof *st->e);
    if (!st->e) {
        ml_fail(ML_ERR_MEM, "load: %s: out of memory", what);
        goto fail;
    }
    size_t data_size = size - st->data_start;
    for (size_t i = 0; i < root->count; i++) {
        const char *key = root->keys[i];
        const ml_json *v = root->items[i];
        if (strlen(key) != root->key_lens[i]) FAIL("a tensor name contains a 0 byte", what);
        if (strcmp(key, "__metadata__") == 0) {
            if (v->type != ML_JSON_OBJECT)
                FAIL("__metadata__ is a %s, expected an object of strings", what, ml_json_type_name(v->type));
            st->meta_keys = calloc(v->count ? v->count : 1, sizeof(char *));
            st->meta_values = calloc(v->count ? v->count : 1, sizeof(char *));
            if (!st->meta_keys || !st->meta_values) {
                ml_fail(ML_ERR_MEM, "load: %s: out of memory", what);
                goto fail;
            }
            for (size_t k = 0; k < v->count; k++) {
                const ml_json *mv = v->items[k];
                if (mv->type != ML_JSON_STRING)
                    FAIL("__metadata__ entry '%.100s' is a %s, expected a string", what, v->keys[k],
                         ml_json_type_name(mv->type));
                if (strlen(v->keys[k]) != v->key_lens[k] || strlen(mv->str) != mv->len)
                    FAIL("__metadata__ entry '%.100s' contains a 0 byte", what, v->keys[k]);
                st->meta_keys[k] = strdup(v->keys[k]);
                st->meta_values[k] = strdup(mv->str);
                st->n_meta = (int)k + 1; /* counts entries to free */
                if (!st->meta_keys[k] || !st->meta_values[k]) {
                    ml_fail(ML_ERR_MEM, "load: %s: out of memory", what);
                    goto fail;
                }
            }
            continue;
        }
        st_entry *e = &st->e[st->n];
        if (parse_entry(what, key, v, e) != ML_OK) goto fail;
        if (e->end > data_size)
            FAIL("tensor '%s' data_offsets [%" PRIu64 ", %" PRIu64 "] exceed the data size %zu (truncated file?)", what,
                 key, e->begin, e->end, data_size);
        e->name = strdup(key);
        if (!e->name) {
            ml_fail(ML_ERR_MEM, "load: %s: out of memory", what);
            goto fail;
        }
        st->n++;
    }
    /* The tensors must tile the data section exactly, as the reference checks. */
    qsort(st->e, (size_t)st->n, sizeof *st->e, cmp_begin);
    uint64_t pos = 0;
    for (int i = 0; i < st->n; i++) {
        const st_entry *e = &st->e[i];
        if (e->begin < pos)
            FAIL("tensors '%s' [%" PRIu64 ", %" PRIu64 "] and '%s' [%" PRIu64 ", %" PRIu64 "] overlap", what,
                 st->e[i - 1].name, st->e[i - 1].begin, st->e[i - 1].end, e->name, e->begin, e->end);
        if (e->begin > pos)
            FAIL("%" PRIu64 " unused bytes before tensor '%s' at data offset %" PRIu64, what, e->begin - pos, e->name,
                 pos);
        pos = e->end;
    }
    if (pos != data_size)
        FAIL("the tensors end at data offset %" PRIu64 " but the data section has %zu bytes", what, pos, data_size);
    st->by_name = calloc(st->n > 0 ? (size_t)st->n : 1u, sizeof *st->by_name);
    if (!st->by_name) {
        ml_fail(ML_ERR_MEM, "load: %s: out of memory", what);
        goto fail;
    }
    for (int i = 0; i < st->n; i++) st->by_name[i] = i;
    sort_st = st;
    qsort(st->by_name, (size_t)st->n, sizeof *st->by_name, cmp_name_idx);
    ml_json_free(root);
    return st;
fail:
    ml_json_free(root);
    ml_safetensors_close(st);
    return NULL;
}

ml_safetensors *ml_safetensors_parse(const void *bytes, size_t n, const char *what) {
    if (!what) what = "(memory)";
    if (n > 0 && !bytes) {
        ml_fail(ML_ERR_ARG, "load: %s: NULL data", what);
        return NULL;
    }
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) {
        ml_fail(ML_ERR_MEM, "load: %s: out of memory (%zu bytes)", what, n);
        return NULL;
    }
    if (n) memcpy(buf, bytes, n);
    return parse_owned(buf, n, what);
}

ml_safetensors *ml_safetensors_open(const char *path) {
    if (!path) {
        ml_fail(ML_ERR_ARG, "load: NULL path");
        return NULL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ml_fail(ML_ERR_IO, "load: %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        ml_fail(ML_ERR_IO, "load: %s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(sb.st_mode)) {
        ml_fail(ML_ERR_IO, "load: %s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX - 1) {
        ml_fail(ML_ERR_MEM, "load: %s: file too large", path);
        close(fd);
        return NULL;
    }
    size_t size = (size_t)sb.st_size;
    /* Check the header length before reading a possibly huge file. */
    unsigned char head[8];
    ssize_t got = size >= 8 ? pread(fd, head, 8, 0) : 0;
    if (got == 8) {
        uint64_t hlen = load_le64(head);
        if (hlen > ML_SAFETENSORS_MAX_HEADER) {
            close(fd);
            ml_fail(ML_ERR_FORMAT,
                    "load: %s: header length %" PRIu64 " exceeds the limit of %llu bytes (corrupt or not safetensors)",
                    path, hlen, ML_SAFETENSORS_MAX_HEADER);
            return NULL;
        }
    }
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) {
        close(fd);
        ml_fail(ML_ERR_MEM, "load: %s: out of memory (%zu bytes)", path, size);
        return NULL;
    }
    size_t have = 0;
    while (have < size) {
        ssize_t r = read(fd, buf + have, size - have);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            ml_fail(ML_ERR_IO, "load: %s: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return NULL;
        }
        if (r == 0) break; /* shrank while reading: validate what is there */
        have += (size_t)r;
    }
    close(fd);
    return parse_owned(buf, have, path);
}

int ml_safetensors_count(const ml_safetensors *st) { return st ? st->n : 0; }

const char *ml_safetensors_name(const ml_safetensors *st, int i) {
    return st && i >= 0 && i < st->n ? st->e[i].name : NULL;
}

int ml_safetensors_find(const ml_safetensors *st, const char *name) {
    if (!st || !name) return -1;
    int lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(name, st->e[st->by_name[mid]].name);
        if (c == 0) return st->by_name[mid];
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return -1;
}

static const st_entry *lookup(const ml_safetensors *st, const char *name, const char *fn) {
    int i = ml_safetensors_find(st, name);
    if (i < 0) {
        ml_fail(ML_ERR_INDEX, "%s: no tensor '%s' in the file", fn, name ? name : "(null)");
        return NULL;
    }
    return &st->e[i];
}

ml_status ml_safetensors_info(const ml_safetensors *st, const char *name, ml_dtype *dtype, int *ndim,
                              int64_t *shape) {
    const st_entry *e = lookup(st, name, "load");
    if (!e) return ML_ERR_INDEX;
    if (dtype) *dtype = e->dtype;
    if (ndim) *ndim = e->ndim;
    if (shape) memcpy(shape, e->shape, (size_t)e->ndim * sizeof *shape);
    return ML_OK;
}

ml_tensor *ml_safetensors_get(const ml_safetensors *st, const char *name) {
    const st_entry *e = lookup(st, name, "load");
    if (!e) return NULL;
    ml_tensor *t = ml_empty(e->dtype, e->ndim, e->shape);
    if (!t) return NULL;
    size_t n = (size_t)(e->end - e->begin) / 4;
    if (n) copy4_le(t->storage->data, st->buf + st->data_start + e->begin, n);
    return t;
}

ml_status ml_safetensors_read_into(const ml_safetensors *st, const char *name, ml_tensor *dst) {
    const st_entry *e = lookup(st, name, "load");
    if (!e) return ML_ERR_INDEX;
    if (!dst) return ml_fail(ML_ERR_ARG, "load: NULL destination for '%s'", name);
    char b1[ML_SHAPE_STR], b2[ML_SHAPE_STR];
    if (dst->dtype != e->dtype || dst->ndim != e->ndim ||
        memcmp(dst->shape, e->shape, (size_t)e->ndim * sizeof *e->shape) != 0)
        return ml_fail(ML_ERR_SHAPE, "load: tensor '%s' is %s %s in the file, expected %s %s", name,
                       ml_dtype_name(e->dtype), ml_shape_str(b1, e->ndim, e->shape), ml_dtype_name(dst->dtype),
                       ml_shape_str(b2, dst->ndim, dst->shape));
    const unsigned char *src = st->buf + st->data_start + e->begin;
    int64_t n = (int64_t)((e->end - e->begin) / 4);
    char *base = (char *)dst->storage->data + dst->offset * 4;
    if (ml_is_contiguous(dst)) {
        if (n) copy4_le(base, src, (size_t)n);
    } else {
        for (int64_t i = 0; i < n; i++) copy4_le(base + ml_flat_offset(dst, i) * 4, src + i * 4, 1);
    }
    dst->storage->version++;
    return ML_OK;
}

int ml_safetensors_meta_count(const ml_safetensors *st) { return st ? st->n_meta : 0; }

const char *ml_safetensors_meta_key(const ml_safetensors *st, int i) {
    return st && i >= 0 && i < st->n_meta ? st->meta_keys[i] : NULL;
}

const char *ml_safetensors_meta_value(const ml_safetensors *st, int i) {
    return st && i >= 0 && i < st->n_meta ? st->meta_values[i] : NULL;
}

const char *ml_safetensors_meta(const ml_safetensors *st, const char *key) {
    if (!st || !key) return NULL;
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

/* ------------------------------------------------------------------ writing */

static _Thread_local const char *const *sort_names;
static _Thread_local ml_tensor *const *sort_tensors;

/* The reference's layout order: dtype descending in its enum (F32 after I32, so F32 first),
 * then name bytewise. */
static int cmp_write_order(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    int di = sort_tensors[i]->dtype == ML_F32 ? 0 : 1, dj = sort_tensors[j]->dtype == ML_F32 ? 0 : 1;
    if (di != dj) return di - dj;
    return strcmp(sort_names[i], sort_names[j]);
}

static int cmp_str_idx(const void *a, const void *b) {
    return strcmp(sort_names[*(const int *)a], sort_names[*(const int *)b]);
}

/* Index of a name that repeats an earlier one (in sorted order), or -1. */
static int find_dup(int n, const char *const *names, int *idx) {
    for (int i = 0; i < n; i++) idx[i] = i;
    sort_names = names;
    qsort(idx, (size_t)n, sizeof *idx, cmp_str_idx);
    for (int k = 1; k < n; k++)
        if (strcmp(names[idx[k - 1]], names[idx[k]]) == 0) return idx[k];
    return -1;
}

ml_status ml_safetensors_write(const char *path, int n, const char *const *names, ml_tensor *const *tensors,
                               int n_meta, const char *const *meta_keys, const char *const *meta_values) {
    if (!path || !*path) return ml_fail(ML_ERR_ARG, "save: empty file name");
    if (n < 0 || (n > 0 && (!names || !tensors))) return ml_fail(ML_ERR_ARG, "save: %s: bad tensor list", path);
    if (n_meta < 0 || (n_meta > 0 && (!meta_keys || !meta_values)))
        return ml_fail(ML_ERR_ARG, "save: %s: bad metadata list", path);
    for (int i = 0; i < n; i++) {
        if (!names[i] || !*names[i]) return ml_fail(ML_ERR_ARG, "save: %s: tensor %d has an empty name", path, i + 1);
        if (strcmp(names[i], "__metadata__") == 0)
            return ml_fail(ML_ERR_ARG, "save: %s: '__metadata__' is reserved and cannot name a tensor", path);
        if (!tensors[i]) return ml_fail(ML_ERR_ARG, "save: %s: tensor '%s' is NULL", path, names[i]);
        if (tensors[i]->dtype != ML_F32 && tensors[i]->dtype != ML_I32)
            return ml_fail(ML_ERR_DTYPE, "save: %s: tensor '%s' has an unsupported dtype", path, names[i]);
    }
    for (int i = 0; i < n_meta; i++)
        if (!meta_keys[i] || !meta_values[i])
            return ml_fail(ML_ERR_ARG, "save: %s: metadata entry %d is NULL", path, i + 1);

    ml_status st = ML_OK;
    ml_json *root = NULL;
    char *header = NULL;
    ml_atomic_file *f = NULL;
    int nmax = n > n_meta ? n : n_meta;
    int *order = malloc((size_t)(nmax ? nmax : 1) * sizeof *order);
    if (!order) return ml_fail(ML_ERR_MEM, "save: %s: out of memory", path);
    int dup = n ? find_dup(n, names, order) : -1;
    if (dup >= 0) {
        st = ml_fail(ML_ERR_ARG, "save: %s: tensor name '%s' appears twice", path, names[dup]);
        goto done;
    }
    dup = n_meta ? find_dup(n_meta, meta_keys, order) : -1;
    if (dup >= 0) {
        st = ml_fail(ML_ERR_ARG, "save: %s: metadata key '%s' appears twice", path, meta_keys[dup]);
        goto done;
    }
    for (int i = 0; i < n; i++) order[i] = i;
    sort_names = names;
    sort_tensors = tensors;
    qsort(order, (size_t)n, sizeof *order, cmp_write_order);

    root = ml_json_object();
    if (!root) {
        st = ml_last_status();
        goto done;
    }
    if (n_meta > 0) {
        ml_json *meta = ml_json_object();
        if ((st = ml_json_set(root, "__metadata__", meta)) != ML_OK) goto done;
        for (int i = 0; i < n_meta; i++) {
            if ((st = ml_json_set(meta, meta_keys[i], ml_json_string(meta_values[i]))) != ML_OK) goto done;
        }
    }
    uint64_t offset = 0;
    for (int k = 0; k < n; k++) {
        const ml_tensor *t = tensors[order[k]];
        uint64_t nbytes = (uint64_t)ml_numel(t) * 4;
        ml_json *info = ml_json_object(), *shape = ml_json_array(), *offs = ml_json_array();
        if (!info || !shape || !offs) {
            ml_json_free(info);
            ml_json_free(shape);
            ml_json_free(offs);
            st = ML_ERR_MEM;
            goto done;
        }
        if ((st = ml_json_set(root, names[order[k]], info)) != ML_OK) {
            ml_json_free(shape);
            ml_json_free(offs);
            goto done;
        }
        if ((st = ml_json_set(info, "dtype", ml_json_string(st_dtype_name(t->dtype)))) != ML_OK) {
            ml_json_free(shape);
            ml_json_free(offs);
            goto done;
        }
        if ((st = ml_json_set(info, "shape", shape)) != ML_OK) {
            ml_json_free(offs);
            goto done;
        }
        for (int d = 0; d < t->ndim; d++)
            if ((st = ml_json_append(shape, ml_json_int(t->shape[d]))) != ML_OK) {
                ml_json_free(offs);
                goto done;
            }
        if ((st = ml_json_set(info, "data_offsets", offs)) != ML_OK) goto done;
        if ((st = ml_json_append(offs, ml_json_int((int64_t)offset))) != ML_OK) goto done;
        if ((st = ml_json_append(offs, ml_json_int((int64_t)(offset + nbytes)))) != ML_OK) goto done;
        offset += nbytes;
    }
    size_t hlen = 0;
    header = ml_json_write(root, 0, &hlen);
    if (!header) {
        st = ml_fail_context(ml_last_status(), "save");
        goto done;
    }
    /* Pad with spaces to a multiple of 8 so the data section is 8-byte aligned. */
    size_t padded = (hlen + 7) / 8 * 8;
    char *hp = realloc(header, padded + 1);
    if (!hp) {
        st = ml_fail(ML_ERR_MEM, "save: %s: out of memory", path);
        goto done;
    }
    header = hp;
    memset(header + hlen, ' ', padded - hlen);
    header[padded] = 0;
    unsigned char lenbuf[8];
    store_le64(lenbuf, (uint64_t)padded);

    f = ml_atomic_open(path);
    if (!f) {
        st = ml_fail_context(ml_last_status(), "save");
        goto done;
    }
    if ((st = ml_atomic_write(f, lenbuf, 8)) != ML_OK) goto done;
    if ((st = ml_atomic_write(f, header, padded)) != ML_OK) goto done;
    for (int k = 0; k < n; k++) {
        ml_tensor *c = ml_contiguous(tensors[order[k]]);
        if (!c) {
            st = ml_fail_context(ml_last_status(), "save");
            goto done;
        }
        size_t cnt = (size_t)ml_numel(c);
        const void *src = (const char *)c->storage->data + c->offset * 4;
        void *tmp = NULL;
        if (!host_le() && cnt) {
            tmp = malloc(cnt * 4);
            if (!tmp) {
                ml_release(c);
                st = ml_fail(ML_ERR_MEM, "save: %s: out of memory", path);
                goto done;
            }
            copy4_le(tmp, src, cnt);
            src = tmp;
        }
        st = cnt ? ml_atomic_write(f, src, cnt * 4) : ML_OK;
        free(tmp);
        ml_release(c);
        if (st != ML_OK) goto done;
    }
    st = ml_atomic_commit(f);
    f = NULL; /* commit frees it, also on failure */
    if (st != ML_OK) ml_fail_context(st, "save");
done:
    ml_atomic_abort(f);
    free(header);
    ml_json_free(root);
    free(order);
    return st;
}
