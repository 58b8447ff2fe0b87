/*
 * dataprep/encode.c — `dataprep encode`: token ids of documents, one line per document
 * (CONTRACTS.md). The inspection and reference-test face of the tokenizer.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/dataprep.h"  /* encode_command */
#include "dataprep/hf_tokenizer.h" /* lt_hf_tokenizer_load */
#include "dataprep/tokenizer.h" /* lt_tokenizer_* */
#include "lib/config.h"         /* lt_config_get_string */
#include "lib/files.h"          /* lt_read_file */
#include "lib/json.h"           /* lt_jsonl_reader */
#include "lib/log.h"            /* LT_WARN */

typedef struct encoder {
    lt_tokenizer *tok;
    lt_tok_scratch *scratch;
    uint32_t *ids;
    size_t cap;
    char *line; /* output line buffer */
    size_t line_cap;
    size_t docs, tokens, replacements, docs_repaired;
} encoder;

/* Decimal digits of v into p (no NUL); returns the count. */
static size_t put_u32(char *p, uint32_t v) {
    char tmp[10];
    size_t n = 0;
    do tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    for (size_t k = 0; k < n; k++) p[k] = tmp[n - 1 - k];
    return n;
}

/* Encode one document and print its line. */
static lt_status encode_document(encoder *e, const char *text, size_t len, const char *where, lt_error *err) {
    lt_encode_info info;
    lt_status st = lt_tokenizer_encode(e->tok, e->scratch, text, len, e->ids, e->cap, &info, err);
    if (st == LT_OK && info.n_tokens > e->cap) { /* rare: the first guess was too small */
        e->cap = info.n_tokens;
        e->ids = lt_realloc_check(e->ids, e->cap * sizeof *e->ids);
        st = lt_tokenizer_encode(e->tok, e->scratch, text, len, e->ids, e->cap, &info, err);
    }
    if (st != LT_OK) {
        lt_error_prefix(err, "%s: ", where);
        return st;
    }
    if (info.n_tokens * 11 + 1 > e->line_cap) {
        e->line_cap = info.n_tokens * 11 + 1;
        e->line = lt_realloc_check(e->line, e->line_cap);
    }
    size_t n = 0;
    for (size_t i = 0; i < info.n_tokens; i++) {
        if (i) e->line[n++] = ' ';
        n += put_u32(e->line + n, e->ids[i]);
    }
    e->line[n++] = '\n';
    if (fwrite(e->line, 1, n, stdout) != n)
        return lt_fail(err, LT_ERR_IO, "standard output", "write failed: %s", strerror(errno));
    e->docs++;
    e->tokens += info.n_tokens;
    e->replacements += info.utf8_replacements;
    e->docs_repaired += info.utf8_replacements > 0;
    return LT_OK;
}

/* Make sure the id buffer can hold a typical document of `len` bytes. */
static void reserve_ids(encoder *e, size_t len) {
    size_t want = len / 2 + 64;
    if (want <= e->cap) return;
    e->cap = want;
    e->ids = lt_realloc_check(e->ids, e->cap * sizeof *e->ids);
}

/* Read all of a stream (stdin). */
static lt_status read_stream(FILE *f, const char *name, char **data, size_t *len, lt_error *err) {
    size_t cap = 1 << 16, n = 0;
    char *buf = lt_malloc_check(cap);
    for (;;) {
        if (n == cap) buf = lt_realloc_check(buf, cap *= 2);
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        free(buf);
        return lt_fail(err, LT_ERR_IO, name, "read failed: %s", strerror(errno));
    }
    *data = buf;
    *len = n;
    return LT_OK;
}

static lt_status encode_whole(encoder *e, const char *path, lt_error *err) {
    char *data;
    size_t len;
    bool is_stdin = strcmp(path, "-") == 0;
    lt_status st = is_stdin ? read_stream(stdin, "standard input", &data, &len, err)
                            : lt_read_file(path, &data, &len, err);
    if (st != LT_OK) return st;
    reserve_ids(e, len);
    st = encode_document(e, data, len, is_stdin ? "standard input" : path, err);
    free(data);
    return st;
}

static bool blank_line(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return false;
    return true;
}

static lt_status encode_jsonl(encoder *e, const char *path, const char *field, lt_error *err) {
    bool is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "standard input" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) return lt_fail(err, LT_ERR_IO, path, "cannot open: %s", strerror(errno));
    lt_jsonl_reader rd;
    lt_jsonl_reader_init(&rd);
    char *line = NULL;
    size_t line_cap = 0, lineno = 0;
    ssize_t got;
    lt_status st = LT_OK;
    char where[PATH_MAX + 32];
    while (st == LT_OK && (got = getline(&line, &line_cap, f)) >= 0) {
        lineno++;
        snprintf(where, sizeof where, "%s:%zu", name, lineno);
        if (blank_line(line, (size_t)got)) continue;
        const char *text;
        size_t len;
        st = lt_jsonl_reader_get(&rd, line, (size_t)got, field, &text, &len, err);
        if (st != LT_OK) {
            lt_error_prefix(err, "%s: ", where);
        } else if (!text) {
            st = lt_fail(err, LT_ERR_INPUT, where, "no string field \"%s\" in this record", field);
            lt_error_hint(err, "choose the text field with --field KEY");
        } else {
            reserve_ids(e, len);
            st = encode_document(e, text, len, where, err);
            /* the reader already repaired invalid UTF-8 inside the JSON string */
            e->replacements += rd.replacements;
            e->docs_repaired += rd.replacements > 0;
        }
    }
    if (st == LT_OK && ferror(f)) st = lt_fail(err, LT_ERR_IO, name, "read failed: %s", strerror(errno));
    free(line);
    lt_jsonl_reader_free(&rd);
    if (!is_stdin) fclose(f);
    return st;
}

int encode_command(lt_cli_ctx *ctx) {
    const char *encoding = NULL, *vocab_dir = NULL, *vocab = NULL, *pattern = NULL, *field = NULL,
               *allowed = NULL, *engine_name = "auto", *hf = NULL;
    bool jsonl = false;
    char **files = lt_calloc_check((size_t)ctx->argc + 1, sizeof *files);
    size_t nfiles = 0;
    for (int i = 1; i < ctx->argc; i++) {
        const char *a = ctx->argv[i], *v;
        int missing = 0;
        if ((v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--encoding", &missing))) encoding = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--vocab-dir", &missing))) vocab_dir = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--vocab", &missing))) vocab = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--pattern", &missing))) pattern = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--tokenizer", &missing))) hf = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--field", &missing))) field = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--allowed-special", &missing))) allowed = v;
        else if (!missing && (v = lt_cli_option_value(ctx->argc, ctx->argv, &i, "--pretokenizer", &missing))) engine_name = v;
        else if (missing) {
            free(files);
            return lt_cli_usage(ctx, "option '%.200s' needs a value", a);
        } else if (strcmp(a, "--jsonl") == 0) jsonl = true;
        else if (a[0] == '-' && a[1] != '\0') {
            free(files);
            return lt_cli_unknown_option(ctx, a);
        } else files[nfiles++] = ctx->argv[i];
    }
    int rc = 0;
    if (hf && (encoding || vocab)) rc = lt_cli_usage(ctx, "give --tokenizer FILE alone, without --encoding or --vocab");
    else if (encoding && vocab) rc = lt_cli_usage(ctx, "give --encoding NAME or --vocab FILE, not both");
    else if (pattern && !vocab) rc = lt_cli_usage(ctx, "--pattern goes with --vocab FILE.tiktoken");
    else if (field && !jsonl) rc = lt_cli_usage(ctx, "--field goes with --jsonl");
    lt_pretok_engine engine = LT_PRETOK_ENGINE_AUTO;
    if (!rc && strcmp(engine_name, "pcre2") == 0) engine = LT_PRETOK_ENGINE_PCRE2;
    else if (!rc && strcmp(engine_name, "auto") != 0)
        rc = lt_cli_usage(ctx, "--pretokenizer is auto or pcre2");
    if (rc) {
        free(files);
        return rc;
    }
    if (!encoding && !vocab && !hf) hf = lt_config_get_string(ctx->config, "data", "tokenizer");
    if (!encoding && !vocab && !hf) encoding = lt_config_get_string(ctx->config, "data", "encoding");
    if (!vocab_dir) vocab_dir = lt_config_get_string(ctx->config, "data", "vocab_dir");
    if (!field) field = lt_config_get_string(ctx->config, "data", "field");
    if (!field) field = "text";

    lt_error err;
    lt_error_clear(&err);
    encoder e = {0};
    lt_status st = hf      ? lt_hf_tokenizer_load(&e.tok, hf, engine, &err)
                   : vocab ? lt_tokenizer_load(&e.tok, vocab, pattern, engine, &err)
                         : lt_tokenizer_load_encoding(&e.tok, encoding, vocab_dir, engine, &err);
    if (st == LT_OK && allowed) st = lt_tokenizer_set_allowed_special(e.tok, allowed, &err);
    if (st == LT_OK && !(e.scratch = lt_tok_scratch_new())) st = lt_fail(&err, LT_ERR_NOMEM, NULL, "out of memory");
    if (st == LT_OK) {
        LT_DEBUG("encode: %s (%" PRIu32 " tokens, sha256 %s), pre-tokenizer %s", lt_tokenizer_name(e.tok),
                 lt_tokenizer_n_vocab(e.tok), lt_tokenizer_vocab_sha256(e.tok), lt_tokenizer_engine(e.tok));
        static char out_buf[1 << 16];
        setvbuf(stdout, out_buf, _IOFBF, sizeof out_buf);
        if (nfiles == 0) files[nfiles++] = "-";
        for (size_t k = 0; k < nfiles && st == LT_OK; k++)
            st = jsonl ? encode_jsonl(&e, files[k], field, &err) : encode_whole(&e, files[k], &err);
        if (fflush(stdout) != 0 && st == LT_OK)
            st = lt_fail(&err, LT_ERR_IO, "standard output", "write failed: %s", strerror(errno));
    }
    if (e.replacements)
        LT_WARN("replaced %zu invalid UTF-8 sequence%s with U+FFFD in %zu document%s", e.replacements,
                e.replacements == 1 ? "" : "s", e.docs_repaired, e.docs_repaired == 1 ? "" : "s");
    LT_DEBUG("encode: %zu documents, %zu tokens", e.docs, e.tokens);
    lt_tok_scratch_free(e.scratch);
    lt_tokenizer_free(e.tok);
    free(e.ids);
    free(e.line);
    free(files);
    return st == LT_OK ? 0 : lt_error_exit(&err);
}
