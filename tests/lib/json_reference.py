#!/usr/bin/env python3
"""
tests/lib/json_reference.py — check lib/json.c against Python's json module.

Usage:  python3 tests/lib/json_reference.py PATH_TO_test_json_BINARY [--count N]

1. Writer: `test_json --dump-json N SEED` writes N JSON lines built from random byte
   strings. Each must parse with json.loads (strict: no NaN/Infinity tokens, no raw control
   characters), its "s" must equal bytes.fromhex(hex).decode("utf-8", "replace"), "d" must be
   bit-identical to the double in "dbits" (or null when that is NaN/Inf), and the text must
   contain no raw U+2028/U+2029.
2. Reader: random JSON lines (json.dumps with ensure_ascii on and off, escaped/duplicate/
   nested keys, lone surrogate escapes, raw invalid UTF-8, wrong value types, and random
   single-byte mutations of all of these) go to `test_json --read-jsonl text`. For each line
   the C result must match Python: reject exactly the lines Python rejects (or whose top
   level is not an object, or whose first "text" member is not a string), report ABSENT
   when there is no top-level "text", else return the FIRST top-level "text" value as UTF-8
   with unpaired surrogates replaced by U+FFFD. Python decodes the line bytes with
   errors="replace" first, which is the C reader's maximal-subpart rule.

Exit status: 0 pass, 1 fail, 2 usage.
"""
import json
import math
import random
import struct
import subprocess
import os
import sys


class Obj(list):
    """pairs of a JSON object, in order (first-wins lookups, duplicates kept)"""


def no_constants(name):
    raise ValueError("non-standard constant " + name)


def py_parse(line_bytes):
    text = line_bytes.decode("utf-8", errors="replace")
    return json.loads(text, object_pairs_hook=Obj, parse_constant=no_constants)


def fix_surrogates(s):
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s)


def expected_reader(line_bytes, key):
    """('ERR',) | ('ABSENT',) | ('OK', bytes)"""
    try:
        v = py_parse(line_bytes)
    except (ValueError, RecursionError):
        return ("ERR",)
    if not isinstance(v, Obj):
        return ("ERR",)
    for k, val in v:
        if k == key:
            if not isinstance(val, str):
                return ("ERR",)
            return ("OK", fix_surrogates(val).encode("utf-8"))
    return ("ABSENT",)


def run(binary, args, stdin_bytes=b""):
    p = subprocess.run([binary] + args, input=stdin_bytes, capture_output=True)
    if p.returncode != 0:
        raise RuntimeError("%s %s exited %d: %s" % (binary, " ".join(args), p.returncode, p.stderr.decode(errors="replace")))
    return p.stdout


# ---------------------------------------------------------------- writer check

def check_writer(binary, count, failures):
    out = run(binary, ["--dump-json", str(count), "20240601"])
    lines = out.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) != count:
        failures.append("writer: expected %d lines, got %d" % (count, len(lines)))
        return
    for i, raw in enumerate(lines):
        try:
            text = raw.decode("utf-8")  # strict: the writer must emit valid UTF-8
        except UnicodeDecodeError as e:
            failures.append("writer line %d: invalid UTF-8 output: %s" % (i, e))
            continue
        if "\u2028" in text or "\u2029" in text:
            failures.append("writer line %d: raw U+2028/U+2029" % i)
        try:
            obj = json.loads(text, parse_constant=no_constants)
        except ValueError as e:
            failures.append("writer line %d: json.loads failed: %s: %r" % (i, e, text[:200]))
            continue
        want = bytes.fromhex(obj["hex"]).decode("utf-8", errors="replace")
        if obj["s"] != want:
            failures.append("writer line %d: s=%r, want %r" % (i, obj["s"], want))
        d = struct.unpack("<d", bytes.fromhex(obj["dbits"])[::-1])[0]
        if math.isfinite(d):
            if not isinstance(obj["d"], (int, float)) or struct.pack("<d", float(obj["d"])) != struct.pack("<d", d):
                failures.append("writer line %d: d=%r, want %r" % (i, obj["d"], d))
        elif obj["d"] is not None:
            failures.append("writer line %d: non-finite written as %r" % (i, obj["d"]))
        nested = obj["nested"]
        if list(nested[0].keys()) != [want] or nested[1] is not None or nested[2] != []:
            failures.append("writer line %d: nested=%r" % (i, nested))
        if not (-(1 << 63) <= obj["i"] < (1 << 63)) or not (0 <= obj["u"] < (1 << 64)):
            failures.append("writer line %d: integers out of range" % i)
    print("json_reference: %d writer lines validated by json.loads" % len(lines))


# ---------------------------------------------------------------- reader check

def rand_str(rnd):
    pieces = ["a", "Z", " ", "\"", "\\", "/", "\n", "\t", "\x00", "\x1f", "\x7f", "\u00e9", "\u20ac",
              "\U0001F600", "\u2028", "\ufffd", "\ud800", "\udc00", "\udbff", "text"]
    return "".join(rnd.choice(pieces) if rnd.random() < 0.5 else chr(rnd.randrange(0x20, 0x7F))
                   for _ in range(rnd.randrange(12)))


def rand_value(rnd, depth=0):
    k = rnd.randrange(9 if depth < 4 else 6)
    if k == 0:
        return rand_str(rnd)
    if k == 1:
        return rnd.randrange(-10**20, 10**20)
    if k == 2:
        return rnd.choice([0.0, -0.0, 1.5, -2.25e-300, 1e300, rnd.random()])
    if k == 3:
        return rnd.choice([True, False])
    if k == 4:
        return None
    if k == 5:
        return rand_str(rnd)
    if k in (6, 7):
        return [rand_value(rnd, depth + 1) for _ in range(rnd.randrange(4))]
    return {rand_str(rnd): rand_value(rnd, depth + 1) for _ in range(rnd.randrange(4))}


def dumps(v, rnd):
    ensure_ascii = rnd.random() < 0.5
    sep = rnd.choice([(",", ":"), (", ", ": "), (" ,\t", " :\r\n ")])
    return json.dumps(v, ensure_ascii=ensure_ascii, separators=sep)


def to_bytes(text):
    # lone surrogates from ensure_ascii=False become raw ED xx xx bytes (invalid UTF-8)
    return text.encode("utf-8", errors="surrogatepass")


def rand_line(rnd):
    kind = rnd.randrange(10)
    members = []
    for _ in range(rnd.randrange(5)):
        members.append((rand_str(rnd), rand_value(rnd)))
    if kind < 6:  # the key, somewhere, maybe duplicated, maybe not a string
        val = rand_str(rnd) if rnd.random() < 0.85 else rand_value(rnd)
        members.insert(rnd.randrange(len(members) + 1), ("text", val))
        if rnd.random() < 0.2:
            members.insert(rnd.randrange(len(members) + 1), ("text", rand_value(rnd)))
    parts = []
    for k, v in members:
        ks = dumps(k, rnd)
        if k == "text" and rnd.random() < 0.3:
            ks = '"te\\u0078t"'
        parts.append(ks + rnd.choice([":", " : "]) + dumps(v, rnd))
    line = rnd.choice(["{", " {", "{ "]) + rnd.choice([",", " , "]).join(parts) + rnd.choice(["}", "} ", "}\r"])
    b = to_bytes(line)
    if kind == 6:  # not an object at top level
        b = to_bytes(dumps(rand_value(rnd), rnd))
    if kind == 7:  # raw invalid UTF-8 inside the value
        junk = bytes(rnd.choice([0xFF, 0x80, 0xC0, 0xE0, 0xED, 0xF0, 0xF4, 0xA0, 0x9F]) for _ in range(rnd.randrange(1, 5)))
        b = b'{"a":1,"text":"x' + junk + b'y\\u00e9' + junk + b'"}'
    if rnd.random() < 0.35:  # mutate one byte
        if not b:
            b = b"{"
        pos = rnd.randrange(len(b))
        op = rnd.randrange(3)
        byte = rnd.choice(b'{}[]",:\\ 0-eE.tfnu\x00\n\xff') if rnd.random() < 0.8 else rnd.randrange(256)
        if op == 0:
            b = b[:pos] + b[pos + 1:]
        elif op == 1:
            b = b[:pos] + bytes([byte]) + b[pos:]
        else:
            b = b[:pos] + bytes([byte]) + b[pos + 1:]
    return b.replace(b"\n", b" ") if kind != 8 else b.replace(b"\n", b"\\n")


def check_reader(binary, count, failures):
    rnd = random.Random(8259)
    lines = [rand_line(rnd) for _ in range(count)]
    # fixed cases too
    lines += [b'{"text":"\\ud83d\\ude00"}', b'{"text":"\\ud83d\\ud83d\\ude00"}', b'{"text":"\xed\xa0\x80"}',
              b'{"text":"a","text":"b"}', b'{"text":1,"text":"b"}', b'{"meta":{"text":"x"}}', b"[]", b"",
              b'{"text":"\\u0000"}', b'{"text":NaN}', b'{"text":"x"} {}', b'{"a":[1,2,]}']
    out = run(binary, ["--read-jsonl", "text"], b"".join(line + b"\n" for line in lines))
    results = out.decode("utf-8", errors="replace").split("\n")
    stats = {"OK": 0, "ABSENT": 0, "ERR": 0}
    for i, line in enumerate(lines):
        got = results[i] if i < len(results) else "<missing>"
        want = expected_reader(line, "text")
        stats[want[0]] += 1
        ok = False
        if want[0] == "ERR":
            ok = got.startswith("ERR input ")
        elif want[0] == "ABSENT":
            ok = got == "ABSENT"
        else:
            ok = got == "OK " + want[1].hex()
        if not ok:
            failures.append("reader line %d %r:\n    C: %s\n    Python: %s" % (i, line[:200], got[:200], want))
    print("json_reference: %d reader lines compared with json.loads (%d values, %d absent, %d rejected)"
          % (len(lines), stats["OK"], stats["ABSENT"], stats["ERR"]))


def main():
    # Under `make check` (automake runs the script without arguments) the binary is the
    # one in the build tree: $top_builddir/tests/lib/test_json.
    if len(sys.argv) >= 2:
        binary = sys.argv[1]
    elif os.environ.get("top_builddir"):
        binary = os.path.join(os.environ["top_builddir"], "tests", "lib", "test_json")
    else:
        print("usage: python3 tests/lib/json_reference.py PATH_TO_test_json_BINARY", file=sys.stderr)
        return 2
    count = 5000
    if len(sys.argv) >= 4 and sys.argv[2] == "--count":
        count = int(sys.argv[3])
    failures = []
    check_writer(binary, count, failures)
    check_reader(binary, count, failures)
    if failures:
        for f in failures[:20]:
            print(f)
        print("json_reference: FAIL (%d mismatches)" % len(failures))
        return 1
    print("json_reference: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
