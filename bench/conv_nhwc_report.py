"""The channels-last table of docs/BENCHMARKS.md: kjit's channels-last op (kjit_conv_bench --nhwc)
against the PyTorch variants on channels-last tensors (conv_peers.py --channels-last), both timed
in the same run, both ways (one call per CUDA-graph replay, and 20 calls back to back); then issue
12's targets against those peers and, where a run of the peers on NCHW tensors is given
(conv_peers.py without --channels-last, same rows), against the best peer in either layout; and
beside each row, where an NCHW kjit run is given, kjit's NCHW dispatch pick.

  conv_nhwc_report.py NHWC_KJIT_JSONL NHWC_TORCH_JSONL [--nhwc-torch-more TORCH_JSONL]
                      [--nchw-torch TORCH_JSONL] [--nchw-kjit KJIT_JSONL]
--nhwc-torch-more adds the peers of another NHWC run of some rows (e.g. max-autotune on a few).
Last, for the rows that miss the batch 8/32 target: how dispatch's pick fills the device — its
output tiles and blocks (split-K multiplies them), the waves they take on the card's SMs and the
last wave's fill — and the TF32 rate reached, over the whole card and per busy SM.
"""
import argparse
import math

from conv_report import PEERS, best_peer, bytes_and_flops, floor_us, lines, load_run, print_targets

SMS = 132  # the H200's multiprocessors


def either_layout(nhwc, nchw):
    """Per row and peer, the faster of its two layouts' times."""
    out = {}
    for key in nhwc.keys() | nchw.keys():
        a, b = nhwc.get(key, {}), nchw.get(key, {})
        row = {}
        for name in PEERS:
            for suffix in ("_us", "_b2b_us"):
                times = [p[name + suffix] for p in (a, b) if name + suffix in p]
                if times:
                    row[name + suffix] = min(times)
        out[key] = row
    return out


def waves(row):
    """Dispatch's pick on a row ("128x64 s8 split 2"): (output tiles, blocks, waves on SMS
    multiprocessors, the SMs busy on average over those waves). The channels-last kernel's tiles
    run over the B·OH·OW output positions in order; a split tile is a cluster of `split` blocks."""
    words = row["dispatch"].split()
    block_m, block_n = (int(v) for v in words[0].split("x"))
    split = int(words[-1]) if "split" in words else 1
    tiles = math.ceil(row["batch"] * row["out_hw"] ** 2 / block_m) * math.ceil(row["c_out"] / block_n)
    blocks = tiles * split
    count = math.ceil(blocks / SMS)
    return tiles, blocks, count, blocks / (count * SMS)


def print_waves(kjit, peers, ceil):
    """The batch 8/32 rows over 0.8x of the best peer, by how their pick fills the device."""
    print(f"\nThe batch 8/32 rows over 0.8x, by how dispatch's pick fills the {SMS} SMs (TF32 ceiling "
          f"{ceil['tf32_TFLOPs']:.0f} TFLOP/s):\n")
    print("| layer | batch | pick | tiles | blocks | waves | SMs busy | TFLOP/s | per busy SM, x132 | kjit / peer |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in kjit:
        peer, _ = best_peer(peers.get((r["layer"], r["batch"]), {}), "_b2b_us")
        if r["batch"] == 1 or math.isnan(peer) or r["dispatch_b2b_us"] <= 0.8 * peer:
            continue
        tiles, blocks, count, busy = waves(r)
        rate = bytes_and_flops(r)[1] / r["dispatch_b2b_us"] / 1e6
        print(f"| {r['layer']} | {r['batch']} | {r['dispatch']} | {tiles} | {blocks} | {count} | {busy:.0%} | "
              f"{rate:.0f} | {rate / busy:.0f} | {r['dispatch_b2b_us'] / peer:.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kjit")
    ap.add_argument("torch")
    ap.add_argument("--nhwc-torch-more")
    ap.add_argument("--nchw-torch")
    ap.add_argument("--nchw-kjit")
    a = ap.parse_args()
    kjit, context, head, peers = load_run(a.kjit, a.torch)
    if a.nhwc_torch_more:
        for p in lines(a.nhwc_torch_more)[1:]:
            row = peers.setdefault((p["layer"], p["batch"]), {})
            row.update({k: v for k, v in p.items() if k not in row})
    nchw_peers = {}
    if a.nchw_torch:
        rows = lines(a.nchw_torch)
        nchw_peers = {(p["layer"], p["batch"]): p for p in rows[1:]}
    nchw = {(r["layer"], r["batch"]): r for r in lines(a.nchw_kjit) if "layer" in r} if a.nchw_kjit else {}
    ceil = head["ceilings"]
    print(f"Ceilings measured in this run: copy {ceil['copy_GBps']:.0f} GB/s, TF32 matmul "
          f"{ceil['tf32_TFLOPs']:.0f} TFLOP/s; PyTorch {head['torch']} on {head['device']} (channels_last); "
          f"kjit NVRTC {context['nvrtc']}, {context['arch']}.\n")
    print("| layer | batch | kjit NHWC dispatch µs (b2b) | dispatch config | best µs | best config "
          "| best NHWC peer µs (b2b) | peer | kjit / peer (b2b) | best NCHW peer b2b | kjit NCHW dispatch b2b "
          "| floor µs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in kjit:
        key = (r["layer"], r["batch"])
        peer_b2b, name = best_peer(peers.get(key, {}), "_b2b_us")
        peer_one, _ = best_peer(peers.get(key, {}), "_us")
        n_peer, n_name = best_peer(nchw_peers.get(key, {}), "_b2b_us")
        n = nchw.get(key)
        cells = [r["layer"], r["batch"], f"{r['dispatch_us']:.1f} ({r['dispatch_b2b_us']:.1f})", r["dispatch"],
                 f"{r['best_us']:.1f}", r["best"], f"{peer_one:.1f} ({peer_b2b:.1f})", name,
                 f"{r['dispatch_us'] / peer_one:.2f} ({r['dispatch_b2b_us'] / peer_b2b:.2f})",
                 f"{n_peer:.1f} {n_name}" if not math.isnan(n_peer) else "-",
                 f"{n['dispatch_b2b_us']:.1f}" if n else "-", f"{floor_us(r, ceil):.1f}"]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    within = sum(r["dispatch_us"] <= 1.15 * r["best_us"] for r in kjit)
    print(f"\nDispatch's pick is within 1.15x of the best candidate (one call per replay) on {within} of "
          f"{len(kjit)} rows.")
    ratios = [r["dispatch_b2b_us"] / best_peer(peers.get((r["layer"], r["batch"]), {}), "_b2b_us")[0] for r in kjit]
    ratios = [x for x in ratios if not math.isnan(x)]
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"\nkjit NHWC dispatch / best NHWC peer, back to back: geometric mean {geo:.2f}x over {len(ratios)} "
              f"rows, best {min(ratios):.2f}x, worst {max(ratios):.2f}x.")
    print("\nIssue 12's targets against the NHWC peers:")
    print_targets(kjit, peers, ceil)
    if nchw_peers:
        print("\nAgainst the best peer in either layout (NHWC or NCHW tensors):")
        print_targets(kjit, either_layout(peers, nchw_peers), ceil)
    print_waves(kjit, either_layout(peers, nchw_peers) if nchw_peers else peers, ceil)


if __name__ == "__main__":
    main()
