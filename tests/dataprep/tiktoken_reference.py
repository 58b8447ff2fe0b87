#!/usr/bin/env python3
"""
tests/dataprep/tiktoken_reference.py — `dataprep encode` must give exactly PyPI tiktoken's ids.

Usage:  python3 tests/dataprep/tiktoken_reference.py [--encoding NAME]... [--set NAME]...
                                                     [--fuzz-count N] [--keep]
Environment: top_builddir, top_srcdir (set by `make check`); LONGTAIL_DATAPREP (the program
to test, default $top_builddir/dataprep/dataprep); LONGTAIL_SHARED (the shared folder,
default $top_srcdir/../shared); LONGTAIL_FUZZ_SEED (vary the random strings; the default
seed is fixed); LONGTAIL_FUZZ_COUNT (random strings per encoding and kind, default 3000).

The reference is tiktoken loaded offline from shared/vocab exactly as shared/vocab/README.md
shows. For each of cl100k_base, o200k_base and r50k_base, one `dataprep encode` process per
set (documents go through a temporary JSONL file, lines alternating json.dumps with
ensure_ascii on and off, or through one file per document), and every id is compared:

  corpus      every document of shared/corpus: WET `conversion` records, JSONL `text`,
              GitHub JSONL `code` (zstd), Wikipedia page wikitext (bz2 XML)
  files       file mode: the damaged files of corpus/bad (raw and decompressed as far as
              they go), generated invalid UTF-8 (truncated, overlong, surrogates, F5..FF,
              lone continuation bytes, corrupted text) and whole decompressed WET files;
              reference: bytes.decode("utf-8", "replace"), and stderr's "replaced N invalid
              UTF-8 sequence" count must equal the U+FFFD Python inserted
  adversarial hand-made edge cases: long runs (to 32 KiB) of letters, digits, every kind of
              whitespace, punctuation; CJK, Thai, Devanagari, emoji sequences, stacked marks,
              mixed-case contractions, special-token text, whitespace at text ends, CRLF code,
              every ASCII character and samples of every Unicode category in small contexts
  fuzz        seeded random strings: runs drawn from every general category, whitespace kinds,
              contractions, emoji, the vocabulary's own tokens..., 0 to ~40K characters; and
              short strings over a small alphabet of the characters where the patterns'
              alternatives meet
  special     --allowed-special all and a subset, against tiktoken's
              encode(text, allowed_special=..., disallowed_special=())
  each of the above also with --pretokenizer pcre2 (the generic engine); documents with
              characters whose L/N/M/White_Space classes differ between Unicode 14 (PCRE2
              10.42, Python's unicodedata) and tiktoken's tables are left out there (the
              random strings drop those characters instead)
  custom      (cl100k_base ranks) --pattern FILE.json with patterns that are not the known
              ones (PCRE2), --pattern NAME and a known .json sidecar

A mismatch prints the encoding, the set, the document, the first differing token position
and the ids with their bytes around it. Exit status: 0 pass, 1 fail, 77 skip (tiktoken or
the shared folder missing), 2 usage.
"""
import argparse
import bz2
import concurrent.futures
import functools
import gzip
import json
import os
import random
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
import zlib

VENV_PYTHON = os.path.expanduser("~/.local/share/longtail/venv/bin/python3")
ENCODINGS = ["cl100k_base", "o200k_base", "r50k_base"]
SETS = ["corpus", "files", "adversarial", "fuzz", "special", "custom"]
DEFAULT_SEED = 20240520
PROG = "tiktoken_reference"

try:
    import numpy as np
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
except ImportError:
    # configure picks the project's venv for PYTHON; fall back to it when run by hand.
    if (os.path.exists(VENV_PYTHON) and os.path.abspath(sys.executable) != VENV_PYTHON
            and not os.environ.get("LONGTAIL_TIKTOKEN_REEXEC")):
        os.environ["LONGTAIL_TIKTOKEN_REEXEC"] = "1"
        os.execv(VENV_PYTHON, [VENV_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    print(PROG + ": SKIP: tiktoken or numpy is not importable by " + sys.executable + " (pip install tiktoken numpy)")
    sys.exit(77)

# Unicode White_Space (stable since Unicode 6.3): what \s means in tiktoken's regex.
WHITE_SPACE = frozenset(map(chr, [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680,
                                  *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000]))

# Patterns that are not the known ones: PCRE2 runs them (tiktoken's Python package forms of
# cl100k/r50k use possessive quantifiers and `$`).
PY_CL100K_PAT = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
                 r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
PY_R50K_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

REPLACED_RE = re.compile(r"replaced (\d+) invalid UTF-8 sequence")


def log(msg=""):
    print(msg, flush=True)


# ----------------------------------------------------------------------------- documents

class Doc:
    """one document: `data` is str (sent through JSONL) or bytes (sent as a file)"""
    __slots__ = ("name", "data")

    def __init__(self, name, data):
        self.name = name
        self.data = data

    def text(self):
        return self.data.decode("utf-8", "replace") if isinstance(self.data, bytes) else self.data


class JsonLineDoc(Doc):
    """a JSONL line (bytes, maybe with raw invalid UTF-8) whose document is its "text" string"""
    __slots__ = ()

    def text(self):
        return json.loads(self.data.decode("utf-8", "replace"))["text"]


def decompress_partial(make, errors, data):
    """every member (gzip) or stream (bzip2), as far as they decompress; None when nothing does"""
    out, complete = [], False
    while data:
        d, rest = make(), b""
        try:
            for i in range(0, len(data), 4096):
                out.append(d.decompress(data[i:i + 4096]))
                if d.eof:
                    rest = d.unused_data + data[i + 4096:]
                    break
        except errors:
            break
        if not d.eof:
            break
        complete, data = True, rest
    return b"".join(out) if complete or any(out) else None


def gunzip_partial(data):
    return decompress_partial(lambda: zlib.decompressobj(31), zlib.error, data)


def bunzip_partial(data):
    return decompress_partial(bz2.BZ2Decompressor, (OSError, EOFError, ValueError), data)


def unzstd(path, partial=False):
    """decompressed bytes of a .zst file (zstd command or the zstandard module)"""
    if shutil.which("zstd"):
        p = subprocess.run(["zstd", "-dcq", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if p.returncode == 0 or (partial and p.stdout):
            return p.stdout
        return None
    try:
        import zstandard
    except ImportError:
        return None
    try:
        with open(path, "rb") as f:
            return zstandard.ZstdDecompressor().stream_reader(f).read()
    except zstandard.ZstdError:
        return None


def wet_records(data):
    """(type, uri, body bytes) of each WARC record, framed by Content-Length"""
    pos, n = 0, len(data)
    while pos < n:
        while pos < n and data[pos] in b"\r\n":
            pos += 1
        if pos >= n:
            break
        ends = [(e, len(sep)) for sep in (b"\r\n\r\n", b"\n\n") for e in [data.find(sep, pos)] if e >= 0]
        if not ends:
            raise ValueError("WARC header without end at byte %d" % pos)
        hend, seplen = min(ends)
        lines = data[pos:hend].decode("utf-8", "replace").replace("\r", "").split("\n")
        if not lines[0].startswith("WARC/"):
            raise ValueError("no WARC record at byte %d" % pos)
        hdr = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            hdr[k.strip().lower()] = v.strip()
        start = hend + seplen
        length = int(hdr["content-length"])
        yield hdr.get("warc-type", ""), hdr.get("warc-target-uri", "?"), data[start:start + length]
        pos = start + length


def wiki_docs(path):
    import xml.etree.ElementTree as ET
    title = "?"
    with bz2.open(path, "rb") as f:
        for _, elem in ET.iterparse(f, events=("end",)):
            tag = elem.tag.rsplit("}", 1)[-1]
            if tag == "title":
                title = elem.text or ""
            elif tag == "text":
                yield title, elem.text or ""
            elif tag == "page":
                elem.clear()


def load_corpus(corpus):
    """(documents as str, whole decompressed WET files as bytes, notes)"""
    docs, wet_files, notes = [], [], []

    def files(sub, suffix):
        d = os.path.join(corpus, sub)
        return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(suffix)) if os.path.isdir(d) else []

    for path in files("cc", ".warc.wet.gz"):
        with open(path, "rb") as f:
            data = gzip.decompress(f.read())
        wet_files.append(Doc("whole " + os.path.basename(path), data))
        for i, (kind, uri, body) in enumerate(wet_records(data)):
            if kind == "conversion":
                docs.append(Doc("%s#%d %s" % (os.path.basename(path), i, uri), body.decode("utf-8", "replace")))
    for path in files("jsonl", ".jsonl.gz"):
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f):
                if line.strip():
                    docs.append(Doc("%s:%d" % (os.path.basename(path), i + 1), json.loads(line)["text"]))
    for path in files("github", ".jsonl.zst"):
        data = unzstd(path)
        if data is None:
            notes.append("%s left out: neither the zstd command nor the zstandard module" % path)
            continue
        for i, line in enumerate(data.decode("utf-8", "replace").split("\n")):
            if line.strip():
                docs.append(Doc("%s:%d" % (os.path.basename(path), i + 1), json.loads(line)["code"]))
    for path in files("wikipedia", ".xml.bz2"):
        for title, text in wiki_docs(path):
            docs.append(Doc("%s [[%s]]" % (os.path.basename(path), title), text))
    return docs, wet_files, notes


def load_bad(corpus):
    """each damaged file as raw bytes, and decompressed as far as it goes"""
    out = []
    d = os.path.join(corpus, "bad")
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        path = os.path.join(d, name)
        with open(path, "rb") as f:
            raw = f.read()
        out.append(Doc("bad/%s (raw)" % name, raw))
        dec = None
        if name.endswith(".gz"):
            dec = gunzip_partial(raw)
        elif name.endswith(".bz2"):
            dec = bunzip_partial(raw)
        elif name.endswith(".zst"):
            dec = unzstd(path, partial=True)
        if dec is not None and dec != raw:
            out.append(Doc("bad/%s (decompressed)" % name, dec))
    return out


# ----------------------------------------------------------------------------- Unicode classes

def learn_tiktoken_classes():
    """the code points tiktoken's regex puts in each class: with byte-level ranks only,
    encode_ordinary returns exactly the bytes of the characters the pattern matched"""
    ranks = {bytes([i]): i for i in range(256)}
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    classes = {}
    for cls, pat in [("L", r"\p{L}+"), ("Lu", r"\p{Lu}+"), ("Ll", r"\p{Ll}+"), ("Lt", r"\p{Lt}+"),
                     ("Lm", r"\p{Lm}+"), ("Lo", r"\p{Lo}+"), ("M", r"\p{M}+"), ("N", r"\p{N}+"),
                     ("WS", r"\s+")]:
        e = tiktoken.Encoding("classes", pat_str=pat, mergeable_ranks=ranks, special_tokens={})
        classes[cls] = frozenset(bytes(e.encode_ordinary(every)).decode("utf-8"))
    return classes


def python_classes(ch):
    cat = unicodedata.category(ch)
    return {"L": cat[0] == "L", "Lu": cat == "Lu", "Ll": cat == "Ll", "Lt": cat == "Lt", "Lm": cat == "Lm",
            "Lo": cat == "Lo", "M": cat[0] == "M", "N": cat[0] == "N", "WS": ch in WHITE_SPACE}


def unicode_disagreements(tk):
    """characters whose class membership differs between tiktoken and Unicode 14"""
    cand = set().union(*tk.values()) | WHITE_SPACE
    for cat, chars in chars_by_category().items():
        if cat[0] in "LMN":
            cand.update(chars)
    diff = set()
    for ch in cand:
        py = python_classes(ch)
        if any((ch in tk[k]) != py[k] for k in tk):
            diff.add(ch)
    return diff


def char_class_regex(chars):
    """a compiled [...] matching any of `chars` (as code point ranges)"""
    cps = sorted(map(ord, chars))
    if not cps:
        return re.compile(r"(?!)")
    parts, lo, prev = [], cps[0], cps[0]
    for c in cps[1:] + [None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        parts.append("\\U%08x" % lo if lo == prev else "\\U%08x-\\U%08x" % (lo, prev))
        if c is not None:
            lo = prev = c
    return re.compile("[" + "".join(parts) + "]")


# ----------------------------------------------------------------------------- generated cases

SPECIAL_TEXTS = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>"]
WS_KINDS = {"space": " ", "tab": "\t", "lf": "\n", "crlf": "\r\n", "cr": "\r", "vt": "\x0b", "ff": "\x0c",
            "nbsp": "\u00a0", "ideographic": "\u3000", "lsep": "\u2028", "psep": "\u2029", "nel": "\u0085",
            "ogham": "\u1680", "enquad": "\u2000", "thin": "\u2009", "narrow-nbsp": "\u202f",
            "mmsp": "\u205f"}
NOT_WS = ["\u200b", "\ufeff", "\u180e", "\x1c", "\x1d", "\x1e", "\x1f", "\u2060", "\u00ad"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Re", "'rE", "'VE", "'Ve",
                "'M", "'LL", "'Ll", "'lL", "'D", "'\u017f", "'\u212a", "'", "''", "\u2019s", "\u02bcs"]
EMOJI = ["\U0001F600", "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466", "\U0001F44D\U0001F3FD",
         "\U0001F3F3\ufe0f\u200d\U0001F308", "\U0001F1FA\U0001F1F8", "\U0001F1EC\U0001F1E7", "\U0001F1EF\U0001F1F5",
         "1\ufe0f\u20e3", "#\ufe0f\u20e3", "\u2764\ufe0f", "\U0001F9D1\U0001F3FF\u200d\U0001F4BB",
         "\U0001F469\U0001F3FB\u200d\u2764\ufe0f\u200d\U0001F48B\u200d\U0001F468\U0001F3FE",
         "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F", "\u263a", "\u263a\ufe0e",
         "\U0001FAE8", "\U0001F1E6"]
SCRIPTS = {  # (characters with no visible form are escaped)
    "cjk": "我们的生活没有空格而且中文分词很难",
    "japanese": "日本語のテキストとカタカナ、ひらがな。",
    "korean": "한국어 문장은 띄어쓰기를 합니다.",
    "thai": "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "devanagari": "क्ष त्र ज्ञ स्त्री हिन्दी अनुच्छेद १२३",
    "arabic": "اللَّغَةُ الْعَرَبِيَّةُ ١٢٣",
    "hebrew": "שָׁלוֹם עוֹלָם",
    "tamil": "தமிழ் மொழி",
    "tibetan": "བོད་སྐད་",
    "greek": "ΣΊΣΥΦΟΣ σίσυφος Ἀθηνᾶ",
    "cyrillic": "Привет, мир! Ёлка",
    "georgian": "ქართული ᲐᲑᲒ",
    "cherokee": "ᎠᎡᎢ ꭰꭱꭲ",
    "turkish": "İstanbul ısı İIıi",
    "german": "Straße STRAẞE Maße",
    "titlecase": "ǅungla ǈubljana ǋu ᾈᾉ",
    "math": "𝐀𝐁𝐂 𝟎𝟏 ∑∫∞ ²³½ ⅠⅫ ①②",
    "fullwidth": "ＡＢＣ１２３！？",
    "new-in-15-16": "\U0001e030\U0001e031 \U00011f04\U00011f05 \U0001e4d0\U0001e4d1\U0001e4f0 \U00031350\U00031351 "
                    "\U0002ebf0 \U00010d50\U00010d51 \U0001e5d0\U0001e5d1 \U00016d43\U00016d44 \U0001cc00 \U0001fae8",
}
CODE_CRLF = ("#include <stdio.h>\r\n\r\nint main(void) {\r\n\tint x = 0x1F2e3D; // don't\r\n"
             "\tprintf(\"%d\\n\", x);\r\n\r\n\r\n\treturn 0;\r\n}\r\n")
CODE_PY = ("def f(a, b):\n    '''doc'''\n    return a+b  \n\n\n\tif x:\n\t\tpass\n  \n    \n"
           "x = [1, 2, 3]  # comment\r\nprint(f'{x!r}')\n")


_BY_CATEGORY = {}


def chars_by_category():
    """every code point but the surrogates, by Unicode 14 general category (Python's tables)"""
    if not _BY_CATEGORY:
        for cp in range(0x110000):
            if not 0xD800 <= cp <= 0xDFFF:
                _BY_CATEGORY.setdefault(unicodedata.category(chr(cp)), []).append(chr(cp))
    return _BY_CATEGORY


def ascii_punct():
    return [chr(c) for c in range(0x21, 0x7F) if not chr(c).isalnum()]


def adversarial_cases(seed, new_chars):
    rng = random.Random(seed)
    c = []

    def add(name, s):
        c.append(Doc(name, s))

    add("empty", "")
    sizes = [1, 2, 3, 4, 5, 99, 100, 101, 127, 128, 255, 256, 257, 1023, 4096, 32768]
    runs = {"a": "a", "A": "A", "e-acute": "\u00e9", "cjk": "\u4e2d", "digit1": "1", "digits": "0123456789",
            "bang": "!", "dot": ".", "dash": "-", "eq": "=", "slash": "/", "apos": "'", "lt": "<",
            "mixed-punct": "!?.,;:-_=+*&^%$#@~`|\\/<>[]{}()\"'", "thai": "\u0e01", "emoji": "\U0001F600",
            "combining": "\u0301", "nul": "\x00", "ab": "ab", "word-space": "word "}
    runs.update({"ws-" + k: v for k, v in WS_KINDS.items()})
    for rname, unit in runs.items():
        for n in sizes:
            unit_bytes = len(unit.encode("utf-8"))
            reps = max(1, n // unit_bytes)
            add("run %s x%d" % (rname, reps), unit * reps)
    for n in [1, 2, 3, 100, 1000, 32768]:
        mixed = "".join(rng.choice(list(WS_KINDS.values())) for _ in range(n))
        add("run ws-mixed %d" % n, mixed)
        for after in ["a", "1", "!", "\u4e2d", "'s", "\u00a0x"]:
            add("ws-mixed %d + %r" % (n, after), mixed + after)
            add("%r + ws-mixed %d" % (after, n), after + mixed)
    for k, w in WS_KINDS.items():
        for n in [1, 2, 3, 40, 600]:
            ws = w * n
            for ctx in ["word", "123", "!!", "\u4e2d", "'ll", "x y"]:
                add("%r+%s*%d" % (ctx, k, n), ctx + ws)
                add("%s*%d+%r" % (k, n, ctx), ws + ctx)
                add("%r+%s*%d+%r" % (ctx, k, n, ctx), ctx + ws + ctx)
    for w in NOT_WS:
        for ctx in ["", "a", " ", "1"]:
            add("not-ws %r ctx %r" % (w, ctx), ctx + w + ctx + w + w + " x" + w)
    ends = ["word ", "word  ", "word\n", "word \n", "word\n ", "word \n ", "123 ", "123  ", "!! ", "!!\n",
            " word", "  word", "\tword", "\n\nword", "word\r\n", "word \r\n ", "a  b", "a \n b", "a\u00a0b",
            "a\u00a0 b", "a \u00a0b", " \u3000x", " ", "  ", "\t", " \n", "\n ", "\r", "\r\n", "\n\r",
            "\n\n\n", " \n\n \n", "x\n\n\ny", "x \n\n y", ".\n", " .\n\n", "x\r\n\r\n", "x\r\r\n", "\r\n\n\r",
            "\u2028\u2028x", "x\u0085", "\u0085\n", "12345 ", " 12345", "1 2 3", "a1b2", "1a2b"]
    for s in ends:
        add("ends %r" % s, s)
    for word in ["hello", "HELLO", "Hello", "h\u00e9llo", "\u4e2d\u6587", "I", "i", "x", "MCDONALD", "McDonald",
                 "\u01c5ungla", "\u03a3\u03c3", "123", "\u0130"]:
        for ct in CONTRACTIONS:
            add("contraction %r%r" % (word, ct), word + ct)
            add("contraction %r%r+x" % (word, ct), word + ct + "x")
            add("contraction sp %r%r" % (word, ct), " " + word + ct + " ")
            add("contraction %r%r" % (ct, word), ct + word)
    add("contraction chain", "'s's's'S'LL'll've're'd'm't'\u017f'")
    add("contraction words", "I'LL they'Re it'\u017f don't DON'T won'T o'clock rock'n'roll y'all'd've")
    add("contraction spaces", " 's 'S\n's\t'll  'LL 'x '1 '!")
    for name, s in SCRIPTS.items():
        add("script " + name, s)
        add("script %s nospace x50" % name, s.replace(" ", "") * 50)
        add("script %s mixed" % name, "abc " + s + " 123 " + s + "DEF!" + s + "'s")
    for i, e in enumerate(EMOJI):
        add("emoji %d" % i, e)
        add("emoji %d ctx" % i, "hi" + e + "there " + e + " " + e + e + "1" + e + "!")
    add("emoji all", "".join(EMOJI) * 3)
    add("flags", "\U0001F1FA\U0001F1F8\U0001F1EC\U0001F1E7\U0001F1EF\U0001F1F5\U0001F1E6")
    add("skin tones", "".join("\U0001F44B" + chr(0x1F3FB + i) for i in range(5)))
    add("stacked marks", "a" + "\u0301\u0300\u0302\u0303\u0308" * 20 + "b")
    add("zalgo", "".join(ch + "".join(chr(rng.randrange(0x300, 0x370)) for _ in range(rng.randrange(8)))
                         for ch in "Zalgo text is here 123"))
    for m in ["\u0301", "\u0903", "\u20dd", "\u0e31", "\u094d"]:
        for ctx in ["", " ", "a", "1", "!", "'", "\n", "\u4e2d", "A", "'s"]:
            add("mark %r after %r" % (m, ctx), ctx + m + "x" + m)
            add("mark %r before %r" % (m, ctx), m + ctx)
    for s in SPECIAL_TEXTS + ["<|im_start|>", "<|endoftext|", "|endoftext|>", "<|", "|>", "<||>"]:
        add("special-text %r" % s, s)
        add("special-text in words %r" % s, "hello" + s + "world " + s + " " + s + s + "\n" + s)
    add("special-text nested", "<<|endoftext|>>" + "<|<|endoftext|>|>" + "<|endoftext|><|endofprompt|>")
    add("code crlf", CODE_CRLF * 3)
    add("code py", CODE_PY * 3)
    add("code crlf no final", CODE_CRLF.rstrip("\r\n"))
    add("json", json.dumps({"a": [1, 2.5e-10, "x\u00e9\U0001F600"], "b": {"c": None}}, indent=2))
    add("url", "https://example.org/a/b?c=1&d=%20#frag http://x.y/z/ //comment /usr/bin/env")
    add("path slashes", " /a/b/c\n/\n//\n/// x/ /y ./z ../w \\n\\r")
    add("numbers", "1234567 3.14159 1,000,000 0x1F 1e-10 \u0967\u0968\u0969\u096a \u0660\u0661\u0662 "
                   "\u2460\u2461 \u216b x\u00b2\u00b3 \uff11\uff12\uff13\uff14 \U0001d7cf\U0001d7d0 12345678901234567890")
    add("controls", "\x00a\x00 \x01\x02\x03\x1b[31mred\x1b[0m\x7f\x08\x0b\x0c\x1c\x1d\x1e\x1f end")
    add("bom start", "\ufeffhello world")
    add("bom only", "\ufeff")
    add("replacement char", "\ufffd \ufffd\ufffd a\ufffdb")
    add("max code point", "\U0010ffff \U0010fffe \uffff \ufffe \U000e0001 \ue000")
    add("markdown", "| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nx = 1\n```\n\n> quote\n\n* item\n")
    add("latex", "\\begin{equation} \\frac{a}{b} = \\sum_{i=0}^{n} x_i^2 \\end{equation}")
    add("wiki", "{{Infobox|name=x}} [[Category:Y]] '''bold''' ''it'' &lt;ref&gt;")
    add("long word mix", "a" * 1000 + "\u4e2d" * 1000 + "A" * 1000 + "1" * 1000)
    add("camel", "XMLHttpRequest iPhone HelloWorldFooBAR getHTTPResponseCode ABCdef abcDEF")
    add("letter-digit", "abc123def456 " * 50)
    # long pieces with real merges (tiktoken's heap path is for pieces of >= 100 bytes)
    english = "thequickbrownfoxjumpsoverthelazydogwhilethetokenizermergesbytepairs"
    for n in list(range(95, 106)) + [200, 1000, 5000, 30000]:
        add("nospace english %d bytes" % n, (english * (n // len(english) + 1))[:n])
        add("nospace english %d bytes, space first" % n, " " + (english * (n // len(english) + 1))[:n - 1])
    add("random lowercase 10K", "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10000)))
    add("random ascii letters 10K", "".join(rng.choice("aAbBeEiInNoOsStT") for _ in range(10000)))
    add("german compound", "Donaudampfschifffahrtsgesellschaftskapit\u00e4nsm\u00fctzen" * 20)
    add("base64", "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
                          for _ in range(8000)) + "==")
    add("hex", "".join(rng.choice("0123456789abcdef") for _ in range(8000)))
    for unit in ["aab", "abc", "aaab", "tt", "\u00e9\u00e8", "ing", "the", "  x", "\n\t", "!?", ".-", "12a"]:
        for n in [40, 400, 4000]:
            add("periodic %r x%d" % (unit, n), unit * n)
    # characters that are letters/digits for tiktoken (Unicode 16) but unassigned in Unicode 14:
    # the piece boundaries, and so the ids, depend on the tables (e.g. "1\U0001e4f1234")
    for ch in rng.sample(sorted(new_chars), min(24, len(new_chars))) + ["\U0001e4f1", "\U0001e030"]:
        for fmt in ["1%s234", "12%s34", "ab%scd", "hello%sworld", "%s's", " %s x", "!%s!", "%s%s%s%s 123"]:
            add("new char U+%04X %r" % (ord(ch), fmt), fmt.replace("%s", ch))
    add("new-in-15-16 all", " ".join("".join(sorted(new_chars)[i:i + 40]) for i in range(0, len(new_chars), 40)))
    # single characters of every kind, in small contexts
    singles = [chr(i) for i in range(128)] + [
        "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\ufeff", "\u200b", "\u200d", "\u00e9", "\u00df",
        "\u017f", "\u212a", "\u0130", "\u01c5", "\u02b0", "\u4e2d", "\u3042", "\u30a2", "\ud55c", "\u0e01",
        "\u0e51", "\u0663", "\u096a", "\u00b2", "\u00bd", "\u216b", "\u0301", "\U0001F600", "\U0001F1FA",
        "\ue000", "\U0010ffff", "\ufffd", "\uffff", "\u180e", "\U0001e030", "\U00031350"]
    by_cat = chars_by_category()
    for cat in sorted(by_cat):
        chars = by_cat[cat]
        singles += [chars[0], chars[-1]] + [rng.choice(chars) for _ in range(3)]
    singles += rng.sample(sorted(new_chars), min(10, len(new_chars)))
    for ch in singles:
        for fmt in ["%s", " %s", "%s ", "a%s", "%sa", "1%s", "%s1", "'%s", "%s'", "\n%s", "%s\n", "%s%s"]:
            s = fmt.replace("%s", ch)
            add("single U+%04X %r" % (ord(ch), s), s)
    return c


class FuzzPools:
    """character pools for the random strings"""

    def __init__(self, enc, new_chars, rng):
        self.pools = []  # (weight, list of strings)
        for cat, chars in sorted(chars_by_category().items()):
            self.pools.append((1.0, chars))
        self.pools += [
            (6.0, [chr(c) for c in range(ord("a"), ord("z") + 1)]),
            (3.0, [chr(c) for c in range(ord("A"), ord("Z") + 1)]),
            (3.0, list("0123456789")),
            (3.0, ascii_punct()),
            (5.0, list(WS_KINDS.values()) + [" "] * 8 + ["\n"] * 3),
            (1.0, NOT_WS),
            (2.0, CONTRACTIONS),
            (0.5, SPECIAL_TEXTS + ["<|", "|>"]),
            (1.0, EMOJI + ["\u200d", "\ufe0f", "\U0001F3FD"]),
            (1.0, sorted(new_chars) or ["x"]),
            (1.0, [ch for s in SCRIPTS.values() for ch in s]),
            (0.5, [chr(c) for c in range(0x300, 0x370)]),
            (1.0, ["\x00", "\x7f", "\ufffd", "\ufeff", "\U0010ffff", "\ue000"]),
        ]
        # real tokens of this vocabulary: merge-heavy pieces
        toks = []
        n = enc.max_token_value
        while len(toks) < 4000:
            try:
                toks.append(enc.decode_single_token_bytes(rng.randrange(n)).decode("utf-8"))
            except (KeyError, UnicodeDecodeError):
                pass
        self.pools.append((8.0, toks))
        self.weights = [w for w, _ in self.pools]

    def string(self, rng, target):
        chosen = [p for _, p in rng.choices(self.pools, self.weights, k=rng.choice([1, 1, 2, 2, 3, 4, 6]))]
        out, n = [], 0
        while n < target:
            run = rng.choices(rng.choice(chosen), k=rng.choice([1, 1, 1, 2, 3, 5, 8, 20, 100]))
            out += run
            n += sum(map(len, run))
        return "".join(out)


# characters where the patterns' alternatives meet: short strings over these reach the
# scanners' corner cases far more often than broad Unicode does
BOUNDARY_ALPHABET = [" ", " ", "\n", "\r", "\t", "\u00a0", "\u3000", "\u2028", "a", "b", "A", "s", "S", "t", "l", "L",
                     "d", "\u017f", "1", "2", "\u0663", "\u00b2", "!", ".", "/", "'", "'", "\"", "\u0301", "\u0903",
                     "\u4e2d", "\u00e9", "\u01c5", "\u02b0", "\u0e01", "\U0001F600", "\u200d", "\x00", "<|", "|>"]


def fuzz_cases(enc, new_chars, seed, count):
    rng = random.Random(seed)
    pools = FuzzPools(enc, new_chars, rng)
    docs = [Doc("boundary #%d" % i, "".join(rng.choices(BOUNDARY_ALPHABET, k=rng.randrange(1, 17))))
            for i in range(count)]
    for i in range(count):
        r = rng.random()
        if r < 0.03:
            target = 0
        elif r < 0.90:
            target = int(round(2 ** rng.uniform(0, 7.7)))  # 1..200
        elif r < 0.99:
            target = int(round(2 ** rng.uniform(7.7, 12)))  # 200..4K
        else:
            target = int(round(2 ** rng.uniform(12, 15.3)))  # 4K..40K
        text = pools.string(rng, target) if target else ""
        docs.append(Doc("fuzz #%d (seed %d, %d chars)" % (i, seed, target), text))
    return docs


def special_cases(specials, fuzz, seed):
    rng = random.Random(seed)
    docs = []
    names = sorted(specials)
    for s in names:
        for fmt in ["%s", " %s", "%s ", "%s%s", "a%sb", "hello%sworld", "\n%s\n", "%s\n\n", " %s %s ",
                    "<%s>", "<|%s|>", "%s|>", "<|%s", "'%s's", "1%s2", "\u4e2d%s\u4e2d"]:
            docs.append(Doc("special %r" % fmt.replace("%s", s), fmt.replace("%s", s)))
    docs.append(Doc("specials adjacent", "".join(names) * 3))
    docs.append(Doc("specials partial", "<|endoftext|<|endoftext|><|endoftext<|endoftext|>|>|endoftext|>"))
    docs.append(Doc("specials near-miss", "<|endoftext |> <| endoftext|> <|ENDOFTEXT|> <|endoftext||>"))
    for i in range(300):
        base = rng.choice(fuzz).data if fuzz else ""
        for _ in range(rng.randrange(1, 6)):
            p = rng.randrange(len(base) + 1)
            base = base[:p] + rng.choice(names + ["<|", "|>", "<|endoftext"]) + base[p:]
        docs.append(Doc("special fuzz #%d" % i, base))
    return docs


def invalid_utf8_cases(seed, corpus_docs):
    rng = random.Random(seed)
    c = []

    def add(name, b):
        c.append(Doc(name, b))

    pieces = [b"\x80", b"\xbf", b"\x80\x80\x80", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf",
              b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\xa0\x80\xed\xb0\x80",
              b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xe4\xb8", b"\xf0\x9f\x98", b"\xf0\x9f", b"\xc3",
              b"\xe4\xb8\xe4\xb8\xad", b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80", b"\xfe\xff", b"\xff\xfe",
              b"\xef\xbf\xbd", b"\xef\xbb\xbf", b"\xc2\x85", b"\xc2\xa0", b"\xe2\x80\xa8"]
    pieces += [bytes([b]) for b in range(0xF5, 0x100)]
    for i, p in enumerate(pieces):
        for fmt in [b"%s", b"ab%scd", b"%s ", b" %s", b"word%s", b"%sword", b"12%s34", b"'%ss", b"%s%s",
                    b"\xe4\xb8\xad%s"]:
            add("invalid %r in %r" % (p, fmt), fmt.replace(b"%s", p))
    add("invalid lone continuations", b"\x80" * 100 + b"x" + b"\xbf" * 33)
    add("invalid ff x1000", b"\xff" * 1000)
    add("invalid random 32K", bytes(rng.randrange(256) for _ in range(32768)))
    add("invalid random high 4K", bytes(rng.randrange(0x80, 0x100) for _ in range(4096)))
    add("bom utf8 start", b"\xef\xbb\xbfhello")
    add("utf16le", "h\u00e9llo w\u00f6rld \u4e2d".encode("utf-16"))
    add("latin1", "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00a0\u00bf".encode("latin-1"))
    add("cesu-8 emoji", b"\xed\xa0\xbd\xed\xb8\x80 smile")
    add("truncated at end 4", "x\U0001F600".encode()[:-1])
    add("truncated at end 3", "x\u4e2d".encode()[:-1])
    add("truncated at end 2", "x\u00e9".encode()[:-1])
    add("only invalid", b"\xc0")
    add("fffd present and invalid", b"\xef\xbf\xbd\xff\xef\xbf\xbd\xc3 \xef\xbf\xbd")
    # corrupted corpus text: truncations inside characters and random byte damage
    texts = [d.data.encode("utf-8") for d in corpus_docs if any(ord(ch) > 0x7F for ch in d.data[:4000])][:40] or [
        "\u4e2d\u6587 caf\u00e9 \U0001F600".encode() * 50]
    for i in range(60):
        t = rng.choice(texts)
        a = rng.randrange(len(t))
        b = min(len(t), a + rng.randrange(1, 3000))
        piece = bytearray(t[a:b])
        for _ in range(rng.randrange(0, 8)):
            if piece:
                piece[rng.randrange(len(piece))] = rng.choice([0x80, 0xBF, 0xC0, 0xE0, 0xED, 0xF0, 0xF4, 0xF5, 0xFF,
                                                               rng.randrange(256)])
        add("corrupted text #%d" % i, bytes(piece))
    return c


def invalid_jsonl_lines(invalid_docs):
    """JSONL lines whose "text" string holds raw invalid UTF-8 (control characters, quote and
    backslash escaped; everything else raw), some with more members around it"""
    out = []
    for i, d in enumerate(invalid_docs):
        if len(d.data) > 4096:
            continue
        body = b"".join(b"\\u%04x" % x if x < 0x20 or x in (0x22, 0x5C) else bytes([x]) for x in d.data)
        if i % 3 == 0:
            line = b'{"text": "' + body + b'"}'
        elif i % 3 == 1:
            line = b'{"id": ' + str(i).encode() + b', "text":"' + body + b'", "z": "\xff\xc3"}'
        else:
            line = b'{"a": "\xe4\xb8", "text" : "' + body + b'" }'
        out.append(JsonLineDoc("jsonl line: " + d.name, line))
    return out


# ----------------------------------------------------------------------------- running dataprep

class Ref:
    """the reference encoder of a job: tiktoken's encode_ordinary, or encode with allowed specials"""

    def __init__(self, enc, allowed=None):
        self._enc = enc   # a tiktoken.Encoding, or a function making one when first needed
        self.allowed = allowed
        self.cache = {}  # id(doc) -> ids (uint32 array); shared by the jobs using this reference

    @property
    def enc(self):
        if not isinstance(self._enc, tiktoken.Encoding):
            self._make, self._enc = self._enc, self._enc()
        return self._enc

    def release(self):
        """forget the cached ids (and an encoding made on demand: ~35 MB each)"""
        self.cache.clear()
        if hasattr(self, "_make"):
            self._enc = self._make

    def ids(self, doc):
        got = self.cache.get(id(doc))
        if got is None:
            if self.allowed is None:
                got = np.array(self.enc.encode_ordinary(doc.text()), dtype=np.uint32)
            else:
                got = self.enc.encode_to_numpy(doc.text(), allowed_special=self.allowed, disallowed_special=())
            self.cache[id(doc)] = got
        return got


def parse_output(out):
    """(lines, ids of each line) of dataprep's stdout (bytes); a line that is not decimal ids separated
    by single spaces has None for ids"""
    lines = out.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    well_formed = (not out.translate(None, b"0123456789 \n") and b"  " not in out and b" \n" not in out
                   and b"\n " not in out and not out.startswith(b" "))
    if well_formed:
        # one parse for the whole output (sep " " also skips the newlines), then cut it by line
        counts = [line.count(b" ") + 1 if line else 0 for line in lines]
        every = np.fromstring(out.decode("ascii"), dtype=np.int64, sep=" ") if out.strip() else np.zeros(0, np.int64)
        if len(every) == sum(counts) and (len(every) == 0 or every.max() < 2 ** 32):
            every = every.astype(np.uint32)
            ends = np.cumsum(counts)
            return lines, [every[e - n:e] for e, n in zip(ends, counts)]
    digit_line = re.compile(rb"(?:[0-9]+(?: [0-9]+)*)?\Z")
    return lines, [np.array([int(x) for x in line.split()], dtype=np.uint32)
                   if digit_line.match(line) and all(int(x) < 2 ** 32 for x in line.split()) else None
                   for line in lines]


class Job:
    """one `dataprep encode` run over a list of documents"""

    def __init__(self, encoding, name, ref, args, docs, via="jsonl", field="text", stdin=False, env=None,
                 sidecar=None):
        self.encoding = encoding  # the rank file's name
        self.name = name
        self.ref = ref
        self.args = list(args)
        self.docs = docs
        self.via = via          # "jsonl": JSON lines written here; "rawjsonl": the docs are JSON lines
                                # (JsonLineDoc); "files": one file per document
        self.field = field      # the JSONL key (another key gets a decoy "text")
        self.stdin = stdin      # the (one) input through stdin instead of FILE arguments
        self.env = env
        self.sidecar = sidecar  # a .json pattern sidecar to write; replaces "@SIDECAR@" in args

    def prepare(self, binary, workdir, seq):
        d = os.path.join(workdir, "%03d-%s" % (seq, re.sub(r"[^A-Za-z0-9_.-]+", "_", self.name)))
        os.makedirs(d)
        if self.sidecar is not None:
            path = os.path.join(d, "pattern.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(self.sidecar, f, indent=1)
            self.args = [path if a == "@SIDECAR@" else a for a in self.args]
        inputs = []
        if self.via == "jsonl":
            # two files (the order carries across files; one for stdin), json.dumps alternating
            # ensure_ascii on and off line by line
            half = len(self.docs) if self.stdin else (len(self.docs) + 1) // 2
            for part, chunk in enumerate([self.docs[:half], self.docs[half:]]):
                if part and not chunk:
                    break
                path = os.path.join(d, "input%d.jsonl" % part)
                with open(path, "w", encoding="utf-8", newline="\n") as f:
                    for i, doc in enumerate(chunk):
                        obj = {"text": doc.data} if self.field == "text" else {"text": "decoy", self.field: doc.data}
                        f.write(json.dumps(obj, ensure_ascii=(i % 2 == 0)) + "\n")
                inputs.append(path)
            args = ["--jsonl"] + (["--field", self.field] if self.field != "text" else [])
        elif self.via == "rawjsonl":
            path = os.path.join(d, "input.jsonl")
            with open(path, "wb") as f:  # some lines end in CRLF, the last one in nothing
                f.write(b"".join(doc.data + (b"\r\n" if i % 4 == 3 else b"\n") for i, doc in enumerate(self.docs))[:-1])
            inputs.append(path)
            args = ["--jsonl"]
        else:
            for i, doc in enumerate(self.docs):
                path = os.path.join(d, "doc%05d" % i)
                with open(path, "wb") as f:
                    f.write(doc.data if isinstance(doc.data, bytes) else doc.data.encode("utf-8"))
                inputs.append(path)
            args = []
        self.stdin_path = inputs[0] if self.stdin else None
        self.argv = [binary, "encode"] + self.args + args + ([] if self.stdin else inputs)
        self.out_path = os.path.join(d, "stdout")
        self.err_path = os.path.join(d, "stderr")
        with open(os.path.join(d, "command"), "w") as f:
            envs = "".join("%s=%s " % (k, shlex.quote(v)) for k, v in (self.env or {}).items())
            f.write(envs + " ".join(shlex.quote(a) for a in self.argv)
                    + (" < " + shlex.quote(self.stdin_path) if self.stdin else "") + "\n")
        self.command_file = os.path.join(d, "command")

    def run(self, timeout):
        env = dict(os.environ)
        env.update(self.env or {})
        t0 = time.time()
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            stdin = open(self.stdin_path, "rb") if self.stdin else subprocess.DEVNULL
            try:
                rc = subprocess.run(self.argv, stdin=stdin, stdout=out, stderr=err, env=env, timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout after %ds" % timeout
            finally:
                if self.stdin:
                    stdin.close()
        return rc, time.time() - t0


def token_repr(enc, t):
    try:
        return repr(enc.decode_single_token_bytes(t))[1:][:40]
    except (KeyError, ValueError, OverflowError):
        return "<no such id>"


def show_mismatch(job, doc, ref, ours):
    enc = job.ref.enc
    ref, ours = [int(x) for x in ref], [int(x) for x in ours]
    i = 0
    while i < len(ref) and i < len(ours) and ref[i] == ours[i]:
        i += 1
    log("  MISMATCH %s [%s] document %r: first difference at token %d (expected %d tokens, got %d)"
        % (job.encoding, job.name, doc.name[:100], i, len(ref), len(ours)))
    prefix = b"".join(enc.decode_single_token_bytes(t) for t in ref[:i])
    text = doc.text().encode("utf-8")
    log("    expected text before it (%d bytes): ...%r" % (len(prefix), prefix[-60:]))
    log("    input from byte %d: %r" % (len(prefix), text[len(prefix):len(prefix) + 80]))
    lo = max(0, i - 4)
    for label, ids in (("expected", ref), ("got     ", ours)):
        cells = ["%s%d %s" % ("*" if k == i else "", ids[k], token_repr(enc, ids[k]))
                 for k in range(lo, min(len(ids), i + 8))]
        log("    %s [%d..]: %s" % (label, lo, " | ".join(cells) if cells else "(nothing)"))


def check_job(job, rc, secs):
    """compare one finished run with tiktoken; returns (ok, tokens compared)"""
    ename = job.encoding
    problems = []
    with open(job.err_path, "rb") as f:
        err = f.read().decode("utf-8", "replace")
    if rc != 0:
        log("FAIL %-11s %-34s exit status %s\n  command: %s\n  stderr: %s"
            % (ename, job.name, rc, job.command_file, err.strip()[-2000:] or "(empty)"))
        return False, 0
    with open(job.out_path, "rb") as f:
        out = f.read()
    if out and not out.endswith(b"\n"):
        problems.append("stdout does not end with a newline")
    lines, ours_all = parse_output(out)
    if len(lines) != len(job.docs):
        problems.append("%d documents in but %d lines out" % (len(job.docs), len(lines)))
    tokens, differ, shown = 0, 0, 0
    for k, doc in enumerate(job.docs):
        expect = job.ref.ids(doc)
        tokens += len(expect)
        ours = ours_all[k] if k < len(lines) else None
        if ours is not None and len(ours) == len(expect) and (len(expect) == 0 or np.array_equal(ours, expect)):
            continue
        differ += 1
        if shown >= 5:
            continue
        shown += 1
        if k >= len(lines):
            log("  MISSING %s [%s] document %d %r: no output line" % (ename, job.name, k, doc.name[:100]))
        elif ours is None:
            log("  MALFORMED %s [%s] document %d %r: line %r" % (ename, job.name, k, doc.name[:100], lines[k][:200]))
        else:
            show_mismatch(job, doc, expect, ours)
    if differ:
        problems.append("%d of %d documents differ" % (differ, len(job.docs)))
    counts = [int(m) for m in REPLACED_RE.findall(err)]
    expected = sum(d.text().count("\ufffd") - d.data.count(b"\xef\xbf\xbd")
                   for d in job.docs if isinstance(d.data, bytes))
    # one line per document or one summary line: the sum or the largest must match; for
    # JSONL input the count is optional (the JSON reader may count on its own)
    if job.via == "rawjsonl" and not counts:
        pass
    elif expected == 0:
        if any(counts):
            problems.append("stderr reports replaced invalid UTF-8 %s where there is none" % counts)
    elif not counts or (sum(counts) != expected and max(counts) != expected):
        problems.append("stderr reports %s replaced invalid UTF-8 sequences, expected %d (stderr: %r)"
                        % (counts or "no", expected, err.strip()[-300:]))
    log("%s %-11s %-34s %6d documents %9d tokens %6.1fs%s"
        % ("FAIL" if problems else "ok  ", ename, job.name, len(job.docs), tokens, secs,
           ("  -- " + "; ".join(problems) + " (" + job.command_file + ")") if problems else ""))
    return not problems, tokens


# ----------------------------------------------------------------------------- main

def load_encoding(vocab, name):
    with open(os.path.join(vocab, name + ".json"), encoding="utf-8") as f:
        meta = json.load(f)
    ranks = load_tiktoken_bpe(os.path.join(vocab, name + ".tiktoken"))
    return tiktoken.Encoding(name, pat_str=meta["pat_str"], mergeable_ranks=ranks,
                             special_tokens=meta["special_tokens"]), meta, ranks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--encoding", action="append", choices=ENCODINGS)
    ap.add_argument("--set", action="append", choices=SETS)
    ap.add_argument("--fuzz-count", type=int, default=int(os.environ.get("LONGTAIL_FUZZ_COUNT", "3000")))
    ap.add_argument("--keep", action="store_true", help="keep the temporary inputs and outputs")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per dataprep run")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 2), help="dataprep runs at once")
    opt = ap.parse_args()
    encodings = opt.encoding or ENCODINGS
    sets = opt.set or SETS
    t_start = time.time()

    src = os.environ.get("top_srcdir") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    shared = os.path.abspath(os.environ.get("LONGTAIL_SHARED") or os.path.join(src, "..", "shared"))
    vocab, corpus = os.path.join(shared, "vocab"), os.path.join(shared, "corpus")
    if not all(os.path.exists(os.path.join(vocab, e + ext)) for e in ENCODINGS for ext in (".tiktoken", ".json")):
        print(PROG + ": SKIP: no vocabularies under %s (set LONGTAIL_SHARED)" % vocab)
        return 77
    if not os.path.isdir(corpus):
        print(PROG + ": SKIP: no corpus under %s (set LONGTAIL_SHARED)" % corpus)
        return 77
    binary = os.environ.get("LONGTAIL_DATAPREP")
    if not binary:
        if not os.environ.get("top_builddir"):
            print(PROG + ": usage: set top_builddir or LONGTAIL_DATAPREP", file=sys.stderr)
            return 2
        binary = os.path.join(os.environ["top_builddir"], "dataprep", "dataprep")
    if not os.access(binary, os.X_OK):
        log("FAIL: %s is not an executable program" % binary)
        return 1
    p = subprocess.run([binary, "encode", "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        log("FAIL: `%s encode --help` exits %d: %s"
            % (binary, p.returncode, p.stderr.decode("utf-8", "replace").strip()[:500]))
        return 1
    os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read the rank files themselves, no cached copies
    seed = int(os.environ.get("LONGTAIL_FUZZ_SEED", DEFAULT_SEED))
    log("%s: %s against tiktoken %s, shared %s, seed %d%s"
        % (PROG, binary, tiktoken.__version__, shared, seed, "" if seed == DEFAULT_SEED else " (LONGTAIL_FUZZ_SEED)"))

    # --- the documents all encodings share
    tk_classes = learn_tiktoken_classes()
    new_chars = unicode_disagreements(tk_classes)
    new_re = char_class_regex(new_chars)
    corpus_docs, wet_files, notes = load_corpus(corpus)
    for n in notes:
        log("note: " + n)
    bad_docs = load_bad(corpus)
    adversarial = adversarial_cases(seed, new_chars)
    # file mode: the damaged files, invalid UTF-8, whole WET files, and some of the adversarial
    # cases as raw bytes (raw CR, LF, NUL)
    files_docs = (bad_docs + invalid_utf8_cases(seed, corpus_docs) + wet_files
                  + [Doc(d.name + " (file)", d.data.encode("utf-8")) for d in adversarial[::25]]
                  + [Doc("nul bytes file", b"a\x00b\x00\x00 c\r\n\x00")])

    def pcre2_ok(docs):
        """the documents without characters whose classes differ between Unicode 14 and tiktoken"""
        return [d for d in docs if not new_re.search(d.text())]

    log("%d characters are classified differently by tiktoken and Unicode 14 (left out of pcre2 runs)"
        % len(new_chars))

    # --- the runs
    jobs = []
    for ename in encodings:
        enc, meta, ranks = load_encoding(vocab, ename)
        ordinary = Ref(enc)
        base = ["--encoding", ename, "--vocab-dir", vocab]
        for engine in ("auto", "pcre2"):
            # `--pretokenizer auto` given explicitly for o200k_base only: it is the default
            pt = ["--pretokenizer", engine] if engine == "pcre2" or ename == "o200k_base" else []
            filt = pcre2_ok if engine == "pcre2" else list
            if "corpus" in sets:
                jobs.append(Job(ename, "corpus/" + engine, ordinary, base + pt, filt(corpus_docs)))
            if "files" in sets:
                jobs.append(Job(ename, "files/" + engine, ordinary, base + pt, filt(files_docs), via="files"))
            if "adversarial" in sets:
                if ename == "r50k_base" and engine == "auto":  # the vocabulary found through the environment
                    jobs.append(Job(ename, "adversarial/auto (env)", ordinary, ["--encoding", ename], adversarial,
                                    env={"LONGTAIL_VOCAB_DIR": vocab}))
                else:
                    jobs.append(Job(ename, "adversarial/" + engine, ordinary, base + pt, filt(adversarial)))
        fuzz = fuzz_cases(enc, new_chars, seed + ENCODINGS.index(ename), opt.fuzz_count)
        fuzz_pcre2 = [Doc(d.name + " pcre2 subset", new_re.sub("", d.data)) for d in fuzz]
        if "fuzz" in sets:
            jobs.append(Job(ename, "fuzz/auto (stdin, --field)", ordinary, base, fuzz, field="s", stdin=True))
            jobs.append(Job(ename, "fuzz/pcre2", ordinary, base + ["--pretokenizer", "pcre2"], fuzz_pcre2))
        if "special" in sets:
            specials = sorted(meta["special_tokens"])
            sp_docs = special_cases(specials, fuzz, seed) + [d for d in adversarial if "<|" in d.data]
            subset = specials[::2]
            sp_all, sp_subset = Ref(enc, "all"), Ref(enc, set(subset))
            jobs.append(Job(ename, "special-all/auto", sp_all, base + ["--allowed-special", "all"], sp_docs))
            jobs.append(Job(ename, "special-%d/auto" % len(subset), sp_subset,
                            base + ["--allowed-special", ",".join(subset)], sp_docs))
            jobs.append(Job(ename, "special-all/pcre2", sp_all,
                            base + ["--allowed-special", "all", "--pretokenizer", "pcre2"], pcre2_ok(sp_docs)))
        if "custom" in sets and ename == "cl100k_base":
            vocab_file = os.path.join(vocab, ename + ".tiktoken")
            customs = [("cl100k N{1,2}", meta["pat_str"].replace(r"\p{N}{1,3}", r"\p{N}{1,2}")),
                       (r"\S+|\s+", r"\S+|\s+"), ("tiktoken-py cl100k", PY_CL100K_PAT),
                       ("tiktoken-py r50k", PY_R50K_PAT), (r"\p{L}+|\p{N}", r"\p{L}+|\p{N}")]
            assert customs[0][1] != meta["pat_str"]
            cdocs = pcre2_ok(adversarial) + fuzz_pcre2[::10] + pcre2_ok(corpus_docs[::4])
            for cname, pat in customs:
                cenc = functools.partial(tiktoken.Encoding, "custom " + cname, pat_str=pat, mergeable_ranks=ranks,
                                         special_tokens=meta["special_tokens"])
                jobs.append(Job(ename, "custom " + cname, Ref(cenc), ["--vocab", vocab_file, "--pattern", "@SIDECAR@"],
                                cdocs, sidecar=dict(meta, name="custom", pat_str=pat)))
            # --pattern NAME (o200k_base's pattern with cl100k_base's ranks) and a known sidecar
            with open(os.path.join(vocab, "o200k_base.json"), encoding="utf-8") as f:
                ometa = json.load(f)
            oenc = functools.partial(tiktoken.Encoding, "cl100k ranks + o200k pattern", pat_str=ometa["pat_str"],
                                     mergeable_ranks=ranks, special_tokens=ometa["special_tokens"])
            ndocs = adversarial + fuzz[::10] + corpus_docs[1::4]
            jobs.append(Job(ename, "custom --pattern o200k_base", Ref(oenc),
                            ["--vocab", vocab_file, "--pattern", "o200k_base"], ndocs))
            jobs.append(Job(ename, "custom --pattern cl100k_base.json", ordinary,
                            ["--vocab", vocab_file, "--pattern", os.path.join(vocab, ename + ".json")], ndocs))
        if "files" in sets and ename == "cl100k_base":
            # JSON strings with raw invalid UTF-8; one document through stdin in file mode
            jobs.append(Job(ename, "jsonl with raw invalid UTF-8", ordinary, base,
                            invalid_jsonl_lines([d for d in files_docs if d.name.startswith(("invalid", "corrupted"))]),
                            via="rawjsonl"))
            jobs.append(Job(ename, "file mode, stdin", ordinary, base,
                            [d for d in files_docs if d.name.startswith("fffd present")], via="files", stdin=True))
            # one file per run: the replacement count of exactly that file
            picks = [d for d in files_docs if d.name.startswith(
                ("invalid lone", "invalid ff", "invalid random 32K", "cesu", "truncated at end 4", "latin1",
                 "fffd present", "invalid b'\\xef\\xbf\\xbd' in b'%s'", "bad/truncated.warc.wet.gz (raw)",
                 "bad/mixed-lines"))]
            for d in picks:
                jobs.append(Job(ename, "replaced: " + d.name[:26], ordinary, base, [d], via="files"))

    _BY_CATEGORY.clear()  # ~100 MB, only needed to make the cases
    workdir = tempfile.mkdtemp(prefix="tiktoken_reference.")
    for seq, job in enumerate(jobs):
        job.prepare(binary, workdir, seq)
    n_docs = sum(len(j.docs) for j in jobs)
    log("%d runs, %d documents, prepared in %.1fs" % (len(jobs), n_docs, time.time() - t_start))

    ok, total_tokens = True, 0
    last_use = {id(job.ref): k for k, job in enumerate(jobs)}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opt.jobs)) as pool:
        futures = [pool.submit(job.run, opt.timeout) for job in jobs]
        for k, (job, fut) in enumerate(zip(jobs, futures)):
            for doc in job.docs:  # the reference, computed while dataprep runs
                job.ref.ids(doc)
            rc, secs = fut.result()
            good, tokens = check_job(job, rc, secs)
            ok &= good
            total_tokens += tokens
            if last_use[id(job.ref)] == k:
                job.ref.release()
    cpu = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
              for f in ("ru_utime", "ru_stime"))
    log("%s: %s: %d runs, %d documents, %d tokens compared in %.1fs (%.1fs CPU, dataprep included)"
        % (PROG, "PASS" if ok else "FAIL", len(jobs), n_docs, total_tokens, time.time() - t_start, cpu))
    if ok and not opt.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        log("inputs, commands and outputs are in " + workdir)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
