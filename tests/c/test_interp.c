/* Interventions (src/interp): the invariants of patching, the fast path against the full forward
 * with a hook, the metric definitions on hand-computed cases, the corruption rule, the evaluator's
 * names, and conv surgery. Small models and a small AR task keep it fast. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp/interp.h"
#include "tasks/task.h"
#include "testutil.h"

static ml_task *small_ar(void) {
    ml_ar_config c = ml_ar_config_default();
    c.num_kv = 64, c.min_length = c.max_length = 8; /* V = 68, documents of 13 tokens */
    ml_task *t = ml_task_ar(&c, 42);
    ck_assert_msg(t != NULL, "%s", ml_last_error());
    return t;
}

/* A 2-layer D = 16 model whose weights are moved off their init (so nothing is accidentally 0). */
static ml_model *tiny(const char *arch, int vocab, int layers) {
    ml_model_config c;
    ml_model_config_defaults(&c, arch);
    c.d_model = 16, c.n_layers = layers, c.vocab = vocab, c.seed = 7;
    ml_model *m = ml_model_new(&c);
    ck_assert_msg(m != NULL, "%s: %s", arch, ml_last_error());
    ml_rng r;
    ml_rng_init(&r, 3, 0);
    float *w = ml_f32(m->flat);
    for (int64_t i = 0; i < m->n_total; i++) w[i] += (float)(0.05 * ml_rng_normal(&r));
    m->flat->storage->version++;
    return m;
}

static ml_tensor *tokens_of(const ml_dataset *ds, int64_t first, int n) {
    ml_tensor *tok, *tg, *pos;
    ck_assert(ml_dataset_batch_range(ds, first, n, &tok, &tg, &pos) == ML_OK);
    ml_release(tg), ml_release(pos);
    return tok;
}

static ml_tensor **cache_all(ml_model *m, ml_tensor *tok, ml_tensor **hidden) {
    ml_tensor **acts = calloc((size_t)m->n_sites, sizeof *acts);
    ck_assert_msg(ml_run_cache(m, tok, NULL, acts, hidden) == ML_OK, "%s", ml_last_error());
    return acts;
}

static void free_cache(ml_model *m, ml_tensor **acts) {
    for (int i = 0; i < m->n_sites; i++) ml_release(acts[i]);
    free(acts);
}


/* ---------------------------------------------------------------- invariants */

/* A hook that returns nothing (the cache) changes no bit; patching clean into clean changes no
 * bit, at every patchable site, through both paths. */
START_TEST(clean_into_clean) {
    ml_task *t = small_ar();
    ml_dataset *ds = ml_dataset_new(t, 3, 1, ML_SPLIT_TEST);
    for (int a = 0; a < ml_mixer_count(); a++) {
        const char *arch = ml_mixer_at(a)->name;
        ml_model *m = tiny(arch, ml_task_vocab_size(t), 2);
        ml_tensor *tok = tokens_of(ds, 0, 3), *h0 = ml_model_hidden(m, tok, NULL), *h1;
        ml_tensor **acts = cache_all(m, tok, &h1);
        ck_assert_msg(ml_equal(h0, h1), "%s: an observing hook changed the output", arch);
        int32_t pos[3] = {2, 5, 12};
        for (int s = 0; s < m->n_sites; s++) {
            if (ml_site_pos_dim(m, s) < 0) continue;
            ml_patch p = {.site = s, .source = acts[s], .pos = pos};
            ml_tensor *hf = ml_patch_fast(m, acts, &p, NULL), *hr = ml_patch_full(m, tok, &p);
            ck_assert_msg(hf && hr, "%s %s: %s", arch, m->sites[s].name, ml_last_error());
            ck_assert_msg(ml_equal(hf, h0) && ml_equal(hr, h0), "%s blocks.%d.%s: clean into clean changed bits",
                          arch, m->site_layer[s], m->sites[s].name);
            ml_release(hf), ml_release(hr);
        }
        free_cache(m, acts);
        ml_release(tok), ml_release(h0), ml_release(h1);
        ml_model_free(m);
    }
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

/* A resume from resid_mid (an entry of every block with an MLP; Mamba blocks have none) with its
 * cached value reproduces the forward bit for bit, with and without readout rows. */
START_TEST(resid_mid_resume_is_exact) {
    ml_task *t = small_ar();
    ml_dataset *ds = ml_dataset_new(t, 2, 1, ML_SPLIT_TEST);
    for (int a = 0; a < ml_mixer_count(); a++) {
        const char *arch = ml_mixer_at(a)->name;
        ml_model *m = tiny(arch, ml_task_vocab_size(t), 2);
        ml_tensor *tok = tokens_of(ds, 0, 2), *h0;
        ml_tensor **acts = cache_all(m, tok, &h0);
        int64_t B = 2;
        ml_tensor *rows = ml_empty(ML_I32, 1, &B);
        ml_i32(rows)[0] = 3, ml_i32(rows)[1] = 9;
        ml_resume r0 = {.layer = 0, .entry = ML_ENTRY_BLOCK_INPUT, .act = acts[ml_site_lookup(m, 0, "block_input")],
                        .rows = rows};
        ml_tensor *want_rows = ml_model_hidden_resume(m, &r0, NULL);
        ck_assert_msg(want_rows, "%s", ml_last_error());
        for (int l = 0; l < 2; l++) {
            int s = m->layers[l].entry_site[ML_ENTRY_RESID_MID];
            ck_assert_int_eq(s, ml_site_lookup(m, l, "resid_mid"));
            if (ml_mixer_at(a)->mamba_block) {
                ck_assert_int_eq(s, -1);
                continue;
            }
            ck_assert_int_ge(s, 0);
            ml_resume rs = {.layer = l, .entry = ML_ENTRY_RESID_MID, .act = acts[s]};
            ml_tensor *h = ml_model_hidden_resume(m, &rs, NULL);
            ck_assert_msg(h && ml_equal(h, h0), "%s layer %d: resume from resid_mid changed bits", arch, l);
            rs.rows = rows;
            ml_tensor *hr = ml_model_hidden_resume(m, &rs, NULL);
            ck_assert_msg(hr && ml_equal(hr, want_rows), "%s layer %d: resume with rows changed bits", arch, l);
            ml_release(h), ml_release(hr);
        }
        ml_release(want_rows), ml_release(rows), ml_release(tok), ml_release(h0);
        free_cache(m, acts);
        ml_model_free(m);
    }
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

/* The forward from row t (ml_model_hidden_suffix: the interchange's corrupted runs) equals rows
 * t.. of the whole forward bit for bit, for every architecture that has one (the others refuse),
 * from several rows up to the first changed token, with and without readout rows, for B
 * sequences at width D: many rows and few (a linear layer's product gives a row the same bits
 * however many rows come with it, mlk_gemm_nt; a BLAS does not). */
static void suffix_exact(int B, int D) {
    ml_task *t = small_ar();
    int changed = 6;
    ml_dataset *ds = ml_dataset_new(t, B, 1, ML_SPLIT_TEST);
    for (int a = 0; a < ml_mixer_count() * (1 + ML_MIXER_MAX_ALIASES); a++) { /* every name, aliases too */
        const ml_mixer_type *mt = ml_mixer_at(a / (1 + ML_MIXER_MAX_ALIASES));
        int al = a % (1 + ML_MIXER_MAX_ALIASES);
        const char *arch = al ? mt->aliases[al - 1].name : mt->name;
        if (!arch) continue;
        ml_model_config c;
        ml_model_config_defaults(&c, arch);
        c.d_model = D, c.n_layers = 2, c.vocab = ml_task_vocab_size(t), c.seed = 7;
        ml_model *m = ml_model_new(&c);
        ck_assert_msg(m != NULL, "%s: %s", arch, ml_last_error());
        ml_tensor *tok = tokens_of(ds, 0, B), *ctok = ml_clone(tok);
        int64_t L = tok->shape[1], B64 = B;
        for (int b = 0; b < B; b++) /* the corrupted copy differs from row `changed` on */
            ml_i32(ctok)[b * L + changed] = (ml_i32(tok)[b * L + changed] + 1 + b) % c.vocab;
        ml_tensor **pre = cache_all(m, tok, NULL), *emb = ml_model_embed(m, ctok);
        ml_tensor *full = ml_model_hidden(m, ctok, NULL), *rows = ml_empty(ML_I32, 1, &B64);
        int32_t docs[40];
        for (int b = 0; b < B; b++) docs[b] = b;
        for (int t0 = 0; t0 <= changed; t0 += 3) {
            ml_tensor *nw = ml_narrow(ctok, 1, t0, L - t0), *st = ml_contiguous(nw);
            ml_suffix sx = {.t = t0, .pre = pre, .docs = docs};
            ml_tensor *h = ml_model_hidden_suffix(m, st, &sx, NULL, NULL);
            if (!ml_model_can_suffix(m)) {
                ck_assert_msg(!h && strstr(ml_last_error(), "has none"), "%s: a forward from row t without one", arch);
                ml_clear_error();
                ml_release(nw), ml_release(st);
                break;
            }
            ml_tensor *want = ml_narrow(full, 1, t0, L - t0);
            ck_assert_msg(h && ml_equal(h, want), "%s D=%d from row %d: not the whole forward's bits (%s)", arch, D,
                          t0, h ? "" : ml_last_error());
            /* readout rows (relative to t0), the last mixer at those rows only */
            for (int b = 0; b < B; b++) ml_i32(rows)[b] = (int32_t)(b % (L - t0));
            ml_tensor *hr = ml_model_hidden_suffix(m, st, &sx, rows, NULL);
            sx.rows = ml_i32(rows);
            ml_tensor *hs = ml_model_hidden_suffix(m, st, &sx, rows, NULL);
            for (int b = 0; b < B; b++) ml_i32(rows)[b] += t0;
            ml_resume rs = {.layer = 0, .entry = ML_ENTRY_BLOCK_INPUT, .act = emb, .rows = rows};
            ml_tensor *hw = ml_model_hidden_resume(m, &rs, NULL);
            ck_assert_msg(hr && hs && hw, "%s: %s", arch, ml_last_error());
            ck_assert_msg(ml_equal(hr, hw) && ml_equal(hs, hw), "%s D=%d from row %d with readout rows: not the bits",
                          arch, D, t0);
            ml_release(h), ml_release(want), ml_release(hr), ml_release(hs), ml_release(hw), ml_release(nw);
            ml_release(st);
        }
        free_cache(m, pre);
        ml_release(tok), ml_release(ctok), ml_release(emb), ml_release(full), ml_release(rows);
        ml_model_free(m);
    }
    ml_dataset_free(ds);
    ml_task_release(t);
}

START_TEST(suffix_forward_is_exact) {
    suffix_exact(40, 64);
    suffix_exact(3, 16);
}
END_TEST

/* Patching block_input of layer 0 at every position reproduces the source run exactly. */
START_TEST(block_input_all_positions_is_the_source) {
    ml_task *t = small_ar();
    ml_dataset *ds = ml_dataset_new(t, 4, 1, ML_SPLIT_TEST);
    for (int a = 0; a < ml_mixer_count(); a++) {
        const char *arch = ml_mixer_at(a)->name;
        ml_model *m = tiny(arch, ml_task_vocab_size(t), 2);
        ml_tensor *base = tokens_of(ds, 0, 2), *src = tokens_of(ds, 2, 2), *hs;
        ml_tensor **sacts = cache_all(m, src, &hs), **bacts = cache_all(m, base, NULL);
        ml_patch p = {.site = ml_site_lookup(m, 0, "block_input"), .source = sacts[ml_site_lookup(m, 0, "block_input")]};
        ml_tensor *hf = ml_patch_fast(m, bacts, &p, NULL), *hr = ml_patch_full(m, base, &p);
        ck_assert_msg(ml_equal(hf, hs) && ml_equal(hr, hs), "%s: not the source's bits", arch);
        ml_release(hf), ml_release(hr), ml_release(hs), ml_release(base), ml_release(src);
        free_cache(m, sacts), free_cache(m, bacts);
        ml_model_free(m);
    }
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

/* The fast path (resuming at the patched layer) equals the full forward with a hook, bit for bit,
 * at every patchable site of every architecture; with readout rows it equals the full run's rows. */
START_TEST(fast_equals_full) {
    ml_task *t = small_ar();
    ml_dataset *ds = ml_dataset_new(t, 6, 1, ML_SPLIT_TEST);
    ml_rng r;
    ml_rng_init(&r, 11, 0);
    for (int a = 0; a < ml_mixer_count(); a++) {
        const char *arch = ml_mixer_at(a)->name;
        ml_model *m = tiny(arch, ml_task_vocab_size(t), 2);
        ml_tensor *base = tokens_of(ds, 0, 3), *src = tokens_of(ds, 3, 3);
        ml_tensor **sacts = cache_all(m, src, NULL), **bacts = cache_all(m, base, NULL);
        int32_t rows_v[3] = {11, 12, 7};
        ml_tensor *rows = ml_from_i32(1, (int64_t[]){3}, rows_v);
        for (int s = 0; s < m->n_sites; s++) {
            if (ml_site_pos_dim(m, s) < 0) continue;
            int32_t pos[3] = {(int32_t)ml_rng_below(&r, 13), (int32_t)ml_rng_below(&r, 13), 7};
            ml_patch p = {.site = s, .source = sacts[s], .pos = pos};
            ml_tensor *hf = ml_patch_fast(m, bacts, &p, NULL), *hr = ml_patch_full(m, base, &p);
            ck_assert_msg(hf && hr, "%s %s: %s", arch, m->sites[s].name, ml_last_error());
            ck_assert_msg(ml_equal(hf, hr), "%s blocks.%d.%s: fast path differs from the full forward", arch,
                          m->site_layer[s], m->sites[s].name);
            ml_tensor *hrow = ml_patch_fast(m, bacts, &p, rows);
            ck_assert_msg(hrow != NULL, "%s", ml_last_error());
            for (int b = 0; b < 3; b++)
                for (int d = 0; d < 16; d++)
                    ck_assert_float_eq_tol(ml_f32(hrow)[b * 16 + d], ml_f32(hr)[(b * 13 + rows_v[b]) * 16 + d], 1e-5f);
            ml_release(hf), ml_release(hr), ml_release(hrow);
        }
        ml_release(rows), ml_release(base), ml_release(src);
        free_cache(m, sacts), free_cache(m, bacts);
        ml_model_free(m);
    }
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

/* Patching the recurrent state at step p (Mamba's ssm_state, DeltaNet's state) continues the
 * recurrence from the donor's state: with the same tokens from p on (and the short convs made
 * identities), the patched example's later outputs are the donor's. (tests/c/test_mixers.c checks the same through raw hooks.) */
START_TEST(state_patch_continues_recurrence) {
    const char *cases[2][2] = {{"mamba", "mixer.ssm_state"}, {"delta_net", "mixer.state"}};
    for (int a = 0; a < 2; a++) {
        ml_model *m = tiny(cases[a][0], 20, 1);
        /* without short convs: their windows would carry the different prefix past p */
        ck_assert_int_gt(ml_short_conv_edit(m, -1, ML_CONV_IDENTITY, 0), 0);
        int L = 9, p = 4;
        ml_tensor *base = ml_empty(ML_I32, 2, (int64_t[]){1, L}), *src = ml_empty(ML_I32, 2, (int64_t[]){1, L});
        for (int t = 0; t < L; t++) ml_i32(base)[t] = 1 + t % 7, ml_i32(src)[t] = t < p ? 10 + t : 1 + t % 7;
        ml_tensor *hs, **sacts = cache_all(m, src, &hs), **bacts = cache_all(m, base, NULL);
        int s = ml_site_lookup(m, 0, cases[a][1]);
        int32_t pos[1] = {p};
        ml_patch pt = {.site = s, .source = sacts[s], .pos = pos};
        ml_tensor *hf = ml_patch_fast(m, bacts, &pt, NULL), *hb = ml_model_hidden(m, base, NULL);
        ck_assert_msg(hf != NULL, "%s", ml_last_error());
        for (int t = 0; t < L; t++)
            for (int d = 0; d < 16; d++) {
                float v = ml_f32(hf)[t * 16 + d];
                if (t < p) ck_assert_float_eq(v, ml_f32(hb)[t * 16 + d]);
                else ck_assert_float_eq_tol(v, ml_f32(hs)[t * 16 + d], 2e-5f);
            }
        ml_release(hf), ml_release(hb), ml_release(hs), ml_release(base), ml_release(src);
        free_cache(m, sacts), free_cache(m, bacts);
        ml_model_free(m);
    }
}
END_TEST

/* ---------------------------------------------------------------- metric definitions */

START_TEST(kl_div_divides_by_vocab) {
    float c[3] = {0.0f, 1.0f, 2.0f}, x[3] = {2.0f, 0.0f, 1.0f};
    double zc = exp(0) + exp(1) + exp(2), zx = exp(2) + exp(0) + exp(1), kl = 0;
    for (int v = 0; v < 3; v++) {
        double pc = exp(c[v]) / zc, px = exp(x[v]) / zx;
        kl += pc * (log(pc) - log(px));
    }
    ck_assert_close(ml_ic_kl_div(c, x, 3), kl / 3, 1e-6, 1e-5);
    ck_assert_close(ml_ic_kl_div(c, c, 3), 0.0, 1e-7, 0);
}
END_TEST

START_TEST(max_perc_ties) {
    const char *names[3] = {"divider", "query_item", "next_key"};
    double v1[3] = {0.5, 0.5, 0.1};
    ck_assert_int_eq(ml_ic_argmax(v1, names, 3), 1); /* tie: "query_item" > "divider" */
    double v2[3] = {0, 0, 0};
    ck_assert_int_eq(ml_ic_argmax(v2, names, 3), 1); /* (0, "query_item") > (0, "nothing") */
    const char *low[2] = {"divider", "next_key"};     /* both sort before "nothing" */
    ck_assert_int_eq(ml_ic_argmax(v2, low, 2), 2);
    double v3[3] = {-0.2, -0.1, -0.3};
    ck_assert_int_eq(ml_ic_argmax(v3, names, 3), 3); /* only positive restorations count */
    const char *layers[3] = {"0", "1", "10"};
    double v4[3] = {0.3, 0.3, 0.3};
    ck_assert_int_eq(ml_ic_argmax(v4, layers, 3), 2); /* string order, as Python compares str(layer) */
}
END_TEST

START_TEST(attrib_ratio_of_means) {
    /* per-example ratios would give mean(0.1/0.5, 0.5/0.7) = 0.457; the ratio of means is 0.5 */
    double diff[2] = {0.1, 0.5}, orig[2] = {0.6, 0.9}, corr[2] = {0.1, 0.2};
    double md = (diff[0] + diff[1]) / 2, mo = (orig[0] + orig[1]) / 2, mc = (corr[0] + corr[1]) / 2;
    bool pass;
    ck_assert_close(ml_ic_attrib(md, mo, mc, 0.01, &pass), 0.5, 1e-12, 0);
    ck_assert(pass);
    ml_ic_attrib(0.001, 0.205, 0.2, 0.01, &pass);
    ck_assert(!pass);
    ck_assert_close(ml_ic_attrib(0.3, 0.5, 0.4, 0.01, &pass), 3.0, 1e-12, 0); /* not clipped */
}
END_TEST

/* r = U[TS, QS − 2], +1 if r >= orig: uniform over the pool minus the original. */
START_TEST(corruption_rule) {
    ml_rng r;
    ml_rng_init(&r, 42, ML_STREAM_INTERP);
    int counts[16] = {0}, n = 70000;
    for (int i = 0; i < n; i++) {
        int32_t v = ml_ic_corrupt(&r, 3, 10, 5);
        ck_assert(v >= 3 && v <= 10 && v != 5);
        counts[v]++;
    }
    for (int v = 3; v <= 10; v++)
        if (v != 5) ck_assert_msg(abs(counts[v] - n / 7) < n / 70, "token %d drawn %d times", v, counts[v]);
    /* an original outside the pool (AR's value position): the rule never adds 1, so the top key
     * is never drawn (the original's quirk, reproduced) */
    for (int i = 0; i < 2000; i++) ck_assert(ml_ic_corrupt(&r, 3, 10, 4099) <= 9);
}
END_TEST

/* ---------------------------------------------------------------- the evaluator */

static double metric(const ml_metric *v, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i].name, name)) return v[i].value;
    ck_abort_msg("metric %s missing", name);
    return 0;
}

/* The evaluator's runs from the first changed row (groups of at least 40 examples: a batch of 96)
 * against the reference's whole forwards, for attention and Mamba at D = 64. */
START_TEST(evaluator_from_rows_equals_reference) {
    ml_task *t = small_ar();
    ml_dataset *ds = ml_dataset_new(t, 96, 1, ML_SPLIT_TEST);
    for (int a = 0; a < 2; a++) {
        ml_model_config mc;
        ml_model_config_defaults(&mc, a ? "mamba" : "attention");
        mc.d_model = 64, mc.n_layers = 2, mc.vocab = ml_task_vocab_size(t), mc.seed = 9;
        ml_model *m = ml_model_new(&mc);
        ck_assert_msg(m != NULL, "%s", ml_last_error());
        ml_ic_config c;
        ml_ic_config_paper(&c, m, t);
        /* every site, one label type and three positions (the corrupted token and two after it):
         * 40 combinations run from the first changed row (116 with the whole paper set, 4x the time) */
        c.n_label_types = 1, c.n_positions = 3;
        c.positions[0] = ML_POS_QUERY_ITEM_ORIG, c.positions[1] = ML_POS_QUERY_ITEM, c.positions[2] = ML_POS_DIVIDER;
        c.batch = 96;
        ml_ic_result *fast = ml_ic_run(m, ds, 0, 96, &c);
        c.reference = true;
        ml_ic_result *ref = ml_ic_run(m, ds, 0, 96, &c);
        ck_assert_msg(fast && ref, "%s", ml_last_error());
        for (size_t i = 0; i < (size_t)fast->n_combos * 96; i++) {
            ck_assert_float_eq_tol(fast->corrupted_prob[i], ref->corrupted_prob[i], 2e-6f);
            ck_assert_float_eq_tol(fast->restored_prob[i], ref->restored_prob[i], 2e-6f);
            ck_assert_float_eq_tol(fast->restored_logit[i], ref->restored_logit[i], 2e-5f);
            ck_assert_float_eq_tol(fast->kl_div[i], ref->kl_div[i], 1e-7f);
        }
        ml_ic_result_free(fast), ml_ic_result_free(ref);
        ml_model_free(m);
    }
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

START_TEST(evaluator_names_and_reference) {
    ml_task *t = small_ar();
    ml_dataset *ds = ml_dataset_new(t, 24, 1, ML_SPLIT_TEST);
    for (int a = 0; a < 2; a++) {
        ml_model *m = tiny(a ? "mamba" : "attention", ml_task_vocab_size(t), 2);
        ml_ic_config c;
        ml_ic_config_paper(&c, m, t);
        ck_assert_int_eq(c.n_sites, a ? 8 : 12); /* Mamba: the first four components only */
        ck_assert_int_eq(c.n_positions, 6);
        c.batch = 10;
        ml_ic_result *fast = ml_ic_run(m, ds, 0, 24, &c);
        c.reference = true;
        c.batch = 24;
        ml_ic_result *ref = ml_ic_run(m, ds, 0, 24, &c);
        ck_assert_msg(fast && ref, "%s", ml_last_error());
        ck_assert_int_eq(fast->n_combos, c.n_sites * 2 * 6);
        for (size_t i = 0; i < (size_t)fast->n_combos * 24; i++) {
            ck_assert_int_eq(fast->corrupt_token[i], ref->corrupt_token[i]); /* batching does not change draws */
            ck_assert_float_eq_tol(fast->restored_prob[i], ref->restored_prob[i], 2e-5f);
            ck_assert_float_eq_tol(fast->corrupted_prob[i], ref->corrupted_prob[i], 2e-5f);
            ck_assert_float_eq_tol(fast->kl_div[i], ref->kl_div[i], 1e-6f);
        }
        ck_assert(fast->patched_forwards < ref->patched_forwards); /* no-op patches were skipped */
        ml_metric *v;
        int n;
        ck_assert(ml_ic_metrics(m, fast, &v, &n) == ML_OK);
        metric(v, n, "1.KEY.query_item_orig.target_item_orig.block_input.restored_prob");
        metric(v, n, "0.KEY.target_item_orig.next_key.attention_output.kl_div");
        metric(v, n, "corrupted.KEY.query_item_orig.query_item.block_input.restored_prob");
        metric(v, n, "original.KEY.query_item_orig.query_item.block_input.restored_logit");
        metric(v, n, "1.KEY.query_item_orig.divider.attention_input.attrib");
        double sum = 0;
        static const char *const pos[] = {"query_item_orig", "target_item_orig", "query_item", "target_item",
                                          "divider", "next_key", "nothing"};
        char name[192];
        for (int p = 0; p < 7; p++) {
            snprintf(name, sizeof name, "0.KEY.query_item_orig.%s.block_output.max_perc", pos[p]);
            sum += metric(v, n, name);
        }
        ck_assert_close(sum, 1.0, 1e-12, 0);
        sum = metric(v, n, "0.KEY.query_item_orig.query_item.block_input.max_perc_layer") +
              metric(v, n, "1.KEY.query_item_orig.query_item.block_input.max_perc_layer") +
              metric(v, n, "nothing.KEY.query_item_orig.query_item.block_input.max_perc_layer");
        ck_assert_close(sum, 1.0, 1e-12, 0);
        /* a patch at a position before the corrupted one cannot restore anything */
        ck_assert_close(metric(v, n, "0.KEY.target_item_orig.query_item_orig.block_output.prob_diff"), 0.0, 0, 0);
        /* block_input at layer 0 away from the corrupted token is the same token: a no-op */
        ck_assert_close(metric(v, n, "0.KEY.query_item_orig.divider.block_input.kl_div"), 0.0, 0, 0);
        /* at the corrupted token itself it restores the clean run at layer 0 */
        snprintf(name, sizeof name, "0.KEY.query_item_orig.query_item_orig.block_input.restored_prob");
        ck_assert_close(metric(v, n, name), metric(v, n, "original.KEY.query_item_orig.query_item_orig.block_input.restored_prob"),
                        1e-6, 1e-5);
        if (a) /* no MLP in a MambaBlock */
            for (int i = 0; i < n; i++) ck_assert_msg(!strstr(v[i].name, "mlp_"), "%s", v[i].name);
        free(v);
        ml_ic_result_free(fast), ml_ic_result_free(ref);
        ml_model_free(m);
    }
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

/* Mixer-internal sites (q, k, v are strided views of one projection) through the fast path with
 * example subsets agree with the reference; swap too. */
START_TEST(evaluator_internal_sites) {
    ml_task *t = small_ar();
    ml_dataset *ds = ml_dataset_new(t, 16, 1, ML_SPLIT_TEST);
    ml_model *m = tiny("attention", ml_task_vocab_size(t), 2);
    for (int swap = 0; swap <= 1; swap++) {
        ml_ic_config c;
        ml_ic_config_paper(&c, m, t);
        c.n_sites = 0;
        static const char *const names[] = {"mixer.q", "mixer.k", "mixer.v", "mixer.scores", "mixer.pattern", "mixer.ctx"};
        for (int l = 0; l < 2; l++)
            for (int k = 0; k < 6; k++) c.sites[c.n_sites++] = ml_site_lookup(m, l, names[k]);
        c.swap = swap, c.batch = 7;
        ml_ic_result *fast = ml_ic_run(m, ds, 0, 16, &c);
        c.reference = true, c.batch = 16;
        ml_ic_result *ref = ml_ic_run(m, ds, 0, 16, &c);
        ck_assert_msg(fast && ref, "%s", ml_last_error());
        for (size_t i = 0; i < (size_t)fast->n_combos * 16; i++)
            ck_assert_msg(fabsf(fast->restored_prob[i] - ref->restored_prob[i]) < 2e-5f, "combination %d: %g vs %g",
                          (int)(i / 16), fast->restored_prob[i], ref->restored_prob[i]);
        ml_ic_result_free(fast), ml_ic_result_free(ref);
    }
    ml_model_free(m);
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

START_TEST(evaluator_bad_config) {
    ml_task *t = small_ar();
    ml_dataset *ds = ml_dataset_new(t, 4, 1, ML_SPLIT_TEST);
    ml_model *m = tiny("attention", ml_task_vocab_size(t), 1);
    ml_ic_config c;
    ml_ic_config_paper(&c, m, t);
    c.label_types[0] = ML_POS_DIVIDER;
    ck_assert(ml_ic_run(m, ds, 0, 4, &c) == NULL);
    ck_assert(strstr(ml_last_error(), "label type"));
    ml_ic_config_paper(&c, m, t);
    ck_assert(ml_ic_run(m, ds, 2, 4, &c) == NULL);
    ck_assert(strstr(ml_last_error(), "outside"));
    ml_model_free(m);
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

/* ---------------------------------------------------------------- surgery and ablations */

START_TEST(conv_surgery) {
    ml_model *m = tiny("mamba", 20, 1);
    ck_assert_int_eq(ml_short_conv_edit(m, -1, ML_CONV_IDENTITY, 0), 1);
    ml_tensor *tok = ml_from_i32(2, (int64_t[]){1, 6}, (int32_t[]){1, 4, 2, 8, 3, 9});
    ml_tensor **acts = cache_all(m, tok, NULL);
    ml_tensor *x = acts[ml_site_lookup(m, 0, "mixer.x")], *xc = acts[ml_site_lookup(m, 0, "mixer.conv")];
    ck_assert(ml_allclose(x, xc, 0, 1e-7)); /* the conv is removed */
    free_cache(m, acts);
    ck_assert_int_eq(ml_short_conv_edit(m, 0, ML_CONV_ZERO, 0), 1);
    acts = cache_all(m, tok, NULL);
    xc = acts[ml_site_lookup(m, 0, "mixer.conv")];
    for (int64_t i = 0; i < ml_numel(xc); i++) ck_assert_float_eq((float)ml_get_flat(xc, i), 0.0f);
    free_cache(m, acts);
    ml_model *att = tiny("attention", 20, 1);
    ck_assert_int_eq(ml_short_conv_edit(att, -1, ML_CONV_ZERO, 0), 0); /* nothing to edit */
    ck_assert_int_eq(ml_short_conv_edit(att, 3, ML_CONV_ZERO, 0), -1);
    ml_model_free(att);
    ml_release(tok);
    ml_model_free(m);
}
END_TEST

START_TEST(zero_and_mean_ablation) {
    ml_task *t = small_ar();
    ml_dataset *ds = ml_dataset_new(t, 8, 1, ML_SPLIT_TEST);
    ml_model *m = tiny("attention", ml_task_vocab_size(t), 2);
    int s = ml_site_lookup(m, 1, "attention_output");
    ml_tensor *mean = ml_site_mean(m, ds, 8, s, 3);
    ck_assert_msg(mean != NULL, "%s", ml_last_error());
    ck_assert_int_eq(mean->ndim, 2);
    ml_tensor *tok = tokens_of(ds, 0, 8);
    ml_tensor **acts = cache_all(m, tok, NULL);
    /* the mean by hand at position 4, channel 3 */
    double acc = 0;
    for (int b = 0; b < 8; b++) acc += ml_f32(acts[s])[(b * 13 + 4) * 16 + 3];
    ck_assert_close(ml_f32(mean)[4 * 16 + 3], acc / 8, 1e-6, 1e-5);
    ml_patch p = {.site = s, .source = mean}; /* broadcast over the batch, every position */
    ml_tensor *h = ml_patch_fast(m, acts, &p, NULL), *h2 = ml_patch_full(m, tok, &p);
    ck_assert(h && h2 && ml_equal(h, h2));
    ml_tensor *zero = ml_zeros(ML_F32, 2, (int64_t[]){13, 16});
    p.source = zero;
    ml_release(h);
    h = ml_patch_fast(m, acts, &p, NULL);
    ck_assert(h != NULL);
    ml_tensor *bad = ml_zeros(ML_F32, 2, (int64_t[]){13, 5});
    p.source = bad;
    ck_assert(ml_patch_fast(m, acts, &p, NULL) == NULL);
    ck_assert(strstr(ml_last_error(), "does not fit"));
    ml_release(bad), ml_release(zero), ml_release(h), ml_release(h2), ml_release(mean), ml_release(tok);
    free_cache(m, acts);
    ml_model_free(m);
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

/* ---------------------------------------------------------------- patching maps and analyses */

/* The mean over examples of p(targets[b]) at row rows[b] of hidden states (B, L, D), computed
 * here from the logits without the library's readout. */
static double mean_prob_at(ml_model *m, ml_tensor *hid, const int32_t *rows, const int32_t *targets) {
    ml_tensor *lg = ml_model_head(m, hid), *c = ml_contiguous(lg);
    int64_t B = c->shape[0], L = c->shape[1], V = c->shape[2];
    double sum = 0;
    for (int64_t b = 0; b < B; b++) {
        const float *x = ml_f32(c) + (b * L + rows[b]) * V;
        double mx = x[0], z = 0;
        for (int64_t v = 1; v < V; v++) mx = fmax(mx, x[v]);
        for (int64_t v = 0; v < V; v++) z += exp(x[v] - mx);
        sum += exp(x[targets[b]] - mx) / z;
    }
    ml_release(lg), ml_release(c);
    return sum / (double)B;
}

typedef struct {
    int calls, fail_at;
} count_ud;

static double counting_metric(void *ud, ml_model *m, ml_tensor *hid, ml_status *err) {
    (void)m;
    count_ud *u = ud;
    if (++u->calls == u->fail_at) {
        *err = ml_fail(ML_ERR_ARG, "the test's metric fails");
        return 0;
    }
    return (double)ml_get_flat(hid, 0);
}

/* Every cell of ml_patching_map is the full forward with the clean activation patched in at that
 * position; a patch the corrupted run cannot feel is exactly 0 and restoring the whole corrupted
 * token's residual is 1. A function metric is called once per run; its failure is the map's. */
START_TEST(patching_map_cells) {
    ml_task *t = small_ar();
    ml_dataset *ds = ml_dataset_new(t, 4, 1, ML_SPLIT_TEST);
    ml_model *m = tiny("attention", ml_task_vocab_size(t), 2);
    ml_tensor *clean = tokens_of(ds, 0, 4), *corr = ml_clone(clean);
    int lo, hi;
    ml_task_corrupt_range(t, &lo, &hi);
    ml_rng rng;
    ml_rng_init(&rng, 42, ML_STREAM_INTERP);
    int32_t rows[4], targets[4];
    for (int b = 0; b < 4; b++) {
        ml_i32(corr)[b * 13 + 1] = ml_ic_corrupt(&rng, lo, hi, ml_i32(clean)[b * 13 + 1]);
        rows[b] = 11, targets[b] = ml_i32(clean)[b * 13 + 12];
    }
    int sites[3] = {ml_site_lookup(m, 0, "block_input"), ml_site_lookup(m, 1, "attention_output"),
                    ml_site_lookup(m, 0, "mixer.q")};
    int32_t positions[3] = {1, 5, 11};
    ml_pm_config c = {.sites = sites, .n_sites = 3, .positions = positions, .n_positions = 3, .rows = rows,
                      .targets = targets, .metric = ML_PM_PROB};
    ml_pm_result *r = ml_patching_map(m, clean, corr, &c);
    ck_assert_msg(r != NULL, "%s", ml_last_error());
    ml_tensor *hc = ml_model_hidden(m, clean, NULL), *hx = ml_model_hidden(m, corr, NULL);
    ck_assert_close(r->clean, mean_prob_at(m, hc, rows, targets), 1e-6, 1e-5);
    ck_assert_close(r->den, r->clean - mean_prob_at(m, hx, rows, targets), 1e-6, 1e-5);
    ml_tensor **acts = cache_all(m, clean, NULL);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            int32_t pos[4] = {positions[j], positions[j], positions[j], positions[j]};
            ml_patch p = {.site = sites[i], .source = acts[sites[i]], .pos = pos};
            ml_tensor *h = ml_patch_full(m, corr, &p);
            ck_assert_close(r->patched[i * 3 + j], mean_prob_at(m, h, rows, targets), 1e-6, 1e-5);
            ml_release(h);
        }
    ck_assert(r->values[1] == 0.0f); /* block_input of layer 0 at position 5: the same token */
    ck_assert_close(r->values[0], 1.0, 1e-3, 0);
    ml_pm_result_free(r);
    count_ud u = {0, 0};
    c.metric = ML_PM_FUNCTION, c.fn = counting_metric, c.ud = &u;
    r = ml_patching_map(m, clean, corr, &c);
    ck_assert_msg(r != NULL, "%s", ml_last_error());
    ck_assert_int_eq(u.calls, 2 + 3 * 3);
    ml_pm_result_free(r);
    u = (count_ud){0, 5};
    ck_assert_ptr_null(ml_patching_map(m, clean, corr, &c));
    ck_assert_str_eq(ml_last_error(), "the test's metric fails");
    free_cache(m, acts);
    ml_release(hc), ml_release(hx), ml_release(clean), ml_release(corr);
    ml_model_free(m);
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

/* Attention mass is the pattern's weight between the two named positions, summed over heads and
 * averaged over documents; a layer with no attention (H3) has none; Mamba's is a share. */
START_TEST(attention_mass_reads_the_pattern) {
    ml_task *t = small_ar();
    ml_dataset *ds = ml_dataset_new(t, 6, 1, ML_SPLIT_TEST);
    ml_model *m = tiny("attention", ml_task_vocab_size(t), 2);
    double mass[2];
    bool has[2];
    ck_assert(ml_attention_mass(m, ds, 6, ML_POS_QUERY_ITEM, ML_POS_TARGET_ITEM_ORIG, mass, has) == ML_OK);
    ml_tensor *tok, *tg, *pos;
    ck_assert(ml_dataset_batch_range(ds, 0, 6, &tok, &tg, &pos) == ML_OK);
    ml_tensor **acts = cache_all(m, tok, NULL);
    for (int l = 0; l < 2; l++) {
        ml_tensor *P = acts[ml_site_lookup(m, l, "mixer.pattern")];
        double want = 0;
        for (int64_t b = 0; b < 6; b++)
            for (int64_t h = 0; h < P->shape[1]; h++)
                want += ml_get(P, (int64_t[]){b, h, ml_i32(pos)[b * ML_NPOS + ML_POS_QUERY_ITEM],
                                               ml_i32(pos)[b * ML_NPOS + ML_POS_TARGET_ITEM_ORIG]});
        ck_assert(has[l]);
        ck_assert_close(mass[l], want / 6, 1e-12, 1e-9);
    }
    free_cache(m, acts);
    ml_model_free(m);
    m = tiny("h3", ml_task_vocab_size(t), 2);
    ck_assert(ml_attention_mass(m, ds, 6, ML_POS_QUERY_ITEM, ML_POS_TARGET_ITEM_ORIG, mass, has) == ML_OK);
    ck_assert(!has[0] && !has[1]);
    ml_model_free(m);
    m = tiny("mamba", ml_task_vocab_size(t), 2);
    ck_assert(ml_attention_mass(m, ds, 6, ML_POS_QUERY_ITEM, ML_POS_TARGET_ITEM_ORIG, mass, has) == ML_OK);
    ck_assert(has[0] && has[1] && mass[1] > 0 && mass[1] <= 1);
    ck_assert(ml_attention_mass(m, ds, 0, ML_POS_QUERY_ITEM, ML_POS_TARGET_ITEM_ORIG, mass, has) != ML_OK);
    ml_model_free(m);
    ml_release(tok), ml_release(tg), ml_release(pos);
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

/* Attribution patching: where the corrupted and the clean activation agree (the embedding away
 * from the corrupted key) the estimate is exactly 0; at the key it is not; sites without a
 * position dimension are refused. */
START_TEST(attribution_patching_estimates) {
    ml_task *t = small_ar();
    ml_dataset *ds = ml_dataset_new(t, 6, 1, ML_SPLIT_TEST);
    ml_model *m = tiny("attention", ml_task_vocab_size(t), 2);
    int sites[2] = {ml_site_lookup(m, 0, "block_input"), ml_site_lookup(m, 1, "mixer.pattern")};
    ml_ap_config c = {.sites = sites, .n_sites = 2, .n_label_types = 1, .label_types = {ML_POS_QUERY_ITEM_ORIG},
                      .n_positions = 2, .positions = {ML_POS_QUERY_ITEM_ORIG, ML_POS_DIVIDER}, .seed = 42};
    ml_ap_result *r = ml_attribution_patching(m, ds, 6, &c);
    ck_assert_msg(r != NULL, "%s", ml_last_error());
    ck_assert_int_eq(r->n_sites * r->n_positions * r->n_label_types, 4);
    ck_assert(r->estimate[0] != 0 && isfinite(r->estimate[0]));
    ck_assert(r->estimate[1] == 0);
    ck_assert(isfinite(r->estimate[2]) && isfinite(r->estimate[3]));
    ml_ap_result_free(r);
    for (int a = 0; a < ml_mixer_count(); a++) { /* a site without a position dimension, if any */
        ml_model *mm = tiny(ml_mixer_at(a)->name, ml_task_vocab_size(t), 1);
        for (int s = 0; s < mm->n_sites; s++)
            if (ml_site_pos_dim(mm, s) < 0) {
                c.sites = &s, c.n_sites = 1;
                ck_assert_ptr_null(ml_attribution_patching(mm, ds, 6, &c));
                ck_assert(strstr(ml_last_error(), "no position dimension"));
                break;
            }
        ml_model_free(mm);
    }
    ml_model_free(m);
    ml_dataset_free(ds);
    ml_task_release(t);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("interp");
    TCase *inv = tcase_create("invariants");
    tcase_set_timeout(inv, 120);
    tcase_add_test(inv, clean_into_clean);
    tcase_add_test(inv, resid_mid_resume_is_exact);
    tcase_add_test(inv, suffix_forward_is_exact);
    tcase_add_test(inv, block_input_all_positions_is_the_source);
    tcase_add_test(inv, fast_equals_full);
    tcase_add_test(inv, state_patch_continues_recurrence);
    suite_add_tcase(s, inv);
    TCase *met = tcase_create("metrics");
    tcase_add_test(met, kl_div_divides_by_vocab);
    tcase_add_test(met, max_perc_ties);
    tcase_add_test(met, attrib_ratio_of_means);
    tcase_add_test(met, corruption_rule);
    suite_add_tcase(s, met);
    TCase *ev = tcase_create("evaluator");
    tcase_set_timeout(ev, 120);
    tcase_add_test(ev, evaluator_names_and_reference);
    tcase_add_test(ev, evaluator_from_rows_equals_reference);
    tcase_add_test(ev, evaluator_internal_sites);
    tcase_add_test(ev, evaluator_bad_config);
    tcase_add_test(ev, conv_surgery);
    tcase_add_test(ev, zero_and_mean_ablation);
    tcase_add_test(ev, patching_map_cells);
    tcase_add_test(ev, attention_mass_reads_the_pattern);
    tcase_add_test(ev, attribution_patching_estimates);
    suite_add_tcase(s, ev);
    return s;
}

int main(void) { return ml_test_run(suite()); }
