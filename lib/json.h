/*
 * lib/json.h — a minimal JSON writer, a JSON-lines string-field reader, a JSON document
 * parser (a small DOM), and UTF-8 repair.
 *
 * WRITER (lt_json): builds one JSON text (RFC 8259) in a growable, always NUL-terminated
 * buffer; commas and colons are placed automatically from the nesting state.
 *
 *     lt_json j;
 *     lt_json_init(&j);
 *     lt_json_object_begin(&j);
 *     lt_json_key(&j, "text");  lt_json_string(&j, s);
 *     lt_json_key(&j, "loss");  lt_json_double(&j, 2.5);
 *     lt_json_object_end(&j);
 *     st = lt_json_fwrite_line(&j, f, path, &err);   // "{"text":"...","loss":2.5}\n"
 *     lt_json_reset(&j);                            // next line, buffer reused
 *     lt_json_free(&j);
 *
 *   - Strings (values and keys) are written as follows: `"` and `\` escaped; U+0000..U+001F
 *     as \b \f \n \r \t or \u00XX (lowercase hex); DEL and '/' unescaped; U+2028 and U+2029
 *     as \u2028 \u2029 (safe to embed in JavaScript); valid non-ASCII UTF-8 copied as is;
 *     INVALID UTF-8 replaced by U+FFFD, one per maximal subpart (see lt_utf8_next) exactly
 *     like Python's bytes.decode("utf-8", errors="replace"). j->replacements counts them.
 *   - Numbers: lt_json_int / lt_json_uint exact; lt_json_double writes the shortest of the
 *     %.15g / %.16g / %.17g forms that reads back to the same double (so integral values
 *     print as "3", not "3.0"), always with '.' as decimal point whatever the locale;
 *     NaN and +-Inf are written as null.
 *   - lt_json_number_text writes a number given as its JSON text (e.g. an lt_jv NUMBER,
 *     so big or precise literals are copied exactly); text that is not one RFC 8259 number
 *     is misuse.
 *   - Misuse — a value where a key is required, a key outside an object, an end that does
 *     not match the open container, a second top-level value without lt_json_reset, nesting
 *     deeper than LT_JSON_MAX_DEPTH, writing an incomplete text — is a programming error:
 *     reported with file:line and the process exits 1 (LT_CHECK style). Out of memory
 *     likewise exits (lt_realloc_check). So the writer functions return nothing.
 *
 * READER (lt_jsonl_reader / lt_jsonl_get_string): extract ONE string field from a JSON-lines
 * record, e.g. the "text" of {"id": 7, "text": "...", "meta": {...}}.
 *   - The whole line must be exactly one JSON object (RFC 8259, strict: no NaN/Infinity, no
 *     comments, no trailing commas, no single quotes), optionally surrounded by JSON
 *     whitespace (so a trailing "\n" or "\r\n" is fine) and optionally preceded by a UTF-8
 *     byte order mark. Every member is validated, including nested values, which are skipped
 *     without recursion up to a nesting depth of LT_JSON_MAX_PARSE_DEPTH (the top-level object
 *     is depth 1); deeper input is rejected cleanly.
 *   - The FIRST top-level member whose unescaped name equals `key` wins; later duplicates are
 *     validated and ignored. Nested members of the same name are not considered. Its value
 *     must be a string, else LT_ERR_INPUT "value of key 'K' is a number, expected a string"
 *     (object, array, number, boolean or null).
 *   - The string is fully unescaped to UTF-8: all JSON escapes; \uXXXX with surrogate pairs
 *     combined (\ud83d\ude00 -> U+1F600); an unpaired surrogate escape becomes U+FFFD (and a
 *     following escape is decoded on its own); \u0000 gives a NUL byte (hence the length);
 *     invalid UTF-8 in the raw bytes becomes U+FFFD per maximal subpart, as in the writer.
 *     Strings of other members are validated for syntax only (their bytes are not UTF-8
 *     checked).
 *   - Key absent: LT_OK with *out = NULL and *out_len = 0.
 *   - Malformed line: LT_ERR_INPUT, err->where = "column N" (N = byte offset + 1 of the
 *     offending byte, or of the opening quote for "unterminated string", or len + 1 for an
 *     unexpected end), err->what a specific reason ("unterminated string", "invalid escape
 *     '\q'", "expected ',' or '}'", "trailing characters after object", "control character
 *     U+000A in string", ...). Callers add the file and line number (lt_error_prefix or
 *     their own WHERE).
 *   - Out of memory for the output: LT_ERR_NOMEM.
 *
 * DOCUMENT (lt_json_parse / lt_jv): parse one whole JSON text — a config or sidecar file —
 * into a tree. Same scanner as the reader, so the same grammar, strictness, unescaping,
 * U+FFFD repair and error messages, with these differences:
 *   - Any value may be at the top (not only an object); optional UTF-8 BOM and JSON
 *     whitespace around it; anything else after it is an error ("trailing characters after
 *     the JSON value, starting with 'x'").
 *   - Every string and member name is decoded as the reader decodes its value (escapes,
 *     surrogate pairs, unpaired surrogate escape -> U+FFFD, ill-formed UTF-8 -> U+FFFD per
 *     maximal subpart), so all text in the tree is well-formed UTF-8. The substitutions of
 *     the whole document are counted in the ROOT's `replacements` (0 in other nodes).
 *   - Numbers are kept as their literal text (exact; convert with lt_jv_int64, strtod...).
 *   - Objects keep every member in document order, duplicates included; lt_jv_get returns
 *     the LAST member of a name (as Python's json.loads does).
 *   - Nesting up to LT_JSON_MAX_PARSE_DEPTH containers (the outermost is level 1).
 *   - Errors: LT_ERR_INPUT with err->where = "line L, column C" (1-based; lines are ended
 *     by '\n'; the column counts BYTES from the start of the line, a BOM included, like
 *     the reader's "column N"; an unexpected end is placed just after the last byte) and
 *     err->what as the reader's, with "end of input" for "end of line" ("expected ',' or
 *     '}', found end of input", "unexpected end of input, expected a value", "empty input,
 *     expected a JSON value"). Callers add the file name (lt_error_prefix or their WHERE).
 *     Out of memory: LT_ERR_NOMEM. On any error *out is NULL and nothing is leaked.
 *   - Each node records the line and column where its value starts, for the caller's own
 *     messages ("special_tokens" at line 5, column 20 is a string, expected an object).
 *
 *     lt_jv *doc;
 *     if ((st = lt_json_parse(text, len, &doc, &err)) != LT_OK) return st;
 *     const lt_jv *pat = lt_jv_get(doc, "pat_str");          // NULL if absent
 *     if (pat == NULL || pat->type != LT_JV_STRING) ...     // lt_jv_type_name(pat->type)
 *     const lt_jv *sp = lt_jv_get(doc, "special_tokens");
 *     for (size_t i = 0; sp != NULL && i < sp->n; i++)
 *         if (lt_jv_int64(&sp->items[i], &id)) ... sp->keys[i] ...
 *     lt_jv_free(doc);
 *
 * UTF-8 (lt_utf8_*): the shared decoder. Well-formed UTF-8 is the table of Unicode 15
 * section 3.9 (no overlongs, no surrogates D800..DFFF, nothing above U+10FFFF). An ill-formed
 * sequence is replaced by one U+FFFD per "maximal subpart" (Unicode 3.9 U+FFFD substitution
 * of maximal subparts, W3C encoding standard): a lead byte followed by as many continuation
 * bytes as can still begin a well-formed sequence; a byte that cannot start one is a subpart
 * by itself. Examples: E0 80 80 -> 3 x U+FFFD, ED A0 80 -> 3, F0 9F 98 -> 1, C0 AF -> 2,
 * F4 90 80 80 -> 4.
 *
 * Ownership: an lt_json owns its buffer (lt_json_free releases it); an lt_jsonl_reader owns
 * its scratch buffer and the string lt_jsonl_reader_get returns points into it, valid until
 * the next call on that reader or lt_jsonl_reader_free. lt_jsonl_get_string returns a
 * malloc'd copy that the caller frees. lt_json_parse returns a tree that the caller
 * releases with lt_jv_free(root); every pointer into it (items, texts, names) is owned by
 * the root and valid until then. The tree is read-only for callers.
 *
 * Thread-safety: no global state; distinct lt_json / lt_jsonl_reader objects may be used
 * from different threads concurrently, one object from one thread at a time. A parsed tree
 * may be read from several threads at once.
 */
#ifndef LT_JSON_H
#define LT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/error.h"

/* ------------------------------------------------------------------ UTF-8 */

/* The code point value returned by lt_utf8_next for an ill-formed subpart. */
#define LT_UTF8_INVALID (-1)

/* Bytes needed by lt_utf8_sanitize for an input of `len` bytes (each ill-formed byte can
 * become the 3 bytes of U+FFFD). The caller checks len <= SIZE_MAX / 3. */
#define LT_UTF8_SANITIZE_MAX(len) (3 * (size_t)(len))

/* Decode the sequence at s[0..n), n >= 1: returns the number of bytes it takes (1..4) and
 * sets *cp to the code point, or to LT_UTF8_INVALID when those bytes are one maximal
 * ill-formed subpart (to be replaced by one U+FFFD). */
size_t lt_utf8_next(const char *s, size_t n, int32_t *cp);

/* Copy in[0..len) to out, replacing each maximal ill-formed subpart with U+FFFD (EF BF BD).
 * `out` must have room for LT_UTF8_SANITIZE_MAX(len) bytes and may not overlap `in`.
 * Returns the bytes written; adds the number of replacements to *replacements if non-NULL. */
size_t lt_utf8_sanitize(const char *in, size_t len, char *out, size_t *replacements);

/* True when s[0..len) is well-formed UTF-8. */
bool lt_utf8_valid(const char *s, size_t len);

/* Append code point cp (0..0x10FFFF, not a surrogate) as UTF-8 to out; returns 1..4. */
size_t lt_utf8_encode(uint32_t cp, char *out);

/* ------------------------------------------------------------------ writer */

#define LT_JSON_MAX_DEPTH 256 /* writer nesting limit */

typedef struct lt_json {
    char *buf;           /* the JSON text so far, NUL-terminated once anything is written */
    size_t len, cap;     /* bytes used (without the NUL), bytes allocated */
    size_t replacements; /* invalid UTF-8 sequences replaced by U+FFFD since init/reset */
    /* nesting state (private): frame[0] is the top level; frame[d] for open container d */
    int depth;
    unsigned char frame[LT_JSON_MAX_DEPTH + 1];
} lt_json;

void lt_json_init(lt_json *j);
void lt_json_free(lt_json *j);  /* releases the buffer; j is then as after lt_json_init */
void lt_json_reset(lt_json *j); /* empty the text and state, keep the buffer */

void lt_json_object_begin(lt_json *j);
void lt_json_object_end(lt_json *j);
void lt_json_array_begin(lt_json *j);
void lt_json_array_end(lt_json *j);

/* Member name inside an object (escaped like a string); the next call must write its value. */
void lt_json_key(lt_json *j, const char *name);
void lt_json_key_n(lt_json *j, const char *name, size_t len);

/* Values. A NULL string (lt_json_string(j, NULL), lt_json_string_n(j, NULL, 0)) writes null. */
void lt_json_string(lt_json *j, const char *s);
void lt_json_string_n(lt_json *j, const char *s, size_t len);
void lt_json_int(lt_json *j, int64_t v);
void lt_json_uint(lt_json *j, uint64_t v);
void lt_json_double(lt_json *j, double v);
void lt_json_bool(lt_json *j, bool v);
void lt_json_null(lt_json *j);

/* True once exactly one complete top-level value has been written. */
bool lt_json_complete(const lt_json *j);

/* The text so far ("" when nothing was written). Valid until the next writer call. */
const char *lt_json_cstr(const lt_json *j);

/* A number given as its JSON text text[0..len), written as is (see WRITER above). */
void lt_json_number_text(lt_json *j, const char *text, size_t len);

/* Write the complete text to `f` (plus '\n' for the _line variant). `where` names the file
 * for the error (may be NULL). Returns LT_ERR_IO on a short write or stream error. */
lt_status lt_json_fwrite(const lt_json *j, FILE *f, const char *where, lt_error *err);
lt_status lt_json_fwrite_line(const lt_json *j, FILE *f, const char *where, lt_error *err);

/* ------------------------------------------------------------------ JSON-lines reader */

#define LT_JSON_MAX_PARSE_DEPTH 512 /* reader nesting limit, top-level object included */

typedef struct lt_jsonl_reader {
    char *buf;                 /* scratch: the last extracted string (NUL-terminated) + keys */
    size_t cap;                /* bytes allocated */
    size_t replacements;       /* U+FFFD substitutions in the last extracted string */
    size_t total_replacements; /* ... summed over every call since init */
} lt_jsonl_reader;

void lt_jsonl_reader_init(lt_jsonl_reader *rd);
void lt_jsonl_reader_free(lt_jsonl_reader *rd);

/*
 * Parse line[0..len) (see READER above) and find string member `key` (NUL-terminated,
 * compared byte-wise with the unescaped member name). On LT_OK, *out points to the unescaped
 * NUL-terminated value inside rd->buf and *out_len is its length (it may contain NULs), or
 * *out is NULL and *out_len 0 when the key is absent. On error *out is NULL.
 */
lt_status lt_jsonl_reader_get(lt_jsonl_reader *rd, const char *line, size_t len, const char *key,
                              const char **out, size_t *out_len, lt_error *err);

/* One-shot variant: *out is a malloc'd NUL-terminated copy (caller frees), NULL if absent. */
lt_status lt_jsonl_get_string(const char *line, size_t len, const char *key, char **out, size_t *out_len,
                              lt_error *err);

/* ------------------------------------------------------------------ document parser */

typedef enum lt_jv_type { LT_JV_NULL, LT_JV_BOOL, LT_JV_NUMBER, LT_JV_STRING, LT_JV_ARRAY, LT_JV_OBJECT } lt_jv_type;

typedef struct lt_jv lt_jv;

/* One JSON value of a parsed document (see DOCUMENT above). Fields not listed for a type are
 * 0 / NULL. */
struct lt_jv {
    lt_jv_type type;
    bool boolean;         /* BOOL: its value */
    char *text;           /* STRING: unescaped UTF-8, NUL-terminated (may contain NULs);
                             NUMBER: its literal text as in the document ("-1.5e3") */
    size_t len;           /* length of text */
    size_t n;             /* ARRAY/OBJECT: number of items / members */
    lt_jv *items;         /* ARRAY/OBJECT: the values, in document order */
    char **keys;          /* OBJECT: unescaped member names (NUL-terminated, may contain NULs),
                             parallel to items */
    size_t *key_lens;     /* OBJECT: their lengths */
    size_t line, column;  /* where the value starts in the document (1-based; column in bytes) */
    size_t replacements;  /* ROOT only: U+FFFD substitutions made in the document's strings
                             and member names (ill-formed UTF-8, unpaired surrogate escapes) */
};

/*
 * Parse one complete JSON document text[0..len) (see DOCUMENT above). On LT_OK *out is the
 * root (free with lt_jv_free); on error *out is NULL and err (if non-NULL) says why and
 * where. `text` need not be NUL-terminated and may be NULL when len is 0.
 */
lt_status lt_json_parse(const char *text, size_t len, lt_jv **out, lt_error *err);

/* Release a tree returned by lt_json_parse (the root only; NULL is fine). */
void lt_jv_free(lt_jv *v);

/* The value of the LAST member named `key` (NUL-terminated, compared byte-wise with the
 * unescaped name) of `obj`; NULL when obj is NULL, not an object, or has no such member. */
const lt_jv *lt_jv_get(const lt_jv *obj, const char *key);

/*
 * True, with *out set, when v is a NUMBER whose value is an integer in int64 range, decided
 * exactly from its text: "42", "-9223372036854775808", "1e3", "1.0", "1.5e1", "100e-2" are;
 * "1.5", "1e-3", "9223372036854775808", "1e19" are not. *out is untouched when false.
 */
bool lt_jv_int64(const lt_jv *v, int64_t *out);

/* "null", "a boolean", "a number", "a string", "an array", "an object" (for messages). */
const char *lt_jv_type_name(lt_jv_type t);
/* Same type and content: strings and numbers byte-wise (numbers as their literal text),
 * members with their names and in order. */
bool lt_jv_equal(const lt_jv *a, const lt_jv *b);
/* Write a parsed value with the writer (numbers as their literal text): a tree written back.
 * Deeper than LT_JSON_MAX_DEPTH is misuse, as for the writer. */
void lt_json_value(lt_json *j, const lt_jv *v);

#endif /* LT_JSON_H */
