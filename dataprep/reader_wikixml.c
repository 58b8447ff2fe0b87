/*
 * dataprep/reader_wikixml.c — MediaWiki XML dumps (pages-articles, plain or bz2
 * multistream), the `wikixml` backend of reader.h.
 *
 * The dump (https://www.mediawiki.org/xml/export-0.10.xsd) is a <mediawiki> element holding
 * <siteinfo> and one <page> per article:
 *     <page> <title>T</title> <ns>0</ns> <id>ID</id> [<redirect title=".."/>]
 *            <revision> <id>REV</id> ... <text bytes="N" xml:space="preserve">WIKITEXT</text>
 *            </revision> </page>
 * It is streamed through expat in READ_CHUNK pieces: memory is the chunk, expat's state and
 * one page. When a page ends, the parser is suspended (XML_StopParser, resumable) and the
 * page is handed back; the next call resumes where it stopped, so completed pages never
 * queue up however many a chunk holds.
 *
 * Documents: pages in namespace 0 (no <ns> counts as 0) without <redirect>; other pages
 * are counted as filtered. The text is lt_wikitext_to_text() of the (last) revision's
 * <text>; id = "page=ID" with the page's own <id> (not the revision's), name = the title,
 * record = the page's ordinal in the file, offset = the decompressed byte offset of its
 * <page> tag. A page without <id> (or with one that is not a number) or without <text> is a
 * bad_page skip.
 *
 * The cap: the wikitext of one page is kept up to 2 x max_doc_bytes + 1 MiB (cut at a
 * UTF-8 boundary) — markup usually shrinks to well under half in conversion, so the text
 * of an article under the cap survives whole. Past it, bytes are read and counted but not
 * kept; such a document has orig_bytes = its converted length + the wikitext bytes dropped
 * (an estimate, always larger than its text) so reader.c counts it as truncated. A
 * construct cut open at the cap is "unclosed" to the converter: its text is kept.
 *
 * Damage: malformed XML, or XML cut short (unclosed elements at the end), is LT_ERR_INPUT
 * with WHERE = "PATH: offset N" (decompressed bytes) and the line and column in WHAT, after
 * every page completed before it has been returned. Errors of the source (a corrupt or
 * truncated bz2 stream) are passed on as they are.
 */
#include "dataprep/reader.h"

#include <expat.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataprep/wikitext.h" /* lt_wikitext_to_text */

#define READ_CHUNK (64u * 1024u)   /* bytes fed to expat per XML_Parse */
#define TITLE_MAX 4096u            /* MediaWiki titles are <= 255 bytes; more is dropped */
#define NUMBER_MAX 32u             /* <id>, <ns> text kept */
#define TEXT_SLACK (1024u * 1024u) /* the wikitext cap is 2 x max_doc_bytes + this */

typedef enum capture { CAP_NONE, CAP_TITLE, CAP_NS, CAP_ID, CAP_TEXT } capture;

typedef struct wiki_state {
    lt_reader_core *core;
    XML_Parser parser;
    char *chunk; /* the bytes being parsed (expat may suspend inside them) */
    size_t text_cap;

    /* parser position */
    int depth;        /* element depth (root = 1) */
    int page_depth;   /* depth of the open <page>, 0 when outside one */
    int rev_depth;    /* depth of the open <revision> inside it, 0 otherwise */
    capture cap;      /* what character data is collected now */
    bool suspended;   /* XML_Parse/ResumeParser returned XML_STATUS_SUSPENDED */
    bool final_sent;  /* the last (isFinal) XML_Parse has been made */
    bool done;        /* end of the file, or an error was returned */
    bool ready;       /* out_* hold a document for next() */
    lt_status failed; /* an error found in a callback (internal), reported by next() */

    /* the page being read */
    uint64_t pages;     /* pages seen; the ordinal of the current one */
    uint64_t page_off;  /* decompressed offset of its <page> */
    char title[TITLE_MAX];
    size_t title_len;
    char ns[NUMBER_MAX];
    size_t ns_len;
    bool has_ns;
    char id[NUMBER_MAX];
    size_t id_len;
    bool has_id, id_long;
    bool redirect;
    bool has_text;
    char *text; /* wikitext kept (<= text_cap) */
    size_t text_len, text_alloc;
    uint64_t text_total; /* its full length */

    /* the document handed back */
    lt_wikitext_buf out;
    char out_id[NUMBER_MAX + 8];
    char out_name[TITLE_MAX];
    uint64_t out_record, out_offset, out_orig;
} wiki_state;

/* ------------------------------------------------------------------ helpers */

static void append_capped(char *buf, size_t *len, size_t cap, const char *s, size_t n) {
    size_t room = cap - *len;
    if (n > room) n = room;
    memcpy(buf + *len, s, n);
    *len += n;
}

/* Trim XML white space; returns the trimmed length and *start. */
static size_t trim(const char *s, size_t n, size_t *start) {
    size_t a = 0;
    while (a < n && (s[a] == ' ' || s[a] == '\t' || s[a] == '\n' || s[a] == '\r')) a++;
    while (n > a && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
    *start = a;
    return n - a;
}

static void append_text(wiki_state *w, const char *s, size_t n) {
    w->text_total += n;
    if (w->text_len >= w->text_cap) return;
    size_t take = n;
    if (take > w->text_cap - w->text_len) {
        take = w->text_cap - w->text_len;
        /* cut at a code point boundary: back off continuation bytes of the cut sequence */
        size_t k = take;
        while (k > 0 && take - k < 3 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
        if (((unsigned char)s[k] & 0xC0) != 0x80) take = k;
        w->text_cap = w->text_len + take; /* nothing more is kept */
    }
    if (w->text_len + take > w->text_alloc) {
        size_t a = w->text_alloc ? w->text_alloc : 4096;
        while (a < w->text_len + take) a = a > SIZE_MAX / 2 ? w->text_len + take : a * 2;
        w->text = lt_realloc_check(w->text, a);
        w->text_alloc = a;
    }
    memcpy(w->text + w->text_len, s, take);
    w->text_len += take;
}

static void where_page(const wiki_state *w, char *buf, size_t size) {
    snprintf(buf, size, "%s: page %" PRIu64 " at offset %" PRIu64, w->core->path, w->pages, w->page_off);
}

/* ------------------------------------------------------------------ expat callbacks */

static void page_begin(wiki_state *w) {
    w->pages++;
    w->core->stats->records++;
    XML_Index off = XML_GetCurrentByteIndex(w->parser);
    w->page_off = off > 0 ? (uint64_t)off : 0;
    w->title_len = w->ns_len = w->id_len = 0;
    w->has_ns = w->has_id = w->id_long = w->redirect = w->has_text = false;
    w->text_len = 0;
    w->text_total = 0;
    w->text_cap = 0;
}

/* </page>: a document, a filtered page or a bad one. */
static void page_end(wiki_state *w) {
    char where[LT_ERROR_WHERE_MAX];
    size_t s;
    size_t n = trim(w->id, w->id_len, &s);
    bool id_ok = w->has_id && !w->id_long && n > 0;
    for (size_t k = 0; id_ok && k < n; k++) id_ok = w->id[s + k] >= '0' && w->id[s + k] <= '9';
    if (!id_ok || !w->has_text) {
        where_page(w, where, sizeof where);
        const char *what = !w->has_id ? "no <id>" : !id_ok ? "an <id> that is not a number" : "no <text>";
        lt_reader_skip(w->core, where, LT_SKIP_BAD_PAGE, "page '%.*s' has %s", (int)(w->title_len > 200 ? 200 : w->title_len),
                       w->title, what);
        return;
    }
    size_t ns_start;
    size_t ns_n = trim(w->ns, w->ns_len, &ns_start);
    bool main_ns = !w->has_ns || (ns_n == 1 && w->ns[ns_start] == '0');
    if (!main_ns || w->redirect) {
        w->core->stats->filtered++;
        return;
    }
    if (w->ready) { /* cannot happen: the parser is suspended at every page end */
        w->failed = LT_ERR_INTERNAL;
        XML_StopParser(w->parser, XML_FALSE);
        return;
    }
    lt_wikitext_to_text(w->text, w->text_len, &w->out);
    snprintf(w->out_id, sizeof w->out_id, "page=%.*s", (int)n, w->id + s);
    memcpy(w->out_name, w->title, w->title_len);
    w->out_name[w->title_len] = '\0';
    w->out_record = w->pages;
    w->out_offset = w->page_off;
    w->out_orig = w->text_total > w->text_len ? w->out.len + (w->text_total - w->text_len) : 0;
    w->ready = true;
    XML_StopParser(w->parser, XML_TRUE);
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs) {
    (void)attrs;
    wiki_state *w = ud;
    w->depth++;
    w->cap = CAP_NONE;
    if (w->page_depth == 0) {
        if (strcmp(name, "page") == 0) {
            w->page_depth = w->depth;
            page_begin(w);
        }
        return;
    }
    if (w->depth == w->page_depth + 1) {
        if (strcmp(name, "title") == 0) {
            w->title_len = 0;
            w->cap = CAP_TITLE;
        } else if (strcmp(name, "ns") == 0) {
            w->ns_len = 0;
            w->has_ns = true;
            w->cap = CAP_NS;
        } else if (strcmp(name, "id") == 0) {
            w->id_len = 0;
            w->id_long = false;
            w->has_id = true;
            w->cap = CAP_ID;
        } else if (strcmp(name, "redirect") == 0) {
            w->redirect = true;
        } else if (strcmp(name, "revision") == 0) {
            w->rev_depth = w->depth;
        }
    } else if (w->rev_depth != 0 && w->depth == w->rev_depth + 1 && strcmp(name, "text") == 0) {
        /* a later revision replaces an earlier one (history dumps): the last is current */
        w->has_text = true;
        w->text_len = 0;
        w->text_total = 0;
        w->text_cap = w->core->opts->max_doc_bytes > (SIZE_MAX - TEXT_SLACK) / 2
                          ? SIZE_MAX
                          : 2 * w->core->opts->max_doc_bytes + TEXT_SLACK;
        w->cap = CAP_TEXT;
    }
}

static void XMLCALL on_end(void *ud, const XML_Char *name) {
    (void)name;
    wiki_state *w = ud;
    w->cap = CAP_NONE;
    if (w->depth == w->rev_depth) w->rev_depth = 0;
    if (w->page_depth != 0 && w->depth == w->page_depth) {
        w->page_depth = 0;
        w->rev_depth = 0;
        w->depth--;
        page_end(w);
        return;
    }
    w->depth--;
}

static void XMLCALL on_chars(void *ud, const XML_Char *s, int len) {
    wiki_state *w = ud;
    size_t n = len > 0 ? (size_t)len : 0;
    switch (w->cap) {
    case CAP_NONE: return;
    case CAP_TITLE: append_capped(w->title, &w->title_len, TITLE_MAX - 1, s, n); return;
    case CAP_NS: append_capped(w->ns, &w->ns_len, NUMBER_MAX, s, n); return;
    case CAP_ID:
        if (w->id_len + n > NUMBER_MAX) w->id_long = true;
        append_capped(w->id, &w->id_len, NUMBER_MAX, s, n);
        return;
    case CAP_TEXT: append_text(w, s, n); return;
    }
}

/* ------------------------------------------------------------------ the backend */

static lt_status xml_error(wiki_state *w, lt_error *err) {
    enum XML_Error code = XML_GetErrorCode(w->parser);
    XML_Index off = XML_GetCurrentByteIndex(w->parser);
    char where[LT_ERROR_WHERE_MAX];
    snprintf(where, sizeof where, "%s: offset %" PRIu64, w->core->path, off > 0 ? (uint64_t)off : 0);
    lt_status st = lt_fail(err, LT_ERR_INPUT, where, "malformed XML: %s (line %" PRIu64 ", column %" PRIu64 ")",
                           XML_ErrorString(code), (uint64_t)XML_GetCurrentLineNumber(w->parser),
                           (uint64_t)XML_GetCurrentColumnNumber(w->parser));
    lt_error_hint(err, "the file is damaged or cut short; the pages before this point were read");
    return st;
}

/* One parsing step: resume a suspended parse, or feed the next chunk (the final call at the
 * end of the source). */
static lt_status parse_more(wiki_state *w, lt_error *err) {
    enum XML_Status xs;
    if (w->suspended) {
        xs = XML_ResumeParser(w->parser);
    } else {
        size_t got;
        lt_status st = lt_src_read(w->core->src, w->chunk, READ_CHUNK, &got, err);
        if (st != LT_OK) return st;
        if (got == 0) w->final_sent = true;
        xs = XML_Parse(w->parser, w->chunk, (int)got, w->final_sent ? XML_TRUE : XML_FALSE);
    }
    if (w->failed != LT_OK) return lt_fail(err, w->failed, w->core->path, "wiki XML reader: a page ended twice");
    switch (xs) {
    case XML_STATUS_SUSPENDED: w->suspended = true; return LT_OK;
    case XML_STATUS_OK:
        w->suspended = false;
        if (w->final_sent) w->done = true;
        return LT_OK;
    case XML_STATUS_ERROR: break;
    }
    return xml_error(w, err);
}

static lt_status wiki_next(void *state, lt_doc *doc, bool *eof, lt_error *err) {
    wiki_state *w = state;
    *eof = false;
    for (;;) {
        if (w->ready) {
            w->ready = false;
            doc->text = w->out.data != NULL ? w->out.data : "";
            doc->len = w->out.len;
            doc->id = w->out_id;
            doc->name = w->out_name;
            doc->record = w->out_record;
            doc->offset = w->out_offset;
            doc->orig_bytes = w->out_orig;
            return LT_OK;
        }
        if (w->done) {
            *eof = true;
            return LT_OK;
        }
        lt_status st = parse_more(w, err);
        if (st != LT_OK) {
            w->done = true;
            w->ready = false;
            return st;
        }
    }
}

static lt_status wiki_open(void **state, lt_reader_core *core, lt_error *err) {
    wiki_state *w = lt_calloc_check(1, sizeof *w);
    w->core = core;
    w->parser = XML_ParserCreate(NULL); /* the declared encoding, else UTF-8; output UTF-8 */
    if (w->parser == NULL) {
        free(w);
        return lt_fail(err, LT_ERR_NOMEM, core->path, "cannot create an XML parser (out of memory)");
    }
    XML_SetUserData(w->parser, w);
    XML_SetElementHandler(w->parser, on_start, on_end);
    XML_SetCharacterDataHandler(w->parser, on_chars);
    w->chunk = lt_malloc_check(READ_CHUNK);
    *state = w;
    return LT_OK;
}

static void wiki_close(void *state) {
    wiki_state *w = state;
    if (w == NULL) return;
    XML_ParserFree(w->parser);
    free(w->chunk);
    free(w->text);
    lt_wikitext_buf_free(&w->out);
    free(w);
}

const lt_reader_backend lt_reader_backend_wikixml = {"wikixml", false, wiki_open, wiki_next, wiki_close};
