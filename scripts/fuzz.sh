#!/usr/bin/env bash
# scripts/fuzz.sh — build and run the libFuzzer targets of tests/fuzz/ (see docs/fuzzing.md).
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--build-dir DIR] [TARGET...]
#   scripts/fuzz.sh --regress [--build-dir DIR] [TARGET...]
#
# TARGETs: fuzz_config fuzz_jsonl fuzz_numbers fuzz_jsondoc fuzz_pretok fuzz_vocab fuzz_encode
# fuzz_wet fuzz_jsonl_reader fuzz_wikixml fuzz_wikitext fuzz_index fuzz_hardware fuzz_planstore
# fuzz_safetensors fuzz_slurm fuzz_parquet fuzz_hftok (default: all). Each target is compiled
# with clang (-fsanitize=fuzzer,address,undefined) into DIR (default _build/fuzz, or
# $LONGTAIL_FUZZ_BUILD_DIR), then
#   default     fuzzed for N seconds (default 30) on DIR/corpus/TARGET, a copy of the seeds
#               of tests/fuzz/corpus/TARGET/ (the source tree is never written); with
#               --jobs J > 1, J worker processes (libFuzzer -fork=J). -timeout=10 (a hang
#               is a failure) and -rss_limit_mb=2048.
#   --regress   runs every seed and every tests/fuzz/crashes/TARGET/ input once.
# Per target one line: "PASS: fuzz TARGET (N runs in S s)", or "FAIL: fuzz TARGET" with
# the crash file, the first lines of the report and the command that reproduces it, or
# "SKIP: fuzz TARGET (reason)". Full logs: DIR/logs/TARGET.log.
# Exit status: 0 all ran targets passed, 1 a failure, 2 bad usage, 77 nothing could run
# (no clang / libFuzzer).
# Compiler: $LONGTAIL_FUZZ_CC, else clang, else clang-14.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ALL_TARGETS=(fuzz_config fuzz_jsonl fuzz_numbers fuzz_jsondoc fuzz_pretok fuzz_vocab fuzz_encode
  fuzz_wet fuzz_jsonl_reader fuzz_wikixml fuzz_wikitext fuzz_index fuzz_hardware fuzz_planstore
  fuzz_safetensors fuzz_slurm fuzz_parquet fuzz_hftok)

TOKENIZER_SOURCES="dataprep/tokenizer.c dataprep/pretok.c dataprep/unicode_tables.c lib/json.c \
lib/error.c lib/files.c lib/strlist.c lib/sha256.c lib/log.c"
READER_SOURCES="dataprep/reader.c dataprep/reader_wet.c dataprep/reader_jsonl.c dataprep/reader_wikixml.c dataprep/reader_skip.c \
dataprep/reader_parquet.c dataprep/parquet.c dataprep/parquet_thrift.c \
dataprep/wikitext.c dataprep/source.c lib/json.c lib/error.c"
# The library sources each target links (relative to ROOT).
target_sources() {
  case "$1" in
    fuzz_config) echo "lib/config.c lib/config_schema.c lib/strutil.c lib/error.c" ;;
    fuzz_jsonl) echo "lib/json.c lib/error.c" ;;
    fuzz_numbers) echo "lib/strutil.c lib/error.c" ;;
    fuzz_jsondoc) echo "lib/json.c lib/error.c tests/testutil.c" ;;
    fuzz_pretok) echo "dataprep/pretok.c dataprep/unicode_tables.c lib/json.c lib/error.c" ;;
    fuzz_vocab | fuzz_encode) echo "$TOKENIZER_SOURCES" ;;
    fuzz_hftok) echo "$TOKENIZER_SOURCES dataprep/hf_tokenizer.c" ;;
    fuzz_wet | fuzz_jsonl_reader | fuzz_wikixml | fuzz_parquet) echo "$READER_SOURCES" ;;
    fuzz_wikitext) echo "dataprep/wikitext.c lib/error.c" ;;
    fuzz_index) echo "dataprep/shard.c lib/error.c lib/files.c lib/sha256.c lib/strlist.c" ;;
    fuzz_hardware) echo "plans/cost/hardware.c plans/batches/lengths.c lib/error.c lib/strutil.c lib/files.c lib/strlist.c" ;;
    fuzz_planstore) echo "plans/store/store.c plans/store/schema.c plans/store/config.c plans/store/ops_text.c \
plans/store/write.c plans/store/read.c plans/store/checks.c plans/store/measured.c plans/store/validate.c plans/strategies/plan.c plans/schedule/schedule.c plans/schedule/generators.c \
plans/schedule/sim.c plans/schedule/deps.c plans/cost/cost.c plans/cost/hardware.c lib/db.c lib/error.c lib/files.c lib/strutil.c lib/strlist.c lib/config.c \
lib/config_schema.c lib/model.c lib/log.c plans/batches/sampler.c plans/batches/lengths.c dataprep/dataset.c dataprep/shard.c lib/rng.c \
lib/sha256.c lib/json.c dataprep/tokenizer.c dataprep/pretok.c dataprep/unicode_tables.c dataprep/hf_tokenizer.c" ;;
    fuzz_safetensors) echo "train/io/safetensors.c lib/bf16.c lib/json.c lib/error.c lib/files.c lib/strlist.c" ;;
    fuzz_slurm) echo "jobctl/slurm.c jobctl/proc.c lib/strutil.c lib/error.c" ;;
    *) return 1 ;;
  esac
}
# Longest generated input: config lines may be up to 4000 bytes (LT_CONFIG_LINE_MAX).
target_max_len() {
  case "$1" in
    fuzz_config) echo 12000 ;;
    fuzz_vocab) echo 8192 ;;
    fuzz_encode) echo 16384 ;;
    fuzz_parquet) echo 16384 ;;
    fuzz_hftok) echo 16384 ;;
    *) echo 4096 ;;
  esac
}

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
die_usage() { printf 'fuzz.sh: error: %s\n' "$1" >&2; printf 'usage: scripts/fuzz.sh [--seconds N] [--jobs J] [--build-dir DIR] [--regress] [TARGET...]\n' >&2; exit 2; }

SECONDS_PER_TARGET=30
JOBS=1
REGRESS=0
BUILD_DIR="${LONGTAIL_FUZZ_BUILD_DIR:-$ROOT/_build/fuzz}"
TARGETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) [ $# -ge 2 ] || die_usage "--seconds needs a value"; SECONDS_PER_TARGET="$2"; shift 2 ;;
    --seconds=*) SECONDS_PER_TARGET="${1#*=}"; shift ;;
    --jobs) [ $# -ge 2 ] || die_usage "--jobs needs a value"; JOBS="$2"; shift 2 ;;
    --jobs=*) JOBS="${1#*=}"; shift ;;
    --build-dir) [ $# -ge 2 ] || die_usage "--build-dir needs a value"; BUILD_DIR="$2"; shift 2 ;;
    --build-dir=*) BUILD_DIR="${1#*=}"; shift ;;
    --regress) REGRESS=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die_usage "unknown option '$1'" ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
[[ "$SECONDS_PER_TARGET" =~ ^[1-9][0-9]*$ ]] || die_usage "--seconds wants a positive integer, got '$SECONDS_PER_TARGET'"
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die_usage "--jobs wants a positive integer, got '$JOBS'"
[ "${#TARGETS[@]}" -gt 0 ] || TARGETS=("${ALL_TARGETS[@]}")
for t in "${TARGETS[@]}"; do
  target_sources "$t" >/dev/null || die_usage "unknown target '$t' (targets: ${ALL_TARGETS[*]})"
done
mkdir -p "$BUILD_DIR"
BUILD_DIR="$(cd "$BUILD_DIR" && pwd)"

# ------------------------------------------------------------------ toolchain
CC="${LONGTAIL_FUZZ_CC:-}"
if [ -z "$CC" ]; then
  for c in clang clang-14; do
    if command -v "$c" >/dev/null 2>&1; then CC="$c"; break; fi
  done
fi
skip_all() {
  for t in "${TARGETS[@]}"; do printf 'SKIP: fuzz %s (%s)\n' "$t" "$1"; done
  exit 77
}
if [ -z "$CC" ] || ! command -v "$CC" >/dev/null 2>&1; then
  skip_all "no clang found; Debian: apt-get install clang-14 libclang-rt-14-dev llvm-14"
fi
mkdir -p "$BUILD_DIR/probe"
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
  'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
  'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
  > "$BUILD_DIR/probe/probe.c"
if ! "$CC" -fsanitize=fuzzer,address,undefined -o "$BUILD_DIR/probe/probe" "$BUILD_DIR/probe/probe.c" \
    >"$BUILD_DIR/probe/probe.log" 2>&1; then
  skip_all "$CC cannot link -fsanitize=fuzzer,address,undefined; Debian: apt-get install libclang-rt-14-dev; see $BUILD_DIR/probe/probe.log"
fi
# Symbolized stack traces in reports.
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
  for s in llvm-symbolizer llvm-symbolizer-14 /usr/lib/llvm-14/bin/llvm-symbolizer; do
    if command -v "$s" >/dev/null 2>&1; then ASAN_SYMBOLIZER_PATH="$(command -v "$s")"; export ASAN_SYMBOLIZER_PATH; break; fi
  done
fi
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

CFLAGS=("-fsanitize=fuzzer,address,undefined" -fno-sanitize-recover=undefined -g -O1 -std=c11
  -D_GNU_SOURCE -I"$ROOT" -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes
  -Wmissing-prototypes -Wpointer-arith)

# Build DIR/TARGET when it is missing or older than a source; returns 1 (and says why) if not.
build_target() {
  local t="$1" bin="$BUILD_DIR/$1" srcs extra=() stale=0 f
  read -r -a srcs <<<"$(target_sources "$t")"
  srcs=("tests/fuzz/$t.c" "${srcs[@]}")
  if [ "$t" = fuzz_config ]; then
    if ! pkg-config --exists inih 2>/dev/null; then
      printf 'SKIP: fuzz %s (inih not found by pkg-config; Debian: apt-get install libinih-dev)\n' "$t"
      return 2
    fi
    read -r -a extra <<<"$(pkg-config --cflags --libs inih)"
  fi
  case "$t" in
    fuzz_pretok | fuzz_vocab | fuzz_encode | fuzz_hftok)
      if ! pkg-config --exists libpcre2-8 2>/dev/null; then
        printf 'SKIP: fuzz %s (libpcre2-8 not found by pkg-config; Debian: apt-get install libpcre2-dev)\n' "$t"
        return 2
      fi
      read -r -a extra <<<"$(pkg-config --cflags --libs libpcre2-8) -DLT_FUZZ_VOCAB_DIR=\"$ROOT/data/vocab\" -lpthread"
      ;;
    fuzz_wet | fuzz_jsonl_reader | fuzz_wikixml | fuzz_parquet) extra=(-lz -lzstd -lbz2 -lexpat -lsnappy) ;;
    fuzz_index) extra=(-lzstd -lxxhash -lpthread) ;;
    fuzz_planstore)
      # store.c includes buildconfig.h (configure's) for PACKAGE_VERSION: a stand-in
      mkdir -p "$BUILD_DIR/include"
      printf '#define PACKAGE_VERSION "fuzz"\n' >"$BUILD_DIR/include/buildconfig.h"
      # dataset.c opens the run's tokenizer (lt_dataset_tokenizer): the tokenizer's sources and PCRE2
      extra=(-I"$BUILD_DIR/include" -lsqlite3 -lzstd -lxxhash -lm -lpthread $(pkg-config --cflags --libs inih libpcre2-8 2>/dev/null))
      ;;
  esac
  local abs=()
  for f in "${srcs[@]}"; do abs+=("$ROOT/$f"); done
  [ -x "$bin" ] || stale=1
  for f in "${abs[@]}" "$ROOT"/lib/*.h "$ROOT"/dataprep/*.h "$ROOT"/plans/*/*.h "$ROOT"/train/*.h "$ROOT"/train/*/*.h "$ROOT"/jobctl/*.h "$ROOT"/tests/fuzz/*.h "$ROOT/scripts/fuzz.sh"; do
    if [ "$f" -nt "$bin" ]; then stale=1; fi
  done
  [ "$stale" = 1 ] || return 0
  mkdir -p "$BUILD_DIR/logs"
  if ! "$CC" "${CFLAGS[@]}" -o "$bin" "${abs[@]}" "${extra[@]}" >"$BUILD_DIR/logs/$t.build.log" 2>&1; then
    printf 'FAIL: fuzz %s (build failed; %s)\n' "$t" "$BUILD_DIR/logs/$t.build.log"
    sed -n '1,20p' "$BUILD_DIR/logs/$t.build.log" | sed 's/^/  /'
    return 1
  fi
  return 0
}

# The first lines of the report in a libFuzzer log.
report_excerpt() {
  local log="$1" start
  start="$(grep -n -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:|property violated|ALARM: working on the last Unit|out-of-memory|deadly signal|internal check failed|error: ' "$log" | cut -d: -f1 || true)"
  if [ -n "$start" ]; then
    sed -n "${start},$((start + 14))p" "$log" | sed 's/^/  /'
  else
    tail -n 15 "$log" | sed 's/^/  /'
  fi
}

n_pass=0
n_fail=0
n_skip=0

run_fuzz() {
  local t="$1" bin="$BUILD_DIR/$1" corpus="$BUILD_DIR/corpus/$1" art="$BUILD_DIR/artifacts/$1/"
  local log="$BUILD_DIR/logs/$1.log" seeds="$ROOT/tests/fuzz/corpus/$1" rc=0 start end runs
  mkdir -p "$corpus" "$art"
  if [ -d "$seeds" ]; then cp -R "$seeds/." "$corpus/"; fi
  local args=(-max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048
    -max_len="$(target_max_len "$t")" -artifact_prefix="$art" -print_final_stats=1)
  if [ "$JOBS" -gt 1 ]; then args+=(-fork="$JOBS" -ignore_crashes=0 -ignore_timeouts=0 -ignore_ooms=0); fi
  start="$(date +%s)"
  # artifacts of this run only: stamp before running
  touch "$BUILD_DIR/logs/$t.stamp"
  (cd "$BUILD_DIR/logs" && "$bin" "${args[@]}" "$corpus") >"$log" 2>&1 || rc=$?
  end="$(date +%s)"
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  if [ -z "$runs" ]; then runs="$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#' || true)"; fi
  [ -n "$runs" ] || runs=0
  if [ "$rc" = 0 ]; then
    printf 'PASS: fuzz %s (%s runs in %s s)\n' "$t" "$runs" "$((end - start))"
    n_pass=$((n_pass + 1))
    return 0
  fi
  local crash
  crash="$(find "$art" -maxdepth 1 -type f -newer "$BUILD_DIR/logs/$t.stamp" | head -n 1)"
  printf 'FAIL: fuzz %s (exit %s after %s s; log %s)\n' "$t" "$rc" "$((end - start))" "$log"
  if [ -n "$crash" ]; then
    printf '  crash input: %s\n' "$crash"
    printf '  reproduce:   %s %s\n' "$bin" "$crash"
  fi
  report_excerpt "$log"
  n_fail=$((n_fail + 1))
}

run_regress() {
  local t="$1" bin="$BUILD_DIR/$1" log="$BUILD_DIR/logs/$1.regress.log" files=() d f rc=0 nbad=0
  for d in "$ROOT/tests/fuzz/corpus/$t" "$ROOT/tests/fuzz/crashes/$t"; do
    [ -d "$d" ] || continue
    while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$d" -type f ! -name '*.md' ! -name '.*' -print0 | sort -z)
  done
  if [ "${#files[@]}" = 0 ]; then
    printf 'SKIP: fuzz %s (regress: no seed or crash inputs)\n' "$t"
    n_skip=$((n_skip + 1))
    return 0
  fi
  # all at once (fast); on a failure, each input alone to name every one that fails
  (cd "$BUILD_DIR/logs" && "$bin" -timeout=10 -rss_limit_mb=2048 "${files[@]}") >"$log" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    printf 'PASS: fuzz %s (regress: %s inputs)\n' "$t" "${#files[@]}"
    n_pass=$((n_pass + 1))
    return 0
  fi
  printf 'FAIL: fuzz %s (regress: %s inputs)\n' "$t" "${#files[@]}"
  for f in "${files[@]}"; do
    rc=0
    (cd "$BUILD_DIR/logs" && "$bin" -timeout=10 -rss_limit_mb=2048 "$f") >"$log.one" 2>&1 || rc=$?
    [ "$rc" = 0 ] && continue
    nbad=$((nbad + 1))
    cat "$log.one" >>"$log"
    printf '  crash input: %s\n' "$f"
    printf '  reproduce:   %s %s\n' "$bin" "$f"
    report_excerpt "$log.one" | head -n 4
  done
  rm -f "$log.one"
  printf '  %s failing input(s); full log %s\n' "$nbad" "$log"
  n_fail=$((n_fail + 1))
}

for t in "${TARGETS[@]}"; do
  brc=0
  build_target "$t" || brc=$?
  if [ "$brc" = 1 ]; then n_fail=$((n_fail + 1)); continue; fi
  if [ "$brc" = 2 ]; then n_skip=$((n_skip + 1)); continue; fi
  if [ "$REGRESS" = 1 ]; then run_regress "$t"; else run_fuzz "$t"; fi
done

if [ "$n_fail" -gt 0 ]; then exit 1; fi
if [ "$n_pass" = 0 ]; then exit 77; fi
exit 0
