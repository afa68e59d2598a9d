#!/usr/bin/env python3
"""Turns `kjit tune --shapes FILE --json` output into rows the dispatch replay test reads
(tests/ops/conv/dispatch_replay.hpp): each layer with every candidate's median time.
    bench/tune_replay.py TUNE_JSON [DEVICE] > docs/bench-data/DATE-NAME-candidates-kjit.jsonl
Layers must be square with square filters and strides (the replay's shapes)."""
import json
import re
import sys

KEY = re.compile(r"b(\d+)_c(\d+)x(\d+)x(\d+)_o(\d+)_k(\d+)x(\d+)_s(\d+)x(\d+)_p(\d+)x(\d+)_g(\d+)$")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: bench/tune_replay.py TUNE_JSON [DEVICE]  (TUNE_JSON: kjit tune --shapes FILE --json)")
    tuned = json.load(open(sys.argv[1]))
    print(json.dumps({"context": {"device": sys.argv[2] if len(sys.argv) > 2 else "NVIDIA H200",
                                  "source": "kjit tune --json"}}))
    for layer in tuned:
        m = KEY.match(layer["layer"])
        if not m:
            sys.exit(f"not a conv problem key: {layer['layer']}")
        b, cin, h, w, cout, kh, kw, sh, sw, ph, pw, groups = map(int, m.groups())
        if h != w or kh != kw or sh != sw or ph != pw:
            sys.exit(f"{layer['layer']}: the replay takes square layers only")
        times = {t["config"]: t["median_us"] for t in layer["tried"]}
        if not times:
            continue
        best = min(times, key=times.get)
        print(json.dumps({"layer": layer["layer"], "batch": b, "c_in": cin, "c_out": cout, "hw": h, "kernel": kh,
                          "stride": sh, "pad": ph, "groups": groups, "best_us": times[best], "best": best,
                          "candidates": times}))


if __name__ == "__main__":
    main()
