"""Joins kjit_conv_bench's and conv_peers.py's JSON lines into the markdown tables of
docs/BENCHMARKS.md: for each layer and batch, kjit's dispatch pick and its best candidate against
the PyTorch variants timed in the same run, both ways (one call per CUDA-graph replay, and 20 calls
back to back per graph), kjit's ratio to the best peer, and the fraction of the roofline floor
max(bytes / copy bandwidth, flops / TF32 rate) kjit reaches back to back; then how many rows
meet each of issue 12's targets (issue 19's for a run of grouped layers, kjit_conv_bench
--grouped), and the figures of those that do not."""
import json
import math
import sys

PEERS = ("eager", "folded", "compiled", "autotuned", "triton")


def lines(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")]


def short_config(config):
    """'BLOCK_M=128 BLOCK_N=64 BLOCK_K=32 GROUP_M=8 SPLIT_K=2' -> '128x64x32x8 split 2';
    'TMA=1 GATHER=1 BLOCK_M=128 BLOCK_N=128 STAGES=5 GROUP_M=8 SPLIT_K=2' -> 'tma gather 128x128 s5 split 2'."""
    values = dict(item.split("=") for item in config.split())
    split = values.pop("SPLIT_K", "1")
    split = f" split {split}" if split != "1" else ""
    if values.pop("TMA", None):
        gather = "gather " if values.pop("GATHER", "0") == "1" else ""
        return f"tma {gather}{values['BLOCK_M']}x{values['BLOCK_N']} s{values['STAGES']}{split}"
    return "x".join(values.values()) + split


def bytes_and_flops(row):
    """What a layer must move (x, w, y, BN) and compute, at the least."""
    oh = row["out_hw"]
    taps = row["kernel"] ** 2
    b, ci, co, hw = row["batch"], row["c_in"], row["c_out"], row["hw"]
    per_group = ci // row.get("groups", 1)  # input channels each output reads
    return (4 * (b * ci * hw * hw + co * per_group * taps + b * co * oh * oh + 2 * co),
            2 * b * co * oh * oh * per_group * taps)


def floor_us(row, ceil):
    bytes_moved, flops = bytes_and_flops(row)
    return max(bytes_moved / (ceil["copy_GBps"] * 1e3), flops / (ceil["tf32_TFLOPs"] * 1e6))


def tflops(r):
    return bytes_and_flops(r)[1] / r["dispatch_b2b_us"] / 1e6


def gbps(r):
    return bytes_and_flops(r)[0] / r["dispatch_b2b_us"] / 1e3


def peer_targets(kjit, peers):
    """The targets against the best peer, back to back, that issues 12 and 19 share."""
    def ratio(r):
        return r["dispatch_b2b_us"] / best_peer(peers.get((r["layer"], r["batch"]), {}), "_b2b_us")[0]

    return [
        ("batch 8 and 32: ≤ 0.8× the best peer", [r for r in kjit if r["batch"] > 1], lambda r: ratio(r) <= 0.8,
         lambda r: f"{ratio(r):.2f}×"),
        ("batch 1: ≤ 1.0× the best peer", [r for r in kjit if r["batch"] == 1], lambda r: ratio(r) <= 1.0,
         lambda r: f"{ratio(r):.2f}×"),
    ]


def targets(kjit, peers, ceil):
    """The targets for dispatch's pick, back to back — issue 12's for ungrouped layers, issue 19's
    for grouped ones: (name, the rows it covers, whether a row meets it, a row's figure). Rows
    without a peer in the run (a run cut short) are left out."""
    kjit = [r for r in kjit if not math.isnan(best_peer(peers.get((r["layer"], r["batch"]), {}), "_b2b_us")[0])]
    copy = ceil["copy_GBps"]
    if any(r.get("groups", 1) > 1 for r in kjit):  # issue 19: depthwise layers at memory speed
        def bandwidth(r):  # and what a copy of the layer's own bytes reached, where the run has it
            own = peers[(r["layer"], r["batch"])].get("copy_b2b_us")
            return f"{gbps(r):.0f} GB/s" + (f" (a copy of its bytes: {own / r['dispatch_b2b_us']:.0%} of it)"
                                            if own else "")

        return peer_targets(kjit, peers) + [
            (f"depthwise, batch 8 and 32: ≥ 70% of {copy:.0f} GB/s",
             [r for r in kjit if r["batch"] > 1 and r.get("groups", 1) == r["c_in"]],
             lambda r: gbps(r) >= 0.7 * copy, bandwidth),
        ]

    def pointwise_b32(r):
        return r["kernel"] == 1 and r["stride"] == 1 and r["batch"] == 32

    return peer_targets(kjit, peers) + [
        (f"1×1, C_in ≥ 512, batch 32: ≥ 60% of {ceil['tf32_TFLOPs']:.0f} TFLOP/s",
         [r for r in kjit if pointwise_b32(r) and r["c_in"] >= 512],
         lambda r: tflops(r) >= 0.6 * ceil["tf32_TFLOPs"], lambda r: f"{tflops(r):.0f} TFLOP/s"),
        (f"1×1, C_in and C_out ≤ 128, batch 32: ≥ 70% of {copy:.0f} GB/s",
         [r for r in kjit if pointwise_b32(r) and r["c_in"] <= 128 and r["c_out"] <= 128],
         lambda r: gbps(r) >= 0.7 * copy, lambda r: f"{gbps(r):.0f} GB/s"),
    ]


def print_targets(kjit, peers, ceil):
    """How many rows meet each of issue 12's targets, and the figures of the rest."""
    print("\n| target (dispatch's pick, back to back) | rows meeting it | the others |\n|---|---|---|")
    for name, rows, met, show in targets(kjit, peers, ceil):
        missed = [r for r in rows if not met(r)]
        others = ", ".join(f"{r['layer']} b{r['batch']} {show(r)}" for r in missed) or "-"
        print(f"| {name} | {len(rows) - len(missed)} of {len(rows)} | {others} |")


def best_peer(p, suffix):
    times = {k: p[f"{k}{suffix}"] for k in PEERS if f"{k}{suffix}" in p}
    if not times:
        return math.nan, "-"
    name = min(times, key=times.get)
    return times[name], name


def load_run(kjit_jsonl, torch_jsonl):
    """One bench run: kjit's rows, its context, the peers' header (ceilings, versions) and the
    peers' rows by (layer, batch)."""
    kjit_lines = lines(kjit_jsonl)
    kjit = [r for r in kjit_lines if "layer" in r]
    context = next(r["context"] for r in kjit_lines if "context" in r)
    peers = lines(torch_jsonl)
    return kjit, context, peers[0], {(p["layer"], p["batch"]): p for p in peers[1:]}


def main():
    kjit, context, head, peers = load_run(sys.argv[1], sys.argv[2])
    ceil = head["ceilings"]
    print(f"Ceilings measured in this run: copy {ceil['copy_GBps']:.0f} GB/s (read + write), "
          f"TF32 matmul {ceil['tf32_TFLOPs']:.0f} TFLOP/s; PyTorch {head['torch']} on {head['device']}; "
          f"kjit NVRTC {context['nvrtc']}, {context['arch']}. Peers: "
          f"{', '.join(k for k in PEERS if any(f'{k}_us' in p for p in peers.values()))}.\n")
    print("| layer | batch | kjit dispatch µs (b2b) | dispatch config | kjit best µs | best config | "
          "best peer µs (b2b) | peer | kjit / peer (b2b) | floor µs | floor / kjit b2b |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for r in kjit:
        p = peers.get((r["layer"], r["batch"]), {})
        peer_b2b, peer_name = best_peer(p, "_b2b_us")
        peer_one, _ = best_peer(p, "_us")
        fl = floor_us(r, ceil)
        ratio = r["dispatch_b2b_us"] / peer_b2b
        if not math.isnan(ratio):
            ratios.append(ratio)
        cells = [r["layer"], r["batch"], f"{r['dispatch_us']:.1f} ({r['dispatch_b2b_us']:.1f})",
                 short_config(r["dispatch"]), f"{r['best_us']:.1f}", short_config(r["best"]),
                 f"{peer_one:.1f} ({peer_b2b:.1f})", peer_name,
                 f"{r['dispatch_us'] / peer_one:.2f} ({ratio:.2f})", f"{fl:.1f}", f"{fl / r['dispatch_b2b_us']:.2f}"]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    within = sum(r["dispatch_us"] <= 1.15 * r["best_us"] for r in kjit)
    print(f"\nDispatch's pick is within 1.15x of the best candidate (one call per replay) on {within} of "
          f"{len(kjit)} rows.")
    if len(ratios) < len(kjit):
        print(f"\n{len(kjit) - len(ratios)} rows have no peer timing in this run: left out of the ratios and targets.")
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"\nkjit dispatch / best peer, back to back: geometric mean {geo:.2f}x over {len(ratios)} rows, "
              f"best {min(ratios):.2f}x, worst {max(ratios):.2f}x.")
        print_targets(kjit, peers, ceil)


if __name__ == "__main__":
    main()
