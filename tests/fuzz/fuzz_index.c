/*
 * tests/fuzz/fuzz_index.c — libFuzzer target for the token index reader
 * (dataprep/shard.h lt_index_open and its accessors).
 *
 * The input is the content of a task-IIIII.index (written to a private temporary file).
 * It is opened twice: as it is, and with its trailing SHA-256 recomputed, so that
 * mutations get past the hash to the structural checks and the accessors. What is checked
 * (abort() on a violation):
 *   - no crash, leak, UB or exit; the status is LT_OK, LT_ERR_INPUT or LT_ERR_VERSION;
 *   - an error names the file (WHERE is the path) and says what is wrong;
 *   - an accepted index is consistent through every accessor: document offsets are
 *     monotone from 0 to n_tokens, lengths match, sources name existing files and
 *     NUL-terminated strings, frames tile the documents and lt_index_frame_of_doc finds
 *     the frame holding each document; opening its (absent) shard fails cleanly.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataprep/shard.h"
#include "lib/sha256.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_index: property violated: %s\n", what);
    if (detail) fprintf(stderr, "  %s\n", detail);
    abort();
}

static char path[64];

static void walk(const lt_index *ix) {
    const lt_shard_meta *m = lt_index_meta(ix);
    if (m->token_width != 2 && m->token_width != 4) fail("accepted a bad token width", NULL);
    if (m->encoding[sizeof m->encoding - 1] != '\0') fail("encoding not NUL-terminated", NULL);
    uint64_t nd = lt_index_n_docs(ix), nf = lt_index_n_frames(ix);
    uint32_t nfiles = lt_index_n_files(ix);
    if (lt_index_doc_offset(ix, 0) != 0) fail("doc_offset(0) != 0", NULL);
    uint64_t sum = 0;
    for (uint64_t d = 0; d < nd; d++) {
        uint64_t a = lt_index_doc_offset(ix, d), b = lt_index_doc_offset(ix, d + 1);
        if (b < a || lt_index_doc_len(ix, d) != b - a) fail("document offsets/lengths inconsistent", NULL);
        sum += b - a;
        lt_index_source src;
        lt_index_doc_source(ix, d, &src);
        if (src.file >= nfiles) fail("a source names a file that is not there", NULL);
        (void)strlen(src.id);
        (void)strlen(src.name);
        uint64_t f = lt_index_frame_of_doc(ix, d);
        if (f >= nf) fail("frame_of_doc out of range", NULL);
        lt_index_frame fr;
        lt_index_frame_get(ix, f, &fr);
        if (d < fr.first_doc || d - fr.first_doc >= fr.n_docs) fail("frame_of_doc gives a frame without the doc", NULL);
        if (a < fr.first_token || b - fr.first_token > fr.n_tokens) fail("a document outside its frame's tokens", NULL);
    }
    if (sum != lt_index_n_tokens(ix)) fail("lengths do not sum to n_tokens", NULL);
    for (uint32_t f = 0; f < nfiles; f++) {
        (void)strlen(lt_index_file_path(ix, f));
        (void)lt_index_file_size(ix, f);
    }
    uint64_t next = 0;
    for (uint64_t f = 0; f < nf; f++) {
        lt_index_frame fr;
        lt_index_frame_get(ix, f, &fr);
        if (fr.first_doc != next || fr.n_docs == 0) fail("frames do not tile the documents", NULL);
        next += fr.n_docs;
    }
    if (next != nd) fail("frames do not cover the documents", NULL);
    lt_shard *sh = NULL;
    lt_error err;
    if (lt_shard_open(&sh, NULL, ix, &err) == LT_OK) fail("opened a shard that does not exist", NULL);
    if (sh) fail("a shard despite an error", NULL);
}

static void one(const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        fail("cannot write the temporary file", path);
    lt_index *ix = NULL;
    lt_error err;
    lt_error_clear(&err);
    lt_status st = lt_index_open(&ix, path, &err);
    if (st != LT_OK) {
        if (st != LT_ERR_INPUT && st != LT_ERR_VERSION) fail("status is neither OK, INPUT nor VERSION", err.what);
        if (ix) fail("an index despite an error", NULL);
        if (strcmp(err.where, path) != 0) fail("the error does not name the file", err.where);
        if (!err.what[0]) fail("an error without a message", NULL);
        return;
    }
    walk(ix);
    lt_index_close(ix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz_index.%ld.index", (long)getpid());
    one(data, size);
    if (size >= 32) { /* the same bytes with a matching trailer */
        uint8_t *copy = malloc(size);
        if (!copy) fail("out of memory", NULL);
        memcpy(copy, data, size);
        lt_sha256 h;
        lt_sha256_init(&h);
        lt_sha256_update(&h, copy, size - 32);
        lt_sha256_final(&h, copy + size - 32);
        one(copy, size);
        free(copy);
    }
    return 0;
}
