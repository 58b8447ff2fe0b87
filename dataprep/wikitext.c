/*
 * dataprep/wikitext.c — MediaWiki wikitext to plain text in one linear pass (wikitext.h;
 * the rules, with examples, are the table in docs/formats.md "Wikitext to plain text").
 *
 * How it works. The input is read once, left to right. Text is written to the output as
 * it is met, also inside constructs that may turn out to be dropped: every open construct
 * ({{ }}, [[ ]], [http ...], {| |}) is a frame on a stack that remembers the output length
 * when it opened. Closing a construct then rewrites only the output's tail: a template or
 * table truncates the output back to that length, a link [[t|label]] moves its label down
 * over "t|". A construct that is never closed costs nothing to undo: its opener is simply
 * never written and what followed it stays as ordinary text, so an unbalanced {{ or [[
 * never loses the rest of the article.
 *
 * Closers follow MediaWiki's preprocessor (Preprocessor_Hash): "}}" and "]]" close only
 * the innermost open construct of their kind, seen through open tables (tables are not
 * preprocessor constructs); "|}" at a line start closes the innermost table, seen through
 * open links (tables are parsed before links). Anything else is text.
 *
 * Linear time: each input byte is looked at a bounded number of times. The places that
 * look ahead are bounded (a namespace prefix, an entity name, a magic word), stop at the
 * next '<' (the end of an HTML tag), stop at the end of the line (a heading), or search
 * for the closer of <ref>, <nowiki>, <!-- ...; those searches jump over what they found,
 * and a failed search for a closer is remembered per tag, so no stretch of input is
 * searched twice for the same thing. Undoing a link moves its label, at most once per
 * enclosing frame (<= LT_WIKITEXT_MAX_DEPTH). A final pass collapses blank lines.
 */
#include "dataprep/wikitext.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/error.h" /* lt_realloc_check */

#define NONE SIZE_MAX

/* ------------------------------------------------------------------ HTML entities */

typedef struct entity {
    const char *name;
    uint32_t cp;
} entity;

/* HTML 4 (Python's html.entities.name2codepoint) + &apos; + the HTML5 names seen on
 * Wikipedia; sorted by strcmp for bsearch. Each decodes to one code point, whose UTF-8 is
 * never longer than "&name;" (the output never outgrows the input here). */
static const entity ENTITIES[] = {
    {"AElig", 0xC6}, {"AMP", 0x26}, {"Aacute", 0xC1}, {"Acirc", 0xC2}, {"Agrave", 0xC0},
    {"Alpha", 0x391}, {"Aring", 0xC5}, {"Atilde", 0xC3}, {"Auml", 0xC4}, {"Beta", 0x392},
    {"COPY", 0xA9}, {"Ccedil", 0xC7}, {"Chi", 0x3A7}, {"Dagger", 0x2021}, {"Delta", 0x394},
    {"Dot", 0xA8}, {"ETH", 0xD0}, {"Eacute", 0xC9}, {"Ecirc", 0xCA}, {"Egrave", 0xC8},
    {"Epsilon", 0x395}, {"Eta", 0x397}, {"Euml", 0xCB}, {"GT", 0x3E}, {"Gamma", 0x393},
    {"Hat", 0x5E}, {"Iacute", 0xCD}, {"Icirc", 0xCE}, {"Igrave", 0xCC}, {"Iota", 0x399},
    {"Iuml", 0xCF}, {"Kappa", 0x39A}, {"LT", 0x3C}, {"Lambda", 0x39B}, {"MediumSpace", 0x205F},
    {"Mu", 0x39C}, {"NonBreakingSpace", 0xA0}, {"Ntilde", 0xD1}, {"Nu", 0x39D}, {"OElig", 0x152},
    {"Oacute", 0xD3}, {"Ocirc", 0xD4}, {"Ograve", 0xD2}, {"Omega", 0x3A9}, {"Omicron", 0x39F},
    {"Oslash", 0xD8}, {"Otilde", 0xD5}, {"Ouml", 0xD6}, {"Phi", 0x3A6}, {"Pi", 0x3A0},
    {"Prime", 0x2033}, {"Psi", 0x3A8}, {"QUOT", 0x22}, {"REG", 0xAE}, {"Rho", 0x3A1},
    {"Scaron", 0x160}, {"Sigma", 0x3A3}, {"THORN", 0xDE}, {"TRADE", 0x2122}, {"Tau", 0x3A4},
    {"Theta", 0x398}, {"ThinSpace", 0x2009}, {"Uacute", 0xDA}, {"Ucirc", 0xDB}, {"Ugrave", 0xD9},
    {"Upsilon", 0x3A5}, {"Uuml", 0xDC}, {"VeryThinSpace", 0x200A}, {"Xi", 0x39E}, {"Yacute", 0xDD},
    {"Yuml", 0x178}, {"ZeroWidthSpace", 0x200B}, {"Zeta", 0x396}, {"aacute", 0xE1},
    {"acirc", 0xE2}, {"acute", 0xB4}, {"aelig", 0xE6}, {"agrave", 0xE0}, {"alefsym", 0x2135},
    {"alpha", 0x3B1}, {"amp", 0x26}, {"and", 0x2227}, {"ang", 0x2220}, {"angst", 0xC5},
    {"apos", 0x27}, {"approx", 0x2248}, {"aring", 0xE5}, {"ast", 0x2A}, {"asymp", 0x2248},
    {"atilde", 0xE3}, {"auml", 0xE4}, {"bdquo", 0x201E}, {"beta", 0x3B2}, {"brvbar", 0xA6},
    {"bsol", 0x5C}, {"bull", 0x2022}, {"bullet", 0x2022}, {"cap", 0x2229}, {"ccedil", 0xE7},
    {"cedil", 0xB8}, {"cent", 0xA2}, {"centerdot", 0xB7}, {"check", 0x2713}, {"chi", 0x3C7},
    {"circ", 0x2C6}, {"clubs", 0x2663}, {"colon", 0x3A}, {"comma", 0x2C}, {"cong", 0x2245},
    {"copy", 0xA9}, {"crarr", 0x21B5}, {"cup", 0x222A}, {"curren", 0xA4}, {"dArr", 0x21D3},
    {"dagger", 0x2020}, {"darr", 0x2193}, {"dash", 0x2010}, {"deg", 0xB0}, {"delta", 0x3B4},
    {"diams", 0x2666}, {"die", 0xA8}, {"divide", 0xF7}, {"dollar", 0x24}, {"eacute", 0xE9},
    {"ecirc", 0xEA}, {"egrave", 0xE8}, {"ell", 0x2113}, {"empty", 0x2205}, {"emsp", 0x2003},
    {"ensp", 0x2002}, {"epsilon", 0x3B5}, {"equals", 0x3D}, {"equiv", 0x2261}, {"eta", 0x3B7},
    {"eth", 0xF0}, {"euml", 0xEB}, {"euro", 0x20AC}, {"excl", 0x21}, {"exist", 0x2203},
    {"fnof", 0x192}, {"forall", 0x2200}, {"frac12", 0xBD}, {"frac14", 0xBC}, {"frac34", 0xBE},
    {"frasl", 0x2044}, {"gamma", 0x3B3}, {"ge", 0x2265}, {"geq", 0x2265}, {"grave", 0x60},
    {"gt", 0x3E}, {"hArr", 0x21D4}, {"hairsp", 0x200A}, {"half", 0xBD}, {"harr", 0x2194},
    {"hbar", 0x210F}, {"hearts", 0x2665}, {"hellip", 0x2026}, {"hyphen", 0x2010}, {"iacute", 0xED},
    {"icirc", 0xEE}, {"iexcl", 0xA1}, {"igrave", 0xEC}, {"image", 0x2111}, {"infin", 0x221E},
    {"int", 0x222B}, {"iota", 0x3B9}, {"iquest", 0xBF}, {"isin", 0x2208}, {"iuml", 0xEF},
    {"kappa", 0x3BA}, {"lArr", 0x21D0}, {"lambda", 0x3BB}, {"lang", 0x2329}, {"laquo", 0xAB},
    {"larr", 0x2190}, {"lceil", 0x2308}, {"lcub", 0x7B}, {"ldquo", 0x201C}, {"ldquor", 0x201E},
    {"le", 0x2264}, {"leq", 0x2264}, {"lfloor", 0x230A}, {"lowast", 0x2217}, {"lowbar", 0x5F},
    {"loz", 0x25CA}, {"lpar", 0x28}, {"lrm", 0x200E}, {"lsaquo", 0x2039}, {"lsqb", 0x5B},
    {"lsquo", 0x2018}, {"lsquor", 0x201A}, {"lt", 0x3C}, {"macr", 0xAF}, {"mdash", 0x2014},
    {"mho", 0x2127}, {"micro", 0xB5}, {"middot", 0xB7}, {"minus", 0x2212}, {"mu", 0x3BC},
    {"nabla", 0x2207}, {"nbhy", 0x2011}, {"nbsp", 0xA0}, {"ndash", 0x2013}, {"ne", 0x2260},
    {"ni", 0x220B}, {"not", 0xAC}, {"notin", 0x2209}, {"nsub", 0x2284}, {"ntilde", 0xF1},
    {"nu", 0x3BD}, {"num", 0x23}, {"numsp", 0x2007}, {"oacute", 0xF3}, {"ocirc", 0xF4},
    {"oelig", 0x153}, {"ograve", 0xF2}, {"ohgr", 0x3C9}, {"ohm", 0x3A9}, {"oline", 0x203E},
    {"omega", 0x3C9}, {"omicron", 0x3BF}, {"oplus", 0x2295}, {"or", 0x2228}, {"ordf", 0xAA},
    {"ordm", 0xBA}, {"oslash", 0xF8}, {"otilde", 0xF5}, {"otimes", 0x2297}, {"ouml", 0xF6},
    {"para", 0xB6}, {"part", 0x2202}, {"percnt", 0x25}, {"period", 0x2E}, {"permil", 0x2030},
    {"perp", 0x22A5}, {"phi", 0x3C6}, {"pi", 0x3C0}, {"piv", 0x3D6}, {"planck", 0x210F},
    {"plus", 0x2B}, {"plusmn", 0xB1}, {"pound", 0xA3}, {"prime", 0x2032}, {"prod", 0x220F},
    {"prop", 0x221D}, {"psi", 0x3C8}, {"puncsp", 0x2008}, {"quest", 0x3F}, {"quot", 0x22},
    {"rArr", 0x21D2}, {"radic", 0x221A}, {"rang", 0x232A}, {"raquo", 0xBB}, {"rarr", 0x2192},
    {"rceil", 0x2309}, {"rcub", 0x7D}, {"rdquo", 0x201D}, {"real", 0x211C}, {"reg", 0xAE},
    {"rfloor", 0x230B}, {"rho", 0x3C1}, {"rlm", 0x200F}, {"rpar", 0x29}, {"rsaquo", 0x203A},
    {"rsqb", 0x5D}, {"rsquo", 0x2019}, {"sbquo", 0x201A}, {"scaron", 0x161}, {"sdot", 0x22C5},
    {"sect", 0xA7}, {"semi", 0x3B}, {"shy", 0xAD}, {"sigma", 0x3C3}, {"sigmaf", 0x3C2},
    {"sim", 0x223C}, {"sime", 0x2243}, {"sol", 0x2F}, {"spades", 0x2660}, {"star", 0x2606},
    {"sub", 0x2282}, {"sube", 0x2286}, {"sum", 0x2211}, {"sup", 0x2283}, {"sup1", 0xB9},
    {"sup2", 0xB2}, {"sup3", 0xB3}, {"supe", 0x2287}, {"szlig", 0xDF}, {"tau", 0x3C4},
    {"there4", 0x2234}, {"theta", 0x3B8}, {"thetasym", 0x3D1}, {"thinsp", 0x2009}, {"thorn", 0xFE},
    {"tilde", 0x2DC}, {"times", 0xD7}, {"trade", 0x2122}, {"uArr", 0x21D1}, {"uacute", 0xFA},
    {"uarr", 0x2191}, {"ucirc", 0xFB}, {"ugrave", 0xF9}, {"uml", 0xA8}, {"upsih", 0x3D2},
    {"upsilon", 0x3C5}, {"uuml", 0xFC}, {"verbar", 0x7C}, {"vert", 0x7C}, {"weierp", 0x2118},
    {"xi", 0x3BE}, {"yacute", 0xFD}, {"yen", 0xA5}, {"yuml", 0xFF}, {"zeta", 0x3B6},
    {"zwj", 0x200D}, {"zwnj", 0x200C},
};

static int entity_cmp(const void *key, const void *elem) {
    return strcmp((const char *)key, ((const entity *)elem)->name);
}

/* A character reference at s[0] == '&': "&name;", "&#DDD;" or "&#xHHH;". Returns the bytes
 * it spans (0: not a reference, the '&' is text) and the code point in *cp; a numeric one
 * that is not a Unicode scalar value (0, a surrogate, > U+10FFFF) gives U+FFFD. */
static size_t entity_at(const char *s, size_t avail, uint32_t *cp) {
    size_t i = 1;
    if (i < avail && s[i] == '#') {
        i++;
        bool hex = i < avail && (s[i] == 'x' || s[i] == 'X');
        if (hex) i++;
        size_t start = i;
        uint32_t v = 0;
        bool big = false;
        for (; i < avail && i - start < 16; i++) {
            unsigned d;
            char ch = s[i];
            if (ch >= '0' && ch <= '9') d = (unsigned)(ch - '0');
            else if (hex && ch >= 'a' && ch <= 'f') d = (unsigned)(ch - 'a' + 10);
            else if (hex && ch >= 'A' && ch <= 'F') d = (unsigned)(ch - 'A' + 10);
            else break;
            if (v > 0x10FFFF) big = true;
            else v = v * (hex ? 16u : 10u) + d;
        }
        if (i == start || i >= avail || s[i] != ';') return 0;
        if (big || v == 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) v = 0xFFFD;
        *cp = v;
        return i + 1;
    }
    char name[32];
    size_t k = 0;
    for (; i < avail && k < sizeof name - 1; i++, k++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))) break;
        name[k] = ch;
    }
    if (k == 0 || i >= avail || s[i] != ';') return 0;
    name[k] = '\0';
    const entity *e = bsearch(name, ENTITIES, sizeof ENTITIES / sizeof ENTITIES[0], sizeof ENTITIES[0], entity_cmp);
    if (e == NULL) return 0;
    *cp = e->cp;
    return i + 1;
}

/* ------------------------------------------------------------------ HTML and extension tags */

typedef enum tag_class {
    TAG_DROP,    /* the element and its content are dropped: <ref>, <math>, <gallery>, ... */
    TAG_LITERAL, /* content kept as written (no markup), entities decoded: <nowiki>, <pre> */
    TAG_RAW,     /* content kept byte for byte (code): <syntaxhighlight>, <source> */
    TAG_BREAK,   /* the tag ends the line: <br> always, block elements unless at a line start */
    TAG_INLINE,  /* the tag is removed, its content kept */
} tag_class;

typedef struct tag_def {
    const char *name;
    tag_class cls;
} tag_def;

/* MediaWiki's allowed HTML tags and the extension tags of Wikipedia; sorted by strcmp. Any
 * other "<name ...>" is not a tag in MediaWiki either: it stays text. */
static const tag_def TAGS[] = {
    {"abbr", TAG_INLINE}, {"b", TAG_INLINE}, {"bdi", TAG_INLINE}, {"bdo", TAG_INLINE},
    {"big", TAG_INLINE}, {"blockquote", TAG_BREAK}, {"br", TAG_BREAK}, {"caption", TAG_BREAK},
    {"categorytree", TAG_DROP}, {"ce", TAG_DROP}, {"center", TAG_BREAK}, {"charinsert", TAG_DROP},
    {"chem", TAG_DROP}, {"cite", TAG_INLINE}, {"code", TAG_INLINE}, {"data", TAG_INLINE},
    {"dd", TAG_BREAK}, {"del", TAG_INLINE}, {"dfn", TAG_INLINE}, {"div", TAG_BREAK},
    {"dl", TAG_BREAK}, {"dt", TAG_BREAK}, {"em", TAG_INLINE}, {"font", TAG_INLINE},
    {"gallery", TAG_DROP}, {"graph", TAG_DROP}, {"h1", TAG_BREAK}, {"h2", TAG_BREAK},
    {"h3", TAG_BREAK}, {"h4", TAG_BREAK}, {"h5", TAG_BREAK}, {"h6", TAG_BREAK},
    {"hiero", TAG_DROP}, {"hr", TAG_BREAK}, {"i", TAG_INLINE}, {"imagemap", TAG_DROP},
    {"includeonly", TAG_DROP}, {"indicator", TAG_DROP}, {"inputbox", TAG_DROP},
    {"ins", TAG_INLINE}, {"kbd", TAG_INLINE}, {"li", TAG_BREAK}, {"mapframe", TAG_DROP},
    {"maplink", TAG_DROP}, {"mark", TAG_INLINE}, {"math", TAG_DROP}, {"noinclude", TAG_INLINE},
    {"nowiki", TAG_LITERAL}, {"ol", TAG_BREAK}, {"onlyinclude", TAG_INLINE}, {"p", TAG_BREAK},
    {"poem", TAG_INLINE}, {"pre", TAG_LITERAL}, {"q", TAG_INLINE}, {"rb", TAG_INLINE},
    {"ref", TAG_DROP}, {"references", TAG_DROP}, {"rp", TAG_INLINE}, {"rt", TAG_INLINE},
    {"rtc", TAG_INLINE}, {"ruby", TAG_INLINE}, {"s", TAG_INLINE}, {"samp", TAG_INLINE},
    {"score", TAG_DROP}, {"section", TAG_DROP}, {"small", TAG_INLINE}, {"source", TAG_RAW},
    {"span", TAG_INLINE}, {"strike", TAG_INLINE}, {"strong", TAG_INLINE}, {"sub", TAG_INLINE},
    {"sup", TAG_INLINE}, {"syntaxhighlight", TAG_RAW}, {"table", TAG_BREAK}, {"tbody", TAG_INLINE},
    {"td", TAG_BREAK}, {"templatedata", TAG_DROP}, {"templatestyles", TAG_DROP},
    {"tfoot", TAG_INLINE}, {"th", TAG_BREAK}, {"thead", TAG_INLINE}, {"time", TAG_INLINE},
    {"timeline", TAG_DROP}, {"tr", TAG_BREAK}, {"tt", TAG_INLINE}, {"u", TAG_INLINE},
    {"ul", TAG_BREAK}, {"var", TAG_INLINE}, {"wbr", TAG_INLINE},
};
#define N_TAGS (sizeof TAGS / sizeof TAGS[0])
#define TAG_NAME_MAX 15 /* "syntaxhighlight" */

static int tag_cmp(const void *key, const void *elem) {
    return strcmp((const char *)key, ((const tag_def *)elem)->name);
}

/* ------------------------------------------------------------------ magic words, namespaces */

/* Behaviour switches (__TOC__ ...); only these are dropped, other __X__ is text. */
static const char *const MAGIC_WORDS[] = {
    "ARCHIVEDTALK", "DISAMBIG", "EXPECTUNUSEDCATEGORY", "EXPECTUNUSEDTEMPLATE", "FORCETOC",
    "HIDDENCAT", "INDEX", "NEWSECTIONLINK", "NOCC", "NOCONTENTCONVERT", "NOEDITSECTION",
    "NOGALLERY", "NOGLOBAL", "NOINDEX", "NONEWSECTIONLINK", "NOTALK", "NOTC", "NOTITLECONVERT",
    "NOTOC", "STATICREDIRECT", "TOC",
};
#define MAGIC_MAX 24

/* Link prefixes whose links are not text: categories and files, in English and the most
 * common localized names (lower case; compared with ASCII letters lowered). */
static const char *const DROP_NAMESPACES[] = {
    "category", "file", "image", "media",
    "archivo", "afbeelding", "arquivo", "bestand", "bild", "categoria", "categorie",
    "categoría", "catégorie", "datei", "fichier", "grafika", "imagem", "imagen", "immagine",
    "kategoria", "kategorie", "plik", "файл", "категория", "ファイル",
};
#define NAMESPACE_MAX 24

/* ------------------------------------------------------------------ converter state */

typedef enum frame_kind { FR_BRACE, FR_LINK, FR_EXTLINK, FR_TABLE } frame_kind;
#define KIND_BIT(k) (1u << (k))

typedef struct frame {
    frame_kind kind;
    size_t out_start; /* output length when the construct opened */
    size_t mark;      /* LINK: output position of its first '|' (NONE: none yet);
                         EXTLINK: output position where the label starts */
    size_t count;     /* BRACE: '{' still unmatched (>= 2) */
    bool drop;        /* LINK: category, file or interlanguage link */
} frame;

typedef struct conv {
    const char *in;
    size_t n, i;
    lt_wikitext_buf *out;
    frame stack[LT_WIKITEXT_MAX_DEPTH];
    int depth;
    bool line_start;      /* in[i] begins an input line not yet looked at as such */
    size_t heading_close; /* the closing "==" of the current heading line (NONE: none) */
    size_t heading_eol;
    /* Closer searches per tag: the first closer at or after closer_from[t] starts at
     * closer_at[t] (NONE: there is none) and ends before closer_end[t]. */
    size_t closer_from[N_TAGS], closer_at[N_TAGS], closer_end[N_TAGS];
} conv;

/* ------------------------------------------------------------------ output */

static void reserve(lt_wikitext_buf *b, size_t extra) {
    if (b->cap - b->len >= extra) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra) cap *= 2;
    b->data = lt_realloc_check(b->data, cap);
    b->cap = cap;
}

static void put_n(conv *c, const char *s, size_t n) {
    reserve(c->out, n);
    memcpy(c->out->data + c->out->len, s, n);
    c->out->len += n;
}

static void put(conv *c, char ch) {
    reserve(c->out, 1);
    c->out->data[c->out->len++] = ch;
}

static void put_cp(conv *c, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp, n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12)), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18)), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    }
    put_n(c, u, n);
}

/* A line break unless the output already ends one (block-level HTML tags). */
static void put_break(conv *c) {
    if (c->out->len > 0 && c->out->data[c->out->len - 1] != '\n') put(c, '\n');
}

/* Text with character references decoded (the content of <nowiki>, <pre>). */
static void put_decoded(conv *c, const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        const char *amp = memchr(s + i, '&', n - i);
        size_t stop = amp ? (size_t)(amp - s) : n;
        put_n(c, s + i, stop - i);
        i = stop;
        if (i < n) {
            uint32_t cp;
            size_t k = entity_at(s + i, n - i, &cp);
            if (k > 0) {
                put_cp(c, cp);
                i += k;
            } else {
                put(c, '&');
                i++;
            }
        }
    }
}

/* ------------------------------------------------------------------ frames */

static frame *top(conv *c) { return c->depth > 0 ? &c->stack[c->depth - 1] : NULL; }

static frame *push(conv *c, frame_kind kind) {
    if (c->depth >= LT_WIKITEXT_MAX_DEPTH) return NULL;
    frame *f = &c->stack[c->depth++];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->out_start = c->out->len;
    f->mark = NONE;
    return f;
}

/* The innermost open frame of `kind` reachable through frames whose kinds are in `pass`;
 * -1 if none. */
static int reachable(const conv *c, frame_kind kind, unsigned pass) {
    for (int d = c->depth - 1; d >= 0; d--) {
        if (c->stack[d].kind == kind) return d;
        if (!(pass & KIND_BIT(c->stack[d].kind))) return -1;
    }
    return -1;
}

/* Close the frames above stack[d] together with their content (they were inside what
 * stack[d] is about to drop or, for a link's label, are dropped constructs themselves). */
static void pop_above(conv *c, int d) {
    if (c->depth > d + 1) {
        c->out->len = c->stack[d + 1].out_start;
        c->depth = d + 1;
    }
}

static void truncate_to(conv *c, size_t len) {
    if (c->out->len > len) c->out->len = len;
}

/* Move out[from..len) down to out[to..). */
static void keep_tail(conv *c, size_t to, size_t from) {
    size_t n = c->out->len - from;
    memmove(c->out->data + to, c->out->data + from, n);
    c->out->len = to + n;
}

/* ------------------------------------------------------------------ links */

static bool is_lower(char ch) { return ch >= 'a' && ch <= 'z'; }

/* An interlanguage prefix: 2-3 lower-case letters, then optional "-" + 2..8 letters parts
 * (de, nds, zh-yue, be-tarask, zh-min-nan), or "simple". */
static bool is_language_prefix(const char *p, size_t n) {
    if (n == 6 && memcmp(p, "simple", 6) == 0) return true;
    size_t i = 0;
    while (i < n && is_lower(p[i])) i++;
    if (i < 2 || i > 3) return false;
    while (i < n) {
        if (p[i] != '-') return false;
        size_t s = ++i;
        while (i < n && is_lower(p[i])) i++;
        if (i - s < 2 || i - s > 8) return false;
    }
    return true;
}

/* Whether the link target at p[0..avail) (just after "[[") names a category, a file or
 * another language: its prefix up to ':' (at most NAMESPACE_MAX bytes, no markup). */
static bool is_dropped_link(const char *p, size_t avail) {
    size_t i = 0;
    while (i < avail && p[i] == ' ') i++;
    size_t start = i;
    while (i < avail && i - start <= NAMESPACE_MAX && p[i] != ':') {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '[' || ch == ']' || ch == '{' || ch == '}' || ch == '|' || ch == '<' || ch == '\n') return false;
        i++;
    }
    if (i >= avail || p[i] != ':') return false;
    size_t end = i;
    while (end > start && (p[end - 1] == ' ' || p[end - 1] == '_')) end--;
    size_t n = end - start;
    if (n == 0) return false;
    if (is_language_prefix(p + start, n)) return true;
    char low[NAMESPACE_MAX + 2];
    for (size_t k = 0; k < n; k++) {
        char ch = p[start + k];
        low[k] = (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch;
    }
    for (size_t k = 0; k < sizeof DROP_NAMESPACES / sizeof DROP_NAMESPACES[0]; k++) {
        if (strlen(DROP_NAMESPACES[k]) == n && memcmp(low, DROP_NAMESPACES[k], n) == 0) return true;
    }
    return false;
}

/* "[[": open an internal link. A leading ':' ([[:Category:X]]) makes any link plain text
 * and is not shown. */
static void open_link(conv *c) {
    size_t j = c->i + 2;
    size_t k = j;
    while (k < c->n && c->in[k] == ' ') k++;
    bool colon = k < c->n && c->in[k] == ':';
    frame *f = push(c, FR_LINK);
    if (f == NULL) { /* too deep: text */
        put_n(c, "[[", 2);
        c->i = j;
        return;
    }
    f->drop = !colon && is_dropped_link(c->in + j, c->n - j);
    c->i = colon ? k + 1 : j;
}

/* "]]" closing the link stack[d]. */
static void close_link(conv *c, int d) {
    pop_above(c, d);
    frame *f = &c->stack[d];
    if (f->drop) {
        truncate_to(c, f->out_start);
    } else if (f->mark != NONE) {
        if (c->out->len == f->mark + 1) truncate_to(c, f->mark); /* [[x|]]: the target */
        else keep_tail(c, f->out_start, f->mark + 1);            /* [[t|label]]: the label */
    }
    c->depth = d;
}

/* URL schemes of external links (MediaWiki's $wgUrlProtocols, the common ones). */
static const char *const URL_SCHEMES[] = {
    "//", "ftp://", "ftps://", "git://", "gopher://", "http://", "https://", "irc://", "ircs://",
    "magnet:", "mailto:", "mms://", "news:", "nntp://", "sftp://", "sip:", "sips:", "sms:",
    "ssh://", "svn://", "tel:", "telnet://", "urn:", "worldwind://", "xmpp:",
};

static size_t scheme_len(const char *p, size_t avail) {
    for (size_t k = 0; k < sizeof URL_SCHEMES / sizeof URL_SCHEMES[0]; k++) {
        size_t m = strlen(URL_SCHEMES[k]);
        if (m > avail) continue;
        size_t q = 0;
        while (q < m && (p[q] | 0x20) == (URL_SCHEMES[k][q] | 0x20)) q++;
        if (q == m) return m;
    }
    return 0;
}

static bool is_url_byte(unsigned char ch) {
    return ch > 0x20 && ch != 0x7F && ch != '[' && ch != ']' && ch != '<' && ch != '>' && ch != '"';
}

/* "[" not followed by "[": an external link [URL], [URL label], or text. */
static void open_bracket(conv *c) {
    size_t i = c->i;
    size_t s = scheme_len(c->in + i + 1, c->n - i - 1);
    size_t j = i + 1 + s;
    if (s > 0)
        while (j < c->n && is_url_byte((unsigned char)c->in[j])) j++;
    if (s == 0 || j == i + 1 + s) { /* no URL: text */
        put(c, '[');
        c->i = i + 1;
        return;
    }
    if (j < c->n && c->in[j] == ']') { /* [URL]: shown as a number; dropped */
        c->i = j + 1;
        return;
    }
    if (j < c->n && (c->in[j] == ' ' || c->in[j] == '\t')) {
        frame *f = push(c, FR_EXTLINK);
        if (f != NULL) {
            /* written as "URL label" so that an unclosed one keeps both */
            put_n(c, c->in + i + 1, j - i - 1);
            put(c, ' ');
            while (j < c->n && (c->in[j] == ' ' || c->in[j] == '\t')) j++;
            f->mark = c->out->len;
            c->i = j;
            return;
        }
    }
    put_n(c, c->in + i, j - i); /* "[" and a bare URL */
    c->i = j;
}

static void close_bracket(conv *c) {
    frame *t = top(c);
    if (t != NULL && t->kind == FR_EXTLINK) { /* [URL label] */
        keep_tail(c, t->out_start, t->mark);
        c->depth--;
        c->i++;
        return;
    }
    if (c->i + 1 < c->n && c->in[c->i + 1] == ']') {
        int d = reachable(c, FR_LINK, KIND_BIT(FR_TABLE));
        if (d >= 0) {
            close_link(c, d);
            c->i += 2;
            return;
        }
        put_n(c, "]]", 2);
        c->i += 2;
        return;
    }
    put(c, ']');
    c->i++;
}

/* ------------------------------------------------------------------ templates */

static size_t run_of(const conv *c, char ch) {
    size_t j = c->i;
    while (j < c->n && c->in[j] == ch) j++;
    return j - c->i;
}

static void open_braces(conv *c) {
    size_t r = run_of(c, '{');
    if (r >= 2) {
        frame *f = push(c, FR_BRACE);
        if (f != NULL) {
            f->count = r;
            c->i += r;
            return;
        }
    }
    put_n(c, c->in + c->i, r); /* "{" or too deep */
    c->i += r;
}

/* A run of '}': as in MediaWiki, each closing step matches 3 braces ({{{param}}}) when
 * both sides have 3, else 2 ({{template}}); what the opening run has left stays open. */
static void close_braces(conv *c) {
    size_t m = run_of(c, '}');
    c->i += m;
    while (m >= 2) {
        int d = reachable(c, FR_BRACE, KIND_BIT(FR_TABLE));
        if (d < 0) break;
        pop_above(c, d);
        frame *f = &c->stack[d];
        size_t k = m < f->count ? m : f->count;
        if (k > 3) k = 3;
        truncate_to(c, f->out_start);
        f->count -= k;
        m -= k;
        if (f->count < 2) {
            c->depth = d;
            if (f->count == 1) put(c, '{'); /* {{{x}} is "{" + {{x}} */
        }
    }
    for (; m > 0; m--) put(c, '}');
}

/* ------------------------------------------------------------------ tags and comments */

/* Find the closer "</name\s*>" of tag t at or after `from` (case-insensitive). Returns its
 * start (NONE: none) and sets *end past its '>'. */
static size_t find_closer(conv *c, size_t t, size_t from, size_t *end) {
    if (c->closer_from[t] != NONE && c->closer_from[t] <= from &&
        (c->closer_at[t] == NONE || c->closer_at[t] >= from)) {
        *end = c->closer_end[t];
        return c->closer_at[t];
    }
    const char *name = TAGS[t].name;
    size_t nl = strlen(name);
    size_t p = from, at = NONE, e = NONE;
    while (p < c->n) {
        const char *q = memchr(c->in + p, '<', c->n - p);
        if (q == NULL) break;
        size_t k = (size_t)(q - c->in);
        p = k + 1;
        if (c->n - k < nl + 3 || c->in[k + 1] != '/') continue;
        size_t m = 0;
        while (m < nl && (c->in[k + 2 + m] | 0x20) == name[m]) m++;
        if (m < nl) continue;
        size_t z = k + 2 + nl;
        while (z < c->n && (c->in[z] == ' ' || c->in[z] == '\t' || c->in[z] == '\n' || c->in[z] == '\r')) z++;
        if (z < c->n && c->in[z] == '>') {
            at = k;
            e = z + 1;
            break;
        }
        p = z > p ? z : p;
    }
    c->closer_from[t] = from;
    c->closer_at[t] = at;
    c->closer_end[t] = e;
    *end = e;
    return at;
}

/* "<": a comment, a known tag, or text. */
static void angle(conv *c) {
    const char *in = c->in;
    size_t i = c->i, n = c->n;
    if (n - i >= 4 && memcmp(in + i, "<!--", 4) == 0) {
        const char *e = memmem(in + i + 4, n - i - 4, "-->", 3);
        c->i = e ? (size_t)(e - in) + 3 : n; /* an unclosed comment runs to the end */
        return;
    }
    size_t j = i + 1;
    bool closing = j < n && in[j] == '/';
    if (closing) j++;
    char name[TAG_NAME_MAX + 1];
    size_t k = 0;
    while (j < n && k <= TAG_NAME_MAX &&
           ((in[j] >= 'a' && in[j] <= 'z') || (in[j] >= 'A' && in[j] <= 'Z') || (k > 0 && in[j] >= '0' && in[j] <= '9'))) {
        name[k++] = (char)(in[j] | 0x20);
        j++;
    }
    const tag_def *def = NULL;
    if (k > 0 && k <= TAG_NAME_MAX && j < n &&
        (in[j] == '>' || in[j] == '/' || in[j] == ' ' || in[j] == '\t' || in[j] == '\n' || in[j] == '\r')) {
        name[k] = '\0';
        def = bsearch(name, TAGS, N_TAGS, sizeof TAGS[0], tag_cmp);
    }
    /* the tag's '>': attributes run to it; a '<' first means this is no tag */
    size_t g = j;
    if (def != NULL)
        while (g < n && in[g] != '>' && in[g] != '<') g++;
    if (def == NULL || g >= n || in[g] != '>') {
        put(c, '<');
        c->i = i + 1;
        return;
    }
    bool self_closing = in[g - 1] == '/';
    size_t end = g + 1;
    size_t t = (size_t)(def - TAGS);
    c->i = end;
    switch (def->cls) {
    case TAG_DROP:
    case TAG_LITERAL:
    case TAG_RAW: {
        if (closing || self_closing) return; /* a stray closer, <ref name=x />, <nowiki/> */
        size_t cend;
        size_t at = find_closer(c, t, end, &cend);
        if (at == NONE) return; /* unclosed: only the opening tag is removed */
        if (def->cls == TAG_LITERAL) put_decoded(c, in + end, at - end);
        else if (def->cls == TAG_RAW) put_n(c, in + end, at - end);
        c->i = cend;
        return;
    }
    case TAG_BREAK:
        if (strcmp(def->name, "br") == 0) put(c, '\n');
        else put_break(c);
        return;
    case TAG_INLINE:
        return;
    }
}

/* ------------------------------------------------------------------ inline markup */

static void ampersand(conv *c) {
    uint32_t cp;
    size_t k = entity_at(c->in + c->i, c->n - c->i, &cp);
    if (k > 0) {
        put_cp(c, cp);
        c->i += k;
    } else {
        put(c, '&');
        c->i++;
    }
}

/* '' italic, ''' bold, ''''' both: removed. As in MediaWiki, '''' is "'" + bold and a run
 * longer than 5 keeps its extra apostrophes; a single one is text. */
static void apostrophes(conv *c) {
    size_t r = run_of(c, '\'');
    c->i += r;
    size_t keep = r == 1 ? 1 : r == 4 ? 1 : r > 5 ? r - 5 : 0;
    for (; keep > 0; keep--) put(c, '\'');
}

/* "__TOC__" and the other behaviour switches. */
static void underscore(conv *c) {
    const char *in = c->in;
    size_t i = c->i, n = c->n;
    if (i + 1 < n && in[i + 1] == '_') {
        size_t j = i + 2;
        while (j < n && j - (i + 2) <= MAGIC_MAX && in[j] >= 'A' && in[j] <= 'Z') j++;
        size_t len = j - (i + 2);
        if (len > 0 && len <= MAGIC_MAX && n - j >= 2 && in[j] == '_' && in[j + 1] == '_') {
            for (size_t k = 0; k < sizeof MAGIC_WORDS / sizeof MAGIC_WORDS[0]; k++) {
                if (strlen(MAGIC_WORDS[k]) == len && memcmp(MAGIC_WORDS[k], in + i + 2, len) == 0) {
                    c->i = j + 2;
                    return;
                }
            }
        }
    }
    put(c, '_');
    c->i = i + 1;
}

static void pipe(conv *c) {
    frame *t = top(c);
    if (t != NULL && t->kind == FR_LINK && t->mark == NONE) t->mark = c->out->len;
    put(c, '|');
    c->i++;
}

/* A newline ends a link target and an external link's label that are still open: they
 * were not links (their opener is gone, the text stays). */
static void newline(conv *c) {
    frame *t;
    while ((t = top(c)) != NULL && ((t->kind == FR_LINK && t->mark == NONE) || t->kind == FR_EXTLINK)) c->depth--;
    put(c, '\n');
    c->i++;
    c->line_start = true;
    c->heading_close = NONE;
}

/* ------------------------------------------------------------------ line starts */

static bool is_blank(char ch) { return ch == ' ' || ch == '\t'; }

/* "== H ==" on in[i..eol): level = the shorter '=' run; text between is the heading. */
static void heading(conv *c) {
    const char *in = c->in;
    size_t i = c->i;
    const char *nl = memchr(in + i, '\n', c->n - i);
    size_t eol = nl ? (size_t)(nl - in) : c->n;
    size_t a = 0;
    while (i + a < eol && in[i + a] == '=') a++;
    size_t e = eol;
    for (;;) { /* trailing blanks and comments after the closing '=' */
        while (e > i + a && (is_blank(in[e - 1]) || in[e - 1] == '\r')) e--;
        if (e - (i + a) < 3 || memcmp(in + e - 3, "-->", 3) != 0) break;
        size_t s = e - 3;
        while (s >= i + a + 4 && memcmp(in + s - 4, "<!--", 4) != 0) s--;
        if (s < i + a + 4) break;
        e = s - 4;
    }
    if (e <= i + a) return; /* only '=': text */
    size_t b = 0;
    while (e - b > i + a && in[e - b - 1] == '=') b++;
    if (b == 0) return;
    size_t level = a < b ? a : b;
    if (level > 6) level = 6;
    put_break(c);
    size_t j = i + level;
    while (j < e - level && is_blank(in[j])) j++;
    c->i = j;
    c->heading_close = e - level;
    c->heading_eol = eol;
}

/* At an input line start: tables, list markers, headings, horizontal rules. */
static void line_start(conv *c) {
    const char *in = c->in;
    size_t i = c->i, n = c->n;
    size_t j = i;
    while (j < n && (in[j] == '*' || in[j] == '#' || in[j] == ':' || in[j] == ';')) j++;
    bool markers = j > i;
    if (markers) {
        while (j < n && is_blank(in[j])) j++;
        c->i = j;
    }
    size_t k = j;
    while (k < n && is_blank(in[k])) k++;
    if (n - k >= 2 && in[k] == '{' && in[k + 1] == '|' && push(c, FR_TABLE) != NULL) {
        c->i = k + 2;
        return;
    }
    if (n - k >= 2 && in[k] == '|' && in[k + 1] == '}') {
        int d = reachable(c, FR_TABLE, KIND_BIT(FR_LINK) | KIND_BIT(FR_EXTLINK));
        if (d >= 0) {
            pop_above(c, d);
            truncate_to(c, c->stack[d].out_start);
            c->depth = d;
            c->i = k + 2;
            return;
        }
    }
    if (markers) return;
    if (in[i] == '=') {
        heading(c);
    } else if (n - i >= 4 && memcmp(in + i, "----", 4) == 0) {
        while (c->i < n && in[c->i] == '-') c->i++;
    }
}

/* ------------------------------------------------------------------ the pass */

/* Bytes that start markup; everything else is copied in runs. */
static const bool SPECIAL[256] = {
    ['\n'] = true, ['{'] = true, ['}'] = true, ['['] = true, [']'] = true,
    ['|'] = true,  ['<'] = true, ['&'] = true, ['\''] = true, ['_'] = true,
};

static void step(conv *c) {
    size_t i = c->i;
    if (c->heading_close != NONE && i >= c->heading_close) { /* the closing "==" and what follows */
        if (i < c->heading_eol) c->i = c->heading_eol;
        c->heading_close = NONE;
        return;
    }
    if (c->line_start) {
        c->line_start = false;
        line_start(c);
        return;
    }
    switch (c->in[i]) {
    case '\n': newline(c); return;
    case '{': open_braces(c); return;
    case '}': close_braces(c); return;
    case '[':
        if (i + 1 < c->n && c->in[i + 1] == '[') open_link(c);
        else open_bracket(c);
        return;
    case ']': close_bracket(c); return;
    case '|': pipe(c); return;
    case '<': angle(c); return;
    case '&': ampersand(c); return;
    case '\'': apostrophes(c); return;
    case '_': underscore(c); return;
    default: break;
    }
    size_t stop = c->heading_close != NONE ? c->heading_close : c->n;
    size_t j = i + 1;
    while (j < stop && !SPECIAL[(unsigned char)c->in[j]]) j++;
    put_n(c, c->in + i, j - i);
    c->i = j;
}

/* Strip blanks at line ends, keep at most one empty line in a row, trim the document. */
static void tidy(lt_wikitext_buf *b) {
    char *d = b->data;
    size_t w = 0, newlines = 0;
    for (size_t r = 0; r < b->len; r++) {
        char ch = d[r];
        if (ch == '\n') {
            while (w > 0 && is_blank(d[w - 1])) w--;
            if (newlines < 2) d[w++] = '\n';
            newlines++;
        } else {
            if (!is_blank(ch)) newlines = 0;
            d[w++] = ch;
        }
    }
    size_t s = 0;
    while (s < w && (is_blank(d[s]) || d[s] == '\n' || d[s] == '\r')) s++;
    while (w > s && (is_blank(d[w - 1]) || d[w - 1] == '\n' || d[w - 1] == '\r')) w--;
    memmove(d, d + s, w - s);
    b->len = w - s;
}

void lt_wikitext_to_text(const char *in, size_t len, lt_wikitext_buf *out) {
    conv c;
    memset(&c, 0, sizeof c);
    c.in = in;
    c.n = len;
    c.out = out;
    c.line_start = true;
    c.heading_close = NONE;
    for (size_t t = 0; t < N_TAGS; t++) c.closer_from[t] = NONE;
    out->len = 0;
    reserve(out, len + 16);
    while (c.i < c.n) step(&c);
    /* Constructs still open at the end were not constructs: their openers were never
     * written and their content is already there as text. */
    tidy(out);
}

void lt_wikitext_buf_free(lt_wikitext_buf *b) {
    if (b == NULL) return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
