#!/usr/bin/env bash
# bench/gpu/run.sh — the ~1B Llama training benchmark of issue 20: units of 8K tokens
# packed (megatron: best-fit sample packing) from documents whose lengths follow a
# long-tailed length file, trained with `trainer train` on the GPU; reports the model-FLOPs
# utilization against the GPU's bf16 dense peak and the simulator's predicted step time and
# memory against the measured ones.
#
#   bench/gpu/run.sh --build-dir DIR [--out DIR] [--lengths FILE] [--steps N] [--docs N]
#                    [--batch N] [--backend cuda|cpu] [--model 1b|nano] [--peak-tflops P]
#                    [--hardware NAME]
#
#   --build-dir DIR   a built tree (dataprep/dataprep, plans/planner, train/trainer)
#   --out DIR         work directory and results (default bench/gpu/out)
#   --lengths FILE    one token count per line (default ../shared/lengths/commoncrawl.txt,
#                     else data/lengths/*.txt); the first --docs lines are used, in order
#   --steps N         trained steps (default 12); the first is warm-up, left out of the figures
#   --docs N          documents in the corpus (default 2000)
#   --batch N         plan.global_batch, documents per step (default 64)
#   --backend B       train.backend (default cuda; `cpu` with --model nano checks this
#                     script's plumbing on a machine without a GPU)
#   --model M         1b: 22 layers, hidden 2048, 32 heads, 4 KV heads, SwiGLU 5632 (the
#                     TinyLlama-1.1B shape) with r50k's 50257-token vocab (1.2 B parameters);
#                     nano: lib/model.c's nano preset (default 1b)
#   --peak-tflops P   the bf16 dense peak (default 989: H100 SXM and H200)
#   --hardware NAME   plan.hardware, the profile the planner prices with (default h100; found
#                     in $LONGTAIL_HARDWARE_DIR, default etc/hardware): scripts/gpu-check.sh
#                     passes the profile `trainer calibrate` just measured
#
# The documents are real text cut to each length: the texts of the sample corpus
# (data/sample: the mixed JSONL and the Common Crawl WET file, part of the working tree, so
# on a GPU machine without network too) read as one stream of words in a cycle, each
# document the next words until they hold n r50k tokens (each word's tokens counted with
# `dataprep encode`; the document's own count differs a little where words join). Real
# text, not one word repeated, because the kernels see the ids: a unit of one repeated token
# made the embedding gradient one run of equal ids and the cross-entropy one target.
# Documents longer than 8K are truncated to the context (plan.context_len = 8K), as the
# planner does.
#
# MFU = model FLOPs / (measured seconds x peak), over the timed steps, where a sample of n
# tokens costs 3 x its forward FLOPs (forward + a backward of twice the forward; recompute
# not counted: model FLOPs, not hardware FLOPs), and the forward = 2 n x (the parameters of
# the layers' matrices and the LM head) + the causal attention 4 x layers x hidden x
# n (n + 1) / 2. step_err = the mean over the timed steps of |predicted - measured| /
# measured step time (metrics.jsonl's predicted_ms and seconds); mem_err = the largest
# |predicted - measured| / measured peak memory, predicted = step_summary.peak_mem_bytes,
# measured = the plan database's step_measured.peak_bytes (what `trainer train --db` stores;
# `na` when there is none). Printed last: `mfu=M tokens_per_s=T step_err=E mem_err=F`.
# Also OUT/results.txt (key=value).
# Exit status: 0; 1 when a program failed; 2 bad usage.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
build="" out="$HERE/out" lengths="" steps=12 docs=2000 batch=64 backend=cuda model=1b peak=989 hardware=h100

die() { echo "bench/gpu/run.sh: error: $*" >&2; exit "${2:-1}"; }
usage() { echo "bench/gpu/run.sh: error: $*" >&2; sed -n '9,30p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --lengths) lengths=${2:?}; shift 2 ;;
    --steps) steps=${2:?}; shift 2 ;;
    --docs) docs=${2:?}; shift 2 ;;
    --batch) batch=${2:?}; shift 2 ;;
    --backend) backend=${2:?}; shift 2 ;;
    --model) model=${2:?}; shift 2 ;;
    --peak-tflops) peak=${2:?}; shift 2 ;;
    --hardware) hardware=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    *) usage "unknown option '$1'" ;;
  esac
done
[ -n "$build" ] || usage "give --build-dir DIR (a built tree)"
for p in dataprep/dataprep plans/planner train/trainer; do
  [ -x "$build/$p" ] || die "$build/$p is missing: build it first (make -C $build $p)"
done
case "$steps$docs$batch" in *[!0-9]*) usage "--steps, --docs and --batch take counts" ;; esac
[ "$steps" -ge 2 ] || usage "--steps must be at least 2 (the first is warm-up)"
case "$model" in 1b|nano) ;; *) usage "--model is 1b or nano, not '$model'" ;; esac
if [ -z "$lengths" ]; then
  for f in "$ROOT/../shared/lengths/commoncrawl.txt" "$ROOT"/data/lengths/*.txt; do
    [ -f "$f" ] && { lengths=$f; break; }
  done
fi
if [ -z "$lengths" ] || [ ! -f "$lengths" ]; then die "no length file: give --lengths FILE (one token count per line)"; fi
command -v python3 >/dev/null || die "python3 is needed for the figures"
export LONGTAIL_HARDWARE_DIR=${LONGTAIL_HARDWARE_DIR:-$ROOT/etc/hardware}

mkdir -p "$out"
rm -rf "$out/data" "$out/run" "$out/plans.db"
# the corpus: one JSONL document per length, cut from the sample corpus's text (above)
python3 - "$ROOT/data/sample" "$out/text.txt" <<'PY' || die "cannot read the sample corpus under $ROOT/data/sample"
import glob, gzip, json, re, sys
src, dst = sys.argv[1], sys.argv[2]
texts = []
for path in sorted(glob.glob(src + "/*.jsonl.gz")):  # {"text": ...} per line
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        texts += [json.loads(line).get("text", "") for line in f if line.strip()]
for path in sorted(glob.glob(src + "/*.wet.gz")):  # WARC records: headers, a blank line, the text
    raw = gzip.open(path, "rb").read().decode("utf-8", "replace").replace("\r\n", "\n")
    for rec in re.split(r"^WARC/1\.0$", raw, flags=re.M):
        head, _, body = rec.partition("\n\n")
        if "WARC-Type: conversion" in head:
            texts.append(body)
text = "\n".join(t for t in texts if t.strip())
if len(text.split()) < 1000:
    sys.exit("too little text in " + src)
open(dst, "w", encoding="utf-8").write(text)
PY
# the text's words (each with the whitespace before it, as r50k's pretokenizer cuts) and the
# r50k tokens of each: a document takes words until it holds n tokens
python3 -c '
import json, re, sys
for w in re.findall(r"\s*\S+", open(sys.argv[1], encoding="utf-8").read()):
    print(json.dumps({"text": w}))
' "$out/text.txt" >"$out/words.jsonl"
"$build/dataprep/dataprep" encode --encoding r50k_base --vocab-dir "$ROOT/data/vocab" --jsonl "$out/words.jsonl" \
  | awk '{ print NF }' >"$out/word_tokens.txt" || die "dataprep encode of the sample text failed"
head -n "$docs" "$lengths" | python3 -c '
import json, sys
words = [json.loads(line)["text"] for line in open(sys.argv[1], encoding="utf-8")]
ntok = [int(x) for x in open(sys.argv[2])]
if len(ntok) != len(words) or sum(ntok) == 0:
    sys.exit("dataprep encode gave %d token counts for %d words" % (len(ntok), len(words)))
pos = 0
for line in sys.stdin:
    line = line.strip()
    if not line.isdigit():
        continue
    n, have, doc = min(max(int(line), 1), 8192), 0, []
    while have < n:
        doc.append(words[pos])
        have += ntok[pos]
        pos = (pos + 1) % len(words)
    print(json.dumps({"text": "".join(doc).lstrip()}))
' "$out/words.jsonl" "$out/word_tokens.txt" >"$out/corpus.jsonl"
[ -s "$out/corpus.jsonl" ] || die "no documents from $lengths"

if [ "$model" = 1b ]; then
  model_ini="layers = 22
hidden = 2048
heads = 32
kv_heads = 4
ffn = 5632"
else
  model_ini="preset = nano"
fi
cat >"$out/bench.ini" <<INI
[data]
encoding = r50k_base
[model]
$model_ini
[parallel]
dp = 1
pp = 1
[plan]
strategy = megatron
global_batch = $batch
context_len = 8K
hardware = $hardware
mem = 80G
steps = $steps
seed = 1
[train]
backend = $backend
lr = 1e-4
warmup_steps = 0
checkpoint_every = 0
INI

run() { # run LOG CMD...: the command's output to LOG; on failure its tail and exit 1
  local log=$1; shift
  echo "\$ $*" >>"$out/commands.txt"
  if ! "$@" >"$log" 2>&1; then
    tail -20 "$log" >&2
    die "failed: $* (log: $log)"
  fi
}
: >"$out/commands.txt"
run "$out/dataprep.log" "$build/dataprep/dataprep" run --input "$out/corpus.jsonl" --format jsonl --field text \
  --encoding r50k_base --vocab-dir "$ROOT/data/vocab" --out "$out/data" -q
run "$out/planner.log" "$build/plans/planner" build --config "$out/bench.ini" --data "$out/data" \
  --db "$out/plans.db" --strategy megatron --steps "$steps"
run "$out/trainer.log" "$build/train/trainer" train --config "$out/bench.ini" --db "$out/plans.db" \
  --data "$out/data" --out "$out/run" --steps "$steps"

python3 - "$out" "$peak" <<'PY'
import json, sqlite3, sys, configparser
out, peak = sys.argv[1], float(sys.argv[2]) * 1e12
cfg = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
cfg.read(out + "/bench.ini")
m = cfg["model"]
if "preset" in m:  # nano (lib/model.c): 2 layers, hidden 64, 4 heads, 2 KV heads, SwiGLU 192
    L, H, nh, nkv, F = 2, 64, 4, 2, 192
else:
    L, H, nh, nkv, F = (int(m[k]) for k in ("layers", "hidden", "heads", "kv_heads", "ffn"))
V = int(m.get("vocab", 50257))  # model.vocab defaults to data.encoding's size: r50k_base, 50257
hd = H // nh
mat = L * (H * H + 2 * H * nkv * hd + H * H + 3 * H * F) + V * H  # q, k, v, o, MLP; LM head
db = sqlite3.connect(out + "/plans.db")
# the tokens each step trains, per sample (truncated to the context: the slices' ranges)
flops = {}
for step, sample, n in db.execute(
        "SELECT step, sample_id, SUM(tok_end - tok_begin) FROM plan_slices WHERE pass = 'F' GROUP BY step, sample_id"):
    flops[step] = flops.get(step, 0) + 3 * (2 * n * mat + 4 * L * H * n * (n + 1) / 2)
pred_mem = {s: b for s, b in db.execute("SELECT step, peak_mem_bytes FROM step_summary")}
rows = [json.loads(line) for line in open(out + "/run/metrics.jsonl") if line.strip()]
timed = rows[1:]  # the first step is warm-up (allocation, cuBLASLt heuristics)
if not timed:
    sys.exit("no timed steps in metrics.jsonl")
secs = sum(r["seconds"] for r in timed)
toks = sum(r["tokens"] for r in timed)
fl = sum(flops.get(r["plan_step"], 0) for r in timed)
mfu = fl / secs / peak
errs = [abs(r["predicted_ms"] - 1e3 * r["seconds"]) / (1e3 * r["seconds"]) for r in timed if r.get("predicted_ms")]
step_err = sum(errs) / len(errs) if errs else float("nan")
# the measured peak: what `trainer train --db` stores per step (the step_measured view of the
# plan database, peak_bytes), else a key of metrics.jsonl; "na" when neither exists
meas_mem = {}
try:
    meas_mem = {s: b for s, b in db.execute("SELECT step, peak_bytes FROM step_measured") if b and b > 0}
except sqlite3.Error:
    pass
if not meas_mem:
    key = next((k for k in ("device_peak_bytes", "peak_bytes") if k in timed[0]), None)
    if key:
        meas_mem = {r["plan_step"]: r[key] for r in timed if r.get(key)}
merrs = [abs(pred_mem[r["plan_step"]] - meas_mem[r["plan_step"]]) / meas_mem[r["plan_step"]]
         for r in timed if r["plan_step"] in meas_mem and r["plan_step"] in pred_mem]
mem_err = "%.4f" % max(merrs) if merrs else "na"
with open(out + "/results.txt", "w") as f:
    f.write("timed_steps=%d seconds=%.4f tokens=%d model_flops=%.4e peak_flops=%.4e\n" % (len(timed), secs, toks, fl, peak))
    f.write("mfu=%.4f tokens_per_s=%.0f step_err=%.4f mem_err=%s\n" % (mfu, toks / secs, step_err, mem_err))
for r in timed:
    print("step %d: %d tokens, %.1f ms measured, %.1f ms predicted" % (r["step"], r["tokens"], 1e3 * r["seconds"],
                                                                      r.get("predicted_ms", float("nan"))))
print("mfu=%.4f tokens_per_s=%.0f step_err=%.4f mem_err=%s" % (mfu, toks / secs, step_err, mem_err))
PY
