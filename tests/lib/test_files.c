/*
 * tests/lib/test_files.c — atomic writes (including a writer killed mid-write), mkdir -p,
 * stale temp cleanup, and input lists (globs, directories, @lists, sorting, errors).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/testutil.h"

#include "lib/files.h"

static char root[256];

static int setup(void **state) {
    (void)state;
    return lt_test_tmpdir_create(root, sizeof root, "files");
}

static int teardown(void **state) {
    (void)state;
    return lt_test_tmpdir_remove(root);
}

static void path_in(char *buf, size_t size, const char *name) { snprintf(buf, size, "%s/%s", root, name); }

static void write_plain(const char *name, const char *text) {
    char p[512];
    path_in(p, sizeof p, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static size_t count_entries(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = 0;
    assert_int_equal(fscanf(p, "%zu", &n), 1);
    pclose(p);
    return n;
}

static void test_atomic_write_and_replace(void **state) {
    (void)state;
    char p[512];
    path_in(p, sizeof p, "atomic");
    assert_int_equal(lt_mkdir_p(p, 0755, NULL), LT_OK);
    path_in(p, sizeof p, "atomic/out.bin");
    lt_error err;
    assert_int_equal(lt_write_file_atomic(p, "first", 5, &err), LT_OK);
    assert_int_equal(lt_write_file_atomic(p, "second!", 7, &err), LT_OK);
    char *data;
    size_t len;
    assert_int_equal(lt_read_file(p, &data, &len, &err), LT_OK);
    assert_int_equal(len, 7);
    assert_string_equal(data, "second!");
    free(data);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0644); /* 0666 & ~umask; main() sets umask 022 */
    path_in(p, sizeof p, "atomic");
    assert_int_equal(count_entries(p), 1); /* no temp left behind */
}

static void test_abort_leaves_nothing(void **state) {
    (void)state;
    char p[512];
    path_in(p, sizeof p, "aborted.txt");
    lt_atomic_file af;
    assert_int_equal(lt_atomic_open(&af, p, NULL), LT_OK);
    fputs("partial", af.fp);
    lt_atomic_abort(&af);
    assert_int_equal(access(p, F_OK), -1);
    lt_atomic_abort(&af); /* second abort is a no-op */
}

/* A writer killed with SIGKILL in the middle of writing: the destination keeps its old
 * content, only a hidden temp remains, and lt_remove_stale_temps deletes it. */
static void test_killed_writer_leaves_old_file(void **state) {
    (void)state;
    char dir[512], p[512];
    path_in(dir, sizeof dir, "killed");
    assert_int_equal(lt_mkdir_p(dir, 0755, NULL), LT_OK);
    path_in(p, sizeof p, "killed/shard.bin");
    assert_int_equal(lt_write_file_atomic(p, "old", 3, NULL), LT_OK);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        lt_atomic_file af;
        if (lt_atomic_open(&af, p, NULL) != LT_OK) _exit(3);
        char block[4096];
        memset(block, 'n', sizeof block);
        for (int i = 0; i < 64; i++) fwrite(block, 1, sizeof block, af.fp);
        fflush(af.fp);
        if (write(ready[1], "x", 1) != 1) _exit(4);
        for (;;) pause(); /* killed here, before commit */
    }
    close(ready[1]);
    char c;
    assert_int_equal(read(ready[0], &c, 1), 1);
    close(ready[0]);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFSIGNALED(status));
    char *data;
    size_t len;
    assert_int_equal(lt_read_file(p, &data, &len, NULL), LT_OK);
    assert_string_equal(data, "old");
    free(data);
    assert_int_equal(count_entries(dir), 2); /* shard.bin + .shard.bin.tmp.XXXXXX */
    size_t removed = 0;
    assert_int_equal(lt_remove_stale_temps(dir, &removed, NULL), LT_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(count_entries(dir), 1);
}

/* Writers sharing a directory (the tasks of a Slurm array): cleaning one task's leftovers
 * leaves the other writers' temporaries alone. */
static void test_remove_stale_temps_of_one_prefix(void **state) {
    (void)state;
    char dir[512], p[512];
    path_in(dir, sizeof dir, "prefixed");
    assert_int_equal(lt_mkdir_p(dir, 0755, NULL), LT_OK);
    lt_atomic_file a, b;
    path_in(p, sizeof p, "prefixed/task-00001.index");
    assert_int_equal(lt_atomic_open(&a, p, NULL), LT_OK);
    path_in(p, sizeof p, "prefixed/task-00002.index");
    assert_int_equal(lt_atomic_open(&b, p, NULL), LT_OK);
    assert_int_equal(count_entries(dir), 2);
    size_t removed = 9;
    assert_int_equal(lt_remove_stale_temps_of(dir, "task-00001.", &removed, NULL), LT_OK);
    assert_int_equal(removed, 1);
    assert_int_equal(count_entries(dir), 1);
    fputs("still writing", b.fp);
    assert_int_equal(lt_atomic_commit(&b, NULL), LT_OK); /* the other writer is unharmed */
    assert_int_equal(lt_remove_stale_temps_of(dir, "task-00002.", &removed, NULL), LT_OK);
    assert_int_equal(removed, 0);
    lt_atomic_abort(&a);
}

static void test_commit_into_missing_directory_fails_clearly(void **state) {
    (void)state;
    char p[512];
    path_in(p, sizeof p, "no/such/dir/out.bin");
    lt_error err;
    assert_int_equal(lt_write_file_atomic(p, "x", 1, &err), LT_ERR_IO);
    assert_string_equal(err.where, p);
    assert_non_null(strstr(err.what, "cannot create temporary file: No such file or directory"));
}

static void test_mkdir_p(void **state) {
    (void)state;
    char p[512];
    path_in(p, sizeof p, "a/b/c/d/");
    assert_int_equal(lt_mkdir_p(p, 0755, NULL), LT_OK);
    assert_int_equal(lt_mkdir_p(p, 0755, NULL), LT_OK); /* exists: fine */
    struct stat sb;
    path_in(p, sizeof p, "a/b/c/d");
    assert_int_equal(stat(p, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    write_plain("a/file", "x");
    path_in(p, sizeof p, "a/file/sub");
    lt_error err;
    assert_int_equal(lt_mkdir_p(p, 0755, &err), LT_ERR_IO);
    assert_non_null(strstr(err.where, "a/file"));
}

static void test_glob_inputs_sorted_unique(void **state) {
    (void)state;
    char p[512];
    path_in(p, sizeof p, "in/sub");
    assert_int_equal(lt_mkdir_p(p, 0755, NULL), LT_OK);
    write_plain("in/b.jsonl", "");
    write_plain("in/a.jsonl", "");
    write_plain("in/c.txt", "");
    write_plain("in/.hidden.jsonl", "");
    write_plain("in/sub/z.jsonl", "");
    char pattern[512], dir[512], listfile[512], list_text[1200];
    path_in(pattern, sizeof pattern, "in/*.jsonl");
    path_in(dir, sizeof dir, "in");
    path_in(listfile, sizeof listfile, "inputs.txt");
    snprintf(list_text, sizeof list_text, "# corpus\n\n%s/in/c.txt\n  %s/in/a.jsonl  \n", root, root);
    write_plain("inputs.txt", list_text);
    char at[520];
    snprintf(at, sizeof at, "@%s", listfile);

    lt_strlist list = LT_STRLIST_INIT;
    const char *args1[] = {pattern};
    assert_int_equal(lt_glob_inputs(args1, 1, &list, NULL), LT_OK);
    assert_int_equal(list.count, 2);
    assert_non_null(strstr(list.items[0], "/in/a.jsonl"));
    assert_non_null(strstr(list.items[1], "/in/b.jsonl"));
    lt_strlist_free(&list);

    /* a directory recurses and skips hidden files; overlaps are removed */
    const char *args2[] = {dir, pattern, at};
    assert_int_equal(lt_glob_inputs(args2, 3, &list, NULL), LT_OK);
    assert_int_equal(list.count, 4);
    assert_non_null(strstr(list.items[0], "/in/a.jsonl"));
    assert_non_null(strstr(list.items[1], "/in/b.jsonl"));
    assert_non_null(strstr(list.items[2], "/in/c.txt"));
    assert_non_null(strstr(list.items[3], "/in/sub/z.jsonl"));
    lt_strlist_free(&list);
}

static void test_glob_inputs_errors_name_the_input(void **state) {
    (void)state;
    lt_strlist list = LT_STRLIST_INIT;
    lt_error err;
    char pattern[512], missing[512];
    path_in(pattern, sizeof pattern, "nothing-*.wet.gz");
    path_in(missing, sizeof missing, "missing.jsonl");
    const char *a1[] = {pattern};
    assert_int_equal(lt_glob_inputs(a1, 1, &list, &err), LT_ERR_IO);
    assert_non_null(strstr(err.what, "matches no file"));
    assert_non_null(strstr(err.what, "nothing-*.wet.gz"));
    assert_true(err.hint[0] != '\0');
    const char *a2[] = {missing};
    assert_int_equal(lt_glob_inputs(a2, 1, &list, &err), LT_ERR_IO);
    assert_non_null(strstr(err.what, "No such file or directory"));
    /* an @list naming a missing file reports the list file and line */
    char text[600];
    snprintf(text, sizeof text, "\n%s\n", missing);
    write_plain("bad-list.txt", text);
    char at[520];
    snprintf(at, sizeof at, "@%s/bad-list.txt", root);
    const char *a3[] = {at};
    assert_int_equal(lt_glob_inputs(a3, 1, &list, &err), LT_ERR_IO);
    assert_non_null(strstr(err.where, "bad-list.txt:2"));
    lt_strlist_free(&list);
}

static void test_read_missing_file(void **state) {
    (void)state;
    char *data = (char *)1;
    lt_error err;
    assert_int_equal(lt_read_file("/nonexistent/x", &data, NULL, &err), LT_ERR_IO);
    assert_null(data);
    assert_string_equal(err.where, "/nonexistent/x");
}

int main(void) {
    umask(022);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atomic_write_and_replace),
        cmocka_unit_test(test_abort_leaves_nothing),
        cmocka_unit_test(test_killed_writer_leaves_old_file),
        cmocka_unit_test(test_remove_stale_temps_of_one_prefix),
        cmocka_unit_test(test_commit_into_missing_directory_fails_clearly),
        cmocka_unit_test(test_mkdir_p),
        cmocka_unit_test(test_glob_inputs_sorted_unique),
        cmocka_unit_test(test_glob_inputs_errors_name_the_input),
        cmocka_unit_test(test_read_missing_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
