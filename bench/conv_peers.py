"""PyTorch peers for kjit's conv benchmark, measured in the same run on the same GPU.

Reads kjit_conv_bench's JSON lines (the layer list), times for each layer: eager
Conv2d -> BatchNorm2d -> SiLU with TF32 allowed, the BN-folded conv + SiLU, with --compile
torch.compile of the module (default mode) and with --max-autotune in mode
"max-autotune-no-cudagraphs" (Inductor's Triton conv templates tuned per layer), and with --triton
a Triton kernel of the same fused algorithm autotuned over 8 tiles (bench/conv_triton.py, its
output checked against eager's first); measures the copy bandwidth and TF32 matrix rate
ceilings, and per layer a copy of the layer's own bytes (an elementwise kernel reading and writing
half of x + w + y each: the bandwidth a layer of that size can reach). Prints JSON lines. Timing: each variant captured into a CUDA graph, median of
per-replay CUDA-event times, as kjit_conv_bench does, so Python and launch overhead stay out of
the comparison; once with one call per graph and once with 20 calls back to back (time / 20).

  conv_peers.py KJIT_JSONL [ITERATIONS] [--compile] [--max-autotune] [--triton] [--channels-last]
               [--max-autotune-rows "LAYER/BATCH;LAYER/BATCH…"]

With --channels-last the input and the module are in torch.channels_last (NHWC) memory format,
as kjit's channels-last op takes them (kjit_conv_bench --nhwc): eager, folded and compiled then
run cuDNN's and Inductor's NHWC paths, their outputs channels-last as well.

max-autotune compiles for minutes per layer; --max-autotune-rows runs it on the named rows only
(each compiled for its static shape), e.g. "1x1 1024->256 @14/32;3x3 256->256 @14/32".
"""
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from graph_timing import BACK_TO_BACK, median_us

torch.backends.cudnn.allow_tf32 = True
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.benchmark = True
torch._dynamo.config.cache_size_limit = 256


def ceilings():
    n = 1 << 29  # 2 GiB of fp32
    src, dst = torch.randn(n, device="cuda"), torch.empty(n, device="cuda")
    # In a graph, copy_ becomes a memcpy node the copy engines run; a kernel (an elementwise
    # multiply) moves data the way the conv kernels do. The faster of the two is the ceiling.
    copy_us = min(median_us(lambda: dst.copy_(src), 20), median_us(lambda: torch.mul(src, 1.0, out=dst), 20))
    del src, dst
    a, b = torch.randn(8192, 8192, device="cuda"), torch.randn(8192, 8192, device="cuda")
    mm_us = median_us(lambda: a @ b, 20)
    return {"copy_GBps": 2 * 4 * n / copy_us / 1e3, "tf32_TFLOPs": 2 * 8192**3 / mm_us / 1e6}


def layer_module(row):
    k, s = row["kernel"], row["stride"]
    conv = nn.Conv2d(row["c_in"], row["c_out"], k, stride=s, padding=k // 2, groups=row.get("groups", 1), bias=False)
    bn = nn.BatchNorm2d(row["c_out"])
    with torch.no_grad():
        bn.weight.uniform_(0.5, 2.0)
        bn.bias.uniform_(-1, 1)
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 2.0)
    return nn.Sequential(conv, bn, nn.SiLU()).cuda().eval()


def parse_rows(text):
    """"LAYER/BATCH;…" as (layer, batch) pairs; exits naming the entry that is not one."""
    rows = set()
    for entry in filter(None, text.split(";")):
        layer, _, batch = entry.rpartition("/")
        if not layer or not batch.isdigit():
            sys.exit(f'conv_peers.py: --max-autotune-rows entry "{entry}" is not LAYER/BATCH, '
                     f'e.g. "1x1 1024->256 @14/32"')
        rows.add((layer, int(batch)))
    return rows


def main():
    autotune_rows = None  # (layer, batch) pairs max-autotune runs on; None: every row with --max-autotune
    argv = sys.argv[1:]
    if "--max-autotune-rows" in argv:
        i = argv.index("--max-autotune-rows")
        if i + 1 == len(argv):
            sys.exit('conv_peers.py: --max-autotune-rows needs "LAYER/BATCH;…"')
        autotune_rows = parse_rows(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    args = [a for a in argv if not a.startswith("--")]
    modes = {name: mode for flag, name, mode in (("--compile", "compiled", "default"),
                                                 ("--max-autotune", "autotuned", "max-autotune-no-cudagraphs"))
             if flag in argv or (name == "autotuned" and autotune_rows)}
    rows = [r for r in (json.loads(l) for l in open(args[0]) if l.startswith("{")) if "layer" in r]
    iterations = int(args[1]) if len(args) > 1 else 100
    for layer, batch in sorted((autotune_rows or set()) - {(r["layer"], r["batch"]) for r in rows}):
        print(f"conv_peers.py: --max-autotune-rows names {layer}/{batch}, which is not in {args[0]}", file=sys.stderr)
    out = {"ceilings": ceilings(), "torch": torch.__version__, "device": torch.cuda.get_device_name()}
    triton_too = "--triton" in argv
    channels_last = "--channels-last" in argv
    if channels_last:
        if triton_too:
            sys.exit("conv_peers.py: the Triton kernel (bench/conv_triton.py) takes NCHW tensors: leave out "
                     "--triton with --channels-last")
        out["layout"] = "nhwc"
    print(json.dumps(out), flush=True)
    if triton_too:
        import conv_triton  # bench/conv_triton.py, beside this script
    modules, compiled_modules = {}, {}  # compiled per (layer, variant)
    for row in rows:
        layer = (row["c_in"], row["c_out"], row["kernel"], row["stride"], row.get("groups", 1))
        if layer not in modules:  # one module per layer; both batch sizes run it
            modules[layer] = layer_module(row)
            if channels_last:
                modules[layer] = modules[layer].to(memory_format=torch.channels_last)
        module = modules[layer]
        x = torch.randn(row["batch"], row["c_in"], row["hw"], row["hw"], device="cuda")
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        conv, bn = module[0], module[1]
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        w = (conv.weight * scale[:, None, None, None]).detach()
        if channels_last:
            w = w.contiguous(memory_format=torch.channels_last)
        b = (bn.bias - scale * bn.running_mean).detach()
        result = {"layer": row["layer"], "batch": row["batch"]}
        pad = row["kernel"] // 2
        variants = {"eager": lambda: module(x),
                    "folded": lambda: F.silu(F.conv2d(x, w, b, stride=row["stride"], padding=pad,
                                                      groups=row.get("groups", 1)))}
        for name, mode in modes.items():
            if name == "autotuned" and autotune_rows is not None:
                if (row["layer"], row["batch"]) not in autotune_rows:
                    continue
                key = (layer, name, row["batch"])  # tuned for this row's static shape
                dynamic = False
            else:
                key, dynamic = (layer, name), True  # dynamic batch: one compile serves every batch
            if key not in compiled_modules:
                compiled_modules[key] = torch.compile(module, dynamic=dynamic, mode=mode)
            variants[name] = lambda compiled=compiled_modules[key]: compiled(x)
        if triton_too and row.get("groups", 1) == 1:  # the Triton kernel takes ungrouped layers
            raw_w, raw_scale = conv.weight.detach(), scale.detach()  # BN in the epilogue, as kjit does
            with torch.no_grad():
                expected = module(x)
                got = conv_triton.conv_bn_silu(x, raw_w, raw_scale, b, row["stride"], pad)  # autotunes
                y_triton = torch.empty_like(got)
                variants["triton"] = lambda: conv_triton.conv_bn_silu(x, raw_w, raw_scale, b, row["stride"], pad,
                                                                      out=y_triton)
                result["triton_error"] = float((got - expected).norm() / expected.norm())
                result["triton_config"] = conv_triton.best_config()
        # Not a peer: the same bytes as x + w + y moved by an elementwise kernel.
        moved = (x.numel() + conv.weight.numel() + row["batch"] * row["c_out"] * row["out_hw"] ** 2) // 2
        src, dst = torch.randn(moved, device="cuda"), torch.empty(moved, device="cuda")
        result["copy_us"] = median_us(lambda: torch.mul(src, 1.0, out=dst), iterations)
        result["copy_b2b_us"] = median_us(lambda: torch.mul(src, 1.0, out=dst), iterations, BACK_TO_BACK)
        with torch.no_grad():
            for name, fn in variants.items():
                result[f"{name}_us"] = median_us(fn, iterations)
                result[f"{name}_b2b_us"] = median_us(fn, iterations, BACK_TO_BACK)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
