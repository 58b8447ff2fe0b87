/*
 * lib/config.h — the INI configuration every stage reads (dataprep, planner, trainer,
 * jobctl): one schema, typed values validated at load time, origins, a reloadable dump.
 *
 * Format (docs/config.md has the full description and the table of keys)
 *   [section]               one of the sections of the schema: run data model parallel
 *                           plan train slurm; a section may appear more than once
 *   key = value             a key of that section (lower_snake_case); blanks around the
 *                           key and the value are dropped; leading indentation is ignored
 *                           (there are no multi-line values)
 *   ; comment  # comment    whole-line comments; " ; comment" after a value too (a ';'
 *                           preceded by a blank starts a comment, so values cannot hold one)
 *   key =                   an empty value: "no value" — allowed only for keys whose default
 *                           is unset (it clears what an earlier file or --set gave)
 *
 * Value types (lt_config_type): string; int (plain decimal int64, no suffix); size (an
 * integer with an optional K/M/G/T suffix, powers of 1024, either case, 1.5G allowed when
 * the result is whole; see lib/strutil.h); double (decimal, finite); bool (true/false,
 * yes/no, on/off, 1/0, any case); enum (exactly one of the key's choices, case-sensitive).
 * Int, size and double keys may carry a minimum and a maximum in the schema.
 *
 * Layering: lt_config_new() holds the defaults; each lt_config_load_file() and each
 * lt_config_set() applies on top, in call order, the later winning. Programs do
 *     defaults -> --config FILE -> each --set section.key=value in command-line order.
 * Within ONE file a key given twice is an error naming both lines (sections may repeat).
 *
 * Errors (lib/error.h): WHAT names the section.key and the reason, WHERE is "FILE:LINE"
 * for a file, "--set section.key=value" for lt_config_set, the caller's `origin` for
 * lt_config_set_value; HINT says what would be accepted, or "did you mean ...". Status:
 * LT_ERR_CONFIG for a bad section/key/value, LT_ERR_USAGE for a malformed --set, LT_ERR_IO
 * for a file that cannot be opened or read, LT_ERR_NOMEM when memory runs out,
 * LT_ERR_INTERNAL for a programming error (a getter for a key that is not in the schema
 * or of another type). A failing load or set leaves the config exactly as it was.
 *
 * Ownership: lt_config_new() returns an object owned by the caller, freed with
 * lt_config_free(). Strings returned by getters belong to the config and stay valid until
 * the key is set again or the config is freed. lt_config_dump_string() returns a malloc'd
 * string the caller frees.
 *
 * Thread-safety: the getters, lt_config_dump*, lt_config_equal and the schema functions
 * only read, so a config that is no longer modified may be shared by any number of
 * threads. Loading and setting modify it and need exclusive access. lt_config_load_*
 * also sets inih's process-wide parser options for the duration of the call (and restores
 * them), so configs are loaded at start-up, not concurrently with other users of inih.
 */
#ifndef LT_CONFIG_H
#define LT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/error.h" /* lt_status, lt_error */

/* Longest line of a config file (bytes, without the newline) and longest value. */
#define LT_CONFIG_LINE_MAX 4000
#define LT_CONFIG_VALUE_MAX 2048

typedef struct lt_config lt_config;

/* ------------------------------------------------------------------ the schema */

typedef enum lt_config_type {
    LT_CONFIG_STRING,
    LT_CONFIG_INT,    /* int64_t */
    LT_CONFIG_SIZE,   /* uint64_t, <= INT64_MAX, K/M/G/T suffixes */
    LT_CONFIG_DOUBLE, /* finite double */
    LT_CONFIG_BOOL,
    LT_CONFIG_ENUM,   /* a string that must be one of `choices` */
} lt_config_type;

/* One valid key (lib/config_schema.c holds the table). All text fields are static. */
typedef struct lt_config_key {
    const char *section;
    const char *key;
    lt_config_type type;
    const char *def;     /* default value as text; NULL = unset by default */
    const char *choices; /* ENUM: the allowed values, separated by single spaces */
    const char *min;     /* INT, SIZE, DOUBLE: smallest allowed value as text, or NULL */
    const char *max;     /* INT, SIZE, DOUBLE: largest allowed value as text, or NULL */
    const char *help;    /* one line for docs and --help */
} lt_config_key;

typedef struct lt_config_section {
    const char *name;
    const char *help;
    bool named; /* a template: a config gives it as [NAME.INSTANCE], any number of times
                   ([source.web], [source.code]); each instance has the section's keys */
} lt_config_section;

/* The whole schema, in its order (grouped by section, sections in lt_config_sections
 * order). *count receives the number of entries. */
const lt_config_key *lt_config_schema(size_t *count);

/* The sections, in order: run data model parallel plan train slurm. */
const lt_config_section *lt_config_sections(size_t *count);

/* The schema entry of section.key, or NULL when there is none. */
const lt_config_key *lt_config_find_key(const char *section, const char *key);

/* "string", "int", "size", "double", "bool", "enum". */
const char *lt_config_type_name(lt_config_type type);

/* ------------------------------------------------------------------ building a config */

/* A config holding every default. NULL when out of memory or when a default in the
 * schema does not validate (a programming error that the unit tests catch). */
lt_config *lt_config_new(void);

/* Free a config and everything it owns. NULL-safe. */
void lt_config_free(lt_config *cfg);

/*
 * Read an INI file over the current values. Every value is validated against its key's
 * type; the first error stops the load and the config is left unchanged. Errors (WHAT,
 * then WHERE in parentheses, then HINT):
 *   cannot open config file: No such file or directory (PATH)                   LT_ERR_IO
 *   unknown section [plna] (PATH:LINE)  did you mean [plan]? sections: ...      LT_ERR_CONFIG
 *   unknown key 'contxt_len' in section [plan] (PATH:LINE)  did you mean 'context_len'?
 *   duplicate key 'steps' in section [plan], first given at line 4 (PATH:LINE)
 *   invalid size 'eighty' for plan.mem (PATH:LINE)  sizes are integers with ...
 *   syntax error: 'contextlen 4K' is not a 'key = value' line (PATH:LINE)
 * Values remember "PATH:LINE" as their origin.
 */
lt_status lt_config_load_file(lt_config *cfg, const char *path, lt_error *err);

/* The same for INI text in memory (e.g. a dump stored in a plan database); `name` stands
 * for the file name in WHERE and origins (NULL: "<string>"). */
lt_status lt_config_load_string(lt_config *cfg, const char *text, const char *name,
                                lt_error *err);

/*
 * Apply one command-line override "section.key=value" (blanks around the parts are
 * dropped; the value may itself contain '='). WHERE of an error is
 * "--set ASSIGNMENT"; a text without '=' or without "section." is LT_ERR_USAGE, a bad
 * key or value LT_ERR_CONFIG. The value's origin becomes "--set".
 */
lt_status lt_config_set(lt_config *cfg, const char *assignment, lt_error *err);

/* Set section.key to `value` (validated like a file value; "" = no value, see above),
 * recording `origin` ("--set", "env LONGTAIL_X", ...; NULL: "api") as its origin and as
 * WHERE of an error. */
lt_status lt_config_set_value(lt_config *cfg, const char *section, const char *key,
                              const char *value, const char *origin, lt_error *err);

/* ------------------------------------------------------------------ reading values */

/*
 * The value as text (for STRING and ENUM keys the value itself; for other types the text
 * as written, e.g. "256K"), or NULL when the key has no value or is not in the schema.
 */
const char *lt_config_get_string(const lt_config *cfg, const char *section, const char *key);

/*
 * Typed getters. LT_OK and *out set; LT_ERR_CONFIG when the key has no value ("no value
 * for model.layers", hint how to set it); LT_ERR_INTERNAL when section.key is not in the
 * schema or is of another type (get_int on a size key is such an error: sizes and ints
 * are distinct types). Values were validated when set, so nothing else can fail.
 */
lt_status lt_config_get_int(const lt_config *cfg, const char *section, const char *key,
                            int64_t *out, lt_error *err);
lt_status lt_config_get_size(const lt_config *cfg, const char *section, const char *key,
                             uint64_t *out, lt_error *err);
lt_status lt_config_get_double(const lt_config *cfg, const char *section, const char *key,
                               double *out, lt_error *err);
lt_status lt_config_get_bool(const lt_config *cfg, const char *section, const char *key,
                             bool *out, lt_error *err);

/* Named sections. A template section (lt_config_section.named: "source") is given as
 * [source.NAME] (NAME: 1..48 of a-z 0-9 _ -, starting with a letter), in files and as
 * --set source.NAME.key=VALUE; each NAME has its own copy of the section's keys, at their
 * defaults until set. Every getter above takes "source.NAME" as its section. A plain
 * [source] is an error asking for a name. The dump writes each instance as its own
 * section; lt_config_equal compares instances by name. */
size_t lt_config_n_named(const lt_config *cfg, const char *section);                 /* instances given */
const char *lt_config_named(const lt_config *cfg, const char *section, size_t i); /* NAME, in the order first given */

/* Whether section.key has a value (false for keys not in the schema). */
bool lt_config_is_set(const lt_config *cfg, const char *section, const char *key);

/* Where the current value came from: "default", "PATH:LINE", "--set", or the origin given
 * to lt_config_set_value. NULL for keys not in the schema. */
const char *lt_config_origin(const lt_config *cfg, const char *section, const char *key);

/* Whether two configs have the same effective values: the same keys set, and equal
 * typed values (so "1536M" equals "1.5G"); origins are not compared. */
bool lt_config_equal(const lt_config *a, const lt_config *b);

/* ------------------------------------------------------------------ dumping */

/*
 * The effective config as INI that lt_config_load_* reads back to equal values:
 * a header comment, then every section and every key of the schema in schema order, the
 * value as written, and its origin as a trailing comment:
 *     [plan]
 *     strategy = megatron                  ; from etc/longtail.ini:52
 *     context_len = 4K                     ; --set
 *     hardware = h200                      ; default
 *     ; mem =
 * A key without a value is the comment "; key =". The output depends only on the values
 * and origins (no time, no addresses), so equal inputs give byte-identical dumps.
 * lt_config_dump returns LT_ERR_IO when writing fails, LT_ERR_NOMEM when memory runs out.
 */
lt_status lt_config_dump(const lt_config *cfg, FILE *out);

/* The same text, malloc'd (caller frees); NULL when out of memory. */
char *lt_config_dump_string(const lt_config *cfg);

#endif /* LT_CONFIG_H */
