/* JSON, safetensors, metrics CSV and atomic writes. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/tensor.h"
#include "io/csv.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "testutil.h"

/* ------------------------------------------------------------------ helpers */

static char tdir[64];

static void make_tmpdir(void) {
    snprintf(tdir, sizeof tdir, "/tmp/mechlab_io_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tdir));
}

/* Removes the test directory and the plain files in it (nothing else is created there). */
static void remove_tmpdir(void) {
    DIR *d = opendir(tdir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", tdir, e->d_name);
        if (unlink(p) != 0) rmdir(p);
    }
    closedir(d);
    rmdir(tdir);
}

/* A path in the test directory; a ring of buffers so a few can be held at once. */
static const char *tpath(const char *name) {
    static char p[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", tdir, name);
    return p[k];
}

/* Number of entries in the test directory whose name contains `part`. */
static int count_files(const char *part) {
    DIR *d = opendir(tdir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, part)) n++;
    closedir(d);
    return n;
}

static char *read_all(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    rewind(fp);
    char *b = malloc((size_t)sz + 1);
    size_t got = fread(b, 1, (size_t)sz, fp);
    fclose(fp);
    b[got] = 0;
    if (n) *n = got;
    return b;
}

static void write_raw(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(data, 1, n, fp), n);
    fclose(fp);
}

/* Parses s (NUL-terminated), expects failure, returns the error offset. */
static size_t json_bad(const char *s) {
    size_t off = 12345;
    ml_json *v = ml_json_parse(s, strlen(s), &off);
    ck_assert_msg(v == NULL, "accepted malformed JSON: %s", s);
    ck_assert_int_eq(ml_last_status(), ML_ERR_FORMAT);
    ck_assert_msg(strstr(ml_last_error(), "at byte") != NULL, "no offset in '%s'", ml_last_error());
    return off;
}

static char *json_roundtrip(const char *s, int indent) {
    ml_json *v = ml_json_parse(s, strlen(s), NULL);
    ck_assert_msg(v != NULL, "rejected %s: %s", s, ml_last_error());
    char *out = ml_json_write(v, indent, NULL);
    ck_assert_ptr_nonnull(out);
    ml_json_free(v);
    return out;
}

/* ------------------------------------------------------------------ JSON */

START_TEST(test_json_roundtrip) {
    const char *doc = " { \"a\" : [1, -2, 3.5, 1e-3, true, false, null, \"x\"], \"b\": {}, \"c\": [], "
                      "\"d\": {\"e\": {\"f\": [[]]}} } ";
    char *out = json_roundtrip(doc, 0);
    ck_assert_str_eq(out, "{\"a\":[1,-2,3.5,0.001,true,false,null,\"x\"],\"b\":{},\"c\":[],\"d\":{\"e\":{\"f\":[[]]}}}");
    char *again = json_roundtrip(out, 0); /* the writer's output reads back to itself */
    ck_assert_str_eq(again, out);
    free(again);
    char *pretty = json_roundtrip(out, 2);
    ck_assert_str_eq(pretty, "{\n  \"a\": [\n    1,\n    -2,\n    3.5,\n    0.001,\n    true,\n    false,\n    null,\n"
                             "    \"x\"\n  ],\n  \"b\": {},\n  \"c\": [],\n  \"d\": {\n    \"e\": {\n      \"f\": [\n"
                             "        []\n      ]\n    }\n  }\n}");
    again = json_roundtrip(pretty, 0);
    ck_assert_str_eq(again, out);
    free(again);
    free(pretty);
    free(out);
}
END_TEST

START_TEST(test_json_access) {
    const char *doc = "{\"n\": 42, \"s\": \"hi\", \"o\": {\"k\": [true]}}";
    ml_json *v = ml_json_parse(doc, strlen(doc), NULL);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(v->type, ML_JSON_OBJECT);
    ck_assert_uint_eq(v->count, 3);
    ck_assert_str_eq(v->keys[1], "s");
    const ml_json *n = ml_json_get(v, "n");
    ck_assert(n && n->type == ML_JSON_NUMBER && n->is_int && n->integer == 42 && n->number == 42.0);
    ck_assert_str_eq(ml_json_get(v, "s")->str, "hi");
    const ml_json *k = ml_json_get(ml_json_get(v, "o"), "k");
    ck_assert(k && k->type == ML_JSON_ARRAY && k->count == 1 && k->items[0]->boolean);
    ck_assert_ptr_null(ml_json_get(v, "missing"));
    ck_assert_ptr_null(ml_json_get(n, "n")); /* not an object */
    ml_json_free(v);
}
END_TEST

START_TEST(test_json_strings) {
    /* Every escape, a BMP character and a surrogate pair (U+1F600), raw UTF-8 passes through. */
    const char *doc = "\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u00e9 \\u20AC \\ud83d\\ude00 caf\xc3\xa9\"";
    ml_json *v = ml_json_parse(doc, strlen(doc), NULL);
    ck_assert_msg(v != NULL, "%s", ml_last_error());
    ck_assert_int_eq(v->type, ML_JSON_STRING);
    const char *expect = "q\" b\\ s/ \b\f\n\r\t \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 caf\xc3\xa9";
    ck_assert_uint_eq(v->len, strlen(expect));
    ck_assert_str_eq(v->str, expect);
    char *out = ml_json_write(v, 0, NULL);
    /* serde_json's escaping: short escapes, \u00XX for other controls, '/' and UTF-8 as they are. */
    ck_assert_str_eq(out, "\"q\\\" b\\\\ s/ \\b\\f\\n\\r\\t \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 caf\xc3\xa9\"");
    free(out);
    ml_json_free(v);
    /* \u0000 is kept as a 0 byte inside the length; control characters are escaped on output. */
    v = ml_json_parse("\"a\\u0000b\\u001f\"", 16, NULL);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(v->len, 4);
    ck_assert(memcmp(v->str, "a\0b\x1f", 4) == 0);
    out = ml_json_write(v, 0, NULL);
    ck_assert_str_eq(out, "\"a\\u0000b\\u001f\"");
    free(out);
    ml_json_free(v);
}
END_TEST

START_TEST(test_json_numbers) {
    const char *doc = "[0, -0, 9223372036854775807, -9223372036854775808, 9223372036854775808, 1.5e300, "
                      "-2.5E-3, 1e-400, 0.1, 123456789012345678901234567890]";
    ml_json *v = ml_json_parse(doc, strlen(doc), NULL);
    ck_assert_msg(v != NULL, "%s", ml_last_error());
    ck_assert_uint_eq(v->count, 10);
    ck_assert(v->items[0]->is_int && v->items[0]->integer == 0);
    ck_assert(v->items[1]->is_int && v->items[1]->integer == 0);
    ck_assert(v->items[2]->is_int && v->items[2]->integer == INT64_MAX);
    ck_assert(v->items[3]->is_int && v->items[3]->integer == INT64_MIN);
    ck_assert(!v->items[4]->is_int && v->items[4]->number == 9223372036854775808.0);
    ck_assert(!v->items[5]->is_int && v->items[5]->number == 1.5e300);
    ck_assert(v->items[6]->number == -2.5e-3);
    ck_assert(v->items[7]->number == 0.0); /* underflow rounds to zero, as strtod does */
    ck_assert(v->items[8]->number == 0.1);
    ck_assert(!v->items[9]->is_int);
    ck_assert_close(v->items[9]->number, 1.2345678901234568e29, 0, 1e-15);
    ml_json_free(v);
    /* The writer prints the shortest digits that read back exactly. */
    double xs[] = {0.1, 1.0 / 3, 1e300, -2.5e-3, 5e-324, 100.0, -0.0, 123456.789};
    const char *ws[] = {"0.1", "0.3333333333333333", "1e+300", "-0.0025", "5e-324", "100", "-0",
                        "123456.789"};
    for (int i = 0; i < 8; i++) {
        ml_json *x = ml_json_number(xs[i]);
        char *s = ml_json_write(x, 0, NULL);
        ck_assert_str_eq(s, ws[i]);
        ml_json *back = ml_json_parse(s, strlen(s), NULL);
        ck_assert(back && back->number == xs[i] && signbit(back->number) == signbit(xs[i]));
        ml_json_free(back);
        free(s);
        ml_json_free(x);
    }
    ml_json *x = ml_json_int(INT64_MIN);
    char *s = ml_json_write(x, 0, NULL);
    ck_assert_str_eq(s, "-9223372036854775808");
    free(s);
    ml_json_free(x);
    /* Non-finite numbers have no JSON form: null, as json.lua writes them (tests/c/test_json.c). */
    x = ml_json_number(NAN);
    s = ml_json_write(x, 0, NULL);
    ck_assert_str_eq(s, "null");
    free(s);
    ml_json_free(x);
    x = ml_json_number(-INFINITY);
    s = ml_json_write(x, 0, NULL);
    ck_assert_str_eq(s, "null");
    free(s);
    ml_json_free(x);
}
END_TEST

START_TEST(test_json_malformed) {
    ck_assert_uint_eq(json_bad(""), 0);
    ck_assert_uint_eq(json_bad("   "), 3);
    ck_assert_uint_eq(json_bad("{"), 1);
    ck_assert_uint_eq(json_bad("[1,]"), 3);
    ck_assert_uint_eq(json_bad("{\"a\":1,}"), 7);
    ck_assert_uint_eq(json_bad("{\"a\" 1}"), 5);
    ck_assert_uint_eq(json_bad("{1:2}"), 1);
    ck_assert_uint_eq(json_bad("[1 2]"), 3);
    ck_assert_uint_eq(json_bad("1 2"), 2);
    ck_assert_uint_eq(json_bad("01"), 1);
    ck_assert_uint_eq(json_bad("-"), 1);
    ck_assert_uint_eq(json_bad("1."), 2);
    ck_assert_uint_eq(json_bad("1e"), 2);
    ck_assert_uint_eq(json_bad(".5"), 0);
    ck_assert_uint_eq(json_bad("+1"), 0);
    ck_assert_uint_eq(json_bad("tru"), 0);
    ck_assert_uint_eq(json_bad("nul"), 0);
    ck_assert_uint_eq(json_bad("NaN"), 0);
    ck_assert_uint_eq(json_bad("Infinity"), 0);
    ck_assert_uint_eq(json_bad("[1e999]"), 1);  /* huge numbers are refused, not made infinite */
    ck_assert_uint_eq(json_bad("-1e400"), 0);
    ck_assert_uint_eq(json_bad("\"abc"), 0);
    ck_assert_uint_eq(json_bad("\"abc\\"), 0);
    ck_assert_uint_eq(json_bad("\"\\x\""), 1);
    ck_assert_uint_eq(json_bad("\"\\u12g4\""), 5);
    ck_assert_uint_eq(json_bad("\"\\u12\""), 3);
    ck_assert_uint_eq(json_bad("\"\\ud800\""), 1);        /* lone high surrogate */
    ck_assert_uint_eq(json_bad("\"\\ud800\\u0041\""), 1); /* high surrogate + non-low */
    ck_assert_uint_eq(json_bad("\"\\udc00\""), 1);        /* lone low surrogate */
    ck_assert_uint_eq(json_bad("\"a\tb\""), 2);           /* raw control character */
    ck_assert_uint_eq(json_bad("\"\xff\""), 1);           /* invalid UTF-8 */
    ck_assert_uint_eq(json_bad("\"\xc0\xaf\""), 1);       /* overlong encoding of '/' */
    ck_assert_uint_eq(json_bad("\"\xed\xa0\x80\""), 1);   /* encoded surrogate */
    ck_assert_uint_eq(json_bad("\"\xe2\x82\""), 1);       /* truncated sequence */
    ck_assert_uint_eq(json_bad("{\"a\":1,\"b\":2,\"a\":3}"), 13);
    ck_assert_uint_eq(json_bad("[1] // comment"), 4);
    ck_assert_uint_eq(json_bad("\xef\xbb\xbf{}"), 0); /* no byte-order mark */
    /* An embedded 0 byte ends nothing: the length decides. */
    size_t off;
    ck_assert_ptr_null(ml_json_parse("[1]\0", 4, &off));
    ck_assert_uint_eq(off, 3);
    /* Duplicate keys in a large object are found too (sorted check). */
    char big[4096];
    int n = snprintf(big, sizeof big, "{");
    for (int i = 0; i < 100; i++) n += snprintf(big + n, sizeof big - (size_t)n, "\"k%d\":%d,", i, i);
    snprintf(big + n, sizeof big - (size_t)n, "\"k57\":0}");
    json_bad(big);
    big[n] = 0;
    big[n - 1] = '}';
    ml_json *ok = ml_json_parse(big, strlen(big), NULL);
    ck_assert_ptr_nonnull(ok);
    ck_assert_uint_eq(ok->count, 100);
    ml_json_free(ok);
}
END_TEST

START_TEST(test_json_limits) {
    /* ML_JSON_MAX_DEPTH nested arrays parse; one more is refused at the extra bracket. */
    char s[2 * (ML_JSON_MAX_DEPTH + 1) + 1];
    for (int d = ML_JSON_MAX_DEPTH; d <= ML_JSON_MAX_DEPTH + 1; d++) {
        memset(s, '[', (size_t)d);
        memset(s + d, ']', (size_t)d);
        s[2 * d] = 0;
        size_t off = 0;
        ml_json *v = ml_json_parse(s, (size_t)(2 * d), &off);
        if (d == ML_JSON_MAX_DEPTH) {
            ck_assert_msg(v != NULL, "%s", ml_last_error());
            char *w = ml_json_write(v, 0, NULL);
            ck_assert_str_eq(w, s);
            free(w);
            ml_json_free(v);
        } else {
            ck_assert_ptr_null(v);
            ck_assert_uint_eq(off, (size_t)ML_JSON_MAX_DEPTH);
            ck_assert(strstr(ml_last_error(), "nesting too deep"));
        }
    }
    /* A deep unterminated prefix (stack-safe). */
    size_t n = 1000000;
    char *deep = malloc(n);
    memset(deep, '{', n);
    ck_assert_ptr_null(ml_json_parse(deep, n, NULL));
    memset(deep, '[', n);
    ck_assert_ptr_null(ml_json_parse(deep, n, NULL));
    /* A number of 1001 characters is refused, 1000 is fine. */
    memset(deep, '1', n);
    ck_assert_ptr_null(ml_json_parse(deep, ML_JSON_MAX_NUMBER + 1, NULL));
    ck_assert(strstr(ml_last_error(), "number too long"));
    ml_json *v = ml_json_parse(deep, ML_JSON_MAX_NUMBER, NULL);
    ck_assert_ptr_null(v); /* 1e999 in magnitude: out of range */
    deep[0] = '0';
    deep[1] = '.';
    v = ml_json_parse(deep, ML_JSON_MAX_NUMBER, NULL);
    ck_assert_ptr_nonnull(v);
    ml_json_free(v);
    free(deep);
}
END_TEST

/* Every prefix of a valid document and every single-byte corruption of it either parses or is
 * refused with an offset inside the input; under the sanitizers this also checks for no invalid
 * read. */
START_TEST(test_json_fuzz) {
    const char *doc = "{\"__metadata__\":{\"step\":\"12\",\"q\":\"a\\\"\\u00e9\\ud83d\\ude00\"},"
                      "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},\"x\":[-1.5e-3,true,null]}";
    size_t len = strlen(doc);
    ml_json *v = ml_json_parse(doc, len, NULL);
    ck_assert_ptr_nonnull(v);
    ml_json_free(v);
    for (size_t k = 0; k < len; k++) {
        char *cut = malloc(k ? k : 1); /* exactly k bytes, so ASan sees a read past the end */
        memcpy(cut, doc, k);
        size_t off = 999999;
        v = ml_json_parse(cut, k, &off);
        ck_assert_msg(v == NULL, "prefix of %zu bytes accepted", k);
        ck_assert_uint_le(off, k);
        free(cut);
    }
    const char repl[] = {'"', '\\', '{', '}', '[', ']', ',', ':', '0', '-', 'e', 'u', ' ', '\0', '\x80', '\xff'};
    char *buf = malloc(len);
    unsigned seed = 12345;
    for (size_t k = 0; k < len; k++)
        for (size_t r = 0; r < sizeof repl; r++) {
            memcpy(buf, doc, len);
            buf[k] = repl[r];
            size_t off = 999999;
            v = ml_json_parse(buf, len, &off);
            if (v) {
                char *w = ml_json_write(v, 0, NULL);
                free(w);
                ml_json_free(v);
            } else {
                ck_assert_uint_le(off, len);
            }
        }
    for (int t = 0; t < 2000; t++) { /* random multi-byte damage */
        memcpy(buf, doc, len);
        for (int j = 0; j < 4; j++) {
            seed = seed * 1103515245u + 12345u;
            size_t k = (seed >> 8) % len;
            seed = seed * 1103515245u + 12345u;
            buf[k] = repl[(seed >> 8) % sizeof repl];
        }
        v = ml_json_parse(buf, len, NULL);
        ml_json_free(v);
    }
    free(buf);
}
END_TEST

START_TEST(test_json_build) {
    ml_json *o = ml_json_object();
    ck_assert_int_eq(ml_json_set(o, "name", ml_json_string("run \"1\"\n")), ML_OK);
    ck_assert_int_eq(ml_json_set(o, "seed", ml_json_int(7)), ML_OK);
    ml_json *a = ml_json_array();
    ck_assert_int_eq(ml_json_append(a, ml_json_number(0.5)), ML_OK);
    ck_assert_int_eq(ml_json_append(a, ml_json_bool(false)), ML_OK);
    ck_assert_int_eq(ml_json_append(a, ml_json_null()), ML_OK);
    ck_assert_int_eq(ml_json_set(o, "list", a), ML_OK);
    ck_assert_int_eq(ml_json_set(o, "seed", ml_json_int(8)), ML_OK); /* replaces, keeps the position */
    char *s = ml_json_write(o, 0, NULL);
    ck_assert_str_eq(s, "{\"name\":\"run \\\"1\\\"\\n\",\"seed\":8,\"list\":[0.5,false,null]}");
    free(s);
    /* Appending to the wrong type frees the item and reports. */
    ck_assert_int_eq(ml_json_append(o, ml_json_int(1)), ML_ERR_ARG);
    ck_assert_int_eq(ml_json_set(a, "x", ml_json_int(1)), ML_ERR_ARG);
    /* Invalid UTF-8 cannot be written. */
    ck_assert_int_eq(ml_json_set(o, "bad", ml_json_string("\xc3(")), ML_OK);
    ck_assert_ptr_null(ml_json_write(o, 0, NULL));
    ml_json_free(o);
}
END_TEST

/* ------------------------------------------------------------------ safetensors */

/* The exact bytes safetensors.torch.save_file writes for
 *   {"weight": tensor([[1., 2.], [3., -0.5]]), "step": tensor([5], dtype=torch.int32)},
 *   metadata={"format": "pt"}
 * : F32 before I32, __metadata__ first, compact JSON, spaces to a multiple of 8. */
static const char torch_header[] = "{\"__metadata__\":{\"format\":\"pt\"},"
                                   "\"weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                                   "\"step\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[16,20]}}";

static size_t torch_file(unsigned char *out) {
    size_t hl = strlen(torch_header), padded = (hl + 7) / 8 * 8;
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(out + 8, torch_header, hl);
    memset(out + 8 + hl, ' ', padded - hl);
    /* little-endian float32 1, 2, 3, -0.5 and int32 5 */
    const unsigned char data[20] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00,
                                    0x40, 0x40, 0x00, 0x00, 0x00, 0xbf, 0x05, 0x00, 0x00, 0x00};
    memcpy(out + 8 + padded, data, 20);
    return 8 + padded + 20;
}

START_TEST(test_st_reads_torch_file) {
    unsigned char buf[512];
    size_t n = torch_file(buf);
    ck_assert_uint_eq((8 + strlen(torch_header) + 7) / 8 * 8 % 8, 0);
    ml_safetensors *st = ml_safetensors_parse(buf, n, "torch.safetensors");
    ck_assert_msg(st != NULL, "%s", ml_last_error());
    ck_assert_int_eq(ml_safetensors_count(st), 2);
    ck_assert_str_eq(ml_safetensors_name(st, 0), "weight"); /* file order */
    ck_assert_str_eq(ml_safetensors_name(st, 1), "step");
    ck_assert_ptr_null(ml_safetensors_name(st, 2));
    ck_assert_int_eq(ml_safetensors_meta_count(st), 1);
    ck_assert_str_eq(ml_safetensors_meta(st, "format"), "pt");
    ck_assert_ptr_null(ml_safetensors_meta(st, "other"));
    ml_tensor *w = ml_safetensors_get(st, "weight");
    ck_assert_ptr_nonnull(w);
    ck_assert(w->dtype == ML_F32 && w->ndim == 2 && w->shape[0] == 2 && w->shape[1] == 2);
    float expect[4] = {1, 2, 3, -0.5f};
    ck_assert_mem_eq(ml_f32(w), expect, sizeof expect);
    ml_tensor *s = ml_safetensors_get(st, "step");
    ck_assert(s->dtype == ML_I32 && s->ndim == 1 && ml_i32(s)[0] == 5);
    ck_assert_ptr_null(ml_safetensors_get(st, "nope"));
    ck_assert_int_eq(ml_last_status(), ML_ERR_INDEX);
    ml_release(w);
    ml_release(s);
    ml_safetensors_close(st);
}
END_TEST

/* mechlab's writer produces the same bytes as the reference for the same content. */
START_TEST(test_st_writes_torch_bytes) {
    make_tmpdir();
    unsigned char ref[512];
    size_t n = torch_file(ref);
    int64_t s22[2] = {2, 2}, s1[1] = {1};
    float wd[4] = {1, 2, 3, -0.5f};
    int32_t sd[1] = {5};
    ml_tensor *w = ml_from_f32(2, s22, wd), *s = ml_from_i32(1, s1, sd);
    /* Given in the other order: the writer sorts like the reference. */
    const char *names[2] = {"step", "weight"};
    ml_tensor *ts[2] = {s, w};
    const char *mk[1] = {"format"}, *mv[1] = {"pt"};
    ck_assert_int_eq(ml_safetensors_write(tpath("m.safetensors"), 2, names, ts, 1, mk, mv), ML_OK);
    size_t got = 0;
    char *bytes = read_all(tpath("m.safetensors"), &got);
    ck_assert_uint_eq(got, n);
    ck_assert_mem_eq(bytes, ref, n);
    free(bytes);
    ml_release(w);
    ml_release(s);
    remove_tmpdir();
}
END_TEST

START_TEST(test_st_roundtrip) {
    make_tmpdir();
    /* Bit patterns that must survive: NaN with payload, -0, infinities, a subnormal. */
    uint32_t bits[6] = {0x7fc12345u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x00000001u, 0x3eaaaaabu};
    float fd[6];
    memcpy(fd, bits, sizeof fd);
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s05[2] = {0, 5};
    ml_tensor *a = ml_from_f32(2, s23, fd);
    int32_t id[4] = {INT32_MIN, -1, 0, INT32_MAX};
    ml_tensor *b = ml_from_i32(1, s4, id);
    ml_tensor *c = ml_scalar(ML_F32, 2.5);           /* 0-dim */
    ml_tensor *e = ml_zeros(ML_F32, 2, s05);         /* empty */
    ml_tensor *at = ml_transpose(a, 0, 1);           /* non-contiguous view [3,2] */
    const char *names[5] = {"layers.0.w", "ids", "scalar", "empty", "layers.0.w.T"};
    ml_tensor *ts[5] = {a, b, c, e, at};
    const char *mk[3] = {"config", "step", "unicode"};
    const char *mv[3] = {"{\"d_model\": 64, \"note\": \"a,b\\n\"}", "1234", "caf\xc3\xa9 \xe2\x82\xac"};
    const char *path = tpath("ck.safetensors");
    ck_assert_int_eq(ml_safetensors_write(path, 5, names, ts, 3, mk, mv), ML_OK);
    ck_assert_int_eq(count_files(".tmp."), 0);
    ml_safetensors *st = ml_safetensors_open(path);
    ck_assert_msg(st != NULL, "%s", ml_last_error());
    ck_assert_int_eq(ml_safetensors_count(st), 5);
    for (int i = 0; i < 5; i++) {
        ml_tensor *r = ml_safetensors_get(st, names[i]);
        ck_assert_msg(r != NULL, "%s", names[i]);
        ml_tensor *ref = ml_contiguous(ts[i]);
        ck_assert_int_eq(r->dtype, ref->dtype);
        ck_assert_int_eq(r->ndim, ref->ndim);
        ck_assert_mem_eq(r->shape, ref->shape, (size_t)r->ndim * sizeof(int64_t));
        size_t nb = (size_t)ml_numel(r) * 4;
        if (nb) ck_assert_mem_eq(r->storage->data, (char *)ref->storage->data + ref->offset * 4, nb);
        ml_dtype dt;
        int nd;
        int64_t sh[ML_MAX_DIMS];
        ck_assert_int_eq(ml_safetensors_info(st, names[i], &dt, &nd, sh), ML_OK);
        ck_assert(dt == ref->dtype && nd == ref->ndim);
        ml_release(ref);
        ml_release(r);
    }
    ck_assert_int_eq(ml_safetensors_meta_count(st), 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_str_eq(ml_safetensors_meta_key(st, i), mk[i]);
        ck_assert_str_eq(ml_safetensors_meta_value(st, i), mv[i]);
        ck_assert_str_eq(ml_safetensors_meta(st, mk[i]), mv[i]);
    }
    /* read_into: into a strided view; a mismatch is refused and leaves the target as it was. */
    ml_tensor *dst = ml_zeros(ML_F32, 2, s23);
    ml_tensor *dview = ml_transpose(dst, 0, 1);
    ck_assert_int_eq(ml_safetensors_read_into(st, "layers.0.w.T", dview), ML_OK);
    ck_assert_mem_eq(ml_f32(dst), fd, sizeof fd);
    float before[6];
    memcpy(before, ml_f32(dst), sizeof before);
    ck_assert_int_eq(ml_safetensors_read_into(st, "ids", dst), ML_ERR_SHAPE);
    ck_assert(strstr(ml_last_error(), "'ids'"));
    ck_assert_int_eq(ml_safetensors_read_into(st, "layers.0.w.T", dst), ML_ERR_SHAPE);
    ck_assert_int_eq(ml_safetensors_read_into(st, "absent", dst), ML_ERR_INDEX);
    ck_assert_mem_eq(ml_f32(dst), before, sizeof before);
    ml_release(dview);
    ml_release(dst);
    ml_safetensors_close(st);
    /* Overwriting: the new content replaces the old atomically. */
    ck_assert_int_eq(ml_safetensors_write(path, 1, names + 1, ts + 1, 0, NULL, NULL), ML_OK);
    st = ml_safetensors_open(path);
    ck_assert_ptr_nonnull(st);
    ck_assert_int_eq(ml_safetensors_count(st), 1);
    ck_assert_int_eq(ml_safetensors_meta_count(st), 0);
    ml_safetensors_close(st);
    ck_assert_int_eq(count_files(".tmp."), 0);
    ml_release(a);
    ml_release(b);
    ml_release(c);
    ml_release(e);
    ml_release(at);
    remove_tmpdir();
}
END_TEST

START_TEST(test_st_write_refusals) {
    make_tmpdir();
    const char *path = tpath("keep.safetensors");
    write_raw(path, "old", 3);
    int64_t s2[1] = {2};
    ml_tensor *t = ml_zeros(ML_F32, 1, s2);
    ml_tensor *ts[2] = {t, t};
    const char *dup[2] = {"x", "x"}, *meta_name[1] = {"__metadata__"}, *empty[1] = {""};
    ck_assert_int_eq(ml_safetensors_write(path, 2, dup, ts, 0, NULL, NULL), ML_ERR_ARG);
    ck_assert(strstr(ml_last_error(), "appears twice"));
    ck_assert_int_eq(ml_safetensors_write(path, 1, meta_name, ts, 0, NULL, NULL), ML_ERR_ARG);
    ck_assert_int_eq(ml_safetensors_write(path, 1, empty, ts, 0, NULL, NULL), ML_ERR_ARG);
    const char *ok[1] = {"ok"}, *mk[2] = {"a", "a"}, *mv[2] = {"1", "2"};
    ck_assert_int_eq(ml_safetensors_write(path, 1, ok, ts, 2, mk, mv), ML_ERR_ARG);
    const char *badutf[1] = {"\xff"};
    ck_assert_int_eq(ml_safetensors_write(path, 1, badutf, ts, 0, NULL, NULL), ML_ERR_FORMAT);
    /* Into a directory that does not exist: an error, nothing created anywhere. */
    char missing[256];
    snprintf(missing, sizeof missing, "%s/no/such/dir/x.safetensors", tdir);
    ck_assert_int_eq(ml_safetensors_write(missing, 1, ok, ts, 0, NULL, NULL), ML_ERR_IO);
    /* Over a directory: the rename fails after the data was written; the temp file goes away. */
    mkdir(tpath("adir"), 0755);
    ck_assert_int_eq(ml_safetensors_write(tpath("adir"), 1, ok, ts, 0, NULL, NULL), ML_ERR_IO);
    ck_assert_int_eq(count_files(".tmp."), 0);
    size_t n;
    char *old = read_all(path, &n);
    ck_assert_uint_eq(n, 3);
    ck_assert_mem_eq(old, "old", 3);
    free(old);
    ml_release(t);
    remove_tmpdir();
}
END_TEST

/* Builds a file from a header string and `data_len` data bytes (pattern-filled). */
static size_t build(unsigned char *out, size_t cap, const char *header, size_t data_len) {
    size_t hl = strlen(header);
    ck_assert(8 + hl + data_len <= cap);
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(out + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) out[8 + hl + i] = (unsigned char)(i * 7 + 1);
    return 8 + hl + data_len;
}

/* Expects refusal of the bytes with a message containing `part`. */
static void refuse(const unsigned char *b, size_t n, const char *part) {
    ml_safetensors *st = ml_safetensors_parse(b, n, "bad.safetensors");
    ck_assert_msg(st == NULL, "accepted a file that should fail with '%s'", part);
    ck_assert_int_eq(ml_last_status(), ML_ERR_FORMAT);
    ck_assert_msg(strstr(ml_last_error(), part) != NULL, "message '%s' lacks '%s'", ml_last_error(), part);
    ck_assert_msg(strncmp(ml_last_error(), "load: bad.safetensors: ", 23) == 0, "message '%s'", ml_last_error());
}

static void refuse_header(const char *header, size_t data_len, const char *part) {
    unsigned char buf[4096];
    size_t n = build(buf, sizeof buf, header, data_len);
    refuse(buf, n, part);
}

START_TEST(test_st_refusals) {
    unsigned char buf[4096];
    /* The reference accepts this one; each variant below breaks one rule. */
    const char *good = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"I32\",\"shape\":[1,1],\"data_offsets\":[8,12]}}";
    size_t n = build(buf, sizeof buf, good, 12);
    ml_safetensors *st = ml_safetensors_parse(buf, n, "good");
    ck_assert_msg(st != NULL, "%s", ml_last_error());
    ml_safetensors_close(st);
    /* Truncated anywhere: every proper prefix is refused. */
    for (size_t k = 0; k < n; k++) {
        st = ml_safetensors_parse(buf, k, "cut");
        ck_assert_msg(st == NULL, "prefix of %zu bytes accepted", k);
        ck_assert_int_eq(ml_last_status(), ML_ERR_FORMAT);
    }
    refuse(buf, 5, "too few");
    refuse(buf, n - 1, "exceed the data size 11");
    refuse(buf, 30, "exceeds the");
    /* Header length beyond the 100 MB cap, in a tiny file. */
    unsigned char big[16] = {0x01, 0xe1, 0xf5, 0x05, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    refuse(big, sizeof big, "exceeds the limit");
    unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    refuse(huge, sizeof huge, "exceeds the limit");
    /* Offsets and sizes. */
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8,
                  "tensor 'a' data_offsets [0, 16] exceed the data size 8");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                  12, "overlap");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "unused bytes");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, "data section has 8 bytes");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "shape [3] F32");
    refuse_header("{\"a\":{\"dtype\":\"I32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 20, "needs");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, "end < begin");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8, "data_offsets [begin, end]");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,-4]}}", 8, "data_offsets [begin, end]");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.0]}}", 4, "data_offsets [begin, end]");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
                  "more than 2^63");
    /* Types and fields. */
    refuse_header("{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "dtype 'F16'");
    refuse_header("{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype 'f32'");
    refuse_header("{\"a\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "non-string dtype");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "shape entry 0");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "shape entry 0");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,4]}}", 4, "not an array");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
                  "9 dimensions");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "lacks 'shape'");
    refuse_header("{\"a\":[1]}", 0, "expected an object");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                  8, "duplicate key \"a\"");
    refuse_header("{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "0 byte");
    refuse_header("{\"__metadata__\":{\"step\":12}}", 0, "expected a string");
    refuse_header("{\"__metadata__\":[\"x\"]}", 0, "__metadata__ is a array");
    refuse_header("[]", 0, "does not start with '{'");
    refuse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, "malformed header");
    refuse_header("{\"a\":\"\\q\"}", 0, "bad escape");
    refuse_header("{} x", 0, "trailing characters");
    /* Extra fields in an entry are ignored, like the reference; an empty file of tensors is fine. */
    n = build(buf, sizeof buf, "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"extra\":1}}", 4);
    st = ml_safetensors_parse(buf, n, "extra");
    ck_assert_msg(st != NULL, "%s", ml_last_error());
    ml_safetensors_close(st);
    n = build(buf, sizeof buf, "{}      ", 0);
    st = ml_safetensors_parse(buf, n, "empty");
    ck_assert_ptr_nonnull(st);
    ck_assert_int_eq(ml_safetensors_count(st), 0);
    ml_safetensors_close(st);
}
END_TEST

/* The same checks through real files, including the message format and files that are not
 * there or not regular. */
START_TEST(test_st_open_files) {
    make_tmpdir();
    unsigned char buf[512];
    size_t n = torch_file(buf);
    const char *p = tpath("t.safetensors");
    write_raw(p, buf, n - 4); /* cut into the data */
    ml_safetensors *st = ml_safetensors_open(p);
    ck_assert_ptr_null(st);
    char expect[512];
    snprintf(expect, sizeof expect, "load: %s: tensor 'step' data_offsets [16, 20] exceed the data size 16", p);
    ck_assert_msg(strncmp(ml_last_error(), expect, strlen(expect)) == 0, "got '%s'", ml_last_error());
    /* Oversized header length: refused before reading the file. */
    unsigned char big[16] = {0x01, 0xe1, 0xf5, 0x05, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    write_raw(p, big, sizeof big);
    ck_assert_ptr_null(ml_safetensors_open(p));
    ck_assert(strstr(ml_last_error(), "exceeds the limit of 100000000 bytes"));
    write_raw(p, buf, n);
    st = ml_safetensors_open(p);
    ck_assert_ptr_nonnull(st);
    ml_safetensors_close(st);
    ck_assert_ptr_null(ml_safetensors_open(tpath("missing.safetensors")));
    ck_assert_int_eq(ml_last_status(), ML_ERR_IO);
    ck_assert_ptr_null(ml_safetensors_open(tdir));
    ck_assert_int_eq(ml_last_status(), ML_ERR_IO);
    write_raw(p, "", 0);
    ck_assert_ptr_null(ml_safetensors_open(p));
    ck_assert_int_eq(ml_last_status(), ML_ERR_FORMAT);
    remove_tmpdir();
}
END_TEST

/* Random damage to a valid file never crashes the reader (run under the sanitizers). */
START_TEST(test_st_fuzz) {
    unsigned char ref[512], buf[512];
    size_t n = torch_file(ref);
    unsigned seed = 7;
    for (int t = 0; t < 20000; t++) {
        memcpy(buf, ref, n);
        int hits = 1 + t % 4;
        for (int j = 0; j < hits; j++) {
            seed = seed * 1103515245u + 12345u;
            size_t k = (seed >> 8) % n;
            seed = seed * 1103515245u + 12345u;
            buf[k] = (unsigned char)(seed >> 16);
        }
        ml_safetensors *st = ml_safetensors_parse(buf, n, "fuzz");
        if (st) {
            for (int i = 0; i < ml_safetensors_count(st); i++) {
                ml_tensor *x = ml_safetensors_get(st, ml_safetensors_name(st, i));
                ck_assert_ptr_nonnull(x);
                ml_release(x);
            }
            ml_safetensors_close(st);
        }
    }
}
END_TEST

/* ------------------------------------------------------------------ atomic writes, CSV */

START_TEST(test_atomic_write) {
    make_tmpdir();
    const char *p = tpath("manifest.json");
    ck_assert_int_eq(ml_write_file_atomic(p, "{\"a\":1}\n", 8), ML_OK);
    size_t n;
    char *s = read_all(p, &n);
    ck_assert_str_eq(s, "{\"a\":1}\n");
    free(s);
    ck_assert_int_eq(ml_write_file_atomic(p, "{}", 2), ML_OK); /* replaces */
    s = read_all(p, &n);
    ck_assert_str_eq(s, "{}");
    free(s);
    ck_assert_int_eq(ml_write_file_atomic(p, NULL, 0), ML_OK); /* empty file */
    s = read_all(p, &n);
    ck_assert_uint_eq(n, 0);
    free(s);
    ck_assert_int_eq(ml_write_file_atomic(p, "keep", 4), ML_OK);
    /* Failures: missing directory, target is a directory, empty name. The old file survives. */
    char missing[256];
    snprintf(missing, sizeof missing, "%s/nodir/manifest.json", tdir);
    ck_assert_int_eq(ml_write_file_atomic(missing, "x", 1), ML_ERR_IO);
    ck_assert(strstr(ml_last_error(), "nodir"));
    mkdir(tpath("d"), 0755);
    ck_assert_int_eq(ml_write_file_atomic(tpath("d"), "x", 1), ML_ERR_IO);
    ck_assert_int_eq(ml_write_file_atomic("", "x", 1), ML_ERR_ARG);
    s = read_all(p, &n);
    ck_assert_str_eq(s, "keep");
    free(s);
    /* A writer that dies half-way never touches the target. */
    pid_t pid = fork();
    if (pid == 0) {
        ml_atomic_file *f = ml_atomic_open(p);
        ml_atomic_write(f, "half", 4);
        _exit(0);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
    }
    s = read_all(p, &n);
    ck_assert_str_eq(s, "keep");
    free(s);
    /* An aborted write removes its temporary file. */
    ml_atomic_file *f = ml_atomic_open(p);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ml_atomic_write(f, "zzz", 3), ML_OK);
    ck_assert_int_eq(count_files(".tmp."), 2); /* this one and the dead writer's */
    ml_atomic_abort(f);
    ck_assert_int_eq(count_files(".tmp."), 1);
    s = read_all(p, &n);
    ck_assert_str_eq(s, "keep");
    free(s);
    remove_tmpdir();
}
END_TEST

START_TEST(test_format_double) {
    char b[32];
    ck_assert_str_eq(ml_format_double(b, 0.1), "0.1");
    ck_assert_str_eq(ml_format_double(b, 1.0 / 3), "0.3333333333333333");
    ck_assert_str_eq(ml_format_double(b, 100), "100");
    ck_assert_str_eq(ml_format_double(b, 1e15), "1000000000000000");
    ck_assert_str_eq(ml_format_double(b, 1e16), "1e+16");
    ck_assert_str_eq(ml_format_double(b, 1234.5), "1234.5");
    ck_assert_str_eq(ml_format_double(b, 0.001), "0.001");
    ck_assert_str_eq(ml_format_double(b, 50016), "50016");
    ck_assert_str_eq(ml_format_double(b, -1.5e-7), "-1.5e-07");
    ck_assert_str_eq(ml_format_double(b, (float)0.95), "0.949999988079071");
    ck_assert_str_eq(ml_format_double(b, NAN), "nan");
    ck_assert_str_eq(ml_format_double(b, INFINITY), "inf");
    ck_assert_str_eq(ml_format_double(b, -INFINITY), "-inf");
    char q[64];
    ck_assert_uint_eq(ml_csv_quote(q, sizeof q, "plain"), 5);
    ck_assert_str_eq(q, "plain");
    ml_csv_quote(q, sizeof q, "a,b");
    ck_assert_str_eq(q, "\"a,b\"");
    ml_csv_quote(q, sizeof q, "say \"hi\"");
    ck_assert_str_eq(q, "\"say \"\"hi\"\"\"");
    ml_csv_quote(q, sizeof q, "two\nlines");
    ck_assert_str_eq(q, "\"two\nlines\"");
    ml_csv_quote(q, sizeof q, " pad");
    ck_assert_str_eq(q, "\" pad\"");
    ck_assert_uint_eq(ml_csv_quote(q, 4, "a,b"), 5); /* truncated but terminated */
    ck_assert_str_eq(q, "\"a,");
}
END_TEST

START_TEST(test_metrics_csv) {
    make_tmpdir();
    const char *p = tpath("metrics.csv");
    ml_metrics *m = ml_metrics_open(p);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(ml_metrics_append(m, 0, "train", "loss", 9.0109), ML_OK);
    ck_assert_int_eq(ml_metrics_append(m, 100, "test", "accuracy", 0.5), ML_OK);
    ck_assert_int_eq(ml_metrics_append(m, 100, "test,ood", "p(\"answer\")", NAN), ML_OK);
    ck_assert_int_eq(ml_metrics_append(m, 100, "test", NULL, 1), ML_ERR_ARG);
    ck_assert_int_eq(ml_metrics_close(m), ML_OK);
    size_t n;
    char *s = read_all(p, &n);
    ck_assert_str_eq(s, "step,split,metric,value\n0,train,loss,9.0109\n100,test,accuracy,0.5\n"
                        "100,\"test,ood\",\"p(\"\"answer\"\")\",nan\n");
    free(s);
    /* Resuming appends without a second header. */
    m = ml_metrics_open(p);
    ck_assert_int_eq(ml_metrics_append(m, 200, "train", "loss", 0.25), ML_OK);
    ml_metrics_close(m);
    s = read_all(p, &n);
    ck_assert(strstr(s, "nan\n200,train,loss,0.25\n") != NULL);
    ck_assert_ptr_null(strstr(s + 1, "step,split"));
    free(s);
    /* A row cut off by a crash gets terminated before new rows. */
    write_raw(p, "step,split,metric,value\n5,train,lo", 34);
    m = ml_metrics_open(p);
    ck_assert_int_eq(ml_metrics_append(m, 6, "train", "loss", 1), ML_OK);
    ml_metrics_close(m);
    s = read_all(p, &n);
    ck_assert_str_eq(s, "step,split,metric,value\n5,train,lo\n6,train,loss,1\n");
    free(s);
    /* Another file is not appended to. */
    write_raw(p, "a,b\n1,2\n", 8);
    ck_assert_ptr_null(ml_metrics_open(p));
    ck_assert_int_eq(ml_last_status(), ML_ERR_FORMAT);
    s = read_all(p, &n);
    ck_assert_str_eq(s, "a,b\n1,2\n");
    free(s);
    char missing[256];
    snprintf(missing, sizeof missing, "%s/nodir/metrics.csv", tdir);
    ck_assert_ptr_null(ml_metrics_open(missing));
    ck_assert_int_eq(ml_last_status(), ML_ERR_IO);
    remove_tmpdir();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("io");
    TCase *j = tcase_create("json");
    tcase_add_test(j, test_json_roundtrip);
    tcase_add_test(j, test_json_access);
    tcase_add_test(j, test_json_strings);
    tcase_add_test(j, test_json_numbers);
    tcase_add_test(j, test_json_malformed);
    tcase_add_test(j, test_json_limits);
    tcase_add_test(j, test_json_fuzz);
    tcase_add_test(j, test_json_build);
    suite_add_tcase(s, j);
    TCase *t = tcase_create("safetensors");
    tcase_add_test(t, test_st_reads_torch_file);
    tcase_add_test(t, test_st_writes_torch_bytes);
    tcase_add_test(t, test_st_roundtrip);
    tcase_add_test(t, test_st_write_refusals);
    tcase_add_test(t, test_st_refusals);
    tcase_add_test(t, test_st_open_files);
    tcase_add_test(t, test_st_fuzz);
    suite_add_tcase(s, t);
    TCase *c = tcase_create("files");
    tcase_add_test(c, test_atomic_write);
    tcase_add_test(c, test_format_double);
    tcase_add_test(c, test_metrics_csv);
    suite_add_tcase(s, c);
    return s;
}

int main(void) { return ml_test_run(suite()); }
