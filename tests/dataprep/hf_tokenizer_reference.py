#!/usr/bin/env python3
"""
tests/dataprep/hf_tokenizer_reference.py — `dataprep encode --tokenizer tokenizer.json` must give
exactly the ids of PyPI tokenizers' Tokenizer.from_file(F).encode(text, add_special_tokens=False).

Usage:  python3 tests/dataprep/hf_tokenizer_reference.py [--keep]
Environment: top_builddir, top_srcdir (set by `make check`); LONGTAIL_DATAPREP (default
$top_builddir/dataprep/dataprep); LONGTAIL_SHARED (default $top_srcdir/../shared);
LONGTAIL_HF_HEAVY=1 encodes more text (2000 random strings, 400 documents).

The tokenizer.json files are built here, offline, with the tokenizers library (BpeTrainer
on shared/corpus text), in the layouts of real models:
  gpt2     ByteLevel(use_regex=True) pre-tokenizer, <|endoftext|> added after training
  llama3   Sequence[Split(cl100k's regex, Isolated), ByteLevel(use_regex=False)],
           ignore_merges=True, specials <|begin_of_text|> ..., one non-special added token
  qwen2    Sequence[Split(Qwen2's regex), ByteLevel(use_regex=False)] (PCRE2 engine), no normalizer
  gaps     a Split regex that leaves text unmatched and matches empty (tokenizers keeps the gaps)
  cl100k   shared/vocab/cl100k_base.tiktoken converted to vocab + merges in the Llama-3 layout
           (100k merges; ordinary ids must equal tokenizers' AND tiktoken's)
and refusals (Unigram, WordPiece, NFC normalizer, Metaspace, byte_fallback) must fail naming what was found.
Expected ids come from tokenizers only.
"""
import gzip, json, os, random, subprocess, sys, tempfile

PROG = "hf_tokenizer_reference"
VENV_PYTHON = os.path.expanduser("~/.local/share/longtail/venv/bin/python3")
try:
    import tokenizers
    from tokenizers import Tokenizer, Regex, models, pre_tokenizers, decoders, trainers, normalizers
except ImportError:
    if os.path.exists(VENV_PYTHON) and os.path.abspath(sys.executable) != VENV_PYTHON:
        os.execv(VENV_PYTHON, [VENV_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    print(PROG + ": SKIP: tokenizers is not importable by " + sys.executable)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("top_srcdir", os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("top_builddir", SRC)
BIN = os.environ.get("LONGTAIL_DATAPREP", os.path.join(BUILD, "dataprep", "dataprep"))
SHARED = os.environ.get("LONGTAIL_SHARED", os.path.join(SRC, "..", "shared"))
HEAVY = os.environ.get("LONGTAIL_HF_HEAVY") == "1"
CL100K = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
# Leaves text between matches (kept as pieces by Split, dropped by tiktoken) and matches empty.
GAPS = r"""\p{L}+| ?\p{N}{0,2}|'s"""
failures = 0


def log(msg):
    print(PROG + ": " + msg, flush=True)


def corpus_texts(limit):
    out = []
    path = os.path.join(SHARED, "corpus", "jsonl", "mixed-0.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            t = json.loads(line).get("text")
            if isinstance(t, str) and t:
                out.append(t)
            if len(out) >= limit:
                break
    return out


def adversarial(rng, n):
    pieces = ["'s", "'T", "'LL", "'ve", "don't", "I'M", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000",
              "12345678901234", "٣٤٥", "½", "😀", "👨‍👩‍👧", "🇫🇷", "é", "e\u0301", "中文字符", "ไทย", "हिन्दी",
              "!!!", "...", "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>", "<tool>", "ab", "The", "the",
              "\u200b", "\ufeff", "Ω", "ǅ", "ⅷ", "\U0001d400", "\x00", "\x7f", "\u0085"]
    out = []
    for _ in range(n):
        k = rng.randint(0, 40)
        s = "".join(rng.choice(pieces) if rng.random() < 0.7 else chr(rng.choice(
            [rng.randint(32, 0x24f), rng.randint(0x370, 0x3000), rng.randint(0x1f300, 0x1faff), rng.randint(0, 0xd7ff)]))
            for _ in range(k))
        out.append(s)
    out += [" " * 300, "\n" * 50 + "x", "9" * 1000, "a" * 3000, " \t \n " * 20, "x" + " " * 17 + "y"]
    return out


def build(kind, train_text, tmp):
    if kind == "gpt2":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex({"llama3": CL100K, "qwen2": QWEN2, "gaps": GAPS}[kind]), behavior="isolated",
                                 invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train_text, trainer=trainer)
    if kind == "gpt2":
        tok.add_special_tokens(["<|endoftext|>"])
    elif kind == "llama3":
        tok.add_special_tokens(["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"])
        tok.add_tokens(["<tool>"])
    else:
        tok.add_special_tokens(["<|endoftext|>", "<|im_start|>"])
    d = os.path.join(tmp, kind)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tokenizer.json")
    tok.save(path)
    return path


def from_tiktoken(tmp):
    """shared/vocab/cl100k_base.tiktoken as a Llama-3-style tokenizer.json (each token's merge:
    tiktoken's BPE of its bytes with the lower ranks gives exactly two parts)."""
    import base64
    b2u = pre_tokenizers.ByteLevel.alphabet()  # set only; build the map as GPT-2 does
    bs = list(range(0x21, 0x7f)) + list(range(0xa1, 0xad)) + list(range(0xae, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    m = {b: chr(c) for b, c in zip(bs, cs)}
    ranks = {}
    with open(os.path.join(SHARED, "vocab", "cl100k_base.tiktoken"), "rb") as f:
        for line in f:
            if line.strip():
                t, r = line.split()
                ranks[base64.b64decode(t)] = int(r)
    u = lambda b: "".join(m[x] for x in b)
    vocab, merges = {}, []
    for tok_b, r in sorted(ranks.items(), key=lambda x: x[1]):
        vocab[u(tok_b)] = r
        if len(tok_b) == 1:
            continue
        parts = [bytes([x]) for x in tok_b]
        while len(parts) > 2:
            best = None
            for i in range(len(parts) - 1):
                rr = ranks.get(parts[i] + parts[i + 1])
                if rr is not None and rr < r and (best is None or rr < best[0]):
                    best = (rr, i)
            i = best[1]
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        merges.append((r, u(parts[0]) + " " + u(parts[1])))
    merges = [s for _, s in sorted(merges)]
    specials = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258}
    j = {"version": "1.0", "truncation": None, "padding": None,
         "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                           "normalized": False, "special": True} for c, i in specials.items()],
         "normalizer": None,
         "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
             {"type": "Split", "pattern": {"Regex": CL100K}, "behavior": "Isolated", "invert": False},
             {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
         "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
         "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                   "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                   "vocab": vocab, "merges": merges}}
    d = os.path.join(tmp, "cl100k_hf")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    return path


def ours(path, texts, tmp):
    jl = os.path.join(tmp, "in.jsonl")
    with open(jl, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}) + "\n")
    p = subprocess.run([BIN, "encode", "--tokenizer", path, "--jsonl", jl], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if p.returncode != 0:
        return None, p.stderr.decode(errors="replace")
    return [[int(x) for x in l.split()] for l in p.stdout.decode().split("\n")[:len(texts)]], ""


def compare(name, path, texts, tmp):
    global failures
    ref = Tokenizer.from_file(path)
    want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    got, why = ours(path, texts, tmp)
    if got is None:
        failures += 1
        log("FAIL: %s: dataprep encode failed: %s" % (name, why.strip()))
        return
    bad = [i for i in range(len(texts)) if got[i] != want[i]]
    if bad:
        failures += 1
        i = bad[0]
        log("FAIL: %s: %d of %d texts differ; first %r:\n  tokenizers %s\n  dataprep   %s"
            % (name, len(bad), len(texts), texts[i][:200], want[i][:40], got[i][:40]))
    else:
        log("ok: %s: %d texts, %d ids equal" % (name, len(texts), sum(map(len, want))))


def tiktoken_agrees(path, texts, tmp):
    """The converted cl100k file: dataprep's ids equal tiktoken's encode_ordinary too."""
    global failures
    try:
        import base64, tiktoken
    except ImportError:
        log("skip: tiktoken is not importable: cl100k not compared with tiktoken")
        return
    ranks = {}
    with open(os.path.join(SHARED, "vocab", "cl100k_base.tiktoken"), "rb") as f:
        for line in f:
            if line.strip():
                t, r = line.split()
                ranks[base64.b64decode(t)] = int(r)
    pat = json.load(open(os.path.join(SHARED, "vocab", "cl100k_base.json")))["pat_str"]
    enc = tiktoken.Encoding("cl100k_base", pat_str=pat, mergeable_ranks=ranks, special_tokens={})
    want = [enc.encode_ordinary(t) for t in texts]
    got, why = ours(path, texts, tmp)
    if got is None or got != want:
        failures += 1
        log("FAIL: cl100k tokenizer.json: dataprep differs from tiktoken %s" % why.strip())
    else:
        log("ok: cl100k tokenizer.json: %d texts equal tiktoken's encode_ordinary" % len(texts))


def refuse(name, j, expect, tmp):
    global failures
    d = os.path.join(tmp, "refuse-" + name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(j if isinstance(j, str) else json.dumps(j))
    p = subprocess.run([BIN, "encode", "--tokenizer", path], input=b"x", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = p.stderr.decode(errors="replace")
    if p.returncode == 0 or expect not in err:
        failures += 1
        log("FAIL: refuse %s: rc %d, stderr %r (wanted %r)" % (name, p.returncode, err.strip(), expect))
    else:
        log("ok: refuse %s: %s" % (name, err.strip().splitlines()[0][:160]))


def run_and_cat(path, texts, tmp):
    """`dataprep run` with data.tokenizer: the shard holds the tokenizers library's ids
    (plus Llama 3's <|end_of_text|> with data.eos = append), and `dataprep cat` finds the
    tokenizer.json again from the run's stats (no --tokenizer) and gives the texts back."""
    global failures
    from tokenizers import Tokenizer
    hf = Tokenizer.from_file(path)
    inp = os.path.join(tmp, "docs.jsonl")
    with open(inp, "w", encoding="utf-8") as f:
        for t in texts:
            if t.strip():
                f.write(json.dumps({"text": t}) + "\n")
    kept = [json.loads(l)["text"] for l in open(inp, encoding="utf-8")]
    out = os.path.join(tmp, "run-hf")
    p = subprocess.run([BIN, "run", "--set", "data.tokenizer=" + path, "--eos", "append", "--threads", "1",
                        "--out", out, "--input", inp], capture_output=True)
    if p.returncode != 0:
        log("FAIL: dataprep run with data.tokenizer: exit %d %s" % (p.returncode, p.stderr.decode()[-800:]))
        failures += 1
        return
    c = subprocess.run([BIN, "cat", out], capture_output=True)
    if c.returncode != 0:
        log("FAIL: dataprep cat of a data.tokenizer run: %s" % c.stderr.decode()[-500:])
        failures += 1
        return
    rows = [json.loads(l) for l in c.stdout.decode().splitlines()]
    eos = hf.token_to_id("<|end_of_text|>")
    lengths = [int(x) for x in subprocess.run([BIN, "lengths", out], capture_output=True).stdout.split()]
    want = [len(hf.encode(t, add_special_tokens=False).ids) + 1 for t in kept]
    if [r["text"] for r in rows] != [t + "<|end_of_text|>" for t in kept] and [r["text"] for r in rows] != kept:
        log("FAIL: dataprep cat: texts differ from the input")
        failures += 1
    elif lengths != want or eos is None:
        log("FAIL: shard lengths with EOS differ from tokenizers' + 1: %s vs %s" % (lengths[:5], want[:5]))
        failures += 1
    else:
        log("ok run + cat with data.tokenizer (%d documents, EOS id %d)" % (len(rows), eos))
    # a run without EOS, exported for llm.c: export finds the run's tokenizer.json in its
    # stats (no --tokenizer, no --eos-id) and puts Llama 3's <|end_of_text|> before every
    # document, as llm.c's fineweb.py does: EOT doc EOT doc ...
    out2, exp = os.path.join(tmp, "run-hf-noeos"), os.path.join(tmp, "export-llmc")
    p = subprocess.run([BIN, "run", "--set", "data.tokenizer=" + path, "--threads", "1", "--out", out2, "--input", inp],
                       capture_output=True)
    e = p.returncode == 0 and subprocess.run([BIN, "export", out2, "--format", "llmc", "--out", exp],
                                             capture_output=True)
    if not e or e.returncode != 0:
        log("FAIL: dataprep export --format llmc of a data.tokenizer run without EOS: %s" %
            (e.stderr.decode()[-500:] if e else p.stderr.decode()[-500:]))
        failures += 1
        return
    import struct
    b = open(os.path.join(exp, "task-00000.bin"), "rb").read()
    head = struct.unpack("<256i", b[:1024])
    width = 2 if head[0] == 20240520 else 4
    got = list(struct.unpack("<%d%s" % (head[2], "H" if width == 2 else "I"), b[1024:]))
    want = []
    for t in kept:
        want += [eos] + hf.encode(t, add_special_tokens=False).ids
    if got != want:
        log("FAIL: export llmc of a data.tokenizer run: %d tokens, tokenizers with <|end_of_text|> %d; first %s vs %s"
            % (len(got), len(want), got[:8], want[:8]))
        failures += 1
    else:
        log("ok export llmc of a data.tokenizer run without EOS: %d tokens, <|end_of_text|> (%d) before each of %d "
            "documents" % (len(got), eos, len(kept)))


def main():
    if not os.access(BIN, os.X_OK):
        log("FAIL: %s is not an executable program" % BIN)
        return 1
    rng = random.Random(int(os.environ.get("LONGTAIL_FUZZ_SEED", "20261129")))
    docs = corpus_texts(400 if HEAVY else 120)
    train = docs[:80]
    texts = docs + adversarial(rng, 2000 if HEAVY else 400)
    with tempfile.TemporaryDirectory(prefix="hftok-") as tmp:
        paths = {k: build(k, train, tmp) for k in ("gpt2", "llama3", "qwen2", "gaps")}
        for k, p in paths.items():
            compare(k, p, texts, tmp)
        cl = from_tiktoken(tmp)
        compare("cl100k as tokenizer.json", cl, texts, tmp)
        tiktoken_agrees(cl, [t for t in texts if "<|" not in t], tmp)
        run_and_cat(paths["llama3"], docs[:40], tmp)
        base = json.load(open(paths["qwen2"], encoding="utf-8"))
        j = dict(base); j["normalizer"] = {"type": "NFC"}
        refuse("nfc", j, "normalizer NFC", tmp)
        j = dict(base); j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": False}
        refuse("metaspace", j, "pre_tokenizer Metaspace", tmp)
        j = dict(base); j["model"] = dict(base["model"], byte_fallback=True)
        refuse("byte_fallback", j, "byte_fallback", tmp)
        refuse("unigram", {"model": {"type": "Unigram", "vocab": [["a", 0.0]]}}, "model type Unigram", tmp)
        refuse("wordpiece", {"model": {"type": "WordPiece", "vocab": {"a": 0}}}, "model type WordPiece", tmp)
        refuse("not json", "{\"model\": ", "tokenizer.json", tmp)
    log("%s" % ("FAIL" if failures else "PASS"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
