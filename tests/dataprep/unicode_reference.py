#!/usr/bin/env python3
"""
tests/dataprep/unicode_reference.py — check the class tables of dataprep/unicode.h against
tiktoken itself, for every Unicode scalar value.

Usage:  python3 tests/dataprep/unicode_reference.py [PATH_TO_unicode_dump_BINARY]
(under `make check`: $top_builddir/tests/dataprep/unicode_dump)

The trick: tiktoken drops the text its pattern does not match, so an Encoding whose
mergeable ranks are the 256 single bytes (token id = byte value) and whose pat_str is one
class, e.g. (?:\\p{L})+, encodes a text holding every scalar value (surrogates excepted)
into exactly the UTF-8 bytes of the characters of that class. That is the set Rust's regex
(through fancy-regex, as tiktoken compiles its patterns) puts in the class; it is compared
with the bit of the class byte that unicode_dump prints for every code point.

Also checked, because dataprep/pretok.c relies on it: under (?i) the letters of the
contractions ('s 't 're 've 'm 'll 'd) match only their two ASCII cases, plus U+017F
LATIN SMALL LETTER LONG S for s; and CR, LF are in \\s.

Exit status: 0 pass, 1 fail, 2 usage, 77 skip (tiktoken cannot be imported).
"""
import os
import subprocess
import sys

try:
    import tiktoken
except ImportError as e:
    print("unicode_reference: SKIP: tiktoken cannot be imported (%s); "
          "pip install tiktoken into $PYTHON's environment" % e)
    sys.exit(77)

MAX_CP = 0x10FFFF
# (bit of dataprep/unicode.h, name, the class as tiktoken's regex spells it)
CLASSES = [
    (0x01, "LT_UC_L", r"\p{L}"),
    (0x02, "LT_UC_N", r"\p{N}"),
    (0x04, "LT_UC_M", r"\p{M}"),
    (0x08, "LT_UC_WS", r"\s"),
    (0x10, "LT_UC_UP", r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"),
    (0x20, "LT_UC_LO", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"),
]
ALL_SCALARS = "".join(chr(cp) for cp in range(MAX_CP + 1) if not 0xD800 <= cp <= 0xDFFF)


def tiktoken_set(pattern, text=ALL_SCALARS):
    """The set of code points of `text` that `pattern` (a single-character class) matches."""
    enc = tiktoken.Encoding(
        name="unicode_reference",
        pat_str="(?:%s)+" % pattern,
        mergeable_ranks={bytes([i]): i for i in range(256)},
        special_tokens={},
    )
    matched = bytes(enc.encode_ordinary(text)).decode("utf-8")
    return {ord(c) for c in matched}


def main():
    if len(sys.argv) > 2:
        print("usage: python3 tests/dataprep/unicode_reference.py [PATH_TO_unicode_dump]",
              file=sys.stderr)
        return 2
    if len(sys.argv) == 2:
        dump = sys.argv[1]
    elif os.environ.get("top_builddir"):
        dump = os.path.join(os.environ["top_builddir"], "tests", "dataprep", "unicode_dump")
    else:
        print("unicode_reference: error: no unicode_dump binary (pass its path or set "
              "top_builddir)", file=sys.stderr)
        return 2
    p = subprocess.run([dump], capture_output=True)
    if p.returncode != 0 or len(p.stdout) != MAX_CP + 1:
        print("unicode_reference: FAIL: %s exited %d with %d bytes (want %d): %s"
              % (dump, p.returncode, len(p.stdout), MAX_CP + 1, p.stderr.decode(errors="replace")))
        return 1
    table = p.stdout
    failures = 0

    for bit, name, pattern in CLASSES:
        want = tiktoken_set(pattern)
        have = {cp for cp in range(MAX_CP + 1) if table[cp] & bit}
        missing = sorted(want - have)   # tiktoken's class has it, the table does not
        extra = sorted(have - want)     # the table has it, tiktoken's class does not
        if missing or extra:
            failures += 1
            print("FAIL: %s (%s): %d code points missing from the table, %d extra"
                  % (name, pattern, len(missing), len(extra)))
            for label, cps in (("missing", missing), ("extra", extra)):
                if cps:
                    print("  first %s: %s" % (label, " ".join("U+%04X" % cp for cp in cps[:20])))
        else:
            print("ok: %s (%s): %d code points agree with tiktoken" % (name, pattern, len(want)))

    # The case folds pretok.c's contraction matcher assumes.
    before = failures
    for letter in "strvmld":
        want = {ord(letter), ord(letter.upper())} | ({0x17F} if letter == "s" else set())
        got = tiktoken_set("(?i:%s)" % letter)
        if got != want:
            failures += 1
            print("FAIL: (?i:%s) matches %s, pretok.c assumes %s"
                  % (letter, sorted("U+%04X" % c for c in got), sorted("U+%04X" % c for c in want)))
    crlf = tiktoken_set(r"\s", "\r\n")
    if crlf != {0x0D, 0x0A}:
        failures += 1
        print("FAIL: CR and LF are not both in \\s")
    if failures == before:
        print("ok: contraction case folds (s: s S U+017F; t r v m l d: ASCII cases only); "
              "CR, LF in \\s")

    print("unicode_reference: %s (tiktoken %s)" % ("FAIL" if failures else "PASS",
                                                  tiktoken.__version__))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
