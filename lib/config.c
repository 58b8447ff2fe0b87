/*
 * lib/config.c — loading, validating, overriding, reading and dumping the INI config
 * (see config.h for the contract and lib/config_schema.c for the keys).
 *
 * Parsing uses inih's ini_parse_stream with our own line reader, which
 *   - counts physical lines, so every error can say FILE:LINE (the inih of Debian is built
 *     without line numbers in the handler);
 *   - drops leading blanks, so an indented line is an ordinary line and never the
 *     continuation of a multi-line value;
 *   - checks [section] headers itself, so an unknown section is an error even when no key
 *     follows it (inih only calls the handler for keys);
 *   - refuses lines longer than LT_CONFIG_LINE_MAX and NUL bytes instead of letting inih
 *     split or cut them silently.
 * inih's process-wide options are set for the parse (multi-line off, stop at the first
 * error, our line limit) and restored afterwards.
 *
 * A load works on a copy of the values and replaces them only when the whole file was
 * valid, so a failing load changes nothing.
 */
#include "lib/config.h"

#include <errno.h>
#include <ini.h> /* ini_parse_stream and its runtime options */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strutil.h" /* lt_parse_*, lt_edit_distance, lt_is_close_match, lt_trim, lt_is_blank_char */

typedef enum origin_kind {
    ORIGIN_DEFAULT,
    ORIGIN_FILE,  /* origin is "PATH:LINE" */
    ORIGIN_OTHER, /* origin is "--set" or the caller's text */
} origin_kind;

typedef union typed_value {
    int64_t i;  /* INT */
    uint64_t u; /* SIZE */
    double d;   /* DOUBLE */
    bool b;     /* BOOL */
} typed_value;

typedef struct cfg_value {
    char *raw;         /* the text as written; NULL = no value */
    typed_value v;     /* parsed from raw (unused for STRING and ENUM) */
    origin_kind kind;
    char *origin;      /* NULL for ORIGIN_DEFAULT */
    unsigned load_id;  /* the file load that set it (duplicate detection); 0 = none */
    long line;         /* its line in that file */
} cfg_value;

/* Named sections ([source.NAME]): the schema holds the keys of the template section
 * ("source", flagged `named`); each name given in a config gets its own copy of those
 * keys' slots, appended after the schema's: values[count + inst * tmpl_n + j] is key
 * tmpl_first + j of instance inst. One template section exists today (lt_config_sections). */
struct lt_config {
    size_t count;      /* = number of schema entries; values[i] belongs to schema[i] */
    cfg_value *values; /* count + n_inst * tmpl_n entries */
    unsigned loads;    /* file loads so far (load ids start at 1) */
    size_t n_inst;     /* named instances of the template section, in the order first given */
    char **inst;       /* their names */
};

/* ------------------------------------------------------------------ small helpers */

/* Schema entry i; every caller's i is < cfg->count, the schema's size. */
static const lt_config_key *schema_at(size_t i) { return &lt_config_schema(NULL)[i]; }

static size_t key_index(const char *section, const char *key) {
    size_t n;
    const lt_config_key *s = lt_config_schema(&n);
    if (section == NULL || key == NULL) return SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        if (strcmp(s[i].section, section) == 0 && strcmp(s[i].key, key) == 0) return i;
    return SIZE_MAX;
}

/* The template section's name and its keys' range in the schema (first, count). */
static const char *template_section(size_t *first, size_t *count) {
    size_t nsec, n;
    const lt_config_section *secs = lt_config_sections(&nsec);
    const lt_config_key *s = lt_config_schema(&n);
    for (size_t i = 0; i < nsec; i++) {
        if (!secs[i].named) continue;
        size_t f = SIZE_MAX, c = 0;
        for (size_t k = 0; k < n; k++)
            if (strcmp(s[k].section, secs[i].name) == 0) {
                if (f == SIZE_MAX) f = k;
                c++;
            }
        *first = f;
        *count = c;
        return secs[i].name;
    }
    *first = *count = 0;
    return NULL;
}

/* Whether `name` is a valid instance name: 1..48 of [a-z0-9_-], starting with a letter. */
static bool instance_name_ok(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > 48 || !(name[0] >= 'a' && name[0] <= 'z')) return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
    }
    return true;
}

/* "source.web" -> the template's name matched and the instance name "web" (NULL when
 * `section` is not TEMPLATE.NAME). */
static const char *instance_of(const char *section) {
    size_t f, c;
    const char *t = template_section(&f, &c);
    if (t == NULL || section == NULL) return NULL;
    size_t tl = strlen(t);
    if (strncmp(section, t, tl) != 0 || section[tl] != '.') return NULL;
    return section + tl + 1;
}

static size_t instance_find(const lt_config *cfg, const char *name) {
    for (size_t i = 0; i < cfg->n_inst; i++)
        if (strcmp(cfg->inst[i], name) == 0) return i;
    return SIZE_MAX;
}

/* The value slot index of section.key in cfg (schema keys and named instances alike), or
 * SIZE_MAX; *schema_idx receives the schema entry that describes it. */
static size_t slot_index(const lt_config *cfg, const char *section, const char *key, size_t *schema_idx) {
    const char *inst = instance_of(section);
    if (inst == NULL) {
        size_t idx = key_index(section, key);
        *schema_idx = idx;
        return idx;
    }
    size_t f, c;
    const char *t = template_section(&f, &c);
    size_t k = key_index(t, key), i = instance_find(cfg, inst);
    *schema_idx = k;
    if (k == SIZE_MAX || i == SIZE_MAX) return SIZE_MAX;
    return cfg->count + i * c + (k - f);
}

static size_t total_slots(const lt_config *cfg) {
    size_t f, c;
    template_section(&f, &c);
    return cfg->count + cfg->n_inst * c;
}

static bool section_exists(const char *name) {
    size_t n;
    const lt_config_section *s = lt_config_sections(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(s[i].name, name) == 0) return !s[i].named;
    const char *inst = instance_of(name);
    return inst != NULL && instance_name_ok(inst);
}

/* `text` shortened for a message: at most 60 bytes, "..." marking a cut. */
static const char *abbrev(const char *text, char buf[64]) {
    size_t n = strlen(text);
    if (n <= 60) return text;
    memcpy(buf, text, 57);
    memcpy(buf + 57, "...", 4);
    return buf;
}

/* "[run] [data] ..." */
static void list_sections(char *buf, size_t cap) {
    size_t n, used = 0;
    const lt_config_section *s = lt_config_sections(&n);
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++) {
        int w = snprintf(buf + used, cap - used, "%s[%s%s]", i ? " " : "", s[i].name, s[i].named ? ".NAME" : "");
        if (w < 0) break;
        used += (size_t)w;
    }
}

/* The keys of one section, space-separated. */
static void list_keys(const char *section, char *buf, size_t cap) {
    size_t n, used = 0;
    const lt_config_key *s = lt_config_schema(&n);
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++) {
        if (strcmp(s[i].section, section) != 0) continue;
        int w = snprintf(buf + used, cap - used, "%s%s", used ? " " : "", s[i].key);
        if (w < 0) break;
        used += (size_t)w;
    }
}

/* The first section holding a key named exactly `key`, or NULL. */
static const char *section_of_key(const char *key) {
    size_t n;
    const lt_config_key *s = lt_config_schema(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(s[i].key, key) == 0) return s[i].section;
    return NULL;
}

static const char *origin_where(const char *origin) { return origin ? origin : "api"; }

/* ------------------------------------------------------------------ validation */

/* Whether `text` is exactly one of the space-separated `choices`. */
static bool is_choice(const char *choices, const char *text) {
    size_t len = strlen(text);
    for (const char *p = choices; *p;) {
        const char *end = strchr(p, ' ');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && len > 0 && memcmp(p, text, n) == 0) return true;
        if (end == NULL) break;
        p = end + 1;
    }
    return false;
}

/* The closest choice to `text` if it is close enough, copied into buf; else false. */
static bool closest_choice(const char *choices, const char *text, char *buf, size_t cap) {
    size_t best = SIZE_MAX;
    bool found = false;
    char word[128];
    for (const char *p = choices; *p;) {
        const char *end = strchr(p, ' ');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n < sizeof word) {
            memcpy(word, p, n);
            word[n] = '\0';
            size_t d = lt_edit_distance(text, word);
            if (d < best && lt_is_close_match(text, word, d)) {
                best = d;
                snprintf(buf, cap, "%s", word);
                found = true;
            }
        }
        if (end == NULL) break;
        p = end + 1;
    }
    return found;
}

/* Characters a value may not hold because the dump could not write it back. */
static lt_status check_writable(const lt_config_key *k, const char *raw, const char *where,
                                lt_error *err) {
    char ab[64];
    size_t len = strlen(raw);
    if (len > LT_CONFIG_VALUE_MAX) {
        lt_fail(err, LT_ERR_CONFIG, where, "value for %s.%s is too long (%zu bytes; at most %d)",
                k->section, k->key, len, LT_CONFIG_VALUE_MAX);
        return LT_ERR_CONFIG;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)raw[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            lt_fail(err, LT_ERR_CONFIG, where,
                    "invalid value for %s.%s: it contains a control character", k->section, k->key);
            lt_error_hint(err, "values are one line of text");
            return LT_ERR_CONFIG;
        }
        if (c == ';' && (i == 0 || lt_is_blank_char(raw[i - 1]))) {
            lt_fail(err, LT_ERR_CONFIG, where,
                    "invalid value '%s' for %s.%s: a ';' at the start or after a blank starts a "
                    "comment",
                    abbrev(raw, ab), k->section, k->key);
            lt_error_hint(err, "remove the blank before the ';'");
            return LT_ERR_CONFIG;
        }
    }
    /* A file line is trimmed when read, so leading/trailing blanks would not come back. */
    if (len > 0 && (lt_is_blank_char(raw[0]) || lt_is_blank_char(raw[len - 1]))) {
        lt_fail(err, LT_ERR_CONFIG, where, "invalid value '%s' for %s.%s: it starts or ends with a blank",
                abbrev(raw, ab), k->section, k->key);
        lt_error_hint(err, "remove the blanks around the value");
        return LT_ERR_CONFIG;
    }
    return LT_OK;
}

static lt_status range_error(const lt_config_key *k, const char *what_type, const char *raw,
                             const char *bound_text, bool is_min, const char *where,
                             lt_error *err) {
    char ab[64];
    lt_fail(err, LT_ERR_CONFIG, where, "invalid %s '%s' for %s.%s: must be at %s %s", what_type,
            abbrev(raw, ab), k->section, k->key, is_min ? "least" : "most", bound_text);
    lt_error_hint(err, "%s.%s: %s", k->section, k->key, k->help);
    return LT_ERR_CONFIG;
}

/*
 * Validate a non-empty `raw` for key `k` and parse it into *out. The schema's bounds are
 * parsed with the same parser (they are tested to be valid).
 */
static lt_status parse_value(const lt_config_key *k, const char *raw, typed_value *out,
                             const char *where, lt_error *err) {
    char ab[64];
    const char *why = NULL;
    lt_status st = check_writable(k, raw, where, err);
    if (st != LT_OK) return st;

    switch (k->type) {
    case LT_CONFIG_STRING: return LT_OK;

    case LT_CONFIG_ENUM: {
        if (is_choice(k->choices, raw)) return LT_OK;
        char near[128];
        lt_fail(err, LT_ERR_CONFIG, where, "invalid choice '%s' for %s.%s", abbrev(raw, ab),
                k->section, k->key);
        if (closest_choice(k->choices, raw, near, sizeof near))
            lt_error_hint(err, "did you mean '%s'? choices: %s", near, k->choices);
        else
            lt_error_hint(err, "choices: %s", k->choices);
        return LT_ERR_CONFIG;
    }

    case LT_CONFIG_INT: {
        int64_t v, bound;
        if (lt_parse_int64_why(raw, &v, &why) != LT_OK) {
            uint64_t as_size;
            lt_fail(err, LT_ERR_CONFIG, where, "invalid integer '%s' for %s.%s%s%s",
                    abbrev(raw, ab), k->section, k->key, why ? ": " : "", why ? why : "");
            if (why != NULL)
                lt_error_hint(err, "integers are between %lld and %lld", (long long)INT64_MIN,
                              (long long)INT64_MAX);
            else if (strchr("KMGTkmgt", raw[strlen(raw) - 1]) != NULL &&
                     lt_parse_size(raw, &as_size) == LT_OK)
                lt_error_hint(err,
                              "%s.%s is a plain integer: write it without a K, M, G or T suffix",
                              k->section, k->key);
            else
                lt_error_hint(err, "integers are plain decimal numbers without a suffix, e.g. 8");
            return LT_ERR_CONFIG;
        }
        if (k->min && lt_parse_int64(k->min, &bound) == LT_OK && v < bound)
            return range_error(k, "integer", raw, k->min, true, where, err);
        if (k->max && lt_parse_int64(k->max, &bound) == LT_OK && v > bound)
            return range_error(k, "integer", raw, k->max, false, where, err);
        out->i = v;
        return LT_OK;
    }

    case LT_CONFIG_SIZE: {
        uint64_t v, bound;
        if (lt_parse_size_why(raw, &v, &why) != LT_OK) {
            lt_fail(err, LT_ERR_CONFIG, where, "invalid size '%s' for %s.%s%s%s", abbrev(raw, ab),
                    k->section, k->key, why ? ": " : "", why ? why : "");
            if (why != NULL && strcmp(why, "too large") == 0)
                lt_error_hint(err, "sizes are at most 2^63 - 1 (just under 8388608T)");
            else
                lt_error_hint(
                    err,
                    "sizes are integers with an optional K, M, G or T suffix (powers of 1024)");
            return LT_ERR_CONFIG;
        }
        if (k->min && lt_parse_size(k->min, &bound) == LT_OK && v < bound)
            return range_error(k, "size", raw, k->min, true, where, err);
        if (k->max && lt_parse_size(k->max, &bound) == LT_OK && v > bound)
            return range_error(k, "size", raw, k->max, false, where, err);
        out->u = v;
        return LT_OK;
    }

    case LT_CONFIG_DOUBLE: {
        double v, bound;
        if (lt_parse_double_why(raw, &v, &why) != LT_OK) {
            lt_fail(err, LT_ERR_CONFIG, where, "invalid number '%s' for %s.%s%s%s", abbrev(raw, ab),
                    k->section, k->key, why ? ": " : "", why ? why : "");
            lt_error_hint(err, "numbers are decimal, e.g. 0.1 or 3e-4");
            return LT_ERR_CONFIG;
        }
        if (k->min && lt_parse_double(k->min, &bound) == LT_OK && v < bound)
            return range_error(k, "number", raw, k->min, true, where, err);
        if (k->max && lt_parse_double(k->max, &bound) == LT_OK && v > bound)
            return range_error(k, "number", raw, k->max, false, where, err);
        out->d = v;
        return LT_OK;
    }

    case LT_CONFIG_BOOL: {
        bool v;
        if (lt_parse_bool(raw, &v) != LT_OK) {
            lt_fail(err, LT_ERR_CONFIG, where, "invalid boolean '%s' for %s.%s", abbrev(raw, ab),
                    k->section, k->key);
            lt_error_hint(err, "booleans are true/false, yes/no, on/off or 1/0");
            return LT_ERR_CONFIG;
        }
        out->b = v;
        return LT_OK;
    }
    }
    return lt_fail(err, LT_ERR_INTERNAL, where, "key %s.%s has an unknown type", k->section,
                   k->key);
}

/* ------------------------------------------------------------------ unknown names */

static lt_status unknown_section(const char *section, const char *where, lt_error *err) {
    size_t tf, tc;
    const char *tmpl = template_section(&tf, &tc);
    char tab[64];
    if (tmpl && (strcmp(section, tmpl) == 0 || instance_of(section))) {
        lt_fail(err, LT_ERR_CONFIG, where, "section [%s] needs a name: [%s.NAME]", abbrev(section, tab), tmpl);
        lt_error_hint(err, "NAME is 1 to 48 of a-z 0-9 _ -, starting with a letter, e.g. [%s.web]", tmpl);
        return LT_ERR_CONFIG;
    }
    size_t n, best = SIZE_MAX;
    const lt_config_section *s = lt_config_sections(&n);
    const char *near = NULL;
    char all[256], ab[64];
    for (size_t i = 0; i < n; i++) {
        size_t d = lt_edit_distance(section, s[i].name);
        if (d < best && lt_is_close_match(section, s[i].name, d)) {
            best = d;
            near = s[i].name;
        }
    }
    list_sections(all, sizeof all);
    lt_fail(err, LT_ERR_CONFIG, where, "unknown section [%s]", abbrev(section, ab));
    if (near)
        lt_error_hint(err, "did you mean [%s]? sections: %s", near, all);
    else
        lt_error_hint(err, "sections: %s", all);
    return LT_ERR_CONFIG;
}

static lt_status unknown_key(const char *section, const char *key, const char *where,
                             lt_error *err) {
    size_t n;
    const lt_config_key *s = lt_config_schema(&n);
    size_t best_in = SIZE_MAX, best_out = SIZE_MAX;
    const lt_config_key *near_in = NULL, *near_out = NULL;
    char ab[64];
    for (size_t i = 0; i < n; i++) {
        size_t d = lt_edit_distance(key, s[i].key);
        if (!lt_is_close_match(key, s[i].key, d)) continue;
        if (strcmp(s[i].section, section) == 0) {
            if (d < best_in) {
                best_in = d;
                near_in = &s[i];
            }
        } else if (d < best_out) {
            best_out = d;
            near_out = &s[i];
        }
    }
    lt_fail(err, LT_ERR_CONFIG, where, "unknown key '%s' in section [%s]", abbrev(key, ab),
            section);
    if (near_out && best_out < best_in)
        lt_error_hint(err, "did you mean '%s.%s'?", near_out->section, near_out->key);
    else if (near_in)
        lt_error_hint(err, "did you mean '%s'?", near_in->key);
    else {
        char keys[LT_ERROR_HINT_MAX - 32];
        list_keys(section, keys, sizeof keys);
        lt_error_hint(err, "keys of [%s]: %s", section, keys);
    }
    return LT_ERR_CONFIG;
}

/* ------------------------------------------------------------------ setting a value */

static void value_clear(cfg_value *v) {
    free(v->raw);
    free(v->origin);
    memset(v, 0, sizeof *v);
}

static void values_free(cfg_value *values, size_t count) {
    if (values == NULL) return;
    for (size_t i = 0; i < count; i++) value_clear(&values[i]);
    free(values);
}

/* Free what a config owns (its values and instance names), not the struct. */
static void state_free(lt_config *cfg) {
    values_free(cfg->values, total_slots(cfg));
    for (size_t i = 0; i < cfg->n_inst; i++) free(cfg->inst[i]);
    free(cfg->inst);
    cfg->values = NULL;
    cfg->inst = NULL;
    cfg->n_inst = 0;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* A deep copy of cfg's values and instances into *dst (its other fields copied too);
 * false when out of memory (dst then owns nothing). */
static bool state_clone(const lt_config *cfg, lt_config *dst) {
    *dst = *cfg;
    dst->values = NULL;
    dst->inst = NULL;
    dst->n_inst = 0;
    size_t total = total_slots(cfg);
    cfg_value *copy = calloc(total ? total : 1, sizeof *copy);
    char **names = calloc(cfg->n_inst ? cfg->n_inst : 1, sizeof *names);
    if (copy == NULL || names == NULL) {
        free(copy);
        free(names);
        return false;
    }
    for (size_t i = 0; i < total; i++) {
        const cfg_value *v = &cfg->values[i];
        copy[i] = *v;
        copy[i].raw = dup_or_null(v->raw);
        copy[i].origin = dup_or_null(v->origin);
        if ((v->raw && !copy[i].raw) || (v->origin && !copy[i].origin)) {
            values_free(copy, i + 1);
            free(names);
            return false;
        }
    }
    for (size_t i = 0; i < cfg->n_inst; i++) {
        if ((names[i] = strdup(cfg->inst[i])) == NULL) {
            values_free(copy, total);
            for (size_t j = 0; j < i; j++) free(names[j]);
            free(names);
            return false;
        }
    }
    dst->values = copy;
    dst->inst = names;
    dst->n_inst = cfg->n_inst;
    return true;
}

static lt_status set_common(lt_config *cfg, const char *section, const char *key, const char *value,
                            origin_kind kind, const char *origin, const char *where, unsigned load_id, long line,
                            lt_error *err);

/* Add instance `name` of the template section (its keys at their defaults). */
static lt_status instance_add(lt_config *cfg, const char *section, const char *name, const char *where,
                              lt_error *err) {
    size_t f, c;
    template_section(&f, &c);
    size_t total = total_slots(cfg);
    cfg_value *values = realloc(cfg->values, (total + c) * sizeof *values);
    if (values == NULL) return lt_fail(err, LT_ERR_NOMEM, where, "out of memory adding [%s]", section);
    memset(values + total, 0, c * sizeof *values);
    cfg->values = values;
    char **inst = realloc(cfg->inst, (cfg->n_inst + 1) * sizeof *inst);
    if (inst == NULL) return lt_fail(err, LT_ERR_NOMEM, where, "out of memory adding [%s]", section);
    cfg->inst = inst;
    if ((cfg->inst[cfg->n_inst] = strdup(name)) == NULL)
        return lt_fail(err, LT_ERR_NOMEM, where, "out of memory adding [%s]", section);
    cfg->n_inst++;
    for (size_t j = 0; j < c; j++) {
        const lt_config_key *k = schema_at(f + j);
        if (k->def == NULL) continue;
        lt_status st = set_common(cfg, section, k->key, k->def, ORIGIN_DEFAULT, NULL, "default", 0, 0, err);
        if (st != LT_OK) return st;
    }
    return LT_OK;
}

/*
 * The one path every value takes (file, --set, API): check names, duplicates, emptiness
 * and the value; then replace the old value. `where` is for errors, `origin` is recorded.
 * `load_id` is the file load (0 for none) and `line` its line, for duplicate detection.
 */
static lt_status set_common(lt_config *cfg, const char *section, const char *key,
                            const char *value, origin_kind kind, const char *origin,
                            const char *where, unsigned load_id, long line, lt_error *err) {
    char ab[64];
    if (key == NULL || key[0] == '\0') {
        lt_fail(err, LT_ERR_CONFIG, where, "missing key name before '='");
        lt_error_hint(
            err, "a line is a [section] header, key = value, or a comment starting with ; or #");
        return LT_ERR_CONFIG;
    }
    if (section == NULL || section[0] == '\0') {
        const char *home = section_of_key(key);
        lt_fail(err, LT_ERR_CONFIG, where, "key '%s' is outside any section", abbrev(key, ab));
        if (home)
            lt_error_hint(err, "put it under [%s]", home);
        else
            lt_error_hint(err, "start with a section header such as [run]");
        return LT_ERR_CONFIG;
    }
    if (!section_exists(section)) return unknown_section(section, where, err);
    size_t kidx, idx = slot_index(cfg, section, key, &kidx);
    if (kidx == SIZE_MAX) {
        size_t tf, tc;
        const char *tmpl = instance_of(section) ? template_section(&tf, &tc) : NULL;
        return unknown_key(tmpl ? tmpl : section, key, where, err);
    }
    if (idx == SIZE_MAX) { /* a new named section */
        lt_status st = instance_add(cfg, section, instance_of(section), where, err);
        if (st != LT_OK) return st;
        idx = slot_index(cfg, section, key, &kidx);
    }

    const lt_config_key *k = schema_at(kidx);
    cfg_value *slot = &cfg->values[idx];
    if (load_id != 0 && slot->load_id == load_id) {
        lt_fail(err, LT_ERR_CONFIG, where,
                "duplicate key '%s' in section [%s], first given at line %ld", key, section,
                slot->line);
        lt_error_hint(err, "give each key once per file; --set %s.%s=VALUE overrides it", section,
                      key);
        return LT_ERR_CONFIG;
    }

    if (value == NULL) value = "";
    typed_value tv;
    memset(&tv, 0, sizeof tv);
    if (value[0] == '\0') {
        if (k->def != NULL) {
            lt_fail(err, LT_ERR_CONFIG, where, "empty value for %s.%s", section, key);
            lt_error_hint(
                err, "%s.%s always has a value (default %s); leave the key out to use the default",
                section, key, k->def);
            return LT_ERR_CONFIG;
        }
    } else {
        lt_status st = parse_value(k, value, &tv, where, err);
        if (st != LT_OK) return st;
    }

    char *raw = NULL, *org = NULL;
    if (value[0] != '\0' && (raw = strdup(value)) == NULL) goto nomem;
    if (kind != ORIGIN_DEFAULT && (org = strdup(origin ? origin : "api")) == NULL) goto nomem;
    value_clear(slot);
    slot->raw = raw;
    slot->v = tv;
    slot->kind = kind;
    slot->origin = org;
    slot->load_id = load_id;
    slot->line = line;
    return LT_OK;

nomem:
    free(raw);
    return lt_fail(err, LT_ERR_NOMEM, where, "out of memory setting %s.%s", section, key);
}

lt_config *lt_config_new(void) {
    size_t n;
    lt_config_schema(&n);
    lt_config *cfg = calloc(1, sizeof *cfg);
    if (cfg == NULL) return NULL;
    cfg->count = n;
    cfg->values = calloc(n ? n : 1, sizeof *cfg->values);
    if (cfg->values == NULL) {
        free(cfg);
        return NULL;
    }
    size_t tf, tc;
    template_section(&tf, &tc);
    for (size_t i = 0; i < n; i++) {
        const lt_config_key *k = schema_at(i);
        if (k->def == NULL || (i >= tf && i < tf + tc)) continue; /* template keys: per instance */
        if (set_common(cfg, k->section, k->key, k->def, ORIGIN_DEFAULT, NULL, "default", 0, 0,
                       NULL) != LT_OK) {
            lt_config_free(cfg);
            return NULL;
        }
    }
    return cfg;
}

void lt_config_free(lt_config *cfg) {
    if (cfg == NULL) return;
    state_free(cfg);
    free(cfg);
}

size_t lt_config_n_named(const lt_config *cfg, const char *section) {
    size_t f, c;
    const char *t = template_section(&f, &c);
    return cfg && t && section && strcmp(section, t) == 0 ? cfg->n_inst : 0;
}

const char *lt_config_named(const lt_config *cfg, const char *section, size_t i) {
    return i < lt_config_n_named(cfg, section) ? cfg->inst[i] : NULL;
}

lt_status lt_config_set_value(lt_config *cfg, const char *section, const char *key,
                              const char *value, const char *origin, lt_error *err) {
    if (cfg == NULL)
        return lt_fail(err, LT_ERR_INTERNAL, origin_where(origin),
                       "lt_config_set_value: no config");
    return set_common(cfg, section, key, value, ORIGIN_OTHER, origin_where(origin),
                      origin_where(origin), 0, 0, err);
}

lt_status lt_config_set(lt_config *cfg, const char *assignment, lt_error *err) {
    char where[LT_ERROR_WHERE_MAX];
    char ab[64];
    snprintf(where, sizeof where, "--set %s", assignment ? assignment : "");
    if (cfg == NULL) return lt_fail(err, LT_ERR_INTERNAL, where, "lt_config_set: no config");
    if (assignment == NULL) assignment = "";

    const char *eq = strchr(assignment, '=');
    if (eq == NULL) {
        lt_fail(err, LT_ERR_USAGE, where, "--set expects section.key=value, got '%s'",
                abbrev(assignment, ab));
        if (strchr(assignment, '.') != NULL && !lt_is_blank(assignment))
            lt_error_hint(err, "write --set %s=VALUE", abbrev(assignment, ab));
        else
            lt_error_hint(err, "for example --set plan.steps=100");
        return LT_ERR_USAGE;
    }

    char *copy = strdup(assignment);
    if (copy == NULL) return lt_fail(err, LT_ERR_NOMEM, where, "out of memory");
    copy[eq - assignment] = '\0';
    char *name = lt_trim(copy);
    char *value = lt_trim(copy + (eq - assignment) + 1);
    char *dot = strrchr(name, '.'); /* the key follows the last dot: source.web.input */
    lt_status st;
    if (dot == NULL || dot == name || dot[1] == '\0') {
        char vab[64];
        st = lt_fail(err, LT_ERR_USAGE, where, "--set expects section.key=value, got '%s'",
                     abbrev(assignment, ab));
        const char *home = dot == NULL ? section_of_key(name) : NULL;
        if (home)
            lt_error_hint(err, "did you mean --set %s.%s=%s?", home, name, abbrev(value, vab));
        else
            lt_error_hint(err, "name the key with its section, e.g. --set plan.steps=100");
    } else {
        *dot = '\0';
        st = set_common(cfg, lt_trim(name), lt_trim(dot + 1), value, ORIGIN_OTHER, "--set", where,
                        0, 0, err);
    }
    free(copy);
    return st;
}

/* ------------------------------------------------------------------ loading */

typedef struct load_ctx {
    lt_config *cfg;       /* the scratch copy being filled */
    const char *name;     /* file name for WHERE and origins */
    FILE *fp;             /* file source, or NULL for a string */
    const char *text;     /* string source */
    size_t text_pos;
    char *buf;            /* the current physical line (owned) */
    size_t buf_cap;
    const char *cur;      /* the current line, trimmed (inside buf) */
    long lineno;
    unsigned load_id;
    lt_status status;     /* first error seen by the reader or the handler */
    lt_error *err;
} load_ctx;

static void load_where(const load_ctx *c, char *buf, size_t cap) {
    snprintf(buf, cap, "%s:%ld", c->name, c->lineno);
}

static lt_status load_fail(load_ctx *c, lt_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static lt_status load_fail(load_ctx *c, lt_status status, const char *fmt, ...) {
    char where[LT_ERROR_WHERE_MAX], what[LT_ERROR_WHAT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    load_where(c, where, sizeof where);
    c->status = status;
    return lt_fail(c->err, status, where, "%s", what);
}

/* Read the next physical line into c->buf; its length in *len (it may hold NULs).
 * False at the end or on an error (c->status set). */
static bool next_physical_line(load_ctx *c, size_t *len) {
    if (c->fp != NULL) {
        errno = 0;
        ssize_t n = getline(&c->buf, &c->buf_cap, c->fp);
        if (n < 0) {
            if (ferror(c->fp)) {
                int e = errno ? errno : EIO;
                c->status = e == ENOMEM ? LT_ERR_NOMEM : LT_ERR_IO;
                lt_fail(c->err, c->status, c->name, "cannot read config file: %s", strerror(e));
            } else if (errno == ENOMEM) {
                c->status = LT_ERR_NOMEM;
                lt_fail(c->err, c->status, c->name, "out of memory reading config file");
            }
            return false;
        }
        *len = (size_t)n;
        return true;
    }
    const char *start = c->text + c->text_pos;
    if (*start == '\0') return false;
    const char *nl = strchr(start, '\n');
    size_t n = nl ? (size_t)(nl - start) + 1 : strlen(start);
    if (n + 1 > c->buf_cap) {
        char *grown = realloc(c->buf, n + 1);
        if (grown == NULL) {
            c->status = LT_ERR_NOMEM;
            lt_fail(c->err, c->status, c->name, "out of memory reading config text");
            return false;
        }
        c->buf = grown;
        c->buf_cap = n + 1;
    }
    memcpy(c->buf, start, n);
    c->buf[n] = '\0';
    c->text_pos += n;
    *len = n;
    return true;
}

/* If `line` is "[name]..." (as inih reads it: the first ']' not inside a " ;" comment),
 * check that the section exists. */
static bool check_section_header(load_ctx *c, const char *line) {
    bool was_space = false;
    const char *p = line + 1;
    while (*p && *p != ']' && !(was_space && *p == ';')) {
        was_space = lt_is_blank_char(*p);
        p++;
    }
    if (*p != ']') return true; /* not a header inih accepts: its syntax error */
    size_t n = (size_t)(p - (line + 1));
    char name[128];
    if (n >= sizeof name) n = sizeof name - 1;
    memcpy(name, line + 1, n);
    name[n] = '\0';
    if (section_exists(name)) return true;
    char where[LT_ERROR_WHERE_MAX];
    load_where(c, where, sizeof where);
    c->status = unknown_section(name, where, c->err);
    return false;
}

/* inih's ini_reader: hand it one physical line, trimmed, or NULL to stop. */
static char *read_line(char *dst, int num, void *stream) {
    load_ctx *c = stream;
    size_t len;
    if (c->status != LT_OK) return NULL;
    if (!next_physical_line(c, &len)) return NULL;
    c->lineno++;
    char *s = c->buf;
    if (memchr(s, '\0', len) != NULL) {
        load_fail(c, LT_ERR_CONFIG, "line contains a NUL byte");
        lt_error_hint(c->err, "a config is a text file");
        return NULL;
    }
    if (c->lineno == 1 && len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) { /* UTF-8 BOM */
        s += 3;
        len -= 3;
    }
    s = lt_trim(s); /* NUL bytes were refused above, so strlen sees the whole line */
    len = strlen(s);
    c->cur = s;
    if (len > LT_CONFIG_LINE_MAX || len + 1 > (size_t)num) {
        size_t limit = (size_t)num - 1 < LT_CONFIG_LINE_MAX ? (size_t)num - 1 : LT_CONFIG_LINE_MAX;
        load_fail(c, LT_ERR_CONFIG, "line is too long (%zu bytes; at most %zu)", len, limit);
        return NULL;
    }
    if (*s == '[' && !check_section_header(c, s)) return NULL;
    memcpy(dst, s, len + 1);
    return dst;
}

/* inih's handler: one key = value. */
static int on_entry(void *user, const char *section, const char *name, const char *value) {
    load_ctx *c = user;
    if (c->status != LT_OK) return 0;
    char where[LT_ERROR_WHERE_MAX];
    load_where(c, where, sizeof where);
    lt_status st = set_common(c->cfg, section, name, value, ORIGIN_FILE, where, where,
                              c->load_id, c->lineno, c->err);
    if (st != LT_OK) {
        c->status = st;
        return 0;
    }
    return 1;
}

static lt_status load_stream(lt_config *cfg, load_ctx *c) {
    lt_config work;
    if (!state_clone(cfg, &work)) return lt_fail(c->err, LT_ERR_NOMEM, c->name, "out of memory loading config");
    c->cfg = &work;
    c->load_id = ++cfg->loads;

    /* inih's options (process-wide in Debian's build); restored below. */
    static char start_prefixes[] = ";#";
    static char inline_prefixes[] = ";";
    bool saved_multiline = ini_allow_multiline, saved_stop = ini_stop_on_first_error;
    bool saved_no_value = ini_allow_no_value, saved_inline = ini_allow_inline_comments;
    bool saved_stack = ini_use_stack, saved_bom = ini_allow_bom;
    char *saved_start = ini_start_comment_prefixes, *saved_inline_p = ini_inline_comment_prefixes;
    int saved_max_line = ini_max_line;
    ini_allow_multiline = false;
    ini_stop_on_first_error = true;
    ini_allow_no_value = false;
    ini_allow_inline_comments = true;
    ini_use_stack = true;
    ini_allow_bom = false; /* read_line skips the one BOM a file may start with */
    ini_start_comment_prefixes = start_prefixes;
    ini_inline_comment_prefixes = inline_prefixes;
    ini_max_line = LT_CONFIG_LINE_MAX + 2;

    int rc = ini_parse_stream(read_line, c, on_entry, c);

    ini_allow_multiline = saved_multiline;
    ini_stop_on_first_error = saved_stop;
    ini_allow_no_value = saved_no_value;
    ini_allow_inline_comments = saved_inline;
    ini_use_stack = saved_stack;
    ini_allow_bom = saved_bom;
    ini_start_comment_prefixes = saved_start;
    ini_inline_comment_prefixes = saved_inline_p;
    ini_max_line = saved_max_line;

    lt_status st = c->status;
    if (st == LT_OK && rc == -2)
        st = lt_fail(c->err, LT_ERR_NOMEM, c->name, "out of memory parsing config");
    if (st == LT_OK && rc != 0) {
        /* inih found a line it cannot parse; it stopped there, so it is our current line */
        char where[LT_ERROR_WHERE_MAX], ab[64];
        if (rc > 0 && (long)rc == c->lineno && c->cur != NULL) {
            load_where(c, where, sizeof where);
            if (c->cur[0] == '[')
                st = lt_fail(c->err, LT_ERR_CONFIG, where, "syntax error: '%s' has no closing ']'",
                             abbrev(c->cur, ab));
            else
                st = lt_fail(c->err, LT_ERR_CONFIG, where,
                             "syntax error: '%s' is not a 'key = value' line", abbrev(c->cur, ab));
        } else {
            snprintf(where, sizeof where, "%s:%d", c->name, rc);
            st = lt_fail(c->err, LT_ERR_CONFIG, where, "syntax error");
        }
        lt_error_hint(
            c->err, "a line is a [section] header, key = value, or a comment starting with ; or #");
    }
    if (st != LT_OK) {
        state_free(&work);
        return st;
    }
    state_free(cfg);
    cfg->values = work.values;
    cfg->inst = work.inst;
    cfg->n_inst = work.n_inst;
    return LT_OK;
}

lt_status lt_config_load_file(lt_config *cfg, const char *path, lt_error *err) {
    if (cfg == NULL || path == NULL)
        return lt_fail(err, LT_ERR_INTERNAL, path, "lt_config_load_file: no config or path");
    FILE *fp = fopen(path, "r");
    if (fp == NULL) {
        int e = errno;
        lt_fail(err, LT_ERR_IO, path, "cannot open config file: %s", strerror(e));
        if (e == ENOENT) lt_error_hint(err, "check the path given to --config");
        return LT_ERR_IO;
    }
    load_ctx c = {.name = path, .fp = fp, .err = err};
    lt_status st = load_stream(cfg, &c);
    free(c.buf);
    fclose(fp); /* read-only: nothing to lose on close */
    return st;
}

lt_status lt_config_load_string(lt_config *cfg, const char *text, const char *name,
                                lt_error *err) {
    if (name == NULL) name = "<string>";
    if (cfg == NULL || text == NULL)
        return lt_fail(err, LT_ERR_INTERNAL, name, "lt_config_load_string: no config or text");
    load_ctx c = {.name = name, .text = text, .err = err};
    lt_status st = load_stream(cfg, &c);
    free(c.buf);
    return st;
}

/* ------------------------------------------------------------------ reading values */

/* The value slot of section.key if it exists and has type `type`; else fills err. */
static const cfg_value *typed_slot(const lt_config *cfg, const char *section, const char *key,
                                   lt_config_type type, lt_status *st, lt_error *err) {
    size_t kidx = SIZE_MAX, idx = cfg ? slot_index(cfg, section, key, &kidx) : SIZE_MAX;
    if (idx == SIZE_MAX) {
        *st = lt_fail(err, LT_ERR_INTERNAL, NULL, "no config key %s.%s",
                      section ? section : "(null)", key ? key : "(null)");
        return NULL;
    }
    const lt_config_key *k = schema_at(kidx);
    if (k->type != type) {
        *st = lt_fail(err, LT_ERR_INTERNAL, NULL, "config key %s.%s is of type %s, not %s", section,
                      key, lt_config_type_name(k->type), lt_config_type_name(type));
        return NULL;
    }
    const cfg_value *v = &cfg->values[idx];
    if (v->raw == NULL) {
        *st = lt_fail(err, LT_ERR_CONFIG, v->origin, "no value for %s.%s", section, key);
        lt_error_hint(err, "set %s in section [%s] of the config, or pass --set %s.%s=VALUE", key,
                      section, section, key);
        return NULL;
    }
    *st = LT_OK;
    return v;
}

const char *lt_config_get_string(const lt_config *cfg, const char *section, const char *key) {
    size_t kidx, idx = cfg ? slot_index(cfg, section, key, &kidx) : SIZE_MAX;
    return idx == SIZE_MAX ? NULL : cfg->values[idx].raw;
}

lt_status lt_config_get_int(const lt_config *cfg, const char *section, const char *key,
                            int64_t *out, lt_error *err) {
    lt_status st;
    const cfg_value *v = typed_slot(cfg, section, key, LT_CONFIG_INT, &st, err);
    if (v) *out = v->v.i;
    return st;
}

lt_status lt_config_get_size(const lt_config *cfg, const char *section, const char *key,
                             uint64_t *out, lt_error *err) {
    lt_status st;
    const cfg_value *v = typed_slot(cfg, section, key, LT_CONFIG_SIZE, &st, err);
    if (v) *out = v->v.u;
    return st;
}

lt_status lt_config_get_double(const lt_config *cfg, const char *section, const char *key,
                               double *out, lt_error *err) {
    lt_status st;
    const cfg_value *v = typed_slot(cfg, section, key, LT_CONFIG_DOUBLE, &st, err);
    if (v) *out = v->v.d;
    return st;
}

lt_status lt_config_get_bool(const lt_config *cfg, const char *section, const char *key,
                             bool *out, lt_error *err) {
    lt_status st;
    const cfg_value *v = typed_slot(cfg, section, key, LT_CONFIG_BOOL, &st, err);
    if (v) *out = v->v.b;
    return st;
}

bool lt_config_is_set(const lt_config *cfg, const char *section, const char *key) {
    return lt_config_get_string(cfg, section, key) != NULL;
}

const char *lt_config_origin(const lt_config *cfg, const char *section, const char *key) {
    size_t kidx, idx = cfg ? slot_index(cfg, section, key, &kidx) : SIZE_MAX;
    if (idx == SIZE_MAX) return NULL;
    const cfg_value *v = &cfg->values[idx];
    return v->kind == ORIGIN_DEFAULT ? "default" : v->origin;
}

static bool value_equal(const lt_config_key *k, const cfg_value *x, const cfg_value *y);

bool lt_config_equal(const lt_config *a, const lt_config *b) {
    if (a == NULL || b == NULL || a->count != b->count || a->n_inst != b->n_inst) return a == b;
    for (size_t i = 0; i < a->count; i++)
        if (!value_equal(schema_at(i), &a->values[i], &b->values[i])) return false;
    size_t f, c;
    template_section(&f, &c);
    for (size_t i = 0; i < a->n_inst; i++) { /* instances by name: their order does not matter */
        size_t j = instance_find(b, a->inst[i]);
        if (j == SIZE_MAX) return false;
        for (size_t k = 0; k < c; k++)
            if (!value_equal(schema_at(f + k), &a->values[a->count + i * c + k], &b->values[b->count + j * c + k]))
                return false;
    }
    return true;
}

static bool value_equal(const lt_config_key *k, const cfg_value *x, const cfg_value *y) {
    if ((x->raw == NULL) != (y->raw == NULL)) return false;
    if (x->raw == NULL) return true;
    switch (k->type) {
    case LT_CONFIG_STRING:
    case LT_CONFIG_ENUM: return strcmp(x->raw, y->raw) == 0;
    case LT_CONFIG_INT: return x->v.i == y->v.i;
    case LT_CONFIG_SIZE: return x->v.u == y->v.u;
    case LT_CONFIG_DOUBLE: return x->v.d == y->v.d;
    case LT_CONFIG_BOOL: return x->v.b == y->v.b;
    }
    return false;
}

/* ------------------------------------------------------------------ dumping */

typedef struct strbuf {
    char *p;
    size_t len, cap;
    bool failed;
} strbuf;

static void sb_append(strbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(strbuf *b, const char *s) { sb_append(b, s, strlen(s)); }

/* Column where origin comments start (when the key = value part is shorter). */
enum { DUMP_COMMENT_COLUMN = 40 };

static void dump_key(strbuf *b, const lt_config_key *k, const cfg_value *v) {
    if (v->raw == NULL) {
        sb_puts(b, "; ");
        sb_puts(b, k->key);
        sb_puts(b, " =\n");
        return;
    }
    size_t start = b->len;
    sb_puts(b, k->key);
    sb_puts(b, " = ");
    sb_puts(b, v->raw);
    if (b->failed) return;
    size_t used = b->len - start;

    /* the origin comment, made safe for one line */
    char comment[LT_ERROR_WHERE_MAX + 16];
    if (v->kind == ORIGIN_DEFAULT)
        snprintf(comment, sizeof comment, "; default");
    else if (v->kind == ORIGIN_FILE)
        snprintf(comment, sizeof comment, "; from %s", v->origin);
    else
        snprintf(comment, sizeof comment, "; %s", v->origin);
    for (char *p = comment; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';

    size_t pad = used < DUMP_COMMENT_COLUMN ? DUMP_COMMENT_COLUMN - used : 2;
    if (used + pad + strlen(comment) <= LT_CONFIG_LINE_MAX) {
        static const char spaces[DUMP_COMMENT_COLUMN + 1] =
            "                                        ";
        sb_append(b, spaces, pad);
        sb_puts(b, comment);
    }
    sb_puts(b, "\n");
}

char *lt_config_dump_string(const lt_config *cfg) {
    if (cfg == NULL) return NULL;
    strbuf b = {0};
    size_t nsec;
    const lt_config_section *secs = lt_config_sections(&nsec);
    sb_puts(&b, "; longtail configuration: the effective values, loadable with --config\n");
    sb_puts(&b, "; (each value's origin follows it; \"; key =\" marks a key without a value)\n");
    size_t tf, tc;
    template_section(&tf, &tc);
    for (size_t s = 0; s < nsec; s++) {
        if (secs[s].named) { /* each instance as [TEMPLATE.NAME] */
            if (cfg->n_inst == 0) {
                sb_puts(&b, "\n; [");
                sb_puts(&b, secs[s].name);
                sb_puts(&b, ".NAME]: none\n");
            }
            for (size_t i = 0; i < cfg->n_inst; i++) {
                sb_puts(&b, "\n[");
                sb_puts(&b, secs[s].name);
                sb_puts(&b, ".");
                sb_puts(&b, cfg->inst[i]);
                sb_puts(&b, "]\n");
                for (size_t k = 0; k < tc; k++) dump_key(&b, schema_at(tf + k), &cfg->values[cfg->count + i * tc + k]);
            }
            continue;
        }
        sb_puts(&b, "\n[");
        sb_puts(&b, secs[s].name);
        sb_puts(&b, "]\n");
        for (size_t i = 0; i < cfg->count; i++) {
            const lt_config_key *k = schema_at(i);
            if (strcmp(k->section, secs[s].name) == 0) dump_key(&b, k, &cfg->values[i]);
        }
    }
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

lt_status lt_config_dump(const lt_config *cfg, FILE *out) {
    if (cfg == NULL || out == NULL) return LT_ERR_INTERNAL;
    char *text = lt_config_dump_string(cfg);
    if (text == NULL) return LT_ERR_NOMEM;
    size_t len = strlen(text);
    bool ok = fwrite(text, 1, len, out) == len;
    free(text);
    if (fflush(out) != 0 || ferror(out) || !ok) return LT_ERR_IO;
    return LT_OK;
}
