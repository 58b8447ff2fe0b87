/*
 * dataprep/reader_jsonl.c — JSON lines, the `jsonl` backend of reader.h.
 *
 * Lines end at '\n' (a '\r' before it is dropped; a last line without '\n' counts). Each
 * line is one JSON object read with lt_jsonl_reader_get (lib/json.h) for the member
 * opts->field; its unescaped string is the document, id "line=N" (1-based), name "".
 *
 *   blank / whitespace-only line       filtered (not a record that went wrong)
 *   not one JSON object                bad_json, with the parser's reason and column
 *   no member `field`                  missing_field
 *   `field` is not a string            field_not_string
 *   longer than 2 x max_doc_bytes + 1 MiB   line_too_long (the rest of the line is read
 *                                      and dropped without being kept: memory stays bounded)
 *
 * lt_jsonl_reader_get reports a non-string member as a parse error; to tell it from a
 * syntax error, a line that fails is parsed again as a whole document (lt_json_parse, the
 * same grammar): if that succeeds and gives an object, only the member's type was wrong.
 * This costs a second parse of bad lines only.
 *
 * The two steps are separate functions, cutting a line (lt_jsonl_next_line, the reader's
 * thread) and decoding it (lt_jsonl_decode_line, any thread): reader.c's lt_line_decode
 * runs the second on other threads for `dataprep run` (reader.h, record-parallel decoding).
 */
#include "dataprep/reader.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h" /* lt_jsonl_reader_get, lt_json_parse */

#define JSONL_CHUNK (256u * 1024u)
#define JSONL_MIB (1024u * 1024u)

typedef struct jsonl_state {
    lt_reader_core *core;
    char *chunk;           /* decompressed input: chunk[pos..len) not yet consumed */
    size_t pos, len;
    bool eof;
    char *line;            /* the current line */
    size_t line_len, line_cap;
    size_t line_max;       /* 2 x max_doc_bytes + 1 MiB */
    uint64_t line_no;
    uint64_t offset;       /* decompressed offset of chunk[pos] */
    lt_jsonl_reader jr;
    char id[32];
} jsonl_state;

static void line_append(jsonl_state *j, const char *p, size_t n) {
    if (n == 0) return;
    if (j->line_len + n > j->line_cap) {
        size_t cap = j->line_cap ? j->line_cap : 4096;
        while (cap < j->line_len + n) cap = cap > SIZE_MAX / 2 ? j->line_len + n : cap * 2;
        j->line = lt_realloc_check(j->line, cap);
        j->line_cap = cap;
    }
    memcpy(j->line + j->line_len, p, n);
    j->line_len += n;
}

/* Read the next line into j->line. *got = false at EOF. *too_long when the line went over
 * line_max (then it was consumed but not kept). *start is its offset. */
static lt_status read_line(jsonl_state *j, bool *got, bool *too_long, uint64_t *start, lt_error *err) {
    j->line_len = 0;
    *got = false;
    *too_long = false;
    *start = j->offset;
    for (;;) {
        if (j->pos == j->len) {
            if (j->eof) return LT_OK;
            size_t n;
            lt_status st = lt_src_read(j->core->src, j->chunk, JSONL_CHUNK, &n, err);
            if (st != LT_OK) return st;
            j->pos = 0;
            j->len = n;
            if (n == 0) {
                j->eof = true;
                return LT_OK;
            }
        }
        *got = true;
        const char *p = j->chunk + j->pos;
        size_t n = j->len - j->pos;
        const char *nl = memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) : n;
        if (!*too_long) {
            if (take > j->line_max - j->line_len) {
                *too_long = true;
                j->line_len = 0;
            } else {
                line_append(j, p, take);
            }
        }
        size_t used = nl ? take + 1 : take;
        j->pos += used;
        j->offset += used;
        if (nl != NULL) return LT_OK;
    }
}

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return false;
    return true;
}

static size_t line_cap(size_t max_doc_bytes) {
    return max_doc_bytes <= (SIZE_MAX - JSONL_MIB) / 2 ? 2 * max_doc_bytes + JSONL_MIB : SIZE_MAX;
}

lt_status lt_jsonl_next_line(void *state, lt_line *line, bool *eof, lt_error *err) {
    jsonl_state *j = state;
    bool got, too_long;
    uint64_t start;
    *eof = false;
    lt_status st = read_line(j, &got, &too_long, &start, err);
    if (st != LT_OK) return st;
    if (!got) {
        *eof = true;
        return LT_OK;
    }
    j->line_no++;
    line->text = too_long || j->line == NULL ? "" : j->line;
    line->len = too_long ? 0 : j->line_len;
    line->line_no = j->line_no;
    line->offset = start;
    line->too_long = too_long;
    return LT_OK;
}

lt_status lt_jsonl_decode_line(lt_jsonl_reader *jr, char id[32], lt_reader_core *core, const lt_line *line,
                               lt_doc *doc, bool *is_doc, lt_error *err) {
    const char *field = core->opts->field;
    char where[LT_ERROR_WHERE_MAX];
    *is_doc = false;
    core->stats->records++;
    snprintf(where, sizeof where, "%s:%" PRIu64, core->path, line->line_no);
    if (line->too_long) {
        lt_reader_skip(core, where, LT_SKIP_LINE_TOO_LONG, "line longer than %zu bytes (2 x max_doc_bytes + 1 MiB)",
                       line_cap(core->opts->max_doc_bytes));
        return LT_OK;
    }
    size_t n = line->len;
    if (n > 0 && line->text[n - 1] == '\r') n--;
    if (blank(line->text, n)) {
        core->stats->filtered++;
        return LT_OK;
    }
    const char *val;
    size_t vlen;
    lt_error e;
    lt_error_clear(&e);
    lt_status st = lt_jsonl_reader_get(jr, line->text, n, field, &val, &vlen, &e);
    if (st == LT_ERR_INPUT) {
        lt_jv *root = NULL;
        bool valid = lt_json_parse(line->text, n, &root, NULL) == LT_OK && root->type == LT_JV_OBJECT;
        lt_jv_free(root);
        if (valid)
            lt_reader_skip(core, where, LT_SKIP_NOT_STRING, "%s", e.what);
        else
            lt_reader_skip(core, where, LT_SKIP_BAD_JSON, "%s (%s)", e.what, e.where);
        return LT_OK;
    }
    if (st != LT_OK) {
        if (err != NULL) *err = e;
        return st;
    }
    if (val == NULL) {
        /* name what the record holds, so that the run's error can suggest the field: the
         * members, and the one whose string value is longest (a skip is the slow path) */
        char members[160] = "", longest[48] = "";
        size_t used = 0, best = 0;
        lt_jv *root = NULL;
        if (lt_json_parse(line->text, n, &root, NULL) == LT_OK && root->type == LT_JV_OBJECT) {
            for (size_t i = 0; i < root->n && used + 1 < sizeof members; i++) {
                int w = snprintf(members + used, sizeof members - used, "%s%.40s", i ? ", " : "", root->keys[i]);
                if (w < 0) break;
                used += (size_t)w < sizeof members - used ? (size_t)w : sizeof members - used - 1;
                if (root->items[i].type == LT_JV_STRING && root->items[i].len > best &&
                    strlen(root->keys[i]) < sizeof longest) {
                    best = root->items[i].len;
                    snprintf(longest, sizeof longest, "%s", root->keys[i]);
                }
            }
        }
        lt_jv_free(root);
        if (longest[0])
            lt_reader_skip(core, where, LT_SKIP_MISSING_FIELD, "no member '%s' (members: %s; longest string: %s)",
                           field, members, longest);
        else
            lt_reader_skip(core, where, LT_SKIP_MISSING_FIELD, "no member '%s' (members: %s)", field, members);
        return LT_OK;
    }
    snprintf(id, 32, "line=%" PRIu64, line->line_no);
    memset(doc, 0, sizeof *doc);
    doc->text = val;
    doc->len = vlen;
    doc->id = id;
    doc->name = "";
    doc->record = line->line_no;
    doc->offset = line->offset;
    doc->utf8_replacements = jr->replacements; /* repaired by the JSON decoder */
    *is_doc = true;
    return LT_OK;
}

static lt_status jsonl_next(void *state, lt_doc *doc, bool *eof, lt_error *err) {
    jsonl_state *j = state;
    for (;;) {
        lt_line line;
        lt_status st = lt_jsonl_next_line(j, &line, eof, err);
        if (st != LT_OK || *eof) return st;
        bool is_doc;
        st = lt_jsonl_decode_line(&j->jr, j->id, j->core, &line, doc, &is_doc, err);
        if (st != LT_OK || is_doc) return st;
    }
}

static lt_status jsonl_open(void **state, lt_reader_core *core, lt_error *err) {
    (void)err;
    jsonl_state *j = lt_calloc_check(1, sizeof *j);
    j->core = core;
    j->chunk = lt_malloc_check(JSONL_CHUNK);
    j->line_max = line_cap(core->opts->max_doc_bytes);
    lt_jsonl_reader_init(&j->jr);
    *state = j;
    return LT_OK;
}

static void jsonl_close(void *state) {
    jsonl_state *j = state;
    if (j == NULL) return;
    lt_jsonl_reader_free(&j->jr);
    free(j->chunk);
    free(j->line);
    free(j);
}

const lt_reader_backend lt_reader_backend_jsonl = {"jsonl", true, jsonl_open, jsonl_next, jsonl_close};
