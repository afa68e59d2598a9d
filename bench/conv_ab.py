"""A/B of two kjit_conv_bench runs of the same rows (say main's kernels through KJIT_KERNELS_DIR
against the working tree's, in one session on one card): per row the best candidate and
dispatch's back-to-back time on each side, then the geometric mean of new / old over every
configuration both sides timed, by tiles (conv_report.py's names, pipeline depth left out).

  conv_ab.py OLD_JSONL NEW_JSONL
"""
import collections
import math
import re
import sys

from conv_report import lines, short_config  # bench/conv_report.py, beside this script


def rows(path):
    return {(r["layer"], r["batch"]): r for r in lines(path) if "layer" in r}


def tiles(config):
    """A configuration's tiles and split, e.g. 'tma gather 128x128 split 2' (any STAGES)."""
    return re.sub(r" s\d+", "", short_config(config))


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
    by_tiles = collections.defaultdict(list)
    for key in common:
        o, n = old[key], new[key]
        print(f"| {key[0]} | {key[1]} | {o['best_us']:.1f} | {n['best_us']:.1f} | {n['best_us'] / o['best_us']:.2f} "
              f"| {o['dispatch_b2b_us']:.1f} | {n['dispatch_b2b_us']:.1f} | {n['dispatch_b2b_us'] / o['dispatch_b2b_us']:.2f} |")
        for config, us in n["candidates"].items():
            if config in o["candidates"]:
                by_tiles[tiles(config)].append(us / o["candidates"][config])
    print("\n| tiles | timings | new/old geomean | range |\n|---|---|---|---|")
    for name in sorted(by_tiles):
        v = by_tiles[name]
        print(f"| {name} | {len(v)} | {geomean(v):.3f} | {min(v):.2f}–{max(v):.2f} |")
    every = [x for v in by_tiles.values() for x in v]
    print(f"\nevery configuration: new/old geomean {geomean(every):.3f} over {len(every)} timings")


if __name__ == "__main__":
    main()
