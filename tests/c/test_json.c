/* The C JSON reader (io/json.c) against Nicolas Seriot's JSONTestSuite, kept beside the checkout
 * in ../shared/fixtures/JSONTestSuite (CI keeps ../shared beside the clone; a missing suite fails,
 * never skips): every y_ file is accepted except the two duplicate-key refusals of I-JSON
 * (RFC 7493), every n_ file is refused, and every i_ file ends either way (Check's timeout
 * catches a hang, fork mode a crash). tests/lua/test_json_conformance.lua runs the same files
 * through mech.json_decode. Also the writer's rule for NaN and infinities: null, as json.lua. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "testutil.h"

#define SUITE_DIR ML_FIXTURES_DIR "/../../../shared/fixtures/JSONTestSuite/test_parsing"

static const char *const duplicate_keys[] = {"y_object_duplicated_key.json", "y_object_duplicated_key_and_value.json",
                                             NULL};

static bool is_duplicate_case(const char *name) {
    for (int i = 0; duplicate_keys[i]; i++)
        if (!strcmp(name, duplicate_keys[i])) return true;
    return false;
}

/* The whole file, malloc'd (length in *len). */
static char *read_case(const char *name, size_t *len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SUITE_DIR, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    ck_assert(n >= 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Parses every case whose name starts with prefix; counts what was accepted and checks each. */
static int run_cases(char prefix, int *accepted) {
    DIR *d = opendir(SUITE_DIR);
    ck_assert_msg(d != NULL, "JSONTestSuite not found at %s: ../shared/fixtures must sit beside the checkout", SUITE_DIR);
    int n = 0;
    *accepted = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name;
        size_t nl = strlen(name);
        if (name[0] != prefix || name[1] != '_' || nl < 6 || strcmp(name + nl - 5, ".json")) continue;
        size_t len, off = 0;
        char *text = read_case(name, &len);
        ml_json *v = ml_json_parse(text, len, &off);
        n++;
        if (v) {
            (*accepted)++;
            ck_assert_msg(prefix != 'n', "accepted the invalid %s", name);
            ck_assert_msg(!is_duplicate_case(name), "accepted %s, which repeats a key", name);
        } else {
            ck_assert_msg(prefix != 'y' || is_duplicate_case(name), "refused the valid %s: %s", name, ml_last_error());
            ck_assert_msg(!strncmp(ml_last_error(), "json: ", 6), "%s: message '%s'", name, ml_last_error());
            ck_assert_msg(off <= len, "%s: error offset %zu beyond %zu bytes", name, off, len);
            if (is_duplicate_case(name)) ck_assert_ptr_nonnull(strstr(ml_last_error(), "duplicate key"));
            ml_clear_error();
        }
        ml_json_free(v);
        free(text);
    }
    closedir(d);
    return n;
}

START_TEST(test_suite_y) {
    int accepted, n = run_cases('y', &accepted);
    ck_assert_int_eq(n, 95);
    ck_assert_int_eq(accepted, 93);
}
END_TEST

START_TEST(test_suite_n) {
    int accepted, n = run_cases('n', &accepted);
    ck_assert_int_eq(n, 188);
    ck_assert_int_eq(accepted, 0);
}
END_TEST

START_TEST(test_suite_i) {
    int accepted, n = run_cases('i', &accepted);
    ck_assert_int_eq(n, 35);
    ck_assert(accepted >= 0 && accepted <= n);
}
END_TEST

/* NaN and infinities have no JSON form: both writers write null (docs/ARCHITECTURE.md, "JSON"). */
START_TEST(test_nonfinite_written_null) {
    ml_json *o = ml_json_object();
    ck_assert_int_eq(ml_json_set(o, "loss", ml_json_number(NAN)), ML_OK);
    ck_assert_int_eq(ml_json_set(o, "hi", ml_json_number(INFINITY)), ML_OK);
    ck_assert_int_eq(ml_json_set(o, "lo", ml_json_number(-INFINITY)), ML_OK);
    ck_assert_int_eq(ml_json_set(o, "x", ml_json_number(0.25)), ML_OK);
    char *s = ml_json_write(o, 0, NULL);
    ck_assert_str_eq(s, "{\"loss\":null,\"hi\":null,\"lo\":null,\"x\":0.25}");
    ml_json *back = ml_json_parse(s, strlen(s), NULL);
    ck_assert_int_eq(ml_json_get(back, "loss")->type, ML_JSON_NULL);
    ml_json_free(back);
    free(s);
    ml_json_free(o);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("json");
    TCase *c = tcase_create("JSONTestSuite");
    tcase_add_test(c, test_suite_y);
    tcase_add_test(c, test_suite_n);
    tcase_add_test(c, test_suite_i);
    tcase_add_test(c, test_nonfinite_written_null);
    suite_add_tcase(s, c);
    return s;
}

int main(void) { return ml_test_run(suite()); }
