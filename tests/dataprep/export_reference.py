#!/usr/bin/env python3
"""
tests/dataprep/export_reference.py — `dataprep export` read back by numpy readers written here.

Usage:  python3 tests/dataprep/export_reference.py [--keep]
Environment: top_builddir, top_srcdir (set by `make check`); LONGTAIL_DATAPREP (the program
to test, default $top_builddir/dataprep/dataprep).

A small corpus made here (three JSONL files: ASCII, accents, CJK, emoji, code, a long
document, special-token text) goes through `dataprep run` for cl100k_base (uint32 tokens)
and r50k_base (uint16 tokens), with and without --eos append, as 2 tasks (task I holds
files [I::2] of the sorted list). Then `dataprep export --format llmc` and `--format
megatron`, and every output file is read with the layouts of docs/formats.md / llm.c's
dev/data/data_common.py / Megatron-LM's megatron/core/datasets/indexed_dataset.py, with
numpy only (no project code), and compared with `dataprep encode --jsonl` of each file:

  index     magic, version, width, vocabulary size, eos policy; the trailing SHA-256;
            doc_offsets differences are the document lengths (+1 with EOS)
  shard     the `zstd` command (or the zstandard module) decompresses task-I.tokens.zst
            to the concatenation of the documents
  llmc      header magic/version/dtype by token width, header[2] = token count, file size;
            the stream is doc EOS doc EOS ... (EOS appended by the run) or EOT doc EOT doc
            ... (<|endoftext|> inserted by export)
  megatron  "MMIDIDX\\0\\0", version 1, dtype code (8 uint16 / 4 int32), one sequence per
            non-empty document, pointers = byte offsets, document_indices = 0..n, .bin size
  tasks     an incomplete task (its .done removed) is left out with a warning; --task I
            exports only task I; --task of an incomplete task and a directory without
            complete tasks fail with exit 1

Output: TAP lines ("ok N - ...", "not ok N - ...") and the plan at the end. Exit status:
0 pass, 1 fail, 77 skip (numpy missing, the program or `dataprep run` not built).
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

VENV_PYTHON = os.path.expanduser("~/.local/share/longtail/venv/bin/python3")
PROG = "export_reference"

try:
    import numpy as np
except ImportError:
    # configure picks the project's venv for PYTHON; fall back to it when run by hand.
    if (os.path.exists(VENV_PYTHON) and os.path.abspath(sys.executable) != VENV_PYTHON
            and not os.environ.get("LONGTAIL_EXPORT_REEXEC")):
        os.environ["LONGTAIL_EXPORT_REEXEC"] = "1"
        os.execv(VENV_PYTHON, [VENV_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    print("1..0 # SKIP numpy is not importable by " + sys.executable)
    sys.exit(77)

SRCDIR = os.environ.get("top_srcdir") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BUILDDIR = os.environ.get("top_builddir") or SRCDIR
DATAPREP = os.environ.get("LONGTAIL_DATAPREP") or os.path.join(BUILDDIR, "dataprep", "dataprep")
VOCAB = os.path.join(SRCDIR, "data", "vocab")

# <|endoftext|> of the two encodings (tiktoken's special_tokens)
EOT = {"cl100k_base": 100257, "r50k_base": 50256}

results = []


def tap(ok, name, detail=""):
    results.append(ok)
    print("%s %d - %s" % ("ok" if ok else "not ok", len(results), name), flush=True)
    if not ok and detail:
        for line in str(detail).splitlines()[:40]:
            print("# " + line, flush=True)
    return ok


def dataprep(*args):
    """(exit status, stdout bytes, stderr text) of one dataprep run, Slurm variables removed"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    p = subprocess.run([DATAPREP] + [str(a) for a in args], capture_output=True, env=env)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


# ------------------------------------------------------------------ readers (docs/formats.md)

def read_index(path):
    """the header fields and doc_offsets of a task-IIIII.index"""
    raw = open(path, "rb").read()
    h = np.frombuffer(raw, dtype=np.uint8)
    if bytes(h[:8]) != b"LTIDX\0v1":
        raise ValueError("%s: bad magic" % path)
    u32 = lambda off: int(np.frombuffer(raw, "<u4", count=1, offset=off)[0])
    u64 = lambda off: int(np.frombuffer(raw, "<u8", count=1, offset=off)[0])
    ix = {"version": u32(8), "header_size": u32(12), "token_width": u32(16), "n_vocab": u32(20),
          "encoding": bytes(h[56:88]).rstrip(b"\0").decode(), "eos_policy": u32(88), "eos_id": u32(92),
          "task_id": u32(96), "num_tasks": u32(100), "n_docs": u64(104), "n_tokens": u64(112),
          "n_frames": u64(120), "n_files": u64(128), "shard_bytes": u64(216)}
    off = u64(136)
    ix["doc_offsets"] = np.frombuffer(raw, "<u8", count=ix["n_docs"] + 1, offset=off)
    ix["sha_ok"] = hashlib.sha256(raw[:-32]).digest() == raw[-32:]
    return ix


def read_llmc(path):
    """(magic, version, tokens) of an llm.c .bin (dev/data/data_common.py write_datafile)"""
    raw = open(path, "rb").read()
    header = np.frombuffer(raw, "<i4", count=256)
    magic, version, ntok = int(header[0]), int(header[1]), int(header[2])
    dtype = {20240520: "<u2", 20240801: "<u4"}[magic]
    toks = np.frombuffer(raw, dtype, offset=256 * 4)
    if len(toks) != ntok or any(header[3:]):
        raise ValueError("%s: header says %d tokens, file holds %d; reserved ints %s" %
                         (path, ntok, len(toks), "zero" if not any(header[3:]) else "non-zero"))
    return magic, version, toks.astype(np.int64)


def read_megatron(prefix):
    """(dtype code, documents as lists) of a Megatron-LM indexed dataset (indexed_dataset.py)"""
    idx = open(prefix + ".idx", "rb").read()
    if idx[:9] != b"MMIDIDX\x00\x00":
        raise ValueError("bad .idx header")
    version = int(np.frombuffer(idx, "<u8", count=1, offset=9)[0])
    code = idx[17]
    seq_count, doc_count = (int(x) for x in np.frombuffer(idx, "<u8", count=2, offset=18))
    off = 34
    lengths = np.frombuffer(idx, "<i4", count=seq_count, offset=off)
    off += lengths.nbytes
    pointers = np.frombuffer(idx, "<i8", count=seq_count, offset=off)
    off += pointers.nbytes
    doc_idx = np.frombuffer(idx, "<i8", count=doc_count, offset=off)
    off += doc_idx.nbytes
    if off != len(idx) or version != 1:
        raise ValueError(".idx: version %d, %d bytes, layout says %d" % (version, len(idx), off))
    dtype = {8: np.uint16, 4: np.int32}[code]
    data = np.fromfile(prefix + ".bin", dtype=dtype)
    itemsize = np.dtype(dtype).itemsize
    if len(data) * itemsize != int(lengths.sum()) * itemsize:
        raise ValueError(".bin holds %d tokens, .idx %d" % (len(data), int(lengths.sum())))
    seqs = [data[p // itemsize:p // itemsize + n].astype(np.int64).tolist() for p, n in zip(pointers, lengths)]
    docs = [sum(seqs[doc_idx[k]:doc_idx[k + 1]], []) for k in range(doc_count - 1)]
    return code, docs, lengths, pointers, doc_idx


def unzstd(path):
    if shutil.which("zstd"):
        p = subprocess.run(["zstd", "-dcq", path], capture_output=True)
        return p.stdout if p.returncode == 0 else None
    try:
        import zstandard
    except ImportError:
        return None
    with open(path, "rb") as f:  # all frames (the shard is many frames and a skippable one)
        return zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read()


# ------------------------------------------------------------------ the corpus

def corpus():
    """three JSONL files (sorted names a, b, c) of non-empty documents"""
    long_text = " ".join("word%d, naïve café; 東京 %d" % (i, i * i) for i in range(3000))
    files = {
        "a.jsonl": ["Hello world", "The quick brown fox jumps over the lazy dog.", long_text,
                    "def f(x):\n    return x ** 2  # square\n", "emoji 🙂👍🏽 and flags 🇺🇸"],
        "b.jsonl": ["Zweite Datei: Grüße aus München", "第二个文件的文本", "special text <|endoftext|> stays text",
                    "tabs\tand\r\nCRLF lines\n\n\n"],
        "c.jsonl": ["c" * 5000, "1234567890 " * 300, "last document."],
    }
    return files


# ------------------------------------------------------------------ checks

def check_encoding(tmp, encoding, eos, files):
    name = "%s, eos %s" % (encoding, eos)
    indir = os.path.join(tmp, "in")
    out = os.path.join(tmp, "run-%s-%s" % (encoding, eos))
    # expected documents per task: task I holds files [I::2] of the sorted list
    expected = {}
    for t in range(2):
        docs = []
        for fname in sorted(files)[t::2]:
            rc, so, se = dataprep("encode", "--vocab-dir", VOCAB, "--encoding", encoding, "--jsonl",
                                  os.path.join(indir, fname))
            if not tap(rc == 0, "%s: encode --jsonl %s" % (name, fname), se):
                return
            docs += [[int(x) for x in line.split()] for line in so.decode().split("\n")[:-1]]
        expected[t] = docs
    for t in range(2):
        rc, _, se = dataprep("run", "--vocab-dir", VOCAB, "--encoding", encoding, "--out", out, "--input", indir,
                             "--eos", eos, "--num-tasks", 2, "--task-id", t)
        if not tap(rc == 0, "%s: run task %d of 2" % (name, t), se):
            return
    eot = EOT[encoding]
    for t in range(2):
        docs = expected[t]
        ix = read_index(os.path.join(out, "task-%05d.index" % t))
        width = 2 if ix["n_vocab"] <= 65536 else 4
        lens = np.diff(ix["doc_offsets"].astype(np.int64)).tolist()
        want_lens = [len(d) + (eos == "append") for d in docs]
        tap(ix["version"] == 2 and ix["header_size"] == 256 and ix["token_width"] == width and ix["sha_ok"]
            and ix["encoding"] == encoding and ix["eos_policy"] == (1 if eos == "append" else 0)
            and (eos != "append" or ix["eos_id"] == eot) and ix["task_id"] == t and ix["num_tasks"] == 2
            and lens == want_lens and ix["n_tokens"] == sum(want_lens),
            "%s: task %d index read with numpy" % (name, t),
            "index %s\nlengths %s\nexpected %s" % ({k: v for k, v in ix.items() if k != "doc_offsets"},
                                                    lens, want_lens))
        stream = []
        for d in docs:
            stream += d + ([eot] if eos == "append" else [])
        raw = unzstd(os.path.join(out, "task-%05d.tokens.zst" % t))
        if raw is None:
            print("# zstd: neither the zstd command nor the zstandard module; shard check left out")
        else:
            got = np.frombuffer(raw, "<u2" if width == 2 else "<u4").astype(np.int64).tolist()
            tap(got == stream, "%s: task %d shard decompressed by zstd = the documents" % (name, t))

    # llm.c
    e1 = os.path.join(tmp, "llmc-%s-%s" % (encoding, eos))
    rc, _, se = dataprep("export", out, "--format", "llmc", "--out", e1, "--vocab-dir", VOCAB)
    if tap(rc == 0, "%s: export --format llmc" % name, se):
        for t in range(2):
            try:
                magic, version, toks = read_llmc(os.path.join(e1, "task-%05d.bin" % t))
            except (ValueError, KeyError, OSError) as e:
                tap(False, "%s: llmc task %d readable" % (name, t), repr(e))
                continue
            want_magic = (20240520, 1) if encoding == "r50k_base" else (20240801, 7)
            stream = []
            for d in expected[t]:
                stream += d + [eot] if eos == "append" else [eot] + d
            tap((magic, version) == want_magic and toks.tolist() == stream,
                "%s: llmc task %d = documents separated by <|endoftext|>" % (name, t),
                "magic %d version %d, %d tokens, expected %d" % (magic, version, len(toks), len(stream)))
    # Megatron-LM
    e2 = os.path.join(tmp, "megatron-%s-%s" % (encoding, eos))
    rc, _, se = dataprep("export", out, "--format", "megatron", "--out", e2)
    if tap(rc == 0, "%s: export --format megatron" % name, se):
        for t in range(2):
            try:
                code, got, lengths, pointers, doc_idx = read_megatron(os.path.join(e2, "task-%05d" % t))
            except (ValueError, KeyError, OSError) as e:
                tap(False, "%s: megatron task %d readable" % (name, t), repr(e))
                continue
            want = [d + ([eot] if eos == "append" else []) for d in expected[t]]
            tap(code == (8 if encoding == "r50k_base" else 4) and got == want
                and doc_idx.tolist() == list(range(len(want) + 1)) and len(lengths) == len(want),
                "%s: megatron task %d = one sequence per document" % (name, t),
                "dtype code %d, %d documents, expected %d" % (code, len(got), len(want)))


def check_tasks(tmp):
    out = os.path.join(tmp, "run-r50k_base-append")
    if not os.path.exists(os.path.join(out, "task-00001.done")):
        tap(False, "tasks: the r50k_base run is there")
        return
    os.rename(os.path.join(out, "task-00001.done"), os.path.join(out, "task-00001.done.off"))
    e = os.path.join(tmp, "partial")
    rc, _, se = dataprep("export", out, "--format", "megatron", "--out", e)
    tap(rc == 0 and "task 1 is not complete" in se and os.path.exists(os.path.join(e, "task-00000.idx"))
        and not os.path.exists(os.path.join(e, "task-00001.idx")),
        "tasks: an incomplete task is left out with a warning", "exit %d\n%s" % (rc, se))
    rc, _, se = dataprep("export", out, "--format", "llmc", "--out", e, "--task", 1)
    tap(rc == 1 and "not complete" in se, "tasks: --task of an incomplete task fails (exit 1)",
        "exit %d\n%s" % (rc, se))
    e3 = os.path.join(tmp, "one")
    rc, _, se = dataprep("export", out, "--format", "llmc", "--out", e3, "--task", 0)
    tap(rc == 0 and os.listdir(e3) == ["task-00000.bin"], "tasks: --task 0 exports only task 0",
        "exit %d, %s\n%s" % (rc, os.listdir(e3) if os.path.isdir(e3) else "-", se))
    os.rename(os.path.join(out, "task-00000.done"), os.path.join(out, "task-00000.done.off"))
    rc, _, se = dataprep("export", out, "--format", "llmc", "--out", e3)
    tap(rc == 1 and "no complete task" in se, "tasks: no complete task fails (exit 1)", "exit %d\n%s" % (rc, se))
    rc, _, se = dataprep("export", out, "--format", "parquet", "--out", e3)
    tap(rc == 2, "usage: an unknown --format is exit 2", "exit %d\n%s" % (rc, se))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    if not os.access(DATAPREP, os.X_OK):
        print("1..0 # SKIP %s is not built" % DATAPREP)
        return 77
    rc, _, _ = dataprep("run", "--help")
    if rc != 0:
        print("1..0 # SKIP `dataprep run` is not available in %s" % DATAPREP)
        return 77
    if not os.path.exists(os.path.join(VOCAB, "cl100k_base.tiktoken")):
        print("1..0 # SKIP no vocabularies in %s" % VOCAB)
        return 77
    tmp = tempfile.mkdtemp(prefix="lt-export-")
    try:
        files = corpus()
        os.makedirs(os.path.join(tmp, "in"))
        for fname, texts in files.items():
            with open(os.path.join(tmp, "in", fname), "w", encoding="utf-8") as f:
                for i, text in enumerate(texts):
                    f.write(json.dumps({"text": text}, ensure_ascii=bool(i % 2)) + "\n")
        for encoding in ["cl100k_base", "r50k_base"]:
            for eos in ["none", "append"]:
                check_encoding(tmp, encoding, eos, files)
        check_tasks(tmp)
    finally:
        if args.keep:
            print("# kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print("1..%d" % len(results))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
