#!/usr/bin/env python3
"""
tests/lib/rng_reference.py — check lib/rng.c against numpy.random.Philox (Philox4x64-10).

Usage:  python3 tests/lib/rng_reference.py PATH_TO_test_rng_BINARY [--blocks N]

The test_rng binary has reference modes (see tests/lib/test_rng.c):
  --dump-blocks            read "k0 k1 c0 c1 c2 c3" (hex) lines on stdin, print the 4 output
                           words of lt_rng_philox_block for each
  --dump-stream SEED N     print the key of lt_rng_seed(SEED), then its first N u64 outputs
  --dump-split SEED ID N   the same for lt_rng_split(child, seeded parent, ID)

What is compared (independently computed here):
  1. >= 1000 raw blocks for random keys/counters plus edge cases (counter carries, all-ones),
     and the three Random123 known-answer vectors;
  2. the stream layout: splitmix64 key derivation and "block n = philox(key, counter n)";
  3. the split derivation: child key = words 0,1 of philox(parent key, {id, 0, 0, DOMAIN}).

numpy convention: numpy's Philox increments its 256-bit counter BEFORE producing a block
(numpy/random/src/philox/philox.h, philox_next), so the block for counter c is obtained by
setting numpy's counter to c - 1 (mod 2^256) with an empty buffer and drawing 4 raw words.

Exit status: 0 pass, 1 fail, 77 skip (numpy missing), 2 usage.
"""
import random
import subprocess
import os
import sys

MASK64 = (1 << 64) - 1
MASK256 = (1 << 256) - 1
SPLIT_DOMAIN = 0x73706C6974000000

try:
    import numpy as np
except ImportError:
    print("rng_reference: SKIP: numpy is not installed (pip install numpy)")
    sys.exit(77)


def words_to_int(ws):
    return sum(int(w) << (64 * i) for i, w in enumerate(ws))


def int_to_words(v, n):
    return [(v >> (64 * i)) & MASK64 for i in range(n)]


def np_philox_stream(key, ctr, nwords):
    """u64 words of the stream whose first block is philox(key, ctr), via numpy."""
    bg = np.random.Philox(key=np.array(key, dtype=np.uint64))
    st = bg.state
    st["state"]["key"] = np.array(key, dtype=np.uint64)
    before = (words_to_int(ctr) - 1) & MASK256
    st["state"]["counter"] = np.array(int_to_words(before, 4), dtype=np.uint64)
    st["buffer_pos"] = 4
    st["has_uint32"] = 0
    st["uinteger"] = 0
    bg.state = st
    return [int(x) for x in bg.random_raw(nwords)]


def np_block(key, ctr):
    return np_philox_stream(key, ctr, 4)


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def seed_key(seed):
    s, k0 = splitmix64(seed & MASK64)
    s, k1 = splitmix64(s)
    return [k0, k1]


def run(binary, args, stdin_text=""):
    p = subprocess.run([binary] + args, input=stdin_text, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("%s %s exited %d: %s" % (binary, " ".join(args), p.returncode, p.stderr))
    return p.stdout.split("\n")


def main():
    # Under `make check` (automake runs the script without arguments) the binary is the
    # one in the build tree: $top_builddir/tests/lib/test_rng.
    if len(sys.argv) >= 2:
        binary = sys.argv[1]
    elif os.environ.get("top_builddir"):
        binary = os.path.join(os.environ["top_builddir"], "tests", "lib", "test_rng")
    else:
        print("usage: python3 tests/lib/rng_reference.py PATH_TO_test_rng_BINARY", file=sys.stderr)
        return 2
    nblocks = 2000
    if len(sys.argv) >= 4 and sys.argv[2] == "--blocks":
        nblocks = int(sys.argv[3])
    failures = 0

    # 1. raw blocks
    rnd = random.Random(20111112)
    F = MASK64
    cases = [
        ([0, 0], [0, 0, 0, 0]),
        ([F, F], [F, F, F, F]),
        ([0x452821E638D01377, 0xBE5466CF34E90C6C],
         [0x243F6A8885A308D3, 0x13198A2E03707344, 0xA4093822299F31D0, 0x082EFA98EC4E6C89]),
        ([1, 0], [F, 0, 0, 0]),
        ([0, 1], [F, F, 0, 0]),
        ([F, 0], [F, F, F, 0]),
        ([0, F], [0, 0, 0, SPLIT_DOMAIN]),
    ]
    while len(cases) < nblocks:
        key = [rnd.getrandbits(64) for _ in range(2)]
        kind = rnd.randrange(4)
        if kind == 0:
            ctr = [rnd.getrandbits(64) for _ in range(4)]
        elif kind == 1:  # small counters, as in real streams
            ctr = [rnd.getrandbits(20), 0, 0, 0]
        elif kind == 2:  # near carries
            ctr = [F - rnd.randrange(3), rnd.choice([0, F]), rnd.choice([0, F]), rnd.getrandbits(64)]
        else:
            ctr = [rnd.choice([0, F, rnd.getrandbits(64)]) for _ in range(4)]
        cases.append((key, ctr))
    stdin_text = "".join(
        "%016x %016x %016x %016x %016x %016x\n" % (k[0], k[1], c[0], c[1], c[2], c[3]) for k, c in cases
    )
    out = run(binary, ["--dump-blocks"], stdin_text)
    for i, (key, ctr) in enumerate(cases):
        want = np_block(key, ctr)
        got_line = out[i] if i < len(out) else ""
        try:
            got = [int(x, 16) for x in got_line.split()]
        except ValueError:
            got = None
        if got != want:
            failures += 1
            if failures <= 10:
                print("block mismatch: key=%s ctr=%s\n  C:     %s\n  numpy: %s" % (
                    [hex(x) for x in key], [hex(x) for x in ctr], got_line,
                    " ".join("%016x" % w for w in want)))
    print("rng_reference: %d raw Philox4x64-10 blocks compared with numpy" % len(cases))

    # 2. stream layout and seeding
    for seed in [0, 1, 42, 12345, MASK64, 0xDEADBEEFCAFEF00D]:
        n = 23  # crosses block boundaries at an odd position
        out = run(binary, ["--dump-stream", str(seed), str(n)])
        key = seed_key(seed)
        want = ["%016x %016x" % (key[0], key[1])] + ["%016x" % w for w in np_philox_stream(key, [0, 0, 0, 0], n)]
        if out[: n + 1] != want:
            failures += 1
            print("stream mismatch for seed %d:\n  C:     %s\n  numpy: %s" % (seed, out[:4], want[:4]))
    # numpy's own convention, stated in rng.h: numpy counter 2^256-1 == our counter 0
    key = seed_key(7)
    bg = np.random.Philox(counter=np.array([F, F, F, F], dtype=np.uint64), key=np.array(key, dtype=np.uint64))
    if [int(x) for x in bg.random_raw(8)] != np_philox_stream(key, [0, 0, 0, 0], 8):
        failures += 1
        print("numpy counter convention differs from the one documented in lib/rng.h")
    print("rng_reference: seeded streams compared")

    # 3. split derivation
    for seed, sid in [(0, 0), (1, 1), (12345, 7), (42, MASK64), (99, 1 << 40)]:
        n = 9
        out = run(binary, ["--dump-split", str(seed), str(sid), str(n)])
        pkey = seed_key(seed)
        ckey = np_block(pkey, [sid, 0, 0, SPLIT_DOMAIN])[:2]
        want = ["%016x %016x" % (ckey[0], ckey[1])] + ["%016x" % w for w in np_philox_stream(ckey, [0, 0, 0, 0], n)]
        if out[: n + 1] != want:
            failures += 1
            print("split mismatch for seed %d stream %d:\n  C:     %s\n  numpy: %s" % (seed, sid, out[:3], want[:3]))
    print("rng_reference: split streams compared")

    if failures:
        print("rng_reference: FAIL (%d mismatches)" % failures)
        return 1
    print("rng_reference: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
