"""A/B of two kjit_conv_bench runs of the same rows (say main's kernels through KJIT_KERNELS_DIR
against the working tree's, in one session on one card): per row the best candidate and
dispatch's back-to-back time on each side, then the geometric mean of new / old over every
configuration both sides timed, by tile shape.

  conv_ab.py OLD_JSONL NEW_JSONL
"""
import collections
import json
import math
import re
import sys


def rows(path):
    out = {}
    for line in open(path):
        if line.startswith('{"layer"'):
            r = json.loads(line)
            out[(r["layer"], r["batch"])] = r
    return out


def shape(config):
    m = re.search(r"BLOCK_M=(\d+) BLOCK_N=(\d+)", config)
    kind = ("tma" if "TMA=1" in config else "sm80") + (" gather" if "GATHER=1" in config else "")
    split = " split" if re.search(r"SPLIT_K=[2-9]", config) else ""
    return f"{kind} {m.group(1)}x{m.group(2)}{split}"


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old, new = rows(sys.argv[1]), rows(sys.argv[2])
    common = [k for k in old if k in new]
    if not common:
        sys.exit(f"conv_ab.py: {sys.argv[1]} and {sys.argv[2]} share no row (layer, batch)")
    print("| layer | batch | old best µs | new best µs | new/old | old dispatch b2b µs | new dispatch b2b µs | new/old |")
    print("|---|---|---|---|---|---|---|---|")
    by_shape = collections.defaultdict(list)
    for key in common:
        o, n = old[key], new[key]
        print(f"| {key[0]} | {key[1]} | {o['best_us']:.1f} | {n['best_us']:.1f} | {n['best_us'] / o['best_us']:.2f} "
              f"| {o['dispatch_b2b_us']:.1f} | {n['dispatch_b2b_us']:.1f} | {n['dispatch_b2b_us'] / o['dispatch_b2b_us']:.2f} |")
        for config, us in n["candidates"].items():
            if config in o["candidates"]:
                by_shape[shape(config)].append(us / o["candidates"][config])
    print("\n| tiles | timings | new/old geomean | range |\n|---|---|---|---|")
    for name in sorted(by_shape):
        v = by_shape[name]
        print(f"| {name} | {len(v)} | {geomean(v):.3f} | {min(v):.2f}–{max(v):.2f} |")
    every = [x for v in by_shape.values() for x in v]
    print(f"\nevery configuration: new/old geomean {geomean(every):.3f} over {len(every)} timings")


if __name__ == "__main__":
    main()
