/*
 * tests/dataprep/test_wikitext.c — wikitext to plain text (dataprep/wikitext.h) and the
 * MediaWiki XML reader (the wikixml backend of dataprep/reader.h).
 *
 * Converter: every construct of docs/formats.md "Wikitext to plain text", each against an
 * expected string written by hand from MediaWiki's rendering (not produced by the code):
 * templates and parameters (nested, brace counts), tables (nested, inside templates),
 * <ref>, comments, category / file / interlanguage links (captions with links), links and
 * labels, link trails, external links, headings, bold/italic, lists, rules, entities,
 * magic words, tags (dropped, literal, removed), blank lines; unbalanced input (nothing
 * after an unclosed opener is lost); nesting past LT_WIKITEXT_MAX_DEPTH as text; 1 MiB of
 * each construct's opener converts in linear time (a CPU-time bound that only a
 * quadratic scan could break).
 *
 * Reader: ns / redirect filtering, the page's <id> (not the revision's), titles with
 * entities, bad pages (no <id>, no <text>) skipped and reported, records and offsets, many
 * pages per 64 KiB chunk, a page over many chunks, the wikitext cap (truncated, orig_bytes),
 * bz2 multistream (made here with libbz2), XML cut short or malformed (pages before it
 * returned, then LT_ERR_INPUT "NAME: offset N"), a corrupt bz2 stream, and the shared
 * Wikipedia sample (../shared, else the copy in data/sample/): as many documents, with the
 * same page ids, as an independent scan of the XML (decompressed here with libbz2) finds
 * namespace-0 non-redirect pages; ../shared/corpus/bad/unclosed.xml.bz2 ends in
 * LT_ERR_INPUT "PATH: offset N" (skipped when ../shared is absent).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bzlib.h>
#include <cmocka.h>

#include "dataprep/reader.h"
#include "dataprep/wikitext.h"

/* ================================================================ converter helpers */

typedef struct wt_case {
    const char *in;
    const char *want;
} wt_case;

static void check_case(lt_wikitext_buf *b, const char *in, size_t in_len, const char *want) {
    lt_wikitext_to_text(in, in_len, b);
    size_t wl = strlen(want);
    if (b->len != wl || memcmp(b->data, want, wl) != 0)
        fail_msg("input  [%.*s]\n  got    [%.*s]\n  wanted [%s]", (int)in_len, in, (int)b->len,
                 b->data ? b->data : "", want);
}

static void run_cases(const wt_case *cases, size_t n) {
    lt_wikitext_buf b = {0};
    for (size_t i = 0; i < n; i++) check_case(&b, cases[i].in, strlen(cases[i].in), cases[i].want);
    lt_wikitext_buf_free(&b);
}

#define RUN(cases) run_cases(cases, sizeof cases / sizeof cases[0])

/* ================================================================ constructs */

static void test_templates(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"a{{b}}c", "ac"},
        {"a {{b|c={{d|e}}}} f", "a  f"},
        {"x{{{1|default}}}y", "xy"},
        {"{{a|{{{b}}}}}z", "z"},
        {"{{{x}}", "{"},  /* MediaWiki: "{" then the template {{x}} */
        {"{{a}}}", "}"},
        {"a {{{{{b}}}}} c", "a  c"},
        {"{{Infobox\n| name = X\n| value = {{nowrap|y}}\n}}\nText.", "Text."},
        {"{{#if:x|[[a|b]]|c}}d", "d"},
        {"a {{b [[c|d]] e}} f", "a  f"},
        {"{{a|<ref>}}</ref>}}b", "b"}, /* the ref is opaque: its "}}" does not close */
        {"{{a|\n== H ==\n}}b", "b"},
    };
    RUN(cases);
}

static void test_tables(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"a\n{|\n|-\n| x || y\n|}\nb", "a\n\nb"},
        {"{| class=\"wikitable\"\n|+ Caption\n! H\n|-\n| c\n|}", ""},
        {"{|\n|\n{|\n| in\n|}\n| out\n|}\nz", "z"},
        {"  {|\n| x\n  |}\nz", "z"},
        {":{|\n| x\n|}\nz", "z"},
        {"{{a|\n{|\n| x\n|}\n}}z", "z"},
        {"{{a|\n{|\n| x\n}}\nz", "z"}, /* "}}" closes the template through the open table */
        {"{|\n| [[a|b\n|}\nz", "z"},   /* "|}" closes the table through the open link */
        {"x {| y", "x {| y"},          /* not at a line start */
    };
    RUN(cases);
}

static void test_refs(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"a<ref>b</ref> c", "a c"},
        {"a<ref name=\"n\" /> c", "a c"},
        {"a<ref name=n>b [[c]] {{d}}</ref>.", "a."},
        {"a<REF>b</Ref >c", "ac"},
        {"a<ref group=\"note\">x\ny</ref>b", "ab"},
        {"a<ref>b</ref>c<ref>d</ref>e", "ace"},
        {"<ref>x</ref><ref>y", "y"}, /* an unclosed <ref>: only the tag goes */
        {"a</ref>b", "ab"},
        {"<references />x", "x"},
        {"<references>\n<ref name=a>z</ref>\n</references>y", "y"},
    };
    RUN(cases);
}

static void test_comments(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"a<!-- b -->c", "ac"},
        {"a<!--b-->c<!--d-->e", "ace"},
        {"<!-- multi\nline -->x", "x"},
        {"a<!-- b", "a"}, /* unclosed: to the end, as MediaWiki */
        {"a<!-- [[x]] {{y -->b", "ab"},
        {"a<!---->b", "ab"},
    };
    RUN(cases);
}

static void test_category_file_language_links(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"a[[Category:Foo]]b", "ab"},
        {"a[[Category:Foo|sort key]]b", "ab"},
        {"a[[category:foo]]b", "ab"},
        {"a[[CATEGORY:foo]]b", "ab"},
        {"[[File:X.jpg|thumb|A [[b|c]] d]]z", "z"},
        {"[[File:a.jpg|thumb|caption with [[File:b.jpg]] and [[c]]]]z", "z"},
        {"[[File:a.jpg|thumb|line one\nline two]]z", "z"},
        {"[[Image:X.png]]z", "z"},
        {"[[image:x.png|left|200px]]z", "z"},
        {"[[file:x.png]]z", "z"},
        {"[[Media:X.ogg]]z", "z"},
        {"[[Datei:X.jpg|mini]]z", "z"},
        {"[[Fichier:X.jpg]]z", "z"},
        {"[[de:Foo]][[fr:Bar]][[zh-yue:Baz]][[simple:Q]][[be-tarask:W]]z", "z"},
        {"[[:Category:Foo]]", "Category:Foo"},
        {"[[:File:X.jpg|the file]]", "the file"},
        {"[[:de:Foo]]", "de:Foo"},
        {"[[wikt:word]]", "wikt:word"},
        {"[[Wikipedia:About|about]]", "about"},
    };
    RUN(cases);
}

static void test_links(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"[[Paris]]", "Paris"},
        {"[[Paris|the city]]", "the city"},
        {"[[bus]]es", "buses"},
        {"[[a|b]]c", "bc"},
        {"[[Help:Contents|]]", "Help:Contents"}, /* pipe trick: the target */
        {"[[a|b|c]]", "b|c"},
        {"[[a|''b'']]", "b"},
        {"[[a#s|b]]", "b"},
        {"[[#History]]", "#History"},
        {"[[a|[[b]]]]", "b"},
        {"[[a\nb]]", "a\nb]]"}, /* a target cannot span lines: not a link */
        {"a ]] b", "a ]] b"},
        {"x]y", "x]y"},
        {"[[a|multi\nline]]", "multi\nline"},
    };
    RUN(cases);
}

static void test_external_links(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"[http://example.org Example site]", "Example site"},
        {"see [http://example.org].", "see ."},
        {"visit http://example.org now", "visit http://example.org now"},
        {"[https://a.b/c?d=e&f=g ''label'']", "label"},
        {"[//example.org proto-relative]", "proto-relative"},
        {"[mailto:x@y.z mail]", "mail"},
        {"[HTTP://X.ORG upper]", "upper"},
        {"[http://x.org label\nmore", "http://x.org label\nmore"}, /* unclosed at the line end */
        {"[not a link]", "[not a link]"},
        {"[http://x.org a [[b|c]] d]", "a c d"},
        {"[http://x.org a]]", "a]"},
        {"[http://x.org", "[http://x.org"},
    };
    RUN(cases);
}

static void test_headings(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"== History ==", "History"},
        {"text\n== H ==\nmore", "text\nH\nmore"},
        {"=== Sub ===\nx", "Sub\nx"},
        {"==H==", "H"},
        {"=== H ==", "= H"},
        {"== H ===", "H ="},
        {"== H == <!-- c -->\nx", "H\nx"},
        {"== [[a|b]] '''c''' ==", "b c"},
        {"====", "===="},
        {"a == b ==", "a == b =="},
        {"= H", "= H"},
        {"====== Six ======", "Six"},
    };
    RUN(cases);
}

static void test_bold_italic(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"''it'' '''bold''' '''''both'''''", "it bold both"},
        {"don't", "don't"},
        {"''''x''''", "'x'"},     /* 4: an apostrophe + bold */
        {"''''''x''''''", "'x'"}, /* 6: one extra + bold italic */
        {"''a", "a"},
    };
    RUN(cases);
}

static void test_lists_and_rules(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"* one\n** two\n# three\n#: cont\n; term : def\n: indent", "one\ntwo\nthree\ncont\nterm : def\nindent"},
        {"a * b # c", "a * b # c"},
        {"*", ""},
        {"a\n----\nb", "a\n\nb"},
        {"a\n------ x\nb", "a\n x\nb"},
        {"a --- b", "a --- b"},
    };
    RUN(cases);
}

static void test_entities(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"&amp; &lt; &gt; &quot; &apos;", "& < > \" '"},
        {"a&nbsp;b", "a\xC2\xA0" "b"},
        {"&ndash;&mdash;&hellip;", "\xE2\x80\x93\xE2\x80\x94\xE2\x80\xA6"},
        {"&eacute;&copy;&euro;&rarr;&times;&deg;&frac12;&alpha;&Omega;&minus;&thinsp;",
         "\xC3\xA9\xC2\xA9\xE2\x82\xAC\xE2\x86\x92\xC3\x97\xC2\xB0\xC2\xBD\xCE\xB1\xCE\xA9\xE2\x88\x92\xE2\x80\x89"},
        {"&#65;&#x42;&#X43;&#233;&#x1F600;", "ABC\xC3\xA9\xF0\x9F\x98\x80"},
        {"&#0;&#xD800;&#x110000;&#99999999999;", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"&bogus; &amp &#; &#x; & ;", "&bogus; &amp &#; &#x; & ;"},
        {"&amp;lt;", "&lt;"}, /* decoded once */
        {"AT&T", "AT&T"},
        {"&Amp;", "&Amp;"}, /* names are case-sensitive */
    };
    RUN(cases);
}

static void test_magic_words(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"__TOC__a__NOTOC__b__NOEDITSECTION__", "ab"},
        {"__FOO__", "__FOO__"},
        {"__init__", "__init__"},
        {"x___TOC__", "x_"},
        {"snake_case", "snake_case"},
    };
    RUN(cases);
}

static void test_tags(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"a<math>x^2</math>b", "ab"},
        {"<Math>x</MATH>y", "y"},
        {"<gallery>\nFile:a.jpg|x\n</gallery>z", "z"},
        {"<timeline>\nImageSize = width:100\n</timeline>z", "z"},
        {"<score>\\relative c' { c d e }</score>z", "z"},
        {"<nowiki>[[a]] ''b'' {{c}} <ref>d</ref></nowiki>", "[[a]] ''b'' {{c}} <ref>d</ref>"},
        {"<nowiki>&amp;</nowiki>", "&"},
        {"a<nowiki/>b", "ab"},
        {"<pre>x  ''y''</pre>", "x  ''y''"},
        {"<syntaxhighlight lang=\"c\">int *p = &amp;x;</syntaxhighlight>", "int *p = &amp;x;"},
        {"a<br>b<br/>c<br />d</br>e", "a\nb\nc\nd\ne"},
        {"<b>bold</b> <span style=\"color:red\">s</span> <small>t</small>", "bold s t"},
        {"<div>a</div><div>b</div>", "a\nb"},
        {"x <bigon@debian.org> y", "x <bigon@debian.org> y"}, /* not a tag */
        {"a < b > c", "a < b > c"},
        {"<foo>x</foo>", "<foo>x</foo>"},
        {"<includeonly>x</includeonly>y<noinclude>z</noinclude>", "yz"},
        {"<nowiki>x", "x"}, /* unclosed: only the tag goes */
        {"<b title='a<b'>x</b>", "<b title='a<b'>x"}, /* '<' inside a tag: not a tag */
    };
    RUN(cases);
}

static void test_whitespace(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"a\n\n\n\nb", "a\n\nb"},
        {"  \n\n a \n\n", "a"},
        {"a  \nb", "a\nb"},
        {"a\n \n \n \nb", "a\n\nb"},
        {"{{a}}\n\n{{b}}\n\n\nText\n\n{{c}}\n", "Text"},
        {" indented\n code", "indented\n code"},
        {"", ""},
        {"a\xFF" "b", "a\xFF" "b"}, /* invalid UTF-8 passes through */
    };
    RUN(cases);
}

static void test_unbalanced(void **state) {
    (void)state;
    static const wt_case cases[] = {
        {"{{a", "a"},
        {"x {{a|b", "x a|b"},
        {"[[a", "a"},
        {"[[a|b", "a|b"},
        {"{|\n| x", "| x"},
        {"}} ]] |} a", "}} ]] |} a"},
        {"|}\nx", "|}\nx"},
        {"a {{b [[c}} d", "a b c}} d"},
        {"{{a}}}}", "}}"},
        {"<ref>a", "a"},
        {"''a", "a"},
        {"{{a\n\nlong text after the unclosed template", "a\n\nlong text after the unclosed template"},
    };
    RUN(cases);
}

static char *repeat(const char *unit, size_t times, const char *middle, const char *tail_unit, size_t tail_times) {
    size_t u = strlen(unit), m = strlen(middle), t = strlen(tail_unit);
    char *s = malloc(u * times + m + t * tail_times + 1);
    assert_non_null(s);
    size_t o = 0;
    for (size_t i = 0; i < times; i++, o += u) memcpy(s + o, unit, u);
    memcpy(s + o, middle, m);
    o += m;
    for (size_t i = 0; i < tail_times; i++, o += t) memcpy(s + o, tail_unit, t);
    s[o] = '\0';
    return s;
}

static void test_depth_limit(void **state) {
    (void)state;
    lt_wikitext_buf b = {0};
    char *s = repeat("{{a", LT_WIKITEXT_MAX_DEPTH, "x", "}}", LT_WIKITEXT_MAX_DEPTH);
    check_case(&b, s, strlen(s), "");
    free(s);
    /* one more: the innermost opener is text, and so is the "}}" left over */
    s = repeat("{{a", LT_WIKITEXT_MAX_DEPTH + 1, "x", "}}", LT_WIKITEXT_MAX_DEPTH + 1);
    check_case(&b, s, strlen(s), "}}");
    free(s);
    s = repeat("[[a|", LT_WIKITEXT_MAX_DEPTH + 6, "x", "]]", LT_WIKITEXT_MAX_DEPTH + 6);
    check_case(&b, s, strlen(s), "[[a|[[a|[[a|[[a|[[a|[[a|x]]]]]]]]]]]]");
    free(s);
    lt_wikitext_buf_free(&b);
}

/* 1 MiB made of one construct's pieces: a linear pass takes milliseconds, a quadratic one
 * (re-scanning for a closer from every opener) hours. The bound is CPU time, loose enough
 * for valgrind. */
static void test_linear_time(void **state) {
    (void)state;
    static const char *const units[] = {
        "{{", "[[", "<ref>", "<b ", "&#", "[http://x ", "== a\n", "'''", "{|\n", "[[a|", "<nowiki>",
        "<!-", "__TOC", "{{{", "}}", "]]", "[[File:", "=\n", "<math>x</b>", "[[a\n", "[http://x a {{b\n",
        "\n|}", "{{[[", "[[{{", "<", "<ref", "&amp", "=a", "<b>", "[[a]]", "{{a}}", "a<!-- x -->",
        "== a <!-- b -->", "<ref name=x/>", "[[de:", "&nbsp;",
    };
    const size_t size = (size_t)1 << 20;
    char *in = malloc(size);
    assert_non_null(in);
    lt_wikitext_buf b = {0};
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        size_t k = strlen(units[u]);
        for (size_t i = 0; i < size; i++) in[i] = units[u][i % k];
        clock_t t0 = clock();
        lt_wikitext_to_text(in, size, &b);
        double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
        if (secs > 5.0) fail_msg("1 MiB of \"%s\" took %.2f s of CPU", units[u], secs);
        assert_true(b.len <= 2 * size + 16);
    }
    free(in);
    lt_wikitext_buf_free(&b);
}

/* The buffer is reused: a long result then a short one. */
static void test_buffer_reuse(void **state) {
    (void)state;
    lt_wikitext_buf b = {0};
    char *s = repeat("word ", 10000, "", "", 0);
    lt_wikitext_to_text(s, strlen(s), &b);
    assert_int_equal(b.len, strlen(s) - 1);
    check_case(&b, "[[x|y]]", 7, "y");
    free(s);
    lt_wikitext_buf_free(&b);
    lt_wikitext_buf_free(&b); /* idempotent */
    lt_wikitext_buf_free(NULL);
}

/* ================================================================ XML reader helpers */

typedef struct sbuf {
    char *s;
    size_t len, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 1024;
        while (c < b->len + n + 1) c *= 2;
        b->s = realloc(b->s, c);
        assert_non_null(b->s);
        b->cap = c;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof tmp);
    sb_add(b, tmp, (size_t)n);
}

static const char XML_HEAD[] =
    "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.10/\" version=\"0.10\" xml:lang=\"en\">\n"
    "  <siteinfo>\n    <sitename>Wikipedia</sitename>\n    <dbname>enwiki</dbname>\n  </siteinfo>\n";
static const char XML_TAIL[] = "</mediawiki>\n";

/* One <page>; id / ns / text NULL leave the element out; redirect adds <redirect/>. */
static void add_page(sbuf *b, const char *title, const char *ns, const char *id, const char *rev_id, bool redirect,
                     const char *text) {
    sb_printf(b, "  <page>\n    <title>%s</title>\n", title);
    if (ns) sb_printf(b, "    <ns>%s</ns>\n", ns);
    if (id) sb_printf(b, "    <id>%s</id>\n", id);
    if (redirect) sb_printf(b, "    <redirect title=\"Somewhere\" />\n");
    sb_printf(b, "    <revision>\n      <id>%s</id>\n      <timestamp>2024-05-01T00:00:00Z</timestamp>\n",
              rev_id ? rev_id : "1");
    sb_printf(b, "      <model>wikitext</model>\n      <format>text/x-wiki</format>\n");
    if (text && text[0] == '\0') sb_printf(b, "      <text bytes=\"0\" xml:space=\"preserve\" />\n");
    else if (text) {
        sb_printf(b, "      <text bytes=\"%zu\" xml:space=\"preserve\">", strlen(text));
        sb_add(b, text, strlen(text));
        sb_printf(b, "</text>\n");
    }
    sb_printf(b, "    </revision>\n  </page>\n");
}

typedef struct skip_log {
    int n;
    char where[8][256];
    char msg[8][256];
} skip_log;

static void on_skip(void *ctx, const char *where, lt_skip_reason reason, const char *message) {
    skip_log *l = ctx;
    assert_int_equal(reason, LT_SKIP_BAD_PAGE);
    if (l->n < 8) {
        snprintf(l->where[l->n], sizeof l->where[0], "%s", where);
        snprintf(l->msg[l->n], sizeof l->msg[0], "%s", message);
    }
    l->n++;
}

typedef struct got_doc {
    char *text;
    size_t len;
    char id[64];
    char name[256];
    uint64_t record, offset, orig_bytes;
    bool truncated;
} got_doc;

typedef struct read_all {
    got_doc *docs;
    size_t n;
    lt_status st;
    lt_error err;
    lt_reader_stats stats;
    skip_log skips;
} read_all;

/* Read every document of data[0..len) as `name` (format forced unless AUTO). */
static void read_mem(read_all *r, const void *data, size_t len, const char *name, lt_format fmt,
                     size_t max_doc_bytes) {
    memset(r, 0, sizeof *r);
    lt_reader_opts o = {0};
    o.format = fmt;
    o.max_doc_bytes = max_doc_bytes;
    o.on_skip = on_skip;
    o.skip_ctx = &r->skips;
    lt_reader *rd;
    lt_status st = lt_reader_open_mem(&rd, data, len, name, &o, &r->err);
    if (st != LT_OK) fail_msg("open: %s (%s)", r->err.what, r->err.where);
    assert_int_equal(lt_reader_format(rd), LT_FMT_WIKIXML);
    size_t cap = 0;
    for (;;) {
        lt_doc d;
        bool eof;
        r->st = lt_reader_next(rd, &d, &eof, &r->err);
        if (r->st != LT_OK || eof) break;
        if (r->n == cap) {
            cap = cap ? 2 * cap : 16;
            r->docs = realloc(r->docs, cap * sizeof *r->docs);
            assert_non_null(r->docs);
        }
        got_doc *g = &r->docs[r->n++];
        g->text = malloc(d.len + 1);
        assert_non_null(g->text);
        memcpy(g->text, d.text, d.len);
        g->text[d.len] = '\0';
        g->len = d.len;
        snprintf(g->id, sizeof g->id, "%s", d.id);
        snprintf(g->name, sizeof g->name, "%s", d.name);
        g->record = d.record;
        g->offset = d.offset;
        g->orig_bytes = d.orig_bytes;
        g->truncated = d.truncated;
    }
    r->stats = *lt_reader_get_stats(rd);
    lt_reader_close(rd);
}

static void read_free(read_all *r) {
    for (size_t i = 0; i < r->n; i++) free(r->docs[i].text);
    free(r->docs);
}

/* bz2 of data[0..len) as one stream, appended to out. */
static void bz2_append(sbuf *out, const char *data, size_t len) {
    unsigned int cap = (unsigned int)(len + len / 100 + 1024);
    char *z = malloc(cap);
    assert_non_null(z);
    assert_int_equal(BZ2_bzBuffToBuffCompress(z, &cap, (char *)data, (unsigned int)len, 9, 0, 0), BZ_OK);
    sb_add(out, z, cap);
    free(z);
}

/* The basic file: every kind of page once. */
static void basic_xml(sbuf *b) {
    sb_add(b, XML_HEAD, strlen(XML_HEAD));
    add_page(b, "Alpha", "0", "10", "1000", false,
             "'''Alpha''' is a [[letter]].&lt;ref&gt;x&lt;/ref&gt;\n[[Category:Letters]]");
    add_page(b, "Talk:Alpha", "1", "11", "1001", false, "talk");
    add_page(b, "Beta", "0", "12", "1002", true, "#REDIRECT [[Alpha]]");
    add_page(b, "Gamma &amp; Delta", "0", "13", "99", false, "G &amp;amp; D");
    add_page(b, "NoId", "0", NULL, "5", false, "x"); /* the revision's <id> is no page id */
    add_page(b, "NoText", "0", "15", "1005", false, NULL);
    add_page(b, "Empty", "0", "16", "1006", false, "");
    add_page(b, "Last", "0", "17", "1007", false, "x");
    sb_add(b, XML_TAIL, strlen(XML_TAIL));
}

/* Offset of the k-th (1-based) "<page>" in s. */
static uint64_t page_offset(const char *s, int k) {
    const char *p = s;
    for (int i = 0; i < k; i++) {
        p = strstr(i == 0 ? p : p + 1, "<page>");
        assert_non_null(p);
    }
    return (uint64_t)(p - s);
}

static void check_basic(const read_all *r, const char *xml) {
    if (r->st != LT_OK) fail_msg("%s (%s)", r->err.what, r->err.where);
    assert_int_equal(r->n, 4);
    assert_string_equal(r->docs[0].text, "Alpha is a letter.");
    assert_string_equal(r->docs[0].id, "page=10");
    assert_string_equal(r->docs[0].name, "Alpha");
    assert_int_equal(r->docs[0].record, 1);
    assert_int_equal(r->docs[0].offset, page_offset(xml, 1));
    assert_string_equal(r->docs[1].text, "G & D");
    assert_string_equal(r->docs[1].id, "page=13");
    assert_string_equal(r->docs[1].name, "Gamma & Delta");
    assert_int_equal(r->docs[1].record, 4);
    assert_int_equal(r->docs[1].offset, page_offset(xml, 4));
    assert_string_equal(r->docs[2].text, "");
    assert_string_equal(r->docs[2].id, "page=16");
    assert_int_equal(r->docs[2].record, 7);
    assert_string_equal(r->docs[3].id, "page=17");
    assert_int_equal(r->docs[3].record, 8);
    for (size_t i = 0; i < r->n; i++) assert_false(r->docs[i].truncated);
    assert_int_equal(r->stats.records, 8);
    assert_int_equal(r->stats.docs, 4);
    assert_int_equal(r->stats.filtered, 2);
    assert_int_equal(r->stats.skipped[LT_SKIP_BAD_PAGE], 2);
    assert_int_equal(r->skips.n, 2);
    assert_non_null(strstr(r->skips.msg[0], "NoId"));
    assert_non_null(strstr(r->skips.msg[0], "<id>"));
    assert_non_null(strstr(r->skips.where[0], "page 5"));
    assert_non_null(strstr(r->skips.msg[1], "NoText"));
    assert_non_null(strstr(r->skips.msg[1], "<text>"));
}

/* ================================================================ XML reader */

static void test_xml_pages(void **state) {
    (void)state;
    sbuf b = {0};
    basic_xml(&b);
    read_all r;
    read_mem(&r, b.s, b.len, "basic.xml", LT_FMT_AUTO, 0);
    check_basic(&r, b.s);
    assert_non_null(strstr(r.skips.where[0], "basic.xml"));
    read_free(&r);
    free(b.s);
}

static void test_xml_many_pages_per_chunk(void **state) {
    (void)state;
    sbuf b = {0};
    sb_add(&b, XML_HEAD, strlen(XML_HEAD));
    const int pages = 3000; /* ~300 bytes each: ~200 pages per 64 KiB chunk */
    for (int i = 0; i < pages; i++) {
        char title[32], id[32], text[64];
        snprintf(title, sizeof title, "P%d", i);
        snprintf(id, sizeof id, "%d", 100 + i);
        snprintf(text, sizeof text, "text ''%d''", i);
        add_page(&b, title, i % 3 == 2 ? "4" : "0", id, "7", false, text);
    }
    sb_add(&b, XML_TAIL, strlen(XML_TAIL));
    read_all r;
    read_mem(&r, b.s, b.len, "many.xml", LT_FMT_WIKIXML, 0);
    assert_int_equal(r.st, LT_OK);
    size_t k = 0;
    for (int i = 0; i < pages; i++) {
        if (i % 3 == 2) continue;
        char want[64];
        assert_true(k < r.n);
        snprintf(want, sizeof want, "text %d", i);
        assert_string_equal(r.docs[k].text, want);
        snprintf(want, sizeof want, "page=%d", 100 + i);
        assert_string_equal(r.docs[k].id, want);
        assert_int_equal(r.docs[k].record, (uint64_t)i + 1);
        k++;
    }
    assert_int_equal(r.n, k);
    assert_int_equal(r.stats.filtered, pages / 3);
    read_free(&r);
    free(b.s);
}

static void test_xml_long_page_and_cap(void **state) {
    (void)state;
    /* 300 KiB of text over several chunks, kept whole */
    char *text = repeat("abcdefghi\n", 30000, "", "", 0);
    sbuf b = {0};
    sb_add(&b, XML_HEAD, strlen(XML_HEAD));
    add_page(&b, "Long", "0", "1", "1", false, text);
    add_page(&b, "After", "0", "2", "2", false, "after");
    sb_add(&b, XML_TAIL, strlen(XML_TAIL));
    read_all r;
    read_mem(&r, b.s, b.len, "long.xml", LT_FMT_WIKIXML, 0);
    assert_int_equal(r.st, LT_OK);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.docs[0].len, strlen(text) - 1);
    assert_memory_equal(r.docs[0].text, text, strlen(text) - 1);
    assert_false(r.docs[0].truncated);
    read_free(&r);
    free(b.s);
    free(text);

    /* 2 MiB of wikitext with max_doc_bytes 1000: the backend keeps 2 x 1000 + 1 MiB of it */
    text = repeat("abcdefghi\n", 200 * 1024 + 1, "", "", 0);
    size_t tl = strlen(text);
    memset(&b, 0, sizeof b);
    sb_add(&b, XML_HEAD, strlen(XML_HEAD));
    add_page(&b, "Huge", "0", "1", "1", false, text);
    add_page(&b, "After", "0", "2", "2", false, "after");
    sb_add(&b, XML_TAIL, strlen(XML_TAIL));
    read_mem(&r, b.s, b.len, "huge.xml", LT_FMT_WIKIXML, 1000);
    assert_int_equal(r.st, LT_OK);
    assert_int_equal(r.n, 2);
    assert_true(r.docs[0].truncated);
    assert_true(r.docs[0].len <= 1000 && r.docs[0].len >= 990);
    assert_memory_equal(r.docs[0].text, text, r.docs[0].len);
    assert_true(r.docs[0].orig_bytes >= tl - 16 && r.docs[0].orig_bytes <= tl);
    assert_string_equal(r.docs[1].text, "after");
    assert_int_equal(r.stats.truncated, 1);
    read_free(&r);
    free(b.s);
    free(text);
}

static void test_xml_bz2_multistream(void **state) {
    (void)state;
    sbuf plain = {0};
    basic_xml(&plain);
    /* three streams cut at arbitrary points (inside pages and tags) */
    size_t cut1 = plain.len / 3 + 7, cut2 = 2 * plain.len / 3 + 3;
    sbuf z = {0};
    bz2_append(&z, plain.s, cut1);
    bz2_append(&z, plain.s + cut1, cut2 - cut1);
    bz2_append(&z, plain.s + cut2, plain.len - cut2);
    read_all r;
    read_mem(&r, z.s, z.len, "multi.xml.bz2", LT_FMT_AUTO, 0);
    check_basic(&r, plain.s);
    read_free(&r);
    free(z.s);
    free(plain.s);
}

static void test_xml_damage(void **state) {
    (void)state;
    sbuf plain = {0};
    basic_xml(&plain);
    read_all r;

    /* cut inside page 4: page 1 comes back, then the error with its offset */
    const char *cut_at = strstr(plain.s, "Gamma");
    size_t cut = (size_t)(cut_at - plain.s);
    read_mem(&r, plain.s, cut, "cut.xml", LT_FMT_AUTO, 0);
    assert_int_equal(r.st, LT_ERR_INPUT);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.docs[0].id, "page=10");
    assert_int_equal(r.err.status, LT_ERR_INPUT);
    unsigned long long off;
    if (sscanf(r.err.where, "cut.xml: offset %llu", &off) != 1) fail_msg("where: %s", r.err.where);
    assert_true(off >= page_offset(plain.s, 4) && off <= cut);
    assert_non_null(strstr(r.err.what, "line"));
    read_free(&r);

    /* a mismatched tag in page 4 */
    sbuf bad = {0};
    sb_add(&bad, plain.s, (size_t)(cut_at - plain.s));
    sb_printf(&bad, "Gamma</titl>\n");
    sb_add(&bad, cut_at + 5, plain.len - cut - 5);
    read_mem(&r, bad.s, bad.len, "bad.xml", LT_FMT_AUTO, 0);
    assert_int_equal(r.st, LT_ERR_INPUT);
    assert_int_equal(r.n, 1);
    assert_non_null(strstr(r.err.what, "mismatched tag"));
    if (sscanf(r.err.where, "bad.xml: offset %llu", &off) != 1) fail_msg("where: %s", r.err.where);
    /* in the "</titl>" (expat names the tag's name) */
    assert_true(off >= (size_t)(cut_at - plain.s) + 5 && off < (size_t)(cut_at - plain.s) + 5 + 7);
    read_free(&r);
    free(bad.s);

    /* not XML at all */
    read_mem(&r, "hello", 5, "hello.xml", LT_FMT_WIKIXML, 0);
    assert_int_equal(r.st, LT_ERR_INPUT);
    assert_int_equal(r.n, 0);
    read_free(&r);

    /* a corrupt second bz2 stream: the first stream's pages, then the source's error */
    size_t split = (size_t)(strstr(plain.s, "  <page>\n    <title>Gamma") - plain.s);
    sbuf z = {0};
    bz2_append(&z, plain.s, split);
    size_t second = z.len;
    bz2_append(&z, plain.s + split, plain.len - split);
    for (size_t i = second + 40; i < z.len - 20; i += 7) z.s[i] ^= 0x55;
    read_mem(&r, z.s, z.len, "corrupt.xml.bz2", LT_FMT_AUTO, 0);
    assert_int_equal(r.st, LT_ERR_INPUT);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.docs[0].id, "page=10");
    assert_non_null(strstr(r.err.where, "corrupt.xml.bz2"));
    read_free(&r);
    free(z.s);
    free(plain.s);
}

/* ================================================================ the shared sample */

static char *shared_file(const char *rel) {
    const char *env = getenv("LONGTAIL_SHARED");
    const char *src = getenv("top_srcdir");
    const char *srcdir = getenv("srcdir");
    char buf[4096];
    const char *roots[6] = {0};
    char r1[4096], r2[4096];
    int k = 0;
    if (env) roots[k++] = env;
    if (src) {
        snprintf(r1, sizeof r1, "%s/../shared", src);
        roots[k++] = r1;
    }
    if (srcdir) {
        snprintf(r2, sizeof r2, "%s/../shared", srcdir);
        roots[k++] = r2;
    }
    roots[k++] = "../shared";
    roots[k++] = "../../shared";
    for (int i = 0; i < k; i++) {
        snprintf(buf, sizeof buf, "%s/%s", roots[i], rel);
        if (access(buf, R_OK) == 0) return strdup(buf);
    }
    return NULL;
}

/* The copy the project ships under data/sample/ (same bytes), for a tree without ../shared. */
static char *sample_file(const char *name) {
    const char *roots[] = {getenv("top_srcdir"), getenv("srcdir"), ".", "..", "../.."};
    char buf[4096];
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        if (roots[i] == NULL) continue;
        snprintf(buf, sizeof buf, "%s/data/sample/%s", roots[i], name);
        if (access(buf, R_OK) == 0) return strdup(buf);
    }
    return NULL;
}

/* Decompress a whole (multistream) .bz2 file with libbz2 directly. */
static char *bunzip_file(const char *path, size_t *out_len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    sbuf in = {0};
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) sb_add(&in, tmp, n);
    fclose(f);
    sbuf out = {0};
    size_t pos = 0;
    while (pos < in.len) {
        bz_stream z;
        memset(&z, 0, sizeof z);
        assert_int_equal(BZ2_bzDecompressInit(&z, 0, 0), BZ_OK);
        z.next_in = in.s + pos;
        z.avail_in = (unsigned int)(in.len - pos);
        int rc;
        do {
            z.next_out = tmp;
            z.avail_out = sizeof tmp;
            rc = BZ2_bzDecompress(&z);
            sb_add(&out, tmp, sizeof tmp - z.avail_out);
        } while (rc == BZ_OK && z.avail_in > 0);
        if (rc != BZ_STREAM_END) {
            BZ2_bzDecompressEnd(&z);
            break; /* damaged: what came out so far */
        }
        pos = in.len - z.avail_in;
        BZ2_bzDecompressEnd(&z);
    }
    free(in.s);
    *out_len = out.len;
    return out.s;
}

static void test_shared_wikipedia(void **state) {
    (void)state;
    char *path = shared_file("corpus/wikipedia/enwiki-20240501-pages-articles-multistream0.xml.bz2");
    if (path == NULL) path = sample_file("enwiki-20240501-pages-articles-multistream0.xml.bz2");
    if (path == NULL) {
        printf("# skip: neither ../shared/corpus/wikipedia nor data/sample found (set LONGTAIL_SHARED)\n");
        skip();
    }
    /* the independent count: split the XML at <page>, keep ns 0 without <redirect */
    size_t len;
    char *xml = bunzip_file(path, &len);
    assert_true(len > 0);
    size_t expect = 0, pages = 0;
    char ids[512][32];
    for (char *p = strstr(xml, "<page>"); p != NULL; p = strstr(p + 1, "<page>")) {
        char *end = strstr(p, "</page>");
        assert_non_null(end);
        *end = '\0';
        pages++;
        char *ns = strstr(p, "<ns>");
        bool main_ns = ns == NULL || strncmp(ns, "<ns>0</ns>", 10) == 0;
        if (main_ns && strstr(p, "<redirect") == NULL) {
            char *id = strstr(p, "<id>");
            assert_non_null(id);
            if (expect < 512) sscanf(id, "<id>%31[0-9]", ids[expect]);
            expect++;
        }
        *end = '<';
    }
    assert_true(expect > 0);

    lt_reader_opts o = {0};
    lt_reader *rd;
    lt_error err;
    assert_int_equal(lt_reader_open(&rd, path, &o, &err), LT_OK);
    assert_int_equal(lt_reader_format(rd), LT_FMT_WIKIXML);
    size_t n = 0;
    for (;;) {
        lt_doc d;
        bool eof;
        lt_status st = lt_reader_next(rd, &d, &eof, &err);
        if (st != LT_OK) fail_msg("%s (%s)", err.what, err.where);
        if (eof) break;
        if (n < 512) {
            char want[64];
            snprintf(want, sizeof want, "page=%s", ids[n]);
            assert_string_equal(d.id, want);
        }
        assert_true(d.name[0] != '\0');
        /* offsets point at the page in the decompressed XML */
        assert_true(d.offset < len);
        assert_memory_equal(xml + d.offset, "<page>", 6);
        n++;
    }
    const lt_reader_stats *s = lt_reader_get_stats(rd);
    assert_int_equal(n, expect);
    assert_int_equal(s->records, pages);
    assert_int_equal(s->filtered + s->docs + s->skipped[LT_SKIP_BAD_PAGE], pages);
    lt_reader_close(rd);
    free(xml);
    free(path);
}

static void test_shared_unclosed(void **state) {
    (void)state;
    char *path = shared_file("corpus/bad/unclosed.xml.bz2");
    if (path == NULL) {
        printf("# skip: ../shared/corpus/bad not found (set LONGTAIL_SHARED)\n");
        skip();
    }
    size_t len;
    char *xml = bunzip_file(path, &len);
    lt_reader_opts o = {0};
    lt_reader *rd;
    lt_error err;
    assert_int_equal(lt_reader_open(&rd, path, &o, &err), LT_OK);
    lt_status st;
    lt_doc d;
    bool eof;
    while ((st = lt_reader_next(rd, &d, &eof, &err)) == LT_OK && !eof) {
    }
    assert_int_equal(st, LT_ERR_INPUT);
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s: offset ", path);
    assert_memory_equal(err.where, prefix, strlen(prefix));
    unsigned long long off = strtoull(err.where + strlen(prefix), NULL, 10);
    assert_true(off <= len);
    /* after the error: end of file */
    assert_int_equal(lt_reader_next(rd, &d, &eof, &err), LT_OK);
    assert_true(eof);
    lt_reader_close(rd);
    free(xml);
    free(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_templates),
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_refs),
        cmocka_unit_test(test_comments),
        cmocka_unit_test(test_category_file_language_links),
        cmocka_unit_test(test_links),
        cmocka_unit_test(test_external_links),
        cmocka_unit_test(test_headings),
        cmocka_unit_test(test_bold_italic),
        cmocka_unit_test(test_lists_and_rules),
        cmocka_unit_test(test_entities),
        cmocka_unit_test(test_magic_words),
        cmocka_unit_test(test_tags),
        cmocka_unit_test(test_whitespace),
        cmocka_unit_test(test_unbalanced),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_linear_time),
        cmocka_unit_test(test_buffer_reuse),
        cmocka_unit_test(test_xml_pages),
        cmocka_unit_test(test_xml_many_pages_per_chunk),
        cmocka_unit_test(test_xml_long_page_and_cap),
        cmocka_unit_test(test_xml_bz2_multistream),
        cmocka_unit_test(test_xml_damage),
        cmocka_unit_test(test_shared_wikipedia),
        cmocka_unit_test(test_shared_unclosed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
