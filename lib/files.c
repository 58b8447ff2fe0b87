/*
 * lib/files.c — atomic writes, mkdir -p, stale temp cleanup, input globbing (see files.h).
 */
#include "lib/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <libgen.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEMP_SUFFIX ".tmp."
#define TEMP_RANDOM "XXXXXX"

/* ---------------------------------------------------------------- umask */

static mode_t process_umask = 022;
static pthread_once_t umask_once = PTHREAD_ONCE_INIT;

/* umask() cannot be read without being set (a race with other threads), so read it
 * from /proc/self/status (Linux >= 4.7); fall back to 022. */
static void read_umask(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned int m;
        if (sscanf(line, "Umask: %o", &m) == 1) {
            process_umask = (mode_t)m;
            break;
        }
    }
    fclose(f);
}

/* ---------------------------------------------------------------- paths */

/* Directory part of a path as a malloc'd string ("." for a bare name). */
static char *dir_of(const char *path) {
    char *copy = lt_strdup_check(path);
    char *d = lt_strdup_check(dirname(copy));
    free(copy);
    return d;
}

static char *base_of(const char *path) {
    char *copy = lt_strdup_check(path);
    char *b = lt_strdup_check(basename(copy));
    free(copy);
    return b;
}

/* ---------------------------------------------------------------- atomic files */

lt_status lt_fsync_dir(const char *dir, lt_error *err) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return lt_fail(err, LT_ERR_IO, dir, "cannot open directory: %s", strerror(errno));
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    /* Some file systems cannot fsync directories (EINVAL); the rename is still done. */
    if (rc != 0 && saved != EINVAL && saved != EROFS)
        return lt_fail(err, LT_ERR_IO, dir, "cannot fsync directory: %s", strerror(saved));
    return LT_OK;
}

lt_status lt_atomic_open(lt_atomic_file *af, const char *path, lt_error *err) {
    memset(af, 0, sizeof *af);
    pthread_once(&umask_once, read_umask);
    char *dir = dir_of(path), *base = base_of(path);
    size_t n = strlen(dir) + strlen(base) + sizeof "/." TEMP_SUFFIX TEMP_RANDOM;
    char *tmp = lt_malloc_check(n);
    snprintf(tmp, n, "%s/.%s" TEMP_SUFFIX TEMP_RANDOM, dir, base);
    free(dir);
    free(base);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        lt_status st = lt_fail(err, LT_ERR_IO, path, "cannot create temporary file: %s",
                               strerror(errno));
        free(tmp);
        return st;
    }
    af->fp = fdopen(fd, "wb");
    if (af->fp == NULL) {
        lt_status st = lt_fail(err, LT_ERR_IO, path, "cannot open temporary file: %s",
                               strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return st;
    }
    af->tmp_path = tmp;
    af->path = lt_strdup_check(path);
    return LT_OK;
}

static void atomic_release(lt_atomic_file *af) {
    free(af->path);
    free(af->tmp_path);
    af->path = af->tmp_path = NULL;
    af->fp = NULL;
}

void lt_atomic_abort(lt_atomic_file *af) {
    if (af == NULL || af->tmp_path == NULL) return;
    if (af->fp) fclose(af->fp);
    unlink(af->tmp_path);
    atomic_release(af);
}

lt_status lt_atomic_commit(lt_atomic_file *af, lt_error *err) {
    if (af == NULL || af->fp == NULL)
        return lt_fail(err, LT_ERR_INTERNAL, NULL, "commit of an atomic file that is not open");
    const char *what = NULL;
    int saved = 0;
    if (fflush(af->fp) != 0 || ferror(af->fp))
        what = "write failed";
    else if (fchmod(fileno(af->fp), 0666 & ~process_umask) != 0)
        what = "cannot set file mode";
    else if (fsync(fileno(af->fp)) != 0)
        what = "fsync failed";
    saved = errno;
    int close_rc = fclose(af->fp);
    af->fp = NULL;
    if (what == NULL && close_rc != 0) {
        what = "close failed";
        saved = errno;
    }
    if (what == NULL && rename(af->tmp_path, af->path) != 0) {
        what = "cannot rename temporary file into place";
        saved = errno;
    }
    if (what != NULL) {
        lt_status st = lt_fail(err, LT_ERR_IO, af->path, "%s: %s", what, strerror(saved));
        unlink(af->tmp_path);
        atomic_release(af);
        return st;
    }
    char *dir = dir_of(af->path);
    lt_status st = lt_fsync_dir(dir, err);
    free(dir);
    atomic_release(af);
    return st;
}

lt_status lt_write_file_atomic(const char *path, const void *data, size_t len, lt_error *err) {
    lt_atomic_file af;
    lt_status st = lt_atomic_open(&af, path, err);
    if (st != LT_OK) return st;
    if (len > 0 && fwrite(data, 1, len, af.fp) != len) {
        st = lt_fail(err, LT_ERR_IO, path, "write failed: %s", strerror(errno));
        lt_atomic_abort(&af);
        return st;
    }
    return lt_atomic_commit(&af, err);
}

/* ---------------------------------------------------------------- directories */

lt_status lt_mkdir_p(const char *path, mode_t mode, lt_error *err) {
    if (path == NULL || path[0] == '\0')
        return lt_fail(err, LT_ERR_USAGE, NULL, "empty directory name");
    char *copy = lt_strdup_check(path);
    size_t len = strlen(copy);
    while (len > 1 && copy[len - 1] == '/') copy[--len] = '\0';
    lt_status st = LT_OK;
    for (char *p = copy + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(copy, mode) != 0 && errno != EEXIST) {
            st = lt_fail(err, LT_ERR_IO, copy, "cannot create directory: %s", strerror(errno));
            break;
        }
        struct stat sb;
        if (stat(copy, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            st = lt_fail(err, LT_ERR_IO, copy, "exists and is not a directory");
            break;
        }
        *p = saved;
        if (saved == '\0') break;
    }
    free(copy);
    return st;
}

static int is_stale_temp(const char *name) {
    size_t n = strlen(name);
    size_t tail = strlen(TEMP_SUFFIX TEMP_RANDOM);
    return name[0] == '.' && n > tail + 1 &&
           strncmp(name + n - tail, TEMP_SUFFIX, strlen(TEMP_SUFFIX)) == 0;
}

lt_status lt_remove_stale_temps(const char *dir, size_t *removed, lt_error *err) {
    return lt_remove_stale_temps_of(dir, NULL, removed, err);
}

lt_status lt_remove_stale_temps_of(const char *dir, const char *prefix, size_t *removed, lt_error *err) {
    if (removed) *removed = 0;
    size_t plen = prefix ? strlen(prefix) : 0;
    DIR *d = opendir(dir);
    if (d == NULL) return lt_fail(err, LT_ERR_IO, dir, "cannot open directory: %s", strerror(errno));
    lt_status st = LT_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_stale_temp(e->d_name)) continue;
        if (prefix && strncmp(e->d_name + 1, prefix, plen) != 0) continue; /* ".NAME.tmp.XXXXXX" */
        if (unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT) {
            st = lt_fail(err, LT_ERR_IO, dir, "cannot remove stale temporary '%s': %s", e->d_name,
                         strerror(errno));
            break;
        }
        if (removed) (*removed)++;
    }
    closedir(d);
    return st;
}

const char *lt_path_base(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

lt_status lt_read_file(const char *path, char **data, size_t *len, lt_error *err) {
    *data = NULL;
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) return lt_fail(err, LT_ERR_IO, path, "cannot open: %s", strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = lt_malloc_check(cap);
    for (;;) {
        if (n + 1 >= cap) buf = lt_realloc_check(buf, cap *= 2);
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        lt_status st = lt_fail(err, LT_ERR_IO, path, "read failed: %s", strerror(errno));
        fclose(f);
        free(buf);
        return st;
    }
    fclose(f);
    buf[n] = '\0';
    *data = buf;
    if (len) *len = n;
    return LT_OK;
}

/* ---------------------------------------------------------------- input lists */

static lt_status add_directory(const char *dir, lt_strlist *out, lt_error *err) {
    DIR *d = opendir(dir);
    if (d == NULL) return lt_fail(err, LT_ERR_IO, dir, "cannot open directory: %s", strerror(errno));
    lt_status st = LT_OK;
    struct dirent *e;
    while (st == LT_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue; /* hidden files, ".", "..", temp files */
        size_t n = strlen(dir) + strlen(e->d_name) + 2;
        char *child = lt_malloc_check(n);
        snprintf(child, n, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(child, &sb) != 0)
            st = lt_fail(err, LT_ERR_IO, child, "cannot stat: %s", strerror(errno));
        else if (S_ISDIR(sb.st_mode))
            st = add_directory(child, out, err);
        else if (S_ISREG(sb.st_mode))
            lt_strlist_push(out, child);
        free(child);
    }
    closedir(d);
    return st;
}

static lt_status add_input(const char *arg, const char *where, lt_strlist *out, lt_error *err);

static lt_status add_list_file(const char *path, lt_strlist *out, lt_error *err) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return lt_fail(err, LT_ERR_IO, path, "cannot open input list: %s", strerror(errno));
    lt_status st = LT_OK;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    unsigned long lineno = 0;
    while (st == LT_OK && (n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' ||
                         line[n - 1] == '\t'))
            line[--n] = '\0';
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '\0' || *p == '#') continue;
        char where[LT_ERROR_WHERE_MAX];
        snprintf(where, sizeof where, "%s:%lu", path, lineno);
        st = add_input(p, where, out, err);
    }
    if (st == LT_OK && ferror(f))
        st = lt_fail(err, LT_ERR_IO, path, "read failed: %s", strerror(errno));
    free(line);
    fclose(f);
    return st;
}

static int has_glob_chars(const char *s) { return strpbrk(s, "*?[{") != NULL; }

static lt_status add_input(const char *arg, const char *where, lt_strlist *out, lt_error *err) {
    if (arg[0] == '@') return add_list_file(arg + 1, out, err);
    if (!has_glob_chars(arg) && arg[0] != '~') {
        struct stat sb;
        if (stat(arg, &sb) != 0) {
            lt_status st = lt_fail(err, LT_ERR_IO, where ? where : arg, "input '%s': %s", arg,
                                   strerror(errno));
            return st;
        }
        if (S_ISDIR(sb.st_mode)) return add_directory(arg, out, err);
        lt_strlist_push(out, arg);
        return LT_OK;
    }
    glob_t g;
    int rc = glob(arg, GLOB_BRACE | GLOB_TILDE | GLOB_ERR, NULL, &g);
    if (rc == GLOB_NOMATCH) {
        globfree(&g);
        lt_fail(err, LT_ERR_IO, where ? where : arg, "input pattern '%s' matches no file", arg);
        lt_error_hint(err, "quote the pattern if the shell should not expand it; check the path");
        return LT_ERR_IO;
    }
    if (rc != 0) {
        globfree(&g);
        return lt_fail(err, rc == GLOB_NOSPACE ? LT_ERR_NOMEM : LT_ERR_IO, where ? where : arg,
                       "cannot expand input pattern '%s'", arg);
    }
    lt_status st = LT_OK;
    for (size_t i = 0; st == LT_OK && i < g.gl_pathc; i++) {
        struct stat sb;
        if (stat(g.gl_pathv[i], &sb) != 0) continue; /* vanished or dangling link */
        if (S_ISDIR(sb.st_mode))
            st = add_directory(g.gl_pathv[i], out, err);
        else if (S_ISREG(sb.st_mode))
            lt_strlist_push(out, g.gl_pathv[i]);
    }
    globfree(&g);
    return st;
}

lt_status lt_glob_inputs(const char *const *args, size_t nargs, lt_strlist *out, lt_error *err) {
    for (size_t i = 0; i < nargs; i++) {
        lt_status st = add_input(args[i], NULL, out, err);
        if (st != LT_OK) return st;
    }
    lt_strlist_sort_unique(out);
    return LT_OK;
}

/* ---------------------------------------------------------------- encodings */

#ifndef LT_PKGDATADIR /* the installed data directory (the build defines it) */
#define LT_PKGDATADIR "/usr/local/share/longtail"
#endif

static bool regular_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static char *vocab_path_of(const char *dir, const char *name, const char *ext) {
    size_t n = strlen(dir) + strlen(name) + strlen(ext) + 2;
    char *p = lt_malloc_check(n);
    snprintf(p, n, "%s/%s%s", dir, name, ext);
    return p;
}

lt_status lt_vocab_find(const char *name, const char *vocab_dir, char **vocab_path, char **json_path, lt_error *err) {
    *vocab_path = *json_path = NULL;
    if (!*name || strchr(name, '/'))
        return lt_fail(err, LT_ERR_USAGE, NULL, "'%s' is not an encoding name", name);
    const char *env = getenv("LONGTAIL_VOCAB_DIR");
    const char *dirs[3] = {vocab_dir, env && *env ? env : NULL, LT_PKGDATADIR "/vocab"};
    char searched[1024] = "";
    size_t used = 0;
    for (int d = 0; d < 3; d++) {
        if (!dirs[d]) continue;
        char *v = vocab_path_of(dirs[d], name, ".tiktoken"), *j = vocab_path_of(dirs[d], name, ".json");
        if (regular_file(v) && regular_file(j)) {
            *vocab_path = v;
            *json_path = j;
            return LT_OK;
        }
        free(v);
        free(j);
        int w = snprintf(searched + used, sizeof searched - used, "%s%s", used ? ", " : "", dirs[d]);
        if (w > 0 && (size_t)w < sizeof searched - used) used += (size_t)w;
    }
    lt_fail(err, LT_ERR_USAGE, NULL, "encoding '%s' not found: no %s.tiktoken + %s.json in %s", name, name, name,
            searched);
    lt_error_hint(err, "pass --vocab-dir DIR (or set LONGTAIL_VOCAB_DIR) to a directory with the tiktoken files");
    return LT_ERR_USAGE;
}
