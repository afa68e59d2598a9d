#!/usr/bin/env python3
"""Would the tuned winners of other layers make a better heuristic than dispatch's cost model?

Leave-one-out over a recorded candidates file (kjit_conv_bench --candidates: every candidate of
every layer timed): each layer gets the configuration that won on its nearest other layer of the
same filter, stride and grouping (distance over log2 of pixels, K per group and outputs per
group), where that configuration is one of its own candidates and the neighbour lies within
--radius; else dispatch's pick. Prints how often each choice is within 1.15x and 1.3x of the
layer's best candidate (one call per graph replay), the worst and the geometric mean.

    bench/winner_neighbours.py docs/bench-data/2026-12-03-unmasked-taps-candidates-kjit.jsonl
"""
import argparse
import json
import math


def features(row):
    groups = row.get("groups", 1)
    kind = (row["kernel"], row["stride"], groups == row["c_in"], groups > 1)
    return kind, [math.log2(row["batch"] * row["out_hw"] ** 2),
                  math.log2(row["c_in"] / groups * row["kernel"] ** 2), math.log2(row["c_out"] / groups)]


def summary(ratios):
    def within(limit):
        return sum(r <= limit for r in ratios)
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    return (f"{within(1.15)}/{len(ratios)} within 1.15x, {within(1.3)}/{len(ratios)} within 1.3x, "
            f"worst {max(ratios):.2f}x, geomean {geomean:.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("candidates")
    parser.add_argument("--radius", type=float, nargs="+", default=[0.5, 1.0, math.inf])
    args = parser.parse_args()
    rows = [r for r in map(json.loads, open(args.candidates)) if "layer" in r]
    print(f"{args.candidates}: {len(rows)} layers")
    print(f"  dispatch's pick:                {summary([r['dispatch_us'] / r['best_us'] for r in rows])}")
    for radius in args.radius:
        ratios = []
        for i, row in enumerate(rows):
            kind, at = features(row)
            nearest = min(((math.dist(at, features(o)[1]), o["best"]) for j, o in enumerate(rows)
                           if j != i and features(o)[0] == kind and o["best"] in row["candidates"]), default=None)
            chosen = row["candidates"][nearest[1]] if nearest and nearest[0] <= radius else row["dispatch_us"]
            ratios.append(chosen / row["best_us"])
        print(f"  nearest winner within {radius:<8}: {summary(ratios)}")


if __name__ == "__main__":
    main()
