#!/usr/bin/env python3
"""bench/tokenizer/make_texts.py — the text sets of the tokenizer benchmark.

Extracts, deterministically, from the shared corpus (default ../shared/corpus):

  english       Common Crawl WET "conversion" records (cc/*.warc.wet.gz) whose letters are
                almost all ASCII (non-ASCII share below --ascii-max, default 0.5 %). WET
                records are the plain text a crawler extracted from a page, so they need no
                markup stripping; the Wikipedia dump in the corpus is wikitext (templates,
                [[links]], '''bold''', XML entities), whose markup would turn "prose" into
                punctuation-heavy text that is neither prose nor code.
  code          the "code" field of github/*.jsonl.zst (decompressed with `zstd -dc`).
  multilingual  WET conversion records whose letters are at least --multi-min (default
                25 %) non-ASCII: Cyrillic, Georgian, Greek, Han, Hangul, Kana ...

and the per-script sets, from every text of the corpus (WET conversion records, the "text"
of jsonl/*.jsonl.gz, the Wikipedia dump's XML): each line whose letters are at least
--script-min (default 60 %) of one script group, consecutive such lines of one source text
forming a document of at most 8 KiB; a line seen before (in any source) is left out, so a
list that two sources share is counted once:

  cjk           Han, Hiragana, Katakana, Hangul (Japanese prose of a Rust book in WET,
                Chinese place names in the JSONL and Wikipedia lists): 3-byte characters,
                pieces of whole sentences (no spaces);
  cyrillic      Cyrillic (Russian place names, prose, comments): 2-byte letters;
  georgian      Georgian (WET lists): 3-byte letters in space-separated words, the corpus's
                stand-in for the other 3-byte alphabets (Devanagari and Arabic, 2 bytes, are
                missing: the whole corpus holds 79 Arabic and 5 Devanagari letters).

Each set is written as OUT/NAME.jsonl, one {"text": ...} per record, in corpus order
(files sorted by name, records in file order), capped at --max-bytes of text per set.
A summary (documents, bytes, share of non-ASCII letters, top scripts or languages) is
printed as TSV and written to OUT/texts.tsv.

It also writes the long-run cases, each one document of 1 MiB (at most; whole characters)
that the pre-tokenizer cannot split, or hardly: OUT/long_NAME.txt for
  letter       'a' repeated: one \p{L}+ piece;
  cjk          "中文字符" repeated, no spaces: one \p{L}+ piece of 3-byte characters;
  punct        '!' repeated: one [^\s\p{L}\p{N}]+ piece;
  punct_mixed  ".,;:!?-=+*&^%$#@~" repeated: one piece, many distinct pairs;
  digits       "1234567890" repeated: \p{N}{1,3} splits it every 3 digits;
  spaces       ' ' repeated: one \s+ piece (the text ends there).

Usage: make_texts.py [--corpus DIR] [--out DIR] [--max-bytes N]
"""
import argparse
import bz2
import collections
import glob
import gzip
import json
import os
import subprocess
import sys
import unicodedata


def wet_records(path):
    """Yield (headers, body bytes) of each WARC record of a gzip (multi-member) WET file.

    A record is 'WARC/1.0' CRLF, header lines, an empty line, then Content-Length bytes of
    block, then CRLF CRLF. Truncated or malformed files raise ValueError naming the file."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    pos, n = 0, len(data)
    while pos < n:
        while pos < n and data[pos:pos + 1] in (b"\r", b"\n"):
            pos += 1
        if pos >= n:
            break
        end = data.find(b"\r\n\r\n", pos)
        if end < 0:
            raise ValueError(f"{path}: record at byte {pos} has no end of headers")
        lines = data[pos:end].decode("utf-8", "replace").split("\r\n")
        if not lines[0].startswith("WARC/"):
            raise ValueError(f"{path}: byte {pos} does not start a WARC record")
        headers = {}
        for line in lines[1:]:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "-1"))
        if length < 0 or end + 4 + length > n:
            raise ValueError(f"{path}: record at byte {pos} has a bad Content-Length")
        yield headers, data[end + 4:end + 4 + length]
        pos = end + 4 + length


def letter_stats(text):
    """(letters, non-ASCII letters, Counter of the scripts of the non-ASCII letters)."""
    letters = non_ascii = 0
    scripts = collections.Counter()
    for c in text:
        if c.isalpha():
            letters += 1
            if ord(c) > 127:
                non_ascii += 1
                scripts[unicodedata.name(c, "UNNAMED").split(" ")[0]] += 1
    return letters, non_ascii, scripts


LONG_RUNS = {
    "letter": "a",
    "cjk": "中文字符",
    "punct": "!",
    "punct_mixed": ".,;:!?-=+*&^%$#@~",
    "digits": "1234567890",
    "spaces": " ",
}


def write_long_runs(out_dir, size=1 << 20):
    """OUT/long_NAME.txt: the unit of LONG_RUNS[NAME] repeated to at most `size` bytes."""
    for name, unit in LONG_RUNS.items():
        unit_bytes = unit.encode("utf-8")
        text = unit * (size // len(unit_bytes))
        per_char = len(unit_bytes) // len(unit)  # every unit has characters of one length
        text += unit[:(size - len(text.encode("utf-8"))) // per_char]
        with open(os.path.join(out_dir, f"long_{name}.txt"), "w", encoding="utf-8", newline="") as f:
            f.write(text)


# script group -> the first word of the Unicode names of its letters
SCRIPT_GROUPS = {
    "cjk": ("CJK", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA", "HANGUL"),
    "cyrillic": ("CYRILLIC",),
    "georgian": ("GEORGIAN",),
}
SCRIPT_DOC_BYTES = 8192


def script_of_letter(c):
    """The SCRIPT_GROUPS key of letter c, or None."""
    if ord(c) < 128:
        return None
    first = unicodedata.name(c, "").split(" ")[0]
    for group, names in SCRIPT_GROUPS.items():
        if first in names:
            return group
    return None


def script_docs(text, min_share, seen):
    """Yield (group, document) for the runs of consecutive lines of `text` whose letters
    are >= min_share of one script group (a line already in `seen` is skipped and ends a
    run; a run is cut at SCRIPT_DOC_BYTES)."""
    run_group, run = None, []

    def flush():
        if run:
            yield run_group, "\n".join(run)
        run.clear()

    for line in text.split("\n"):
        letters = 0
        groups = collections.Counter()
        for c in line:
            if c.isalpha():
                letters += 1
                g = script_of_letter(c)
                if g:
                    groups[g] += 1
        group = None
        if letters and groups:
            g, k = groups.most_common(1)[0]
            if k >= min_share * letters:
                group = g
        if group is None or line in seen:
            yield from flush()
            run_group = None
            continue
        seen.add(line)
        size = sum(len(x.encode("utf-8")) + 1 for x in run) + len(line.encode("utf-8"))
        if group != run_group or size > SCRIPT_DOC_BYTES:
            yield from flush()
            run_group = group
        run.append(line)
    yield from flush()


class TextSet:
    def __init__(self, name, out_dir, max_bytes):
        self.name = name
        self.path = os.path.join(out_dir, name + ".jsonl")
        self.max_bytes = max_bytes
        self.docs = self.bytes = self.letters = self.non_ascii = 0
        self.kinds = collections.Counter()  # scripts or languages, for the summary
        self.file = open(self.path, "w", encoding="utf-8", newline="\n")

    def full(self):
        return self.bytes >= self.max_bytes

    def add(self, text, kinds=None, letters=None):
        size = len(text.encode("utf-8"))
        if self.full() or size == 0:
            return
        self.file.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
        self.docs += 1
        self.bytes += size
        if letters is None:
            letters = letter_stats(text)
        self.letters += letters[0]
        self.non_ascii += letters[1]
        self.kinds.update(kinds if kinds is not None else letters[2])

    def close(self):
        self.file.close()

    def summary(self):
        share = self.non_ascii / self.letters if self.letters else 0.0
        top = ",".join(f"{k}:{v}" for k, v in self.kinds.most_common(6))
        return f"{self.name}\t{self.docs}\t{self.bytes}\t{share:.3f}\t{top}"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_corpus = os.path.normpath(os.path.join(here, "..", "..", "..", "shared", "corpus"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=default_corpus, help="the shared corpus directory")
    ap.add_argument("--out", default=os.path.join(here, "out"), help="where the sets go")
    ap.add_argument("--max-bytes", type=int, default=8_000_000, help="text bytes per set, at most")
    ap.add_argument("--ascii-max", type=float, default=0.005,
                    help="english: largest share of non-ASCII letters")
    ap.add_argument("--multi-min", type=float, default=0.25,
                    help="multilingual: smallest share of non-ASCII letters")
    ap.add_argument("--script-min", type=float, default=0.6,
                    help="per-script sets: smallest share of a line's letters in the script")
    args = ap.parse_args()

    wet = sorted(glob.glob(os.path.join(args.corpus, "cc", "*.warc.wet.gz")))
    code = sorted(glob.glob(os.path.join(args.corpus, "github", "*.jsonl.zst")))
    if not wet or not code:
        sys.exit(f"make_texts.py: error: no cc/*.warc.wet.gz or github/*.jsonl.zst in {args.corpus}\n"
                 "hint: pass --corpus DIR (the shared corpus)")
    os.makedirs(args.out, exist_ok=True)
    english = TextSet("english", args.out, args.max_bytes)
    multi = TextSet("multilingual", args.out, args.max_bytes)
    code_set = TextSet("code", args.out, args.max_bytes)
    scripts = {g: TextSet(g, args.out, args.max_bytes) for g in SCRIPT_GROUPS}
    seen_lines = set()

    def add_script_docs(text):
        for group, doc in script_docs(text, args.script_min, seen_lines):
            scripts[group].add(doc)

    for path in wet:
        for headers, body in wet_records(path):
            if headers.get("warc-type") != "conversion":
                continue
            text = body.decode("utf-8", "replace")
            add_script_docs(text)
            stats = letter_stats(text)
            letters, non_ascii, _ = stats
            if letters == 0:
                continue
            share = non_ascii / letters
            if share < args.ascii_max:
                english.add(text, letters=stats)
            elif share >= args.multi_min:
                multi.add(text, letters=stats)

    for path in code:
        out = subprocess.run(["zstd", "-dc", path], check=True, stdout=subprocess.PIPE).stdout
        for lineno, line in enumerate(out.split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"make_texts.py: error: {path}:{lineno}: {e}")
            text = rec.get("code")
            if isinstance(text, str):
                code_set.add(text, kinds={rec.get("language", "?"): 1})

    for path in sorted(glob.glob(os.path.join(args.corpus, "jsonl", "*.jsonl.gz"))):
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the corpus's JSONL may hold malformed lines on purpose
                if isinstance(rec, dict) and isinstance(rec.get("text"), str):
                    add_script_docs(rec["text"])
    for path in sorted(glob.glob(os.path.join(args.corpus, "wikipedia", "*.xml.bz2"))):
        with bz2.open(path, "rt", encoding="utf-8", errors="replace") as f:
            add_script_docs(f.read())

    write_long_runs(args.out)
    rows = ["set\tdocs\tbytes\tnon_ascii_letter_share\ttop_scripts_or_languages"]
    for s in (english, code_set, multi, *scripts.values()):
        s.close()
        rows.append(s.summary())
    with open(os.path.join(args.out, "texts.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
