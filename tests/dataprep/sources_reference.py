#!/usr/bin/env python3
"""
tests/dataprep/sources_reference.py — named sources and the Parquet row-group split of
`dataprep run`, against independent readers (pyarrow, Python's gzip/json, the zstd
command, tiktoken).

Usage:  python3 tests/dataprep/sources_reference.py [--keep]
Environment: top_builddir, top_srcdir (set by `make check`); LONGTAIL_DATAPREP (default
$top_builddir/dataprep/dataprep); LONGTAIL_SHARED (default $top_srcdir/../shared).

  sources     three [source.NAME] sections (Common Crawl WET, GitHub code JSONL with field
              = code, a Parquet file written by pyarrow with its text in column `content`)
              in one run: every document of every source is in the shard, with the source
              its file belongs to (the index's file table, read here with struct), the ids
              tiktoken's; stats count each source's documents
  rowgroups   one Parquet file of 7 row groups over N = 3 tasks (fewer files than tasks):
              each task reads whole row groups, together every row exactly once, in order;
              over N = 1 the same documents
  planner     planner build over those sources: the source views (sample_sources,
              step_sources) agree with the documents' sources, the token shares follow the
              weights, `planner show` breaks a step down by source
  no_docs     a source whose records all miss its field: exit 1, the hint names the member

Exit status: 0 pass, 1 fail, 77 skip (pyarrow, tiktoken or the shared folder missing).
"""
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

VENV_PYTHON = os.path.expanduser("~/.local/share/longtail/venv/bin/python3")
PROG = "sources_reference"
try:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import tiktoken
except ImportError:
    if (os.path.exists(VENV_PYTHON) and os.path.abspath(sys.executable) != VENV_PYTHON
            and not os.environ.get("LONGTAIL_SOURCES_REEXEC")):
        os.environ["LONGTAIL_SOURCES_REEXEC"] = "1"
        os.execv(VENV_PYTHON, [VENV_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    print(PROG + ": SKIP: pyarrow or tiktoken is not importable by " + sys.executable)
    sys.exit(77)

SRCDIR = os.environ.get("top_srcdir") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BUILDDIR = os.environ.get("top_builddir") or SRCDIR
DATAPREP = os.environ.get("LONGTAIL_DATAPREP") or os.path.join(BUILDDIR, "dataprep", "dataprep")
SHARED = os.environ.get("LONGTAIL_SHARED") or os.path.join(SRCDIR, "..", "shared")
VOCAB = os.path.join(SRCDIR, "data", "vocab")
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg, flush=True)
    return cond


def dataprep(*args, ok=(0,)):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    p = subprocess.run([DATAPREP] + [str(a) for a in args], capture_output=True, env=env)
    err = p.stderr.decode("utf-8", "replace")
    if ok is not None and p.returncode not in ok:
        check(False, "%s: exit %d\n%s" % (" ".join(map(str, args)), p.returncode, err[-2000:]))
    return p.returncode, p.stdout, err


def cat(out, task=None):
    args = ["cat", "--vocab-dir", VOCAB, out] + (["--task", task] if task is not None else [])
    rc, so, _ = dataprep(*args)
    return [json.loads(line) for line in so.decode().splitlines()] if rc == 0 else []


def index_file_sources(path):
    """The index's files table, read with struct (docs/formats.md): [(path, source)]."""
    b = open(path, "rb").read()
    assert b[:8] == b"LTIDX\0v1"
    version, n_files = struct.unpack_from("<I", b, 8)[0], struct.unpack_from("<Q", b, 128)[0]
    files_off = struct.unpack_from("<Q", b, 136 + 16 * 2)[0]
    strings_off = struct.unpack_from("<Q", b, 136 + 16 * 4)[0]

    def string(off):
        end = b.index(b"\0", strings_off + off)
        return b[strings_off + off:end].decode()
    width = 24 if version >= 2 else 16
    out = []
    for i in range(n_files):
        p, _, s = struct.unpack_from("<QQQ", b, files_off + width * i) if width == 24 else \
            struct.unpack_from("<QQ", b, files_off + width * i) + (0,)
        out.append((string(p), string(s)))
    return out


def write_parquet(path, texts, row_group_size):
    table = pa.table({"id": list(range(len(texts))), "content": texts})
    pq.write_table(table, path, row_group_size=row_group_size, compression="zstd")


def test_sources(tmp, enc):
    wet = os.path.join(SHARED, "corpus", "cc", "CC-MAIN-20240520-00002.warc.wet.gz")
    code = os.path.join(tmp, "code.jsonl.gz")
    with gzip.open(os.path.join(tmp, "code.jsonl.gz"), "wt", encoding="utf-8") as f:
        for i in range(20):
            f.write(json.dumps({"code": "int f%d(void) { return %d; }\n" % (i, i * i), "repo_name": "r/%d" % i}) + "\n")
    pqf = os.path.join(tmp, "books.parquet")
    books = ["Chapter %d. It was a dark and stormy night, %s." % (i, "é" * i) for i in range(30)]
    write_parquet(pqf, books, 8)
    ini = os.path.join(tmp, "mix.ini")
    with open(ini, "w") as f:
        f.write("[data]\nencoding = cl100k_base\n[source.web]\ninput = %s\nweight = 5\n"
                "[source.code]\ninput = %s\nfield = code\nweight = 1\n"
                "[source.books]\ninput = %s\nformat = parquet\nfield = content\nweight = 1\n" % (wet, code, pqf))
    out = os.path.join(tmp, "mix")
    dataprep("run", "--config", ini, "--vocab-dir", VOCAB, "--out", out, "--threads", "2")
    docs = cat(out)
    files = index_file_sources(os.path.join(out, "task-00000.index"))
    src_of = dict(files)
    check(src_of.get(pqf) == "books" and src_of.get(code) == "code" and src_of.get(wet) == "web",
          "index sources: %s" % files)
    by = {}
    for d in docs:
        path = d["source"].rsplit("#", 1)[0]
        by.setdefault(src_of.get(path), []).append(d)
    check([d["text"] for d in by.get("books", [])] == books, "books: the Parquet rows in order")
    codes = [json.loads(l)["code"] for l in gzip.open(code, "rt", encoding="utf-8")]
    check([d["text"] for d in by.get("code", [])] == codes, "code: the `code` members in order")
    check(len(by.get("web", [])) > 10, "web: its documents")
    for d in docs:
        if d["tokens"] != len(enc.encode_ordinary(d["text"])):
            check(False, "tokens of %s: %d, tiktoken %d" % (d["source"], d["tokens"], len(enc.encode_ordinary(d["text"]))))
            break
    stats = json.load(open(os.path.join(out, "task-00000.stats.json")))
    got = {s["name"]: s["documents"] for s in stats["sources"]}
    check(got == {k: len(v) for k, v in by.items()}, "stats per source: %s" % got)
    print("ok sources: %s" % {k: len(v) for k, v in by.items()}, flush=True)
    test_planner(tmp, ini, out, src_of)


def test_planner(tmp, ini, data, src_of):
    """planner build over the three sources: the plan file's source views (read here with
    Python's sqlite3) agree with each sample's document as `dataprep cat` locates it; the
    realized token shares follow the weights (web 5 : code 1 : books 1); `planner show`
    breaks a step down by source."""
    import sqlite3
    planner = os.environ.get("LONGTAIL_PLANNER") or os.path.join(BUILDDIR, "plans", "planner")
    db = os.path.join(tmp, "mix.db")
    env = dict(os.environ, LONGTAIL_HARDWARE_DIR=os.path.join(SRCDIR, "etc", "hardware"))
    cmd = [planner, "build", "--config", ini, "--data", data, "--db", db, "--steps", "60", "--threads", "1",
           "--set", "plan.global_batch=8", "--set", "plan.context_len=512", "--set", "plan.strategy=megatron",
           "--set", "model.preset=tiny", "--set", "data.holdout=0.1"]
    p = subprocess.run(cmd, capture_output=True, env=env)
    err = p.stderr.decode()
    if not check(p.returncode == 0, "planner build: exit %d\n%s" % (p.returncode, err[-2000:])):
        return
    check("source shares of the tokens" in err and "epoch of each source" in err, "planner build reports shares")
    docs = cat(data)
    src_by_doc = {(d["task"], d["doc"]): src_of.get(d["source"].rsplit("#", 1)[0]) for d in docs}
    con = sqlite3.connect(db)
    rows = con.execute("SELECT step, task, doc, length, source FROM sample_sources").fetchall()
    check(len(rows) == 60 * 8, "sample_sources: %d rows" % len(rows))
    bad = [r for r in rows if src_by_doc.get((r[1], r[2])) != r[4]]
    check(not bad, "sample_sources: %d samples with another source than their document's, e.g. %s" % (len(bad), bad[:2]))
    tok = {}
    for r in rows:
        tok[r[4]] = tok.get(r[4], 0) + r[3]
    total = sum(tok.values())
    for name, w in (("web", 5 / 7), ("code", 1 / 7), ("books", 1 / 7)):
        check(abs(tok.get(name, 0) / total - w) < 0.03, "share of %s: %.3f, weight %.3f" % (name, tok.get(name, 0) / total, w))
    agg = con.execute("SELECT step, sum(n_samples), sum(n_tokens) FROM step_sources GROUP BY step").fetchall()
    summ = dict((r[0], (r[1], r[2])) for r in con.execute("SELECT step, n_samples, n_tokens FROM step_summary"))
    check(all(summ[a[0]] == (a[1], a[2]) for a in agg) and len(agg) == 60, "step_sources adds up to step_summary")
    sh = subprocess.run([planner, "show", "--db", db, "--step", "3"], capture_output=True, env=env)
    out = sh.stdout.decode()
    check(sh.returncode == 0 and "sources of step 3:" in out and "fwd FLOPs" in out, "planner show: by source\n" + out[-500:])
    con.close()
    print("ok planner: shares %s" % {k: round(v / total, 3) for k, v in tok.items()}, flush=True)


def test_rowgroups(tmp):
    pqf = os.path.join(tmp, "split.parquet")
    texts = ["row %d: %s" % (i, "lorem ipsum " * (i % 5)) for i in range(70)]
    write_parquet(pqf, texts, 10)  # 7 row groups
    check(pq.ParquetFile(pqf).num_row_groups == 7, "pyarrow wrote 7 row groups")
    one = os.path.join(tmp, "one")
    dataprep("run", "--vocab-dir", VOCAB, "--encoding", "cl100k_base", "--field", "content", "--out", one,
             "--input", pqf)
    whole = cat(one)
    check([d["text"] for d in whole] == texts, "N=1: every row in order")
    three = os.path.join(tmp, "three")
    got = []
    for t in range(3):
        dataprep("run", "--vocab-dir", VOCAB, "--encoding", "cl100k_base", "--field", "content", "--out", three,
                 "--input", pqf, "--task-id", t, "--num-tasks", 3)
        part = cat(three, t)
        rows = [int(d["source"].rsplit("row=", 1)[1]) - 1 for d in part]
        check(rows == list(range(rows[0], rows[0] + len(rows))) if rows else True, "task %d: consecutive rows" % t)
        check(not rows or (rows[0] % 10 == 0 and len(rows) % 10 == 0), "task %d: whole row groups %s" % (t, rows[:1]))
        check(len(rows) > 0, "task %d: has row groups" % t)
        settings = json.load(open(os.path.join(three, "task-%05d.stats.json" % t)))["settings"]
        check(all("row_groups" in i for i in settings["inputs"]), "task %d: settings record its row groups" % t)
        got += part
    check([d["text"] for d in got] == texts, "N=3: every row exactly once, in order")
    check([d["source"] for d in got] == [d["source"] for d in whole], "N=3: the same sources as N=1")
    print("ok rowgroups: 7 row groups over 3 tasks", flush=True)


def test_no_docs(tmp):
    bad = os.path.join(tmp, "gh.jsonl")
    with open(bad, "w") as f:
        for i in range(5):
            f.write(json.dumps({"code": "x = %d" % i, "path": "a.py"}) + "\n")
    ini = os.path.join(tmp, "bad.ini")
    with open(ini, "w") as f:
        f.write("[source.github]\ninput = %s\n" % bad)
    rc, _, err = dataprep("run", "--config", ini, "--vocab-dir", VOCAB, "--encoding", "cl100k_base", "--out",
                          os.path.join(tmp, "bad"), ok=(1,))
    check(rc == 1 and "set field = code for source github" in err, "no documents: the hint names `code`\n" + err)
    check(not os.path.exists(os.path.join(tmp, "bad", "task-00000.done")), "no documents: no marker")
    print("ok no_docs", flush=True)


def main():
    if not os.path.isdir(os.path.join(SHARED, "corpus")):
        print(PROG + ": SKIP: no shared corpus at " + SHARED)
        return 77
    enc = tiktoken.get_encoding("cl100k_base") if False else None
    from tiktoken.load import load_tiktoken_bpe
    ranks = load_tiktoken_bpe(os.path.join(VOCAB, "cl100k_base.tiktoken"))
    spec = json.load(open(os.path.join(VOCAB, "cl100k_base.json")))
    enc = tiktoken.Encoding("cl100k_base", pat_str=spec["pat_str"], mergeable_ranks=ranks,
                            special_tokens=spec.get("special_tokens", {}))
    tmp = tempfile.mkdtemp(prefix="lt-sources-")
    try:
        test_sources(tmp, enc)
        test_rowgroups(tmp)
        test_no_docs(tmp)
    finally:
        if "--keep" in sys.argv:
            print("kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(PROG + ": %d failure(s)" % len(failures))
        return 1
    print(PROG + ": all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
