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
3. Document parser: random JSON documents (any top-level value; objects with duplicate
   names; random indentation and blanks; ensure_ascii on and off; lone surrogate escapes;
   raw invalid UTF-8; optional BOM; and random truncations and single-byte mutations of
   all of these) go, hex-encoded one per line, to `test_json --parse-json`. For each the C
   result must match Python: reject exactly the documents json.loads rejects (after a
   leading BOM is skipped), with "line L, column C" naming a byte of the document;
   otherwise the tree written back by C equals Python's (member order and duplicates
   kept, numbers compared as their literal text, unpaired surrogates as U+FFFD), every
   number's lt_jv_int64 equals an exact integer check in Python, and the root's
   replacement count equals Python's U+FFFD substitutions plus unpaired surrogates.

Exit status: 0 pass, 1 fail, 2 usage.
"""
import codecs
import json
import math
import re
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


# ---------------------------------------------------------------- document check

class Num(tuple):
    """a number as its literal text (json.loads parse_int / parse_float hook)"""


def num_hook(text):
    return Num(("num", text))


DECODE_ERRORS = [0]


def count_replace(exc):
    DECODE_ERRORS[0] += 1
    return ("\ufffd", exc.end)


codecs.register_error("lt_count_replace", count_replace)

NUMBER_RE = re.compile(r"(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([-+]?[0-9]+))?\Z")


def exact_int64(literal):
    """the integer value of a JSON number literal if it is an integer in int64 range"""
    m = NUMBER_RE.match(literal)
    sign, ip, fp, ep = m.group(1), m.group(2), m.group(3) or "", m.group(4) or "0"
    digits = int(ip + fp)
    exp = int(ep) - len(fp)  # value = digits * 10^exp
    if digits == 0:
        return 0
    if exp >= 0:
        if exp > 40:
            return None
        v = digits * 10 ** exp
    else:
        if -exp > len(str(digits)) or digits % 10 ** (-exp) != 0:
            return None
        v = digits // 10 ** (-exp)
    if sign:
        v = -v
    return v if -(1 << 63) <= v < (1 << 63) else None


def fix_tree(v, stats):
    """unpaired surrogates -> U+FFFD (counted), and every number's int64 in document order"""
    if isinstance(v, Num):
        stats["ints"].append(exact_int64(v[1]))
        return v
    if isinstance(v, str):
        stats["surrogates"] += sum(1 for c in v if 0xD800 <= ord(c) <= 0xDFFF)
        return fix_surrogates(v)
    if isinstance(v, Obj):
        return Obj((fix_tree(k, stats), fix_tree(val, stats)) for k, val in v)
    if isinstance(v, list):
        return [fix_tree(x, stats) for x in v]
    return v


def expected_document(doc_bytes):
    """('ERR',) | ('OK', tree, int64s, replacements)"""
    b = doc_bytes[3:] if doc_bytes.startswith(b"\xef\xbb\xbf") else doc_bytes
    DECODE_ERRORS[0] = 0
    text = b.decode("utf-8", errors="lt_count_replace")
    try:
        v = json.loads(text, object_pairs_hook=Obj, parse_constant=no_constants, parse_int=num_hook,
                       parse_float=num_hook)
    except (ValueError, RecursionError):
        return ("ERR",)
    stats = {"ints": [], "surrogates": 0}
    tree = fix_tree(v, stats)
    return ("OK", tree, stats["ints"], DECODE_ERRORS[0] + stats["surrogates"])


def where_in_text(where, doc_bytes):
    m = re.match(r"line (\d+), column (\d+)\Z", where)
    if not m:
        return False
    lines = doc_bytes.split(b"\n")
    line, col = int(m.group(1)), int(m.group(2))
    return 1 <= line <= len(lines) and 1 <= col <= len(lines[line - 1]) + 1


class Lit(str):
    """a number literal, written as is"""


def rand_doc_value(rnd, depth=0):
    k = rnd.randrange(10 if depth < 5 else 6)
    if k == 0:
        return Lit(rnd.choice(["0", "-0", "1e3", "1.5", "9223372036854775807", "-9223372036854775808",
                           "9223372036854775808", "1E+2", "100e-2", "-1.0", "12345678901234567890123",
                           "1e400", "2.5e-3", "0.0e0", "1e-400", "-9.223372036854775808e18"]))
    if k == 5:
        return rand_str(rnd)
    if k >= 8:  # an object, maybe with duplicate names
        pairs = Obj()
        for _ in range(rnd.randrange(5)):
            name = rand_str(rnd) if not pairs or rnd.random() < 0.7 else rnd.choice(pairs)[0]
            pairs.append((name, rand_doc_value(rnd, depth + 1)))
        return pairs
    if k >= 6:
        return [rand_doc_value(rnd, depth + 1) for _ in range(rnd.randrange(5))]
    return rand_value(rnd, depth + 3)  # a scalar


def dump_doc(v, rnd, indent, ensure_ascii, level=0):
    """json.dumps-like, keeping duplicate names, literal numbers and random blanks"""
    def blank():
        return rnd.choice(["", "", " ", "\n", "\t", "\r\n", "  \n  "])
    pad = "" if indent is None else "\n" + indent * (level + 1)
    end = "" if indent is None else "\n" + indent * level
    if isinstance(v, Obj):
        if not v:
            return "{" + blank() + "}"
        return "{" + ",".join(pad + json.dumps(k, ensure_ascii=ensure_ascii) + blank() + ":" + blank() +
                              dump_doc(x, rnd, indent, ensure_ascii, level + 1) for k, x in v) + end + "}"
    if isinstance(v, list):
        if not v:
            return "[" + blank() + "]"
        return "[" + ",".join(pad + blank() + dump_doc(x, rnd, indent, ensure_ascii, level + 1) + blank()
                              for x in v) + end + "]"
    if isinstance(v, Lit):
        return str(v)
    return json.dumps(v, ensure_ascii=ensure_ascii)


def rand_document(rnd):
    if rnd.random() < 0.2:  # any value at the top
        v = rand_doc_value(rnd)
    else:  # a config-like object
        v = Obj((rand_str(rnd), rand_doc_value(rnd, 1)) for _ in range(rnd.randrange(1, 6)))
    indent = rnd.choice([None, None, "", " ", "  ", "\t"])
    b = to_bytes(rnd.choice(["", " ", "\n"]) + dump_doc(v, rnd, indent, rnd.random() < 0.5) +
                 rnd.choice(["", "\n", " \r\n"]))
    r = rnd.random()
    if r < 0.1:
        b = b"\xef\xbb\xbf" + b
    elif r < 0.2:  # raw invalid UTF-8 in a string
        junk = bytes(rnd.choice([0xFF, 0x80, 0xC0, 0xE0, 0xED, 0xF0, 0xF4, 0xA0, 0x9F])
                     for _ in range(rnd.randrange(1, 5)))
        b = b'{"a":[1,"x' + junk + b'y"],"k' + junk + b'":"\\u00e9' + junk + b'"}'
    r = rnd.random()
    if r < 0.1 and b:  # truncated
        b = b[:rnd.randrange(len(b))]
    elif r < 0.4 and b:  # one byte mutated
        pos = rnd.randrange(len(b))
        op = rnd.randrange(3)
        byte = rnd.choice(b'{}[]",:\\ 0-eE.tfnu\x00\n\xff') if rnd.random() < 0.8 else rnd.randrange(256)
        if op == 0:
            b = b[:pos] + b[pos + 1:]
        elif op == 1:
            b = b[:pos] + bytes([byte]) + b[pos:]
        else:
            b = b[:pos] + bytes([byte]) + b[pos + 1:]
    return b


def check_document(binary, count, failures):
    rnd = random.Random(7159)
    docs = [rand_document(rnd) for _ in range(count)]
    docs += [b"", b"\xef\xbb\xbf", b"\xef\xbb\xbf\xef\xbb\xbf{}", b" 42 ", b'"\\ud83d"', b'"\\ud83d\\ude00"',
             b'{"a":1,"a":2}', b"[1,]", b"{} {}", b"NaN", b"-Infinity", b"[1e999]", b'"\xed\xa0\x80"',
             b'{"\\u0000":"\\u0000"}', b"0", b"-", b"[" * 100 + b"]" * 100, b'{"a"\n:\n1\n,\n"b":[\n]\n}']
    out = run(binary, ["--parse-json"], b"".join(d.hex().encode() + b"\n" for d in docs))
    results = out.decode("utf-8", errors="replace").split("\n")
    stats = {"OK": 0, "ERR": 0}
    for i, doc in enumerate(docs):
        got = results[i] if i < len(results) else "<missing>"
        want = expected_document(doc)
        stats[want[0]] += 1
        if want[0] == "ERR":
            m = re.match(r"ERR input (line \d+, column \d+): ", got)
            ok = m is not None and where_in_text(m.group(1), doc)
        elif not got.startswith("OK "):
            ok = False
        else:
            tree, ints, repl = json.loads(got[3:], object_pairs_hook=Obj, parse_int=num_hook, parse_float=num_hook)
            ints = [None if x is None else int(x[1]) for x in ints]
            ok = (tree, ints, int(repl[1])) == want[1:]
        if not ok:
            failures.append("document %d %r:\n    C: %s\n    Python: %r" % (i, doc[:200], got[:300], want[:1] + tuple(
                str(x)[:300] for x in want[1:])))
    print("json_reference: %d documents compared with json.loads (%d parsed, %d rejected)"
          % (len(docs), stats["OK"], stats["ERR"]))


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
    check_document(binary, count, failures)
    if failures:
        for f in failures[:20]:
            print(f)
        print("json_reference: FAIL (%d mismatches)" % len(failures))
        return 1
    print("json_reference: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
