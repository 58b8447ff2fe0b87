#!/usr/bin/env python3
"""
tests/dataprep/pretok_reference.py — check the pre-tokenization scanners of
dataprep/pretok.c against tiktoken itself.

Usage:  python3 tests/dataprep/pretok_reference.py [PATH_TO_test_pretok_BINARY] [--count N]
(under `make check`: $top_builddir/tests/dataprep/test_pretok)

For each of cl100k_base, o200k_base and r50k_base, N random texts (default 2000; a mix of
ASCII, every kind of white space and its lookalikes, letters of several scripts in every
case, marks, numbers, punctuation, emoji, U+017F, and any scalar value; runs repeated)
are split by `test_pretok --split KIND` and by tiktoken, and must give the same pieces.

How tiktoken's pieces are seen: an Encoding with the real pattern whose vocabulary holds
every substring of the texts (the single bytes first) merges each piece into ONE token —
every adjacent pair inside a piece is a substring, so BPE merges until one token is left —
and pieces never merge across, so the tokens' bytes are the pieces.

The test does not check the PCRE2 engine (tests/dataprep/test_pretok.c compares it with
the scanners): PCRE2 10.42 classifies by Unicode 14, tiktoken by Unicode 16.

Exit status: 0 pass, 1 fail, 2 usage, 77 skip (tiktoken cannot be imported).
"""
import os
import random
import subprocess
import sys
import unicodedata

try:
    import tiktoken
except ImportError as e:
    print("pretok_reference: SKIP: tiktoken cannot be imported (%s); "
          "pip install tiktoken into $PYTHON's environment" % e)
    sys.exit(77)

# The patterns as ../shared/vocab/NAME.json spell them (test_pretok checks the scanners'
# patterns against those files).
PATTERNS = {
    "cl100k": (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
               r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""),
    "o200k": (r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
              r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
              r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
              r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
              r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""),
    "r50k": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
}
ASCII_WEIGHTED = "aAzZ sSl'tTrReEvVLmMdD0123456789 \t\r\n!?.,/-_'\"()"
WHITE_SPACE_AND_LOOKALIKES = ([0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680] +
                              list(range(0x2000, 0x200B)) +
                              [0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
                               0x1C, 0x1D, 0x1E, 0x1F, 0x180E, 0x200B, 0x200D, 0xFEFF])
CATEGORIES = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Po", "So"]


def code_points_by_category():
    """Python's unicodedata (its own Unicode version; only used to draw from)."""
    cats = {c: [] for c in CATEGORIES}
    for cp in range(0x110000):
        c = unicodedata.category(chr(cp))
        if c in cats:
            cats[c].append(cp)
    return cats


def random_texts(rnd, n, cats):
    def draw():
        r = rnd.random()
        if r < 0.35:
            return rnd.choice(ASCII_WEIGHTED)
        if r < 0.45:
            return chr(rnd.choice(WHITE_SPACE_AND_LOOKALIKES))
        if r < 0.50:
            return "\u017f"
        if r < 0.85:
            return chr(rnd.choice(cats[rnd.choice(CATEGORIES)]))
        while True:
            cp = rnd.randrange(0x110000)
            if not 0xD800 <= cp <= 0xDFFF:
                return chr(cp)

    texts = []
    for _ in range(n):
        chars = []
        for _ in range(rnd.randrange(24)):
            r = rnd.random()
            if r < 0.1 and chars:
                chars += [chars[-1]] * rnd.randrange(1, 5)
            elif r < 0.2 and len(chars) >= 2:
                chars += chars[-2:]
            else:
                chars.append(draw())
        texts.append("".join(chars))
    return texts


def tiktoken_pieces(pattern, texts):
    substrings = set()
    for t in texts:
        b = t.encode()
        for i in range(len(b)):
            for j in range(i + 1, len(b) + 1):
                substrings.add(b[i:j])
    ranks = {bytes([i]): i for i in range(256)}
    for s in substrings:  # any order: a piece ends as one token whatever the ranks
        ranks.setdefault(s, len(ranks))
    enc = tiktoken.Encoding(name="pretok_reference", pat_str=pattern, mergeable_ranks=ranks,
                            special_tokens={})
    return [[enc.decode_single_token_bytes(tok) for tok in enc.encode_ordinary(t)] for t in texts]


def scanner_pieces(binary, kind, texts):
    p = subprocess.run([binary, "--split", kind], capture_output=True,
                       input="".join(t.encode().hex() + "\n" for t in texts).encode())
    if p.returncode != 0:
        raise RuntimeError("%s --split %s exited %d: %s"
                           % (binary, kind, p.returncode, p.stderr.decode(errors="replace")))
    lines = p.stdout.decode().split("\n")[:-1]
    return [[bytes.fromhex(x) for x in line.split()] for line in lines]


def main():
    args = sys.argv[1:]
    count = 2000
    if "--count" in args:
        i = args.index("--count")
        if i + 1 >= len(args):
            print("usage: pretok_reference.py [PATH_TO_test_pretok] [--count N]", file=sys.stderr)
            return 2
        count = int(args[i + 1])
        del args[i:i + 2]
    if len(args) == 1:
        binary = args[0]
    elif not args and os.environ.get("top_builddir"):
        binary = os.path.join(os.environ["top_builddir"], "tests", "dataprep", "test_pretok")
    else:
        print("usage: pretok_reference.py [PATH_TO_test_pretok] [--count N]", file=sys.stderr)
        return 2

    cats = code_points_by_category()
    failures = 0
    for seed, kind in enumerate(PATTERNS):
        texts = random_texts(random.Random(20240520 + seed), count, cats)
        want = []
        for i in range(0, len(texts), 250):
            want += tiktoken_pieces(PATTERNS[kind], texts[i:i + 250])
        got = scanner_pieces(binary, kind, texts)
        if len(got) != len(texts):
            print("FAIL: %s: %d texts in, %d lines out" % (kind, len(texts), len(got)))
            failures += 1
            continue
        bad = [(t, w, g) for t, w, g in zip(texts, want, got) if w != g]
        for t, w, g in bad[:5]:
            print("FAIL: %s splits %r\n  tiktoken: %r\n  scanner:  %r"
                  % (kind, t, [x.decode() for x in w], [x.decode() for x in g]))
        if bad:
            failures += 1
            print("FAIL: %s: %d of %d texts split differently" % (kind, len(bad), len(texts)))
        else:
            print("ok: %s: %d texts split as tiktoken splits them" % (kind, len(texts)))
    print("pretok_reference: %s (tiktoken %s)" % ("FAIL" if failures else "PASS",
                                                 tiktoken.__version__))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
