/*
 * lib/files.h — files that are never half-written, directories, input lists.
 *
 * Atomic write (the rule for every output of every stage, DESIGN.md): data goes to a
 * hidden temporary file in the destination's directory (`.NAME.tmp.XXXXXX`), which is
 * flushed, fsync'ed, closed, renamed over NAME, and then the directory is fsync'ed so
 * the rename itself survives a crash. A process killed at any moment leaves either the
 * old NAME, or the new one, never a partial NAME; at worst a stale hidden temp file,
 * which readers ignore and lt_remove_stale_temps() deletes on the next run.
 *
 * Input lists: lt_glob_inputs() turns command-line arguments into a sorted, duplicate-
 * free list of regular files: a glob pattern expands (a pattern matching nothing is an
 * error), a directory contributes every regular, non-hidden file below it (recursively),
 * `@FILE` reads one path or pattern per line (blank lines and `#` comments skipped).
 * Sorting is bytewise, so task I of N gets the same files on every machine.
 *
 * All functions return LT_OK or an error naming the path and the system's reason.
 * Thread-safety: functions are reentrant; one lt_atomic_file belongs to one thread.
 */
#ifndef LT_FILES_H
#define LT_FILES_H

#include <stdio.h>
#include <sys/types.h>

#include "lib/error.h"   /* lt_status, lt_error */
#include "lib/strlist.h" /* lt_strlist */

typedef struct lt_atomic_file {
    FILE *fp;       /* write through this (stdio) */
    char *path;     /* final name */
    char *tmp_path; /* hidden temporary in the same directory */
} lt_atomic_file;

/* Create the temporary for `path`; its mode becomes 0666 & ~umask at commit. */
lt_status lt_atomic_open(lt_atomic_file *af, const char *path, lt_error *err);
/* flush + fsync + close + rename + fsync(dir). On failure the temp is removed. */
lt_status lt_atomic_commit(lt_atomic_file *af, lt_error *err);
/* Drop the temporary (on any error path). NULL-safe; safe after commit (no-op). */
void lt_atomic_abort(lt_atomic_file *af);

/* Whole-buffer convenience over the three calls above. */
lt_status lt_write_file_atomic(const char *path, const void *data, size_t len, lt_error *err);

/* fsync a directory (after creating/renaming entries in it). */
lt_status lt_fsync_dir(const char *dir, lt_error *err);

/* mkdir -p with `mode` for created components; an existing directory is fine. */
lt_status lt_mkdir_p(const char *path, mode_t mode, lt_error *err);

/* Remove `.NAME.tmp.XXXXXX` leftovers of killed writers in `dir`; returns how many. */
lt_status lt_remove_stale_temps(const char *dir, size_t *removed, lt_error *err);
/* The same, only for final names starting with `prefix` (NULL: all): for writers that share
 * a directory with others still running, e.g. the tasks of one Slurm array. */
lt_status lt_remove_stale_temps_of(const char *dir, const char *prefix, size_t *removed, lt_error *err);

/* The last component of a path ("dir/task-00003.index" -> "task-00003.index"), inside it. */
const char *lt_path_base(const char *path);

/* Read a whole file into a NUL-terminated malloc'd buffer (caller frees). */
lt_status lt_read_file(const char *path, char **data, size_t *len, lt_error *err);

/* Expand inputs (see above) and append them, sorted and unique, to `out`. */
lt_status lt_glob_inputs(const char *const *args, size_t nargs, lt_strlist *out, lt_error *err);

/* Resolve a tokenizer encoding NAME to its two files: NAME.tiktoken and NAME.json, searched
 * in vocab_dir (if non-NULL), $LONGTAIL_VOCAB_DIR, then the installed data directory; the
 * first directory with both wins. *vocab_path and *json_path are malloc'd. LT_ERR_USAGE for
 * a name with a '/' and for an encoding found nowhere (naming the directories searched,
 * with a hint). Here, below dataprep's tokenizer and lib/model.c's vocabulary default,
 * which both search the same way. */
lt_status lt_vocab_find(const char *name, const char *vocab_dir, char **vocab_path, char **json_path, lt_error *err);

#endif /* LT_FILES_H */
