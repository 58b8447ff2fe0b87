#!/usr/bin/env python3
"""
tests/dataprep/run_reference.py — `dataprep run` end to end, against independent readers.

Usage:  python3 tests/dataprep/run_reference.py [--keep] [--only NAME,...]
Environment: top_builddir, top_srcdir (set by `make check`); LONGTAIL_DATAPREP (default
$top_builddir/dataprep/dataprep); LONGTAIL_SHARED (default $top_srcdir/../shared).

Everything the program wrote is read back here with code that shares nothing with it:
Python's gzip/bz2/json/xml.etree for the inputs, a Content-Length WARC parser written
here, the `zstd` command for the shards, PyPI tiktoken for the ids. Checks:

  roundtrip   for each format of shared/corpus (JSONL .gz, GitHub JSONL .zst with --field
              code, Common Crawl WET .gz, Wikipedia XML .bz2 multistream): `dataprep cat`
              gives, in input order, every document Python finds (text, source id, name)
              — Wikipedia text after the documented conversion (`dataprep wikitext` on the
              page's wikitext as xml.etree reads it); `zstd -dc` of the shard split by
              `dataprep lengths` equals tiktoken's encode_ordinary of each text; the stats
              count what Python counts; `dataprep verify` passes
  tasks       N=3 tasks give the same documents (by source) as N=1, task I holding files
              [I::3] of the sorted list; a task with no file writes an empty, valid shard
  identical   two runs (1 and 3 threads) give byte-identical shard, index, stats, marker
  resume      a rerun skips a finished task (files untouched); --force redoes it to the same
              bytes; other settings are refused (exit 2) naming the setting
  kill        kill -9 at random moments of a run: no partial file under a final name, no
              marker without complete outputs, and the rerun gives the reference bytes
  truncate    data.max_doc_bytes: cut at a UTF-8 boundary, counted, flagged in cat
  eos         --eos append: every document ends in <|endoftext|>, lengths count it
  bad         each damaged file of shared/corpus/bad: skipped records counted with reasons,
              damage reported with file and offset, exit 1 unless --allow-damaged (and then
              the documents before the damage are kept); unreadable input, unwritable --out
  profile     `dataprep profile --json` buckets equal Python's count over `dataprep lengths`

Exit status: 0 pass, 1 fail, 77 skip (tiktoken or the shared folder missing).
"""
import argparse
import bz2
import glob
import gzip
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
import zlib

VENV_PYTHON = os.path.expanduser("~/.local/share/longtail/venv/bin/python3")
PROG = "run_reference"

try:
    import numpy as np
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
except ImportError:
    if (os.path.exists(VENV_PYTHON) and os.path.abspath(sys.executable) != VENV_PYTHON
            and not os.environ.get("LONGTAIL_TIKTOKEN_REEXEC")):
        os.environ["LONGTAIL_TIKTOKEN_REEXEC"] = "1"
        os.execv(VENV_PYTHON, [VENV_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    print(PROG + ": SKIP: tiktoken or numpy is not importable by " + sys.executable)
    sys.exit(77)

SRCDIR = os.environ.get("top_srcdir") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BUILDDIR = os.environ.get("top_builddir") or SRCDIR
DATAPREP = os.environ.get("LONGTAIL_DATAPREP") or os.path.join(BUILDDIR, "dataprep", "dataprep")
SHARED = os.environ.get("LONGTAIL_SHARED") or os.path.join(SRCDIR, "..", "shared")
VOCAB = os.path.join(SRCDIR, "data", "vocab")
OUTPUTS = ["tokens.zst", "index", "stats.json", "done"]

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, flush=True)


def check(cond, msg):
    if not cond:
        fail(msg)
    return cond


def dataprep(*args, ok=(0,), env=None):
    """Run dataprep; returns (rc, stdout bytes, stderr text)."""
    cmd = [DATAPREP] + [str(a) for a in args]
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("SLURM_"):
            del e[k]
    e.update(env or {})
    p = subprocess.run(cmd, capture_output=True, env=e)
    err = p.stderr.decode("utf-8", "replace")
    if ok is not None and p.returncode not in ok:
        fail("%s: exit %d\n%s" % (" ".join(cmd), p.returncode, err[-3000:]))
    return p.returncode, p.stdout, err


def run(out, inputs, *extra, ok=(0,)):
    return dataprep("run", "--vocab-dir", VOCAB, "--encoding", "cl100k_base", "--out", out,
                    "--input", *inputs, *extra, ok=ok)


# ------------------------------------------------------------------ independent readers

SURROGATE = re.compile("[\ud800-\udfff]")


def fix_text(s):
    """A JSON string as the project stores it: lone surrogates become U+FFFD."""
    return SURROGATE.sub("\ufffd", s)


def open_any(path):
    with open(path, "rb") as f:
        head = f.read(4)
    if head[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb").read()
    if head == b"\x28\xb5\x2f\xfd":
        return subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
    if head[:3] == b"BZh":
        return bz2.open(path, "rb").read()
    return open(path, "rb").read()


def jsonl_docs(path, field):
    docs = []
    for n, line in enumerate(open_any(path).split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get(field), str):
            docs.append({"id": "line=%d" % n, "name": "", "text": fix_text(obj[field])})
    return docs


def wet_docs(path):
    """WARC records framed by Content-Length; conversion records are documents."""
    data = open_any(path)
    docs, pos = [], 0
    while pos < len(data):
        end = data.find(b"\r\n\r\n", pos)
        if end < 0:
            break
        head = data[pos:end].decode("utf-8", "replace").split("\r\n")
        fields = {}
        for line in head[1:]:
            k, _, v = line.partition(":")
            fields[k.strip().lower()] = v.strip()
        n = int(fields["content-length"])
        body = data[end + 4:end + 4 + n]
        if fields.get("warc-type") == "conversion":
            docs.append({"id": fields.get("warc-record-id", ""), "name": fields.get("warc-target-uri", ""),
                         "text": body.decode("utf-8", "replace")})
        pos = end + 4 + n + 4
    return docs


def wiki_docs(path):
    root = ET.fromstring(open_any(path))
    ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    docs = []
    for page in root.iter(ns + "page"):
        if page.findtext(ns + "ns") != "0" or page.find(ns + "redirect") is not None:
            continue
        raw = page.find(ns + "revision").findtext(ns + "text") or ""
        p = subprocess.run([DATAPREP, "wikitext"], input=raw.encode("utf-8"), capture_output=True, check=True)
        docs.append({"id": "page=" + page.findtext(ns + "id"), "name": page.findtext(ns + "title"),
                     "text": p.stdout.decode("utf-8")})
    return docs


# ------------------------------------------------------------------ reading the outputs back

def cat(out, *extra):
    rc, so, _ = dataprep("cat", "--vocab-dir", VOCAB, out, *extra)
    return [json.loads(l) for l in so.decode("utf-8").splitlines()] if rc == 0 else []


def lengths(out):
    rc, so, _ = dataprep("lengths", out)
    return [int(x) for x in so.split()] if rc == 0 else []


def shard_ids(out, task=0):
    """All ids of a task's shard, read with the zstd command (seek table skipped by it)."""
    raw = subprocess.run(["zstd", "-dc", os.path.join(out, "task-%05d.tokens.zst" % task)],
                         capture_output=True, check=True).stdout
    stats = json.load(open(os.path.join(out, "task-%05d.stats.json" % task)))
    width = 2 if len(ENC._mergeable_ranks) + len(ENC._special_tokens) <= 65536 else 4
    return np.frombuffer(raw, dtype="<u2" if width == 2 else "<u4").astype(np.int64), stats


def output_bytes(out, task=0):
    return {s: open(os.path.join(out, "task-%05d.%s" % (task, s)), "rb").read() for s in OUTPUTS}


# ------------------------------------------------------------------ checks

def test_roundtrip(tmp):
    cases = [
        ("jsonl", sorted(glob.glob(os.path.join(SHARED, "corpus/jsonl/*.jsonl.gz"))), [], lambda p: jsonl_docs(p, "text")),
        ("github", sorted(glob.glob(os.path.join(SHARED, "corpus/github/*.jsonl.zst"))), ["--field", "code"],
         lambda p: jsonl_docs(p, "code")),
        ("wet", sorted(glob.glob(os.path.join(SHARED, "corpus/cc/*.warc.wet.gz"))), [], wet_docs),
        ("wiki", sorted(glob.glob(os.path.join(SHARED, "corpus/wikipedia/*multistream*.xml.bz2"))), [], wiki_docs),
    ]
    for name, files, extra, reader in cases:
        if not check(files, "roundtrip %s: no input files in %s" % (name, SHARED)):
            continue
        out = os.path.join(tmp, "rt-" + name)
        rc, _, err = run(out, files, "--threads", "2", *extra)
        if rc != 0:
            continue
        want = []
        for f in files:
            for d in reader(f):
                d["file"] = f
                want.append(d)
        got = cat(out)
        check(len(got) == len(want), "roundtrip %s: %d documents, Python finds %d" % (name, len(got), len(want)))
        for i, (g, w) in enumerate(zip(got, want)):
            src = "%s#%s" % (w["file"], w["id"])
            if not check(g["source"] == src, "roundtrip %s doc %d: source %r, expected %r" % (name, i, g["source"], src)):
                break
            if w["name"]:
                check(g.get("name") == w["name"], "roundtrip %s doc %d: name %r, expected %r" % (name, i, g.get("name"), w["name"]))
            if not check(g["text"] == w["text"], "roundtrip %s doc %d (%s): text differs at %d" % (
                    name, i, src, next((k for k in range(min(len(g["text"]), len(w["text"])))
                                        if g["text"][k] != w["text"][k]), min(len(g["text"]), len(w["text"]))))):
                break
        # ids: the shard (read by zstd) split by lengths == tiktoken's
        ids, stats = shard_ids(out)
        lens = lengths(out)
        check(sum(lens) == len(ids) == stats["tokens"], "roundtrip %s: %d lengths sum, %d ids, stats %d tokens" % (
            name, sum(lens), len(ids), stats["tokens"]))
        check(stats["documents"] == len(want), "roundtrip %s: stats say %d documents" % (name, stats["documents"]))
        pos = 0
        for i, (n, w) in enumerate(zip(lens, want)):
            ref = ENC.encode_ordinary(w["text"])
            if not check(ids[pos:pos + n].tolist() == ref, "roundtrip %s doc %d: ids differ from tiktoken (%d vs %d ids)" % (
                    name, i, n, len(ref))):
                break
            check(got[i]["tokens"] == n if i < len(got) else True, "roundtrip %s doc %d: cat tokens" % (name, i))
            pos += n
        # ... and == `dataprep encode --jsonl` of the same texts (the CONTRACTS.md face)
        texts = os.path.join(tmp, "texts-%s.jsonl" % name)
        with open(texts, "w", encoding="utf-8") as f:
            for w in want:
                f.write(json.dumps({"text": w["text"]}) + "\n")
        rc, so, _ = dataprep("encode", "--vocab-dir", VOCAB, "--encoding", "cl100k_base", "--jsonl", texts)
        enc = [[int(x) for x in l.split()] for l in so.decode().split("\n")[:len(want)]]
        check(rc == 0 and sum(len(e) for e in enc) == len(ids) and
              [i for e in enc for i in e] == ids.tolist(), "roundtrip %s: shard ids differ from dataprep encode" % name)
        rc, so, _ = dataprep("verify", out)
        check(rc == 0 and b"0 problems" in so, "roundtrip %s: verify: %s" % (name, so.decode()[-500:]))
        print("ok roundtrip %s: %d documents, %d tokens" % (name, len(want), len(ids)), flush=True)


def test_tasks(tmp):
    files = sorted(glob.glob(os.path.join(SHARED, "corpus/cc/*.wet.gz")) + glob.glob(os.path.join(SHARED, "corpus/jsonl/*.gz")))
    one, three = os.path.join(tmp, "n1"), os.path.join(tmp, "n3")
    run(one, files, "--threads", "2")
    for t in range(3):
        run(three, files, "--task-id", t, "--num-tasks", 3, "--threads", "1")
    a = {d["source"]: (d["text"], d["tokens"]) for d in cat(one)}
    b = {d["source"]: (d["text"], d["tokens"]) for d in cat(three)}
    check(len(a) > 0 and a == b, "tasks: N=3 and N=1 differ (%d vs %d documents)" % (len(b), len(a)))
    all_sorted = sorted(files)
    for t in range(3):
        st = json.load(open(os.path.join(three, "task-%05d.stats.json" % t)))
        got = [f["path"] for f in st["settings"]["inputs"]]
        check(got == all_sorted[t::3], "tasks: task %d has files %r, expected %r" % (t, got, all_sorted[t::3]))
    rc, so, _ = dataprep("verify", three)
    check(rc == 0, "tasks: verify of 3 tasks: " + so.decode()[-300:])
    # Slurm array variables are the defaults; a task with no file writes an empty shard;
    # the tasks run at the same time in one directory, as an array's do.
    arr = os.path.join(tmp, "array")
    procs = []
    for t in range(5):
        e = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        e.update({"SLURM_ARRAY_TASK_ID": str(t + 1), "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "5"})
        procs.append(subprocess.Popen([DATAPREP, "run", "--vocab-dir", VOCAB, "--encoding", "cl100k_base", "--threads", "1",
                                       "--out", arr, "--input", *files], env=e, stderr=subprocess.PIPE))
    for t, p in enumerate(procs):
        _, err = p.communicate()
        check(p.returncode == 0, "tasks: concurrent array task %d failed: %s" % (t, err.decode()[-500:]))
    c = {d["source"]: (d["text"], d["tokens"]) for d in cat(arr)}
    check(c == a, "tasks: a 5-task Slurm array (1-based ids) differs from N=1")
    st = json.load(open(os.path.join(arr, "task-00004.stats.json")))
    check(st["documents"] == 0 and st["settings"]["inputs"] == [], "tasks: task 4 of 5 should be empty")
    rc, so, _ = dataprep("verify", arr)
    check(rc == 0, "tasks: verify with an empty task: " + so.decode()[-300:])
    # an unfinished task is named
    os.unlink(os.path.join(arr, "task-00002.done"))
    rc, _, err = dataprep("lengths", arr, ok=None)
    check(rc == 1 and "not finished (task 2)" in err, "tasks: lengths with task 2 unfinished: rc %d, %s" % (rc, err))
    print("ok tasks", flush=True)


def test_identical_resume_kill(tmp):
    # a plain JSONL big enough for a run of a few seconds: the GitHub corpus, 12 times
    big = os.path.join(tmp, "big.jsonl")
    with open(big, "wb") as f:
        for _ in range(12):
            for src in sorted(glob.glob(os.path.join(SHARED, "corpus/github/*.zst"))):
                f.write(open_any(src))
    files = [big]
    ref, other = os.path.join(tmp, "ref"), os.path.join(tmp, "other")
    small_frames = ["--set", "data.frame_size=64K"]
    run(ref, files, "--field", "code", "--threads", "1", *small_frames)
    run(other, files, "--field", "code", "--threads", "3", *small_frames)
    want = output_bytes(ref)
    got = output_bytes(other)
    for s in OUTPUTS:
        check(want[s] == got[s], "identical: task-00000.%s differs between 1 and 3 threads" % s)
    check(len(json.load(open(os.path.join(ref, "task-00000.stats.json")))["outputs"]) >= 2, "identical: stats outputs")
    # resume: a finished task is skipped and left alone
    mt = {s: os.stat(os.path.join(ref, "task-00000." + s)).st_mtime_ns for s in OUTPUTS}
    rc, _, err = run(ref, files, "--field", "code", *small_frames)
    check("already done" in err, "resume: no 'already done' in: " + err[-300:])
    check(all(os.stat(os.path.join(ref, "task-00000." + s)).st_mtime_ns == mt[s] for s in OUTPUTS),
          "resume: a finished task's files were touched")
    rc, _, err = run(ref, files, "--field", "code", "--force", *small_frames)
    check(output_bytes(ref) == want, "resume: --force gave other bytes")
    rc, _, err = run(ref, files, "--field", "code", "--eos", "append", *small_frames, ok=(2,))
    check("eos differs" in err and "--force" in err, "resume: other settings not refused clearly: " + err[-300:])
    # kill -9 at random moments, then rerun: the reference bytes, nothing partial
    rng = random.Random(4242)
    t0 = time.time()
    run(os.path.join(tmp, "timing"), files, "--field", "code", "--threads", "2", *small_frames)
    full = max(time.time() - t0, 0.05)
    for k in range(8):
        out = os.path.join(tmp, "kill%d" % k)
        cmd = [DATAPREP, "run", "--vocab-dir", VOCAB, "--encoding", "cl100k_base", "--out", out, "--field", "code",
               "--threads", "2", *small_frames, "--input", *files]
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0, full * 1.1))
        p.send_signal(signal.SIGKILL)
        p.wait()
        present = [s for s in OUTPUTS if os.path.exists(os.path.join(out, "task-00000." + s))]
        if "done" in present:
            check(output_bytes(out) == want, "kill %d: a marker with other outputs" % k)
        for s in present:  # what exists under a final name is complete
            check(open(os.path.join(out, "task-00000." + s), "rb").read() == want[s] or s == "done",
                  "kill %d: task-00000.%s is partial" % (k, s))
        run(out, files, "--field", "code", "--threads", "2", *small_frames)
        check(output_bytes(out) == want, "kill %d (after %s): rerun differs from the reference" % (k, present))
        check(not [f for f in os.listdir(out) if ".tmp." in f], "kill %d: temporary files left after the rerun" % k)
    print("ok identical, resume, kill (run of %.2f s)" % full, flush=True)


def test_truncate_eos(tmp):
    files = sorted(glob.glob(os.path.join(SHARED, "corpus/cc/*.wet.gz")))[:1]
    out = os.path.join(tmp, "trunc")
    cap = 1000
    run(out, files, "--set", "data.max_doc_bytes=%d" % cap)
    want = wet_docs(files[0])
    got = cat(out)
    n_trunc = 0
    for g, w in zip(got, want):
        b = w["text"].encode("utf-8")
        if len(b) > cap:
            n_trunc += 1
            cut = cap
            while cut > 0 and (b[cut] & 0xC0) == 0x80:
                cut -= 1
            check(g["text"].encode("utf-8") == b[:cut] and g.get("truncated") is True,
                  "truncate: %s not cut at the UTF-8 boundary before %d" % (g["source"], cap))
        else:
            check(g["text"] == w["text"] and "truncated" not in g, "truncate: %s changed" % g["source"])
    st = json.load(open(os.path.join(out, "task-00000.stats.json")))
    check(n_trunc > 0 and st["truncated_documents"] == n_trunc, "truncate: stats %d, Python %d" % (st["truncated_documents"], n_trunc))
    out = os.path.join(tmp, "eos")
    run(out, files, "--eos", "append")
    eot = ENC._special_tokens["<|endoftext|>"]
    ids, _ = shard_ids(out)
    pos = 0
    for n, w in zip(lengths(out), want):
        check(ids[pos:pos + n].tolist() == ENC.encode_ordinary(w["text"]) + [eot], "eos: a document without EOS")
        pos += n
    print("ok truncate (%d documents), eos" % n_trunc, flush=True)


def test_bad(tmp):
    bad = os.path.join(SHARED, "corpus/bad")
    def one(name, *extra, ok=(0, 1)):
        out = os.path.join(tmp, "bad-" + name)
        rc, _, err = run(out, [os.path.join(bad, name)], *extra, ok=ok)
        st = None
        p = os.path.join(out, "task-00000.stats.json")
        if os.path.exists(p):
            st = json.load(open(p))
        return rc, err, st, out

    rc, err, st, _ = one("empty.jsonl")
    check(rc == 0 and st["documents"] == 0, "bad empty.jsonl: rc %d" % rc)
    # 4 of its 8 records (one blank) are bad: more than data.max_skipped_share (1 %) fails the task ...
    rc, err, st, out = one("mixed-lines.jsonl")
    check(rc == 1 and "4 of 8 records skipped" in err and "max_skipped_share" in err
          and not os.path.exists(os.path.join(out, "task-00000.done")),
          "bad mixed-lines: over max_skipped_share: rc %d, %s" % (rc, err[-300:]))
    # ... and with the share raised, the good records are kept
    rc, err, st, out = one("mixed-lines.jsonl", "--set", "data.max_skipped_share=0.9")
    lines = open(os.path.join(bad, "mixed-lines.jsonl"), "rb").read().split(b"\n")
    good = len(jsonl_docs(os.path.join(bad, "mixed-lines.jsonl"), "text"))
    nonblank = sum(1 for l in lines if l.strip())
    check(rc == 0 and st["documents"] == good, "bad mixed-lines: rc %d, %s documents, Python %d" % (rc, st and st["documents"], good))
    check(st["skipped"]["total"] == nonblank - good, "bad mixed-lines: %d skipped, expected %d" % (st["skipped"]["total"], nonblank - good))
    check(st["skipped"]["bad_json"] >= 2 and st["skipped"]["missing_field"] == 1 and st["skipped"]["field_not_string"] == 1,
          "bad mixed-lines: reasons %r" % st["skipped"])
    check(st["repaired_documents"] == 1 and st["utf8_replacements"] >= 1, "bad mixed-lines: repaired %d" % st["repaired_documents"])
    check("mixed-lines.jsonl:3" in err and "mixed-lines.jsonl:4" in err, "bad mixed-lines: stderr names file:line: " + err[-500:])
    for name in ["corrupt.jsonl.zst", "truncated.warc.wet.gz", "unclosed.xml.bz2"]:
        rc, err, st, out = one(name)
        check(rc == 1 and name in err and "offset" in err, "bad %s: rc %d, stderr %s" % (name, rc, err[-400:]))
        check(not os.path.exists(os.path.join(out, "task-00000.done")), "bad %s: marked done" % name)
        check(st is not None and st["damaged_files"] == 1, "bad %s: damage not in the stats" % name)
        rc2, err2, st2, out2 = one(name, "--allow-damaged")
        check(rc2 == 0 and os.path.exists(os.path.join(out2, "task-00000.done")), "bad %s --allow-damaged: rc %d" % (name, rc2))
        if name == "truncated.warc.wet.gz":
            # documents before the damage: the complete records zlib gets out of the file
            raw = open(os.path.join(bad, name), "rb").read()
            data, pos = b"", 0
            while pos < len(raw):
                d = zlib.decompressobj(31)
                try:
                    data += d.decompress(raw[pos:])
                except zlib.error:
                    break
                if not d.eof:
                    break
                pos = len(raw) - len(d.unused_data)
            complete = 0
            p = 0
            while True:
                e = data.find(b"\r\n\r\n", p)
                if e < 0:
                    break
                m = re.search(rb"Content-Length: (\d+)", data[p:e])
                n = int(m.group(1))
                if e + 4 + n > len(data):
                    break
                complete += b"WARC-Type: conversion" in data[p:e]
                p = e + 4 + n + 4
            check(st2["documents"] == complete, "bad truncated WET: %d documents kept, %d complete" % (st2["documents"], complete))
    rc, err, st, _ = one("wrong-length.warc.wet.gz")
    check(st is not None and st["skipped"].get("length_overrun", 0) + st["damaged_files"] >= 1 and "wrong-length" in err,
          "bad wrong-length: not reported: rc %d %s" % (rc, err[-300:]))
    rc, err, st, _ = one("not-gzip.warc.wet.gz")
    check("not-gzip" in err and (rc == 1 or st["skipped"]["total"] >= 1), "bad not-gzip: rc %d, %s" % (rc, err[-300:]))
    # unreadable input, unwritable output
    link = os.path.join(tmp, "dangling.jsonl")
    os.symlink(os.path.join(tmp, "nowhere"), link)
    rc, _, err = run(os.path.join(tmp, "o1"), [link], ok=(1, 2))
    check("dangling.jsonl" in err, "bad: dangling input not named: " + err)
    rc, _, err = run("/dev/null/out", [os.path.join(bad, "empty.jsonl")], ok=(1,))
    check("/dev/null/out" in err, "bad: unwritable --out not named: " + err)
    print("ok bad inputs", flush=True)


def test_profile(tmp):
    out = os.path.join(tmp, "n1")
    if not os.path.exists(os.path.join(out, "task-00000.done")):
        run(out, sorted(glob.glob(os.path.join(SHARED, "corpus/cc/*.wet.gz"))))
    rc, so, _ = dataprep("profile", "--json", "--model", "llama-7b", out)
    if rc != 0:
        return
    prof = json.loads(so)
    lens = lengths(out)
    buckets = prof["buckets"]
    for b in buckets:
        lo, hi = b["min_tokens"], b["max_tokens"]
        n = sum(1 for x in lens if x >= lo and (hi is None or x <= hi))
        check(b["documents"] == n, "profile: bucket %s has %d documents, Python counts %d" % (b["label"], b["documents"], n))
    check(abs(sum(b["pct_tokens"] for b in buckets) - 100) < 1e-6, "profile: token shares do not add to 100")
    svg = os.path.join(tmp, "profile.svg")
    rc, _, _ = dataprep("profile", "--svg", svg, out)
    check(rc == 0 and ET.parse(svg).getroot().tag.endswith("svg"), "profile: --svg is not an SVG document")
    print("ok profile", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(SHARED, "corpus")):
        print(PROG + ": SKIP: no shared corpus at " + SHARED)
        return 77
    global ENC
    ranks = load_tiktoken_bpe(os.path.join(SHARED, "vocab", "cl100k_base.tiktoken"))
    meta = json.load(open(os.path.join(SHARED, "vocab", "cl100k_base.json")))
    ENC = tiktoken.Encoding("cl100k_base", pat_str=meta["pat_str"], mergeable_ranks=ranks,
                            special_tokens=meta["special_tokens"])
    tmp = tempfile.mkdtemp(prefix="lt-run-")
    tests = [("roundtrip", test_roundtrip), ("tasks", test_tasks), ("identical", test_identical_resume_kill),
             ("truncate", test_truncate_eos), ("bad", test_bad), ("profile", test_profile)]
    only = set(filter(None, args.only.split(",")))
    try:
        for name, fn in tests:
            if not only or name in only:
                fn(tmp)
    finally:
        if args.keep:
            print("kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%s: %d failure(s)" % (PROG, len(failures)))
        return 1
    print(PROG + ": all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
