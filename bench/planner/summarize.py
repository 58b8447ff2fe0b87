#!/usr/bin/env python3
"""bench/planner/summarize.py — turn the compare part of bench/planner/run.sh's output into
the summary table of docs/PERFORMANCE.md: per length file and context, each strategy's
speedup over megatron, infinipipe's and slimpack's planning medians, the balance ratio
(megatron's per-pipeline CV of unit times / slimpack's), DP-Merge groups, auto's picks and
whether auto is the fastest row of its candidates (helixpipe is not one yet); then a second
table: each strategy's step time over the steps' lower bound (x_bound).

Usage: bench/planner/summarize.py bench/planner/out/compare.md
"""
import re
import sys


def main(path):
    rows, picks, cur = {}, {}, None
    for line in open(path, encoding="utf-8"):
        m = re.match(r"### (\S+), context (\S+)", line)
        if m:
            cur = (m.group(1), m.group(2))
            rows[cur] = {}
            continue
        if cur is None:
            continue
        f = line.split()
        if len(f) >= 12 and f[4].endswith("x") and f[5].endswith("x") and f[0] != "strategy":
            rows[cur][f[0]] = dict(ms=float(f[1]), speedup=float(f[4][:-1]), bound=float(f[5][:-1]),
                                   p50=float(f[7]), cvf=float(f[8]), cvb=float(f[9]), merges=int(f[10]))
        elif line.startswith("auto picked:"):
            picks[cur] = line.split(":", 1)[1].strip()
    strategies = ["seq1f1b", "chunkflow", "gpipe", "infinipipe", "slimpack", "helixpipe", "auto"]
    print("| lengths | context | " + " | ".join(strategies) +
          " | plan ms p50 infinipipe / slimpack | CV fwd / bwd megatron : slimpack | merges (slimpack) | auto picked | auto fastest |")
    print("|" + "---|" * (len(strategies) + 7))
    for (name, ctx), r in rows.items():
        if "megatron" not in r:
            continue
        sp = [f"{r[s]['speedup']:.2f}x" if s in r else "-" for s in strategies]
        singles = [v["ms"] for k, v in r.items() if k not in ("auto", "helixpipe")]
        fastest = "yes" if "auto" in r and r["auto"]["ms"] <= min(singles) * (1 + 1e-9) else "no"

        def ratio(a, b):
            return f"{a / b:.0f}x" if b > 0 else ("=" if a == 0 else "inf")
        m, s = r["megatron"], r.get("slimpack")
        bal = (f"{m['cvf']:.3f} / {m['cvb']:.3f} : {s['cvf']:.3f} / {s['cvb']:.3f} "
               f"({ratio(m['cvf'], s['cvf'])} / {ratio(m['cvb'], s['cvb'])})") if s else "-"
        p50 = f"{r['infinipipe']['p50']:.0f} / {r['slimpack']['p50']:.0f}" if "infinipipe" in r and s else "-"
        print(f"| {name} | {ctx} | " + " | ".join(sp) +
              f" | {p50} | {bal} | {s['merges'] if s else '-'} | {picks.get((name, ctx), '-')} | {fastest} |")
    every = ["megatron"] + strategies
    print()
    print("| lengths | context | " + " | ".join(every) + " |")
    print("|" + "---|" * (len(every) + 2))
    for (name, ctx), r in rows.items():
        print(f"| {name} | {ctx} | " + " | ".join(f"{r[s]['bound']:.2f}x" if s in r else "-" for s in every) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/planner/out/compare.md")
