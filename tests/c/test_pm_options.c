/* A patching map's rows and readout from its options (src/interp/pm_options.c): per-head sites
 * once per head, the dataset's answer rows, and the checks of rows and targets. */
#include <string.h>

#include "interp/interp.h"
#include "interp/pm_options.h"
#include "tasks/task.h"
#include "testutil.h"

START_TEST(rows_expand_heads) {
    ml_model_config c;
    ml_model_config_defaults(&c, "attention");
    c.d_model = 16, c.n_layers = 1, c.vocab = 8;
    ml_model *m = ml_model_new(&c);
    ck_assert_ptr_nonnull(m);
    int H = (int)ml_mixer_opt(&m->cfg, "n_heads");
    int sites[2] = {ml_test_site_index(m, 0, "mixer.head_z"), ml_test_site_index(m, 0, "mlp_output")};
    ck_assert(ml_site_per_head(m, sites[0]) && !ml_site_per_head(m, sites[1]));
    ck_assert_int_eq(ml_pm_rows(m, sites, 2, NULL, NULL), H + 1);
    int rows[64], heads[64];
    ml_pm_rows(m, sites, 2, rows, heads);
    for (int h = 0; h < H; h++) ck_assert(rows[h] == sites[0] && heads[h] == h);
    ck_assert(rows[H] == sites[1] && heads[H] == -1);
    for (int s = 0; s < m->n_sites; s++) /* a site without a position dimension cannot be a row */
        if (ml_site_pos_dim(m, s) < 0) {
            ck_assert_int_eq(ml_pm_rows(m, &s, 1, NULL, NULL), -1);
            ck_assert(strstr(ml_last_error(), "no position dimension"));
        }
    ml_model_free(m);
}
END_TEST

START_TEST(readout_from_the_dataset) {
    ml_ar_config c = ml_ar_config_default();
    c.num_kv = 64, c.min_length = c.max_length = 8;
    ml_task *t = ml_task_ar(&c, 42);
    ml_dataset *ds = ml_dataset_new(t, 4, 1, ML_SPLIT_TEST);
    ck_assert_ptr_nonnull(ds);
    ml_tensor *tok, *tg, *pos;
    ck_assert(ml_dataset_batch_range(ds, 1, 2, &tok, &tg, &pos) == ML_OK);
    int32_t rows[2], targets[2];
    ck_assert(ml_pm_dataset_rows(ds, 1, tok, rows) == ML_OK);
    for (int b = 0; b < 2; b++) { /* the answer's row: the one whose next token is supervised */
        ck_assert(ml_get_flat(tg, b * tok->shape[1] + rows[b]) >= 0);
        ck_assert(ml_pm_check_readout(tok, 68, rows, targets, false) == ML_OK);
        ck_assert_int_eq(targets[b], (int32_t)ml_get_flat(tok, b * tok->shape[1] + rows[b] + 1));
    }
    ck_assert(ml_pm_dataset_rows(ds, 0, tok, rows) != ML_OK); /* not documents 0 and 1 */
    ck_assert(strstr(ml_last_error(), "is not document 0"));
    ck_assert(ml_pm_dataset_rows(ds, 3, tok, rows) != ML_OK);
    ck_assert(strstr(ml_last_error(), "option 'first'"));
    rows[0] = (int32_t)tok->shape[1] - 1; /* the last row has no next token */
    ck_assert(ml_pm_check_readout(tok, 68, rows, targets, false) != ML_OK);
    targets[0] = 68, rows[0] = 0;
    ck_assert(ml_pm_check_readout(tok, 68, rows, targets, true) != ML_OK);
    ck_assert(strstr(ml_last_error(), "token ids in [0, 68)"));
    ml_release(tok), ml_release(tg), ml_release(pos);
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("pm_options");
    TCase *tc = tcase_create("pm_options");
    tcase_add_test(tc, rows_expand_heads);
    tcase_add_test(tc, readout_from_the_dataset);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ml_test_run(suite()); }
