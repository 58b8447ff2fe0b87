#!/usr/bin/env python3
"""bench/trainer/op_overlap.py: do a stage's ops run slower while another stage computes?

For each plans database a pp 2 run wrote (bench/trainer/dist.sh: OUT/STRATEGY-rR.db), every
measured op (measured_ops) gets the share of its measured span during which the other stage
of its pipeline ran an op, and is grouped by kind (F / B, layer part; the F over the model's
end, which carries the LM head, apart). Per group it prints measured / predicted time of the
ops that overlap the other stage for less than 20 % of their span and of those that overlap
it for 80 % or more, and the ratio of the two: about 1 where the cores do not slow each
other (the simulator's compute_contention, docs/simulator.md "Contention"), above 1 where
they do. Ops the cost model prices at 0 (the pre-attention part) are left out.

usage: bench/trainer/op_overlap.py RUN.db...
"""
import collections
import sqlite3
import sys


def groups(db):
    c = sqlite3.connect(db)
    layers = c.execute("select max(layer_end) from plan_ops").fetchone()[0]
    meas = collections.defaultdict(list)
    for step, dp, st, seq, s, f in c.execute(
            "select step, dp_rank, stage, seq, start_ms, finish_ms from measured_ops"):
        meas[(step, dp, st)].append((seq, s, f))
    pred = {}
    for step, dp, st, seq, kind, part, s, f, l1 in c.execute(
            "select step, dp_rank, stage, seq, kind, part, start_ms, finish_ms, layer_end from plan_ops"):
        head = kind == "F" and part in ("all", "post") and l1 == layers
        pred[(step, dp, st, seq)] = (f"{kind}/{part}{'+head' if head else ''}", f - s)
    g = collections.defaultdict(lambda: [[0, 0.0, 0.0], [0, 0.0, 0.0]])
    for (step, dp, st), ops in meas.items():
        others = [o for (s2, d2, q), v in meas.items() if s2 == step and d2 == dp and q != st for o in v]
        for seq, s, f in ops:
            key = (step, dp, st, seq)
            if key not in pred or f <= s or pred[key][1] <= 0:
                continue
            share = sum(max(0.0, min(f, f2) - max(s, s2)) for _, s2, f2 in others) / (f - s)
            b = 0 if share < 0.2 else 1 if share >= 0.8 else None
            if b is None:
                continue
            x = g[pred[key][0]][b]
            x[0] += 1
            x[1] += f - s
            x[2] += pred[key][1]
    return g


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    print("db | op kind | alone: n, meas/pred | beside a computing stage: n, meas/pred | ratio")
    for db in argv[1:]:
        for kind, (a, b) in sorted(groups(db).items()):
            ra = a[1] / a[2] if a[0] else float("nan")
            rb = b[1] / b[2] if b[0] else float("nan")
            ratio = rb / ra if a[0] and b[0] else float("nan")
            print(f"{db} | {kind} | {a[0]}, {ra:.3f} | {b[0]}, {rb:.3f} | {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
