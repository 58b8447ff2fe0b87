/*
 * plans/batches/lengths.h — length files (CONTRACTS.md `--lengths FILE`): one token count per line,
 * as in shared/lengths and as `dataprep lengths DIR` prints them.
 */
#ifndef LT_LENGTHS_H
#define LT_LENGTHS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/error.h" /* lt_status, lt_error */

/* Read the lengths of `path` ("-" = standard input) into a new array *out of *n counts
 * (free() it). Each line holds one integer >= 0 (K/M/G suffixes accepted, surrounding
 * blanks ignored; 0 is an empty document, as `dataprep lengths` prints it); blank lines
 * and lines starting with '#' are skipped. LT_ERR_INPUT naming
 * file:line for anything else, or for a file with no count; LT_ERR_IO when it cannot be
 * read. */
lt_status lt_lengths_read(const char *path, int64_t **out, size_t *n, lt_error *err);

/* Parse a comma-separated list of positive counts ("1,1,2,4", "4K,128K") into a new array.
 * LT_ERR_USAGE naming `what` (e.g. "--unit-lengths") and the bad item. */
lt_status lt_lengths_parse_list(const char *text, const char *what, int64_t **out, size_t *n, lt_error *err);

#endif /* LT_LENGTHS_H */
