/*
 * lib/strutil.h — small string helpers: trimming, edit distance (for "did you mean"),
 * and strict parsers for the value types of the config (integers, sizes with K/M/G/T
 * suffixes, decimal numbers, booleans).
 *
 * Parsers
 *   Every parser reads the WHOLE text: no leading or trailing blanks, no trailing junk
 *   (trim first with lt_trim). Each returns LT_OK and stores the value, or LT_ERR_INPUT
 *   and leaves *out unchanged. The `_why` variants also say why a text was refused:
 *   *why is set to NULL when the text is not of the expected form at all ("eighty"), and
 *   to a short static reason when the form is right but the value is not ("too large",
 *   "not a whole number"); callers put that after their own message.
 *
 *   integer  [+-]DIGITS, decimal, no suffix, no separators; int64_t range.
 *   size     DIGITS[.DIGITS][SUFFIX], SUFFIX one of K M G T (either case) = 2^10, 2^20,
 *            2^30, 2^40; no "B"/"iB", no blank before the suffix, no sign. A fraction is
 *            allowed when the result is a whole number (1.5G, 0.5K; not 1.3K), with at most 18
 *            significant decimal places. The largest
 *            size is INT64_MAX (2^63 - 1) so that sizes fit signed 64-bit arithmetic
 *            (off_t, differences); larger values are refused, never wrapped.
 *   double   [+-]DIGITS[.DIGITS][(e|E)[+-]DIGITS] (also .5 and 5.); finite only: no inf,
 *            nan or hex floats; overflow and underflow to zero are refused.
 *   bool     true/false, yes/no, on/off, 1/0, in any case.
 *
 * Ownership: nothing is allocated except inside lt_edit_distance (freed before return).
 * Thread-safety: all functions are reentrant.
 */
#ifndef LT_STRUTIL_H
#define LT_STRUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h" /* lt_status */

/* The largest value lt_parse_size accepts (INT64_MAX). */
#define LT_SIZE_MAX ((uint64_t)INT64_MAX)

/*
 * Trim ASCII white space (space, \t, \n, \v, \f, \r) in place: writes a NUL after the last
 * non-blank character and returns a pointer to the first one (inside `s`). NULL-safe.
 */
char *lt_trim(char *s);

/* Whether `c` is ASCII white space (space, \t, \n, \v, \f, \r), whatever the locale. */
bool lt_is_blank_char(char c);

/* Whether `s` is NULL, empty, or only white space. */
bool lt_is_blank(const char *s);

/*
 * Edit distance between two byte strings: the least number of single-byte insertions,
 * deletions, substitutions and swaps of two adjacent bytes that turn `a` into `b`
 * (Levenshtein with transpositions, "optimal string alignment"). Case-sensitive.
 * NULL counts as "". Returns SIZE_MAX only if memory for a long pair runs out.
 */
size_t lt_edit_distance(const char *a, const char *b);

/*
 * Whether a misspelling `typed` is close enough to `candidate` at distance `dist` to be
 * offered as "did you mean ...": dist <= 1 + strlen(typed) / 4, at most 3, and never
 * the whole word (dist < strlen(candidate)). Used for every suggestion in the project so
 * that they behave the same.
 */
bool lt_is_close_match(const char *typed, const char *candidate, size_t dist);

lt_status lt_parse_int64(const char *text, int64_t *out);
lt_status lt_parse_int64_why(const char *text, int64_t *out, const char **why);

lt_status lt_parse_size(const char *text, uint64_t *out);
lt_status lt_parse_size_why(const char *text, uint64_t *out, const char **why);

lt_status lt_parse_double(const char *text, double *out);
lt_status lt_parse_double_why(const char *text, double *out, const char **why);

lt_status lt_parse_bool(const char *text, bool *out);

/*
 * Format a size with the largest suffix that divides it exactly ("80G", "1536M", "4K",
 * "1000"): lt_parse_size reads the text back to the same value. Writes at most `cap`
 * bytes including the NUL (21 is always enough); returns `buf`.
 */
char *lt_format_size(uint64_t value, char *buf, size_t cap);

#endif /* LT_STRUTIL_H */
