"""Joins kjit_conv_bench's and conv_peers.py's JSON lines into the markdown tables of
docs/BENCHMARKS.md: µs of each, kjit's ratio to the best PyTorch variant, and the fraction of
the roofline floor max(bytes / copy bandwidth, flops / TF32 rate) that kjit reaches."""
import json
import sys


def lines(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")]


def short_config(config):
    """'BLOCK_M=128 BLOCK_N=64 BLOCK_K=32 GROUP_M=8 SPLIT_K=2' -> '128x64x32x8 split 2'."""
    values = dict(item.split("=") for item in config.split())
    split = values.pop("SPLIT_K", "1")
    return "x".join(values.values()) + (f" split {split}" if split != "1" else "")


def floor_us(row, ceil):
    oh = row["out_hw"]
    taps = row["kernel"] ** 2
    b, ci, co, hw = row["batch"], row["c_in"], row["c_out"], row["hw"]
    bytes_moved = 4 * (b * ci * hw * hw + co * ci * taps + b * co * oh * oh + 2 * co)
    flops = 2 * b * co * oh * oh * ci * taps
    return max(bytes_moved / (ceil["copy_GBps"] * 1e3), flops / (ceil["tf32_TFLOPs"] * 1e6))


def main():
    kjit = [r for r in lines(sys.argv[1]) if "layer" in r]
    context = next(r["context"] for r in lines(sys.argv[1]) if "context" in r)
    peers = lines(sys.argv[2])
    head, peers = peers[0], {(p["layer"], p["batch"]): p for p in peers[1:]}
    ceil = head["ceilings"]
    print(f"Ceilings measured in this run: copy {ceil['copy_GBps']:.0f} GB/s (read + write), "
          f"TF32 matmul {ceil['tf32_TFLOPs']:.0f} TFLOP/s; PyTorch {head['torch']} on {head['device']}; "
          f"kjit NVRTC {context['nvrtc']}, {context['arch']}.\n")
    for kind, title in ((1, "1x1 layers: GEMM kernel (TF32 tensor cores)"), (3, "3x3 layers: implicit-GEMM kernel (TF32 tensor cores)")):
        rows = [r for r in kjit if r["kernel"] == kind]
        if not rows:
            continue
        print(f"### {title}\n")
        if kind == 1:
            print("| layer | batch | kjit best µs | config | kjit dispatch µs | eager µs | folded µs | compiled µs | "
                  "kjit / best torch | floor µs | floor / kjit |")
            print("|---|---|---|---|---|---|---|---|---|---|---|")
        else:
            print("| layer | batch | kjit best µs | config | kjit dispatch µs | eager µs | folded µs | "
                  "kjit / eager | floor µs | floor / kjit |")
            print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            p = peers.get((r["layer"], r["batch"]), {})
            torch_times = [p[k] for k in ("eager_us", "folded_us", "compiled_us") if k in p]
            reference = min(torch_times) if kind == 1 else p.get("eager_us", float("nan"))
            fl = floor_us(r, ceil)
            config = short_config(r["best"])
            cells = [r["layer"], r["batch"], f"{r['best_us']:.1f}", config, f"{r['dispatch_us']:.1f}",
                     f"{p.get('eager_us', float('nan')):.1f}", f"{p.get('folded_us', float('nan')):.1f}"]
            if kind == 1:
                cells.append(f"{p.get('compiled_us', float('nan')):.1f}")
            cells += [f"{r['best_us'] / reference:.2f}", f"{fl:.1f}", f"{fl / r['best_us']:.2f}"]
            print("| " + " | ".join(str(c) for c in cells) + " |")
        print()


if __name__ == "__main__":
    main()
