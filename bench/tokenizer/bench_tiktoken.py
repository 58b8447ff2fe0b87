#!/usr/bin/env python3
"""bench/tokenizer/bench_tiktoken.py — the peer half of bench/tokenizer: PyPI tiktoken's
Encoding.encode_ordinary on the same documents, measured as bench_tokenizer.c measures ours.

    bench_tiktoken.py --encoding NAME [--vocab-dir DIR] (--jsonl FILE | --text FILE)
                      [--threads 1] [--samples 5] [--min-sample-s 0.2] [--label NAME]

tiktoken is loaded offline from NAME.tiktoken + NAME.json (../shared/vocab/README.md).

Method (the same as bench_tokenizer.c):
  1. check pass: encode every document once; the token count and the SHA-256 of all ids
     (4 bytes little-endian each, documents in file order) are printed so run.sh can check
     that both sides produced the same ids;
  2. warm-up pass, which also calibrates `rounds` (passes per sample, enough for a sample to
     last --min-sample-s);
  3. --samples samples per thread count, the thread counts interleaved; a sample is timed
     with time.perf_counter (CLOCK_MONOTONIC on Linux) around `rounds` passes. One thread
     calls encode_ordinary per document in a loop; T > 1 threads take documents (largest
     first) from a ThreadPoolExecutor, as Encoding.encode_ordinary_batch does (tiktoken
     releases the GIL while encoding).

Output: one key=value line per thread count, with the keys of bench_tokenizer.c
(bench=tiktoken). When tiktoken fails on a text (it panics with a fancy-regex
StackOverflow on some long runs), the line says error=... instead of timings.
"""
import argparse
import array
import hashlib
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def load_encoding(name, vocab_dir):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    with open(os.path.join(vocab_dir, name + ".json"), encoding="utf-8") as f:
        meta = json.load(f)
    ranks = load_tiktoken_bpe(os.path.join(vocab_dir, name + ".tiktoken"))
    return tiktoken, tiktoken.Encoding(name, pat_str=meta["pat_str"], mergeable_ranks=ranks,
                                       special_tokens=meta["special_tokens"])


def read_docs(args):
    if args.text:
        with open(args.text, "rb") as f:
            return [f.read().decode("utf-8", "replace")]
    docs = []
    with open(args.jsonl, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                docs.append(json.loads(line)["text"])
    return docs


def ids_digest(encode, docs):
    h = hashlib.sha256()
    tokens = 0
    for d in docs:
        ids = array.array("I", encode(d))
        if sys.byteorder != "little":
            ids.byteswap()
        h.update(ids.tobytes())
        tokens += len(ids)
    return tokens, h.hexdigest()


def run_sample(encode, order, rounds, threads, pool):
    """Seconds for `rounds` passes over the documents on `threads` threads."""
    if threads == 1:
        t0 = time.perf_counter()
        for _ in range(rounds):
            for d in order:
                encode(d)
        return time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(rounds):
        for _ in pool.map(encode, order):
            pass
    return time.perf_counter() - t0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--encoding", required=True)
    ap.add_argument("--vocab-dir", default=os.path.normpath(os.path.join(here, "..", "..", "data", "vocab")))
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--jsonl")
    src.add_argument("--text")
    ap.add_argument("--threads", default="1", help="comma-separated thread counts")
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--min-sample-s", type=float, default=0.2)
    ap.add_argument("--label", default="-")
    args = ap.parse_args()
    thread_counts = [int(t) for t in args.threads.split(",")]

    tiktoken, enc = load_encoding(args.encoding, args.vocab_dir)
    docs = read_docs(args)
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    head = (f"bench=tiktoken set={args.label} encoding={args.encoding} engine=tiktoken-{tiktoken.__version__}"
            f" docs={len(docs)} bytes={nbytes}")
    encode = enc.encode_ordinary
    try:
        tokens, digest = ids_digest(encode, docs)
    except BaseException as e:  # pyo3 panics derive from BaseException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        why = f"{type(e).__name__}: {e}".replace("\n", " ").replace(" ", "_")[:200]
        for t in thread_counts:
            print(f"{head} threads={t} error={why}", flush=True)
        return 0

    order = sorted(docs, key=lambda d: -len(d))
    pool = ThreadPoolExecutor(max(thread_counts)) if max(thread_counts) > 1 else None
    for t in thread_counts:  # warm-up
        run_sample(encode, order, 1, t, pool)
    one = run_sample(encode, order, 1, 1, pool)
    rounds = int(args.min_sample_s / one) + 1 if 0 < one < args.min_sample_s else 1
    times = {t: [] for t in thread_counts}
    for _ in range(args.samples):
        for t in thread_counts:
            times[t].append(run_sample(encode, order, rounds, t, pool) / rounds)
    if pool:
        pool.shutdown()
    for t in thread_counts:
        best, median = min(times[t]), statistics.median(times[t])
        print(f"{head} threads={t} tokens={tokens} ids_sha256={digest} rounds={rounds}"
              f" samples={args.samples} best_s={best:.6f} median_s={median:.6f}"
              f" mb_per_s={nbytes / best / 1e6:.3f} tokens_per_s={tokens / best:.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
