#!/usr/bin/env python3
"""
tests/dataprep/parquet_reference.py — the Parquet reader (dataprep/reader_parquet.c,
dataprep/parquet.c) against pyarrow, which writes the files and reads back the values.

Usage:  python3 tests/dataprep/parquet_reference.py [--keep]
Environment: top_builddir, top_srcdir (set by `make check`); LONGTAIL_DATAPREP (default
$top_builddir/dataprep/dataprep); LONGTAIL_PARQUET_DUMP (default
$top_builddir/tests/dataprep/parquet_dump, which prints the reader's documents as JSONL).

Checks:
  matrix      pyarrow files with several row groups and several pages per column chunk,
              data pages v1 and v2, dictionary on and off (and a dictionary that falls back
              to PLAIN mid-chunk), compression none/snappy/zstd/gzip, nulls, empty strings,
              non-ASCII, a value over 1 MiB: every document equals pyarrow's value of that
              row (id row=N, 1-based), every null is a null_value skip naming the row; read
              from the file and from memory (lt_reader_open_mem); a REQUIRED column; a
              binary column with invalid UTF-8 (repaired as Python's errors="replace")
              (dictionary indices of 10+ bits, values of a few KiB in page statistics)
  row groups  lt_parquet_row_groups gives pyarrow's counts; rg_begin/rg_end ranges give
              exactly pyarrow's rows of those groups, numbered file-wide, and the ranges
              [0,k) + [k,n) give the whole file
  columns     a missing column names the columns there are with a hint; a nested, a list
              and an integer column are refused with a message saying so
  damage      truncated files, wrong magic, a bad footer length, a gzip'd whole, bytes
              flipped in the footer and in the pages: exit 1 with an error naming the file
              (flips may also read fine), never a crash or a sanitizer report
  run         `dataprep run` + `dataprep cat` on a file (format forced and auto-detected):
              the decoded documents equal pyarrow's values; a damaged file exits 1

Exit status: 0 pass, 1 fail, 77 skip (pyarrow not importable).
"""
import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

VENV_PYTHON = os.path.expanduser("~/.local/share/longtail/venv/bin/python3")
PROG = "parquet_reference"

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:
    if (os.path.exists(VENV_PYTHON) and os.path.abspath(sys.executable) != VENV_PYTHON
            and not os.environ.get("LONGTAIL_PYARROW_REEXEC")):
        os.environ["LONGTAIL_PYARROW_REEXEC"] = "1"
        os.execv(VENV_PYTHON, [VENV_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    print(PROG + ": SKIP: pyarrow is not importable by " + sys.executable)
    sys.exit(77)

SRCDIR = os.environ.get("top_srcdir") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BUILDDIR = os.environ.get("top_builddir") or SRCDIR
DATAPREP = os.environ.get("LONGTAIL_DATAPREP") or os.path.join(BUILDDIR, "dataprep", "dataprep")
DUMP = os.environ.get("LONGTAIL_PARQUET_DUMP") or os.path.join(BUILDDIR, "tests", "dataprep", "parquet_dump")
VOCAB = os.path.join(SRCDIR, "data", "vocab")
SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "Segmentation fault", "internal check failed")

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, flush=True)


def check(cond, msg):
    if not cond:
        fail(msg)
    return cond


def run_cmd(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def no_crash(rc, err, what):
    return check(rc in (0, 1, 2) and not any(m in err for m in SANITIZER_MARKS),
                 "%s: crashed (exit %d)\n%s" % (what, rc, err[-2000:]))


def dump(path, *args):
    """The reader's documents, skips and stats for `path`: (rc, docs, skips, stats, stderr)."""
    rc, out, err = run_cmd([DUMP, path] + list(args))
    docs, skips, stats = [], [], None
    for line in out.decode("utf-8").splitlines():
        o = json.loads(line)
        if "skip" in o:
            skips.append(o)
        elif "stats" in o:
            stats = o["stats"]
        else:
            docs.append(o)
    return rc, docs, skips, stats, err


# ------------------------------------------------------------------ the files

LONG = "long \u00e9\u4e2d " * 150000  # about 1.6 MB of UTF-8
assert len(LONG.encode()) > (1 << 20)


def make_table(n_rows, seed):
    rnd = random.Random(seed)
    words = ["hello world", "", "caf\u00e9 \u2615 \u4e2d\u6587 \U0001d11e", "x = 1\n", "tab\tand \"quotes\"",
             "\u0000nul inside", "same", "same", "same"]
    text, code, blob = [], [], []
    for i in range(n_rows):
        r = rnd.random()
        if r < 0.15:
            text.append(None)
        elif r < 0.6:
            text.append(rnd.choice(words))
        else:
            text.append("row %d: %s" % (i, "".join(rnd.choice("ab\u00e9\u4e2d ") for _ in range(rnd.randrange(60)))))
        code.append("def f%d(): return %d" % (i % 7, i))
        blob.append(bytes([0xff, 0xfe]) + b"ok" if i % 5 == 0 else b"fine %d" % i)
    text[n_rows // 2] = LONG
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("text", pa.string()),
                        pa.field("code", pa.string(), nullable=False), pa.field("blob", pa.binary())])
    return pa.table({"id": list(range(n_rows)), "text": text, "code": code, "blob": blob}, schema=schema)


def expected(path, field):
    """pyarrow's values of `field`, row by row, as the reader should give them."""
    vals = pq.read_table(path, columns=[field]).column(field).to_pylist()
    out = []
    for v in vals:
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        out.append(v)
    return out


def write_expected_jsonl(path, field):
    with open(path + "." + field + ".expected.jsonl", "w", encoding="utf-8") as f:
        for i, v in enumerate(expected(path, field)):
            f.write(json.dumps({"row": i + 1, "text": v}) + "\n")


def compare(path, field, got_docs, skips, stats, rows=None, what=""):
    """Documents of the rows `rows` (0-based, default all) against pyarrow."""
    vals = expected(path, field)
    if rows is None:
        rows = range(len(vals))
    want_docs = [("row=%d" % (i + 1), vals[i]) for i in rows if vals[i] is not None]
    want_nulls = [i + 1 for i in rows if vals[i] is None]
    name = "%s [%s]%s" % (os.path.basename(path), field, what)
    got = [(d["id"], d["text"]) for d in got_docs]
    if not check(len(got) == len(want_docs), "%s: %d documents, pyarrow has %d non-null values" %
                 (name, len(got), len(want_docs))):
        return
    for (gid, gtext), (wid, wtext) in zip(got, want_docs):
        if not check(gid == wid and gtext == wtext, "%s: document %s (%r...) != pyarrow's %s (%r...)" %
                     (name, gid, gtext[:60], wid, wtext[:60])):
            return
    check([s["skip"] for s in skips] == ["null_value"] * len(want_nulls), "%s: skips %r" % (name, skips[:5]))
    check([s["where"] for s in skips] == ["%s: row %d" % (path, r) for r in want_nulls],
          "%s: null skips name the wrong rows: %r" % (name, [s["where"] for s in skips][:5]))
    check(stats is not None and stats["records"] == len(rows) and stats["null_value"] == len(want_nulls),
          "%s: stats %r" % (name, stats))


def test_matrix(tmp):
    files = []
    table = make_table(83, 1)
    for version in ("1.0", "2.0"):
        for dictionary in (True, False):
            for comp in ("none", "snappy", "zstd", "gzip"):
                path = os.path.join(tmp, "m_v%s_%s_%s.parquet" % (version[0], "dict" if dictionary else "plain", comp))
                pq.write_table(table, path, row_group_size=20, data_page_size=300, write_batch_size=5,
                               data_page_version=version, use_dictionary=dictionary, compression=comp,
                               dictionary_pagesize_limit=400)
                files.append(path)
    for path in files:
        write_expected_jsonl(path, "text")
        rc, docs, skips, stats, err = dump(path, "--field", "text")
        if check(rc == 0, "%s: exit %d\n%s" % (path, rc, err[-2000:])):
            compare(path, "text", docs, skips, stats)
            check(all(d["record"] == int(d["id"][4:]) for d in docs), "%s: record != row" % path)
    # from memory, the REQUIRED column, the binary one, on a few of them
    for path in files[::3]:
        rc, docs, skips, stats, err = dump(path, "--field", "text", "--mem")
        if check(rc == 0, "%s --mem: exit %d\n%s" % (path, rc, err[-2000:])):
            compare(path, "text", docs, skips, stats, what=" (memory)")
        rc, docs, skips, stats, err = dump(path, "--field", "code")
        if check(rc == 0, "%s code: exit %d\n%s" % (path, rc, err[-2000:])):
            compare(path, "code", docs, skips, stats)
        rc, docs, skips, stats, err = dump(path, "--field", "blob")
        if check(rc == 0, "%s blob: exit %d\n%s" % (path, rc, err[-2000:])):
            compare(path, "blob", docs, skips, stats)
            want = sum(v.count("\ufffd") for v in expected(path, "blob") if v is not None)
            check(want > 0 and sum(d["repl"] for d in docs) == want, "%s blob: invalid UTF-8 not counted" % path)
    # the cap: the long value cut at a UTF-8 boundary
    rc, docs, _, _, err = dump(files[0], "--field", "text", "--max-doc", "1001")
    long_docs = [d for d in docs if d["truncated"]]
    if check(rc == 0 and len(long_docs) >= 1, "%s --max-doc: %d truncated (exit %d)" % (files[0], len(long_docs), rc)):
        d = [d for d in long_docs if d["orig_bytes"] == len(LONG.encode())]
        check(len(d) == 1 and LONG.encode()[:1001].decode("utf-8", "ignore") == d[0]["text"],
              "the long value is not cut at the last UTF-8 boundary before the cap")
    print("matrix: %d files" % len(files), flush=True)
    return files


def test_big_dictionary(tmp):
    """Dictionary indices of 10+ bits, values of a few KiB (page statistics that make long
    page headers), default page and row group sizes, several pages per chunk."""
    rnd = random.Random(3)
    distinct = ["v%d %s" % (i, "\u00e9" * rnd.randrange(30)) for i in range(1500)]
    distinct += ["long %d " % i + "z" * rnd.randrange(1000, 4000) for i in range(20)]
    vals = [None if rnd.random() < 0.05 else rnd.choice(distinct) for _ in range(30000)]
    table = pa.table({"text": pa.array(vals, pa.string())})
    for version in ("1.0", "2.0"):
        for comp in ("snappy", "none"):
            path = os.path.join(tmp, "bigdict_v%s_%s.parquet" % (version[0], comp))
            pq.write_table(table, path, data_page_version=version, compression=comp, row_group_size=12000,
                           data_page_size=16384)
            rc, docs, skips, stats, err = dump(path, "--field", "text")
            if check(rc == 0, "%s: exit %d\n%s" % (path, rc, err[-2000:])):
                compare(path, "text", docs, skips, stats)
    print("big dictionary: ok", flush=True)


def test_row_groups(tmp, files):
    for path in (files[0], files[5]):
        md = pq.ParquetFile(path).metadata
        n, rows = md.num_row_groups, md.num_rows
        rc, out, err = run_cmd([DUMP, path, "--row-groups"])
        check(rc == 0 and out.decode().split() == [str(n), str(rows)],
              "%s --row-groups: %r (pyarrow: %d %d) %s" % (path, out, n, rows, err))
        check(n >= 4, "%s: want several row groups, pyarrow wrote %d" % (path, n))
        starts = [0]
        for g in range(n):
            starts.append(starts[-1] + md.row_group(g).num_rows)
        for g in range(n):
            rc, docs, skips, stats, err = dump(path, "--field", "text", "--rg", str(g), str(g + 1))
            if check(rc == 0, "%s --rg %d: exit %d %s" % (path, g, rc, err)):
                compare(path, "text", docs, skips, stats, rows=range(starts[g], starts[g + 1]), what=" rg %d" % g)
        for k in range(n + 1):
            a, sa = [], []  # --rg 0 0 means the whole file (rg_end 0)
            if k > 0:
                _, a, sa, _, _ = dump(path, "--field", "text", "--rg", "0", str(k))
            _, b, sb, _, _ = dump(path, "--field", "text", "--rg", str(k), "0")
            _, full, sf, _, _ = dump(path, "--field", "text")
            check(a + b == full and sa + sb == sf, "%s: [0,%d) + [%d,end) != the whole file" % (path, k, k))
        rc, _, _, _, err = dump(path, "--field", "text", "--rg", "1", str(n + 1))
        check(rc == 1 and "row groups 1..%d asked for, the file has %d" % (n + 1, n) in err,
              "a range past the last row group: exit %d %s" % (rc, err))
    # an empty table: no row group, no document
    path = os.path.join(tmp, "empty.parquet")
    pq.write_table(make_table(10, 2).slice(0, 0), path)
    rc, out, err = run_cmd([DUMP, path, "--row-groups"])
    md = pq.ParquetFile(path).metadata
    check(rc == 0 and out.decode().split() == [str(md.num_row_groups), "0"], "empty.parquet --row-groups: %r %s" % (out, err))
    rc, docs, skips, stats, err = dump(path, "--field", "text")
    check(rc == 0 and docs == [] and stats["records"] == 0, "empty.parquet: exit %d %r %s" % (rc, docs, err))
    print("row groups: ok", flush=True)


def test_columns(tmp):
    path = os.path.join(tmp, "cols.parquet")
    t = pa.table({"id": pa.array([1, 2], pa.int64()), "code": ["a", "b"], "repo_name": ["r", "s"],
                  "meta": pa.array([{"a": "x"}, {"a": "y"}]), "tags": pa.array([["t"], []], pa.list_(pa.string()))})
    pq.write_table(t, path)
    rc, _, _, _, err = dump(path, "--field", "text")
    check(rc == 1 and "no column 'text'" in err and "columns are: id, code, repo_name, meta, tags" in err
          and "hint: set field = code" in err and path in err, "missing column: exit %d\n%s" % (rc, err))
    for field, words in (("meta", "nested group"), ("tags", "nested group"), ("id", "physical type INT64")):
        rc, _, _, _, err = dump(path, "--field", field)
        check(rc == 1 and words in err and "columns are:" in err, "column %s: exit %d\n%s" % (field, rc, err))
    print("columns: ok", flush=True)


def mutate(data, pos, byte):
    b = bytearray(data)
    b[pos] = byte
    return bytes(b)


def test_damage(tmp, files):
    src = files[1]  # v1, dictionary, snappy
    data = open(src, "rb").read()
    footer_len = int.from_bytes(data[-8:-4], "little")
    cases = {
        "trunc_tail": data[:-1],
        "trunc_half": data[: len(data) // 2],
        "trunc_11": data[:11],
        "empty": b"",
        "bad_magic": b"PAR2" + data[4:],
        "bad_end_magic": data[:-4] + b"PAR0",
        "zero_footer_len": data[:-8] + (0).to_bytes(4, "little") + b"PAR1",
        "huge_footer_len": data[:-8] + (len(data)).to_bytes(4, "little") + b"PAR1",
        "short_footer_len": data[:-8] + (footer_len - 7).to_bytes(4, "little") + b"PAR1",
    }
    for name, blob in cases.items():
        path = os.path.join(tmp, "bad_%s.parquet" % name)
        open(path, "wb").write(blob)
        rc, _, _, _, err = dump(path, "--field", "text")
        if no_crash(rc, err, name):
            check(rc == 1 and "parquet_dump: error:" in err and path in err, "%s: exit %d\n%s" % (name, rc, err))
    gz = os.path.join(tmp, "whole.parquet.gz")
    with gzip.open(gz, "wb") as f:
        f.write(data)
    rc, _, _, _, err = dump(gz, "--field", "text", "--format", "auto")
    check(rc == 1 and "compressed as a whole" in err, "a gzip'd Parquet file: exit %d\n%s" % (rc, err))
    # flipped bytes: in the footer (Thrift), and anywhere (pages, headers)
    rnd = random.Random(7)
    n_err = 0
    path = os.path.join(tmp, "flip.parquet")
    for src in (files[1], files[6], files[10], files[15]):
        data = open(src, "rb").read()
        footer_len = int.from_bytes(data[-8:-4], "little")
        for i in range(60):
            if i % 2 == 0:
                pos = len(data) - 8 - rnd.randrange(1, footer_len + 1)
            else:
                pos = rnd.randrange(4, len(data) - 8)
            open(path, "wb").write(mutate(data, pos, rnd.randrange(256)))
            rc, _, _, _, err = dump(path, "--field", "text")
            if not no_crash(rc, err, "%s flipped at %d" % (os.path.basename(src), pos)):
                shutil.copy(path, path + ".crash%d" % i)
                continue
            if rc != 0:
                n_err += 1
                check(rc == 1 and "parquet_dump: error:" in err and path in err,
                      "flip at %d: exit %d without a clear error\n%s" % (pos, rc, err))
    check(n_err > 20, "only %d of 240 flipped files were refused" % n_err)
    print("damage: ok (%d of 240 flips refused)" % n_err, flush=True)


def test_run(tmp, files):
    if not os.path.exists(DATAPREP):
        fail("no dataprep program at " + DATAPREP)
        return
    src = files[6]  # v1, plain, zstd
    for name, fmt in (("forced", ["--format", "parquet"]), ("auto", [])):
        # auto: a name that says nothing; the content (PAR1) decides
        inp = os.path.join(tmp, "run_%s.data" % name)
        shutil.copy(src, inp)
        out = os.path.join(tmp, "run_out_%s" % name)
        rc, _, err = run_cmd([DATAPREP, "run", "--vocab-dir", VOCAB, "--encoding", "cl100k_base", "--threads", "1",
                              "--out", out, "--input", inp, "--field", "text",
                              "--set", "data.max_skipped_share=0.5"] + fmt)
        if not check(rc == 0, "dataprep run (%s): exit %d\n%s" % (name, rc, err[-2000:])):
            continue
        rc, cat, err = run_cmd([DATAPREP, "cat", "--vocab-dir", VOCAB, out])
        if not check(rc == 0, "dataprep cat: exit %d\n%s" % (rc, err)):
            continue
        got = [json.loads(line) for line in cat.decode().splitlines()]
        vals = expected(src, "text")
        want = [("%s#row=%d" % (inp, i + 1), v) for i, v in enumerate(vals) if v is not None]
        check([(d["source"], d["text"]) for d in got] == want,
              "dataprep run + cat (%s): documents differ from pyarrow's (%d vs %d)" % (name, len(got), len(want)))
        stats = json.load(open(os.path.join(out, "task-00000.stats.json")))
        check("null_value" in json.dumps(stats), "the stats do not list the null_value skips")
    bad = os.path.join(tmp, "run_bad.parquet")
    open(bad, "wb").write(open(src, "rb").read()[:-3])
    rc, _, err = run_cmd([DATAPREP, "run", "--vocab-dir", VOCAB, "--encoding", "cl100k_base", "--threads", "1",
                          "--out", os.path.join(tmp, "run_bad_out"), "--input", bad])
    check(rc == 1 and "run_bad.parquet" in err and not any(m in err for m in SANITIZER_MARKS),
          "dataprep run on a damaged file: exit %d\n%s" % (rc, err[-2000:]))
    print("run: ok", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    if not os.path.exists(DUMP):
        print(PROG + ": FAIL: no parquet_dump at %s (make check builds it)" % DUMP)
        return 1
    tmp = tempfile.mkdtemp(prefix="parquet_ref.")
    try:
        files = test_matrix(tmp)
        test_big_dictionary(tmp)
        test_row_groups(tmp, files)
        test_columns(tmp)
        test_damage(tmp, files)
        test_run(tmp, files)
    finally:
        if args.keep:
            print("kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%s: %d failure(s)" % (PROG, len(failures)))
        return 1
    print("%s: PASS" % PROG)
    return 0


if __name__ == "__main__":
    sys.exit(main())
