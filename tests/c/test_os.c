/* io/os.h: directories, whole-file reads, locks, signal names, child processes, clocks. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/csv.h"
#include "io/os.h"
#include "testutil.h"

static char tdir[64];

static void make_tmpdir(void) {
    snprintf(tdir, sizeof tdir, "/tmp/mechlab_os_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tdir));
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st, (void)type, (void)ftw;
    return remove(path);
}

/* The test's directory and everything in it. */
static void remove_tmpdir(void) { nftw(tdir, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

START_TEST(test_mkdir_read) {
    make_tmpdir();
    char p[128], f[256];
    snprintf(p, sizeof p, "%s/a/b/c", tdir);
    ck_assert_int_eq(ml_mkdir_p(p), ML_OK);
    ck_assert(ml_path_exists(p) && !ml_is_file(p));
    ck_assert_int_eq(ml_mkdir_p(p), ML_OK); /* existing: fine */
    snprintf(f, sizeof f, "%s/x.bin", p);
    const char data[] = {'a', 0, 'b', '\n', (char)0xff};
    ck_assert_int_eq(ml_write_file_atomic(f, data, sizeof data), ML_OK);
    ck_assert(ml_is_file(f));
    size_t n = 0;
    char *got = ml_read_file(f, &n);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(n, sizeof data);
    ck_assert(memcmp(got, data, n) == 0 && got[n] == 0);
    free(got);
    ck_assert_int_ne(ml_mkdir_p(f), ML_OK); /* a file is not a directory */
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "sys.mkdir: '"));
    snprintf(f, sizeof f, "%s/missing", tdir);
    ck_assert_ptr_null(ml_read_file(f, &n));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "sys.read_file: cannot open '"));
    ck_assert_ptr_null(ml_read_file(tdir, &n)); /* a directory opens but cannot be read */
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "cannot read '"));
    ck_assert_int_ne(ml_mkdir_p(""), ML_OK);
    remove_tmpdir();
}
END_TEST

/* A file larger than the first read buffer comes back whole. */
START_TEST(test_read_large) {
    make_tmpdir();
    char f[256];
    snprintf(f, sizeof f, "%s/big", tdir);
    size_t len = 200000;
    char *data = malloc(len);
    for (size_t i = 0; i < len; i++) data[i] = (char)(i * 7);
    ck_assert_int_eq(ml_write_file_atomic(f, data, len), ML_OK);
    size_t n;
    char *got = ml_read_file(f, &n);
    ck_assert_uint_eq(n, len);
    ck_assert(memcmp(got, data, len) == 0);
    free(got), free(data);
    remove_tmpdir();
}
END_TEST

START_TEST(test_lock) {
    make_tmpdir();
    char f[256], holder[64];
    snprintf(f, sizeof f, "%s/lock", tdir);
    int fd = ml_lock_try(f, holder, sizeof holder);
    ck_assert_int_ge(fd, 0);
    /* a second open file description conflicts with the first (flock) */
    ck_assert_int_eq(ml_lock_try(f, holder, sizeof holder), -1);
    char want[64];
    snprintf(want, sizeof want, " %ld", (long)getpid());
    ck_assert_msg(strstr(holder, want) != NULL, "holder '%s'", holder);
    close(fd);
    fd = ml_lock_try(f, holder, sizeof holder);
    ck_assert_int_ge(fd, 0);
    close(fd);
    snprintf(f, sizeof f, "%s/none/lock", tdir);
    ck_assert_int_eq(ml_lock_try(f, holder, sizeof holder), -2);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "sys.lock: cannot open '"));
    remove_tmpdir();
}
END_TEST

/* Files from others: a FIFO or device is never read (no hang), a file past the bound is refused,
 * a lock or appended file is never opened through a symlink, and probing a lock writes nothing. */
START_TEST(test_hostile_files) {
    make_tmpdir();
    char fifo[128], big[128], link[128], victim[128], lock[128];
    size_t n;
    bool unopened = true;
    snprintf(fifo, sizeof fifo, "%s/fifo", tdir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_ptr_null(ml_read_file_bounded(fifo, 100, &n, &unopened));
    ck_assert(!unopened);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "not a regular file"));
    ck_assert_ptr_null(ml_read_file("/dev/zero", &n));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "not a regular file"));
    snprintf(big, sizeof big, "%s/big", tdir);
    ck_assert_int_eq(ml_write_file_atomic(big, "0123456789", 10), ML_OK);
    ck_assert_ptr_null(ml_read_file_bounded(big, 9, &n, NULL));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "more than the bound of 9"));
    char *whole = ml_read_file_bounded(big, 10, &n, NULL);
    ck_assert(whole && n == 10);
    free(whole);
    snprintf(victim, sizeof victim, "%s/victim", tdir);
    ck_assert_int_eq(ml_write_file_atomic(victim, "precious", 8), ML_OK);
    snprintf(link, sizeof link, "%s/lock", tdir);
    ck_assert_int_eq(symlink(victim, link), 0);
    char holder[64];
    ck_assert_int_eq(ml_lock_try(link, holder, sizeof holder), -2);
    ck_assert_int_eq(ml_lock_probe(link), -2);
    ck_assert_int_lt(ml_open_write_in_place(link, O_WRONLY | O_APPEND, "log"), 0);
    ck_assert_int_lt(ml_open_write_in_place(fifo, O_WRONLY | O_APPEND, "log"), 0); /* no reader: no hang */
    char *v = ml_read_file(victim, &n);
    ck_assert(v && n == 8 && memcmp(v, "precious", 8) == 0);
    free(v);
    /* a probe neither creates a missing lock nor takes a held one */
    snprintf(lock, sizeof lock, "%s/run.lock", tdir);
    ck_assert_int_eq(ml_lock_probe(lock), 0);
    ck_assert(!ml_path_exists(lock));
    int fd = ml_lock_try(lock, holder, sizeof holder);
    ck_assert_int_ge(fd, 0);
    pid_t child = fork();
    if (child == 0) _exit(ml_lock_probe(lock) == 1 ? 0 : 1); /* another process sees it held */
    int status;
    waitpid(child, &status, 0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(fd);
    ck_assert_int_eq(ml_lock_probe(lock), 0);
    remove_tmpdir();
}
END_TEST

/* A data file a record names: read from its directory, never from outside it (a relative climb, an
 * absolute path, a symlink out), never a FIFO, never past the bound. */
START_TEST(test_data_files) {
    make_tmpdir();
    char sub[128], path[160], fifo[160], out[160];
    size_t n;
    snprintf(sub, sizeof sub, "%s/run", tdir);
    ck_assert_int_eq(ml_mkdir_p(sub), ML_OK);
    snprintf(path, sizeof path, "%s/data.jsonl", sub);
    ck_assert_int_eq(ml_write_file_atomic(path, "{}\n", 3), ML_OK);
    char *text = ml_read_data_file("data.jsonl", sub, 3, &n);
    ck_assert(text && n == 3 && !strcmp(text, "{}\n"));
    free(text);
    ck_assert_ptr_null(ml_read_data_file("data.jsonl", sub, 2, &n));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "more than the 2 a data file may hold"));
    snprintf(out, sizeof out, "%s/outside", tdir);
    ck_assert_int_eq(ml_write_file_atomic(out, "x", 1), ML_OK);
    const char *escapes[] = {"../outside", out, "link"};
    snprintf(path, sizeof path, "%s/link", sub);
    ck_assert_int_eq(symlink(out, path), 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_ptr_null(ml_read_data_file(escapes[i], sub, 100, &n));
        ck_assert_msg(strstr(ml_last_error(), "is not a file below"), "%s: %s", escapes[i], ml_last_error());
    }
    text = ml_read_data_file(out, NULL, 100, &n); /* without a base: any regular file */
    ck_assert(text && n == 1);
    free(text);
    snprintf(fifo, sizeof fifo, "%s/fifo", sub);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_ptr_null(ml_read_data_file("fifo", sub, 100, &n));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "is not a regular file"));
    remove_tmpdir();
}
END_TEST

START_TEST(test_signals_and_children) {
    ck_assert_str_eq(ml_signal_name(SIGTERM), "SIGTERM");
    ck_assert_int_eq(ml_signal_find("SIGKILL"), SIGKILL);
    ck_assert_int_eq(ml_signal_find("SIGHUP"), 0);
    ck_assert_ptr_null(ml_signal_name(SIGHUP));
    char *argv[] = {"/bin/sh", "-c", "exit 3", NULL};
    long pid;
    ck_assert_int_eq(ml_spawn(argv, NULL, &pid), ML_OK);
    int code = -5, sig = -5;
    ck_assert_int_eq(ml_wait_child(pid, true, &code, &sig), pid);
    ck_assert_int_eq(code, 3);
    ck_assert_int_eq(sig, 0);
    char *sleeper[] = {"/bin/sh", "-c", "sleep 30", NULL};
    ck_assert_int_eq(ml_spawn(sleeper, NULL, &pid), ML_OK);
    ck_assert_int_eq(ml_wait_child(pid, false, &code, &sig), 0); /* still running */
    kill((pid_t)pid, SIGKILL);
    ck_assert_int_eq(ml_wait_child(pid, true, &code, &sig), pid);
    ck_assert_int_eq(sig, SIGKILL);
    char *missing[] = {"/nonexistent/program", NULL};
    ck_assert_int_ne(ml_spawn(missing, NULL, &pid), ML_OK);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "sys.spawn: cannot run '/nonexistent/program'"));
    /* caught: a SIGTERM only sets the flag, and release restores the default action */
    ml_signals_catch();
    raise(SIGTERM);
    ck_assert_int_eq(ml_signal_caught(), SIGTERM);
    ml_signals_release();
}
END_TEST

START_TEST(test_clocks) {
    double t0 = ml_monotonic();
    ml_sleep(0.01);
    ck_assert(ml_monotonic() - t0 >= 0.009);
    char utc[32];
    ml_utc_now(utc);
    ck_assert_uint_eq(strlen(utc), 20);
    ck_assert(utc[4] == '-' && utc[10] == 'T' && utc[19] == 'Z');
    char exe[4096];
    ck_assert_int_eq(ml_executable(exe, sizeof exe), ML_OK);
    ck_assert_ptr_nonnull(strstr(exe, "test_os"));
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("os");
    TCase *tc = tcase_create("os");
    tcase_add_test(tc, test_mkdir_read);
    tcase_add_test(tc, test_read_large);
    tcase_add_test(tc, test_lock);
    tcase_add_test(tc, test_hostile_files);
    tcase_add_test(tc, test_data_files);
    tcase_add_test(tc, test_signals_and_children);
    tcase_add_test(tc, test_clocks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ml_test_run(suite()); }
