/* Free position names (docs/tasks.md, "Position names"): a custom task's own names after the
 * paper's eight, the dataset's per-task stride, the checks on names and documents. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/task.h"
#include "testutil.h"

static ml_custom_config config(const char *const *names, int n) {
    ml_custom_config c = {.vocab = 8, .positions = 1u << ML_POS_BOS | 1u << ML_POS_DIVIDER, .corrupt_lo = -1,
                          .corrupt_hi = -1, .free_positions = names, .n_free_positions = n};
    return c;
}

/* A document of 5 tokens with one readout, positions as given (-1: none). */
static void doc_with(ml_doc *d, int bridge, int hop) {
    ck_assert_int_eq(ml_doc_reserve(d, 5), ML_OK);
    ml_doc_start(d, 5);
    for (int i = 0; i < 5; i++) d->tokens[i] = i + 1;
    d->read_pos[0] = 3, d->read_ans[0] = 5, d->n_reads = 1;
    d->pos[ML_POS_BOS] = 0, d->pos[ML_POS_DIVIDER] = 3;
    d->pos[ML_NPOS] = bridge, d->pos[ML_NPOS + 1] = hop;
}

START_TEST(test_names_and_stride) {
    const char *names[] = {"bridge", "hop"};
    ml_custom_config c = config(names, 2);
    ml_task *t = ml_task_custom(&c, "two_hop", 1);
    ck_assert_msg(t != NULL, "%s", ml_last_error());
    ck_assert_int_eq(ml_task_npos(t), ML_NPOS + 2);
    ck_assert_str_eq(ml_task_pos_name(t, ML_POS_BOS), "bos");
    ck_assert_str_eq(ml_task_pos_name(t, ML_NPOS), "bridge");
    ck_assert_ptr_null(ml_task_pos_name(t, ML_NPOS + 2));
    ck_assert_int_eq(ml_task_pos_index(t, "hop"), ML_NPOS + 1);
    ck_assert_int_eq(ml_task_pos_index(t, "next_key"), ML_POS_NEXT_KEY);
    ck_assert_int_eq(ml_task_pos_index(t, "hops"), -1);
    ck_assert(ml_task_pos_declared(t, ML_NPOS) && ml_task_pos_declared(t, ML_POS_DIVIDER));
    ck_assert(!ml_task_pos_declared(t, ML_POS_QUERY_ITEM) && !ml_task_pos_declared(t, ML_NPOS + 2));

    ml_dataset *ds = ml_dataset_open(t, 2, ML_SPLIT_TRAIN);
    ck_assert_ptr_nonnull(ds);
    ck_assert_int_eq(ml_dataset_npos(ds), ML_NPOS + 2);
    ml_doc d;
    ml_doc_init(&d);
    bool rejected;
    doc_with(&d, 1, 2);
    ck_assert_int_eq(ml_dataset_append(ds, &d, &rejected), ML_OK);
    doc_with(&d, 2, -1);
    ck_assert_int_eq(ml_dataset_append(ds, &d, &rejected), ML_OK);
    ck_assert_int_eq(ml_dataset_positions(ds, 0)[ML_NPOS], 1);
    ck_assert_int_eq(ml_dataset_positions(ds, 1)[ML_NPOS], 2);
    ck_assert_int_eq(ml_dataset_positions(ds, 1)[ML_NPOS + 1], -1);
    ck_assert_int_eq(ml_dataset_positions(ds, 1)[ML_POS_DIVIDER], 3); /* the stride is the task's */
    ml_tensor *p;
    ck_assert_int_eq(ml_dataset_batch_positions(ds, (int64_t[]){1, 0}, 2, &p), ML_OK);
    ck_assert_int_eq(p->shape[1], ML_NPOS + 2);
    ck_assert_int_eq(ml_i32(p)[ML_NPOS + 2 + ML_NPOS + 1], 2); /* row 1 = document 0: hop */
    ml_release(p);
    ml_doc back;
    ml_doc_init(&back);
    ck_assert_int_eq(ml_dataset_get_doc(ds, 0, &back), ML_OK);
    ck_assert_int_eq(back.pos[ML_NPOS + 1], 2);
    char *text = ml_doc_format(t, &back);
    ck_assert_ptr_nonnull(strstr(text, "\n  bridge "));
    ck_assert_ptr_nonnull(strstr(text, "\n  hop "));
    free(text);
    ml_doc_free(&back);
    /* a slot the task does not have, a paper position it does not declare */
    doc_with(&d, 1, 2);
    d.pos[ML_NPOS + 2] = 0;
    ck_assert_int_ne(ml_doc_check(t, &d, 0), ML_OK);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "is not one the task declares"));
    doc_with(&d, 9, 2);
    ck_assert_int_ne(ml_doc_check(t, &d, 0), ML_OK);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "position 'bridge' = 9 is outside the document"));
    ml_doc_free(&d);
    ml_dataset_free(ds);
    ml_task_release(t);

    ml_task *ar = ml_task_preset("ar_32", 1);
    ck_assert_int_eq(ml_task_npos(ar), ML_NPOS);
    ck_assert_int_eq(ml_task_pos_index(ar, "bridge"), -1);
    ml_task_release(ar);
}
END_TEST

static void refused(const char *const *names, int n, const char *why) {
    ml_custom_config c = config(names, n);
    ml_task *t = ml_task_custom(&c, "bad", 1);
    ck_assert_msg(t == NULL, "expected the names to be refused (%s)", why);
    ck_assert_msg(strstr(ml_last_error(), why) != NULL, "'%s' does not say '%s'", ml_last_error(), why);
}

START_TEST(test_bad_names) {
    refused((const char *[]){"bridge", "bridge"}, 2, "lists 'bridge' twice");
    refused((const char *[]){"divider"}, 1, "clashes with the paper's position");
    refused((const char *[]){"2hop"}, 1, "expected an identifier");
    refused((const char *[]){"a-b"}, 1, "expected an identifier");
    refused((const char *[]){""}, 1, "expected an identifier");
    refused((const char *[]){"abcdefghijabcdefghijabcdefghijab"}, 1, "of 1..31 bytes");
    refused((const char *[]){"all_target_items_orig"}, 1, "is a document field");
    static char buf[ML_MAX_POS][8];
    const char *many[ML_MAX_POS];
    for (int i = 0; i < ML_MAX_POS; i++) snprintf(buf[i], sizeof buf[i], "p%d", i), many[i] = buf[i];
    ml_custom_config c = config(many, ML_MAX_POS - ML_NPOS);
    ml_task *t = ml_task_custom(&c, "full", 1);
    ck_assert_msg(t != NULL, "%s", ml_last_error());
    ck_assert_int_eq(ml_task_npos(t), ML_MAX_POS);
    ck_assert_str_eq(ml_task_pos_name(t, ML_MAX_POS - 1), "p55");
    ml_task_release(t);
    refused(many, ML_MAX_POS - ML_NPOS + 1, "at most 56 (ML_MAX_POS = 64 slots in all)");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("task_positions");
    TCase *tc = tcase_create("names");
    tcase_add_test(tc, test_names_and_stride);
    tcase_add_test(tc, test_bad_names);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ml_test_run(suite()); }
