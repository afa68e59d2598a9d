#!/usr/bin/env python3
"""kjit against PyTorch on the YOLOv8n-like graph (run on a GPU machine after building kjit).

Builds the network of yolov8n.json in PyTorch (Conv2d + BatchNorm2d + SiLU, add, cat, MaxPool2d,
nearest Upsample) with random weights and non-trivial BatchNorm statistics, saves them as
safetensors (raw BatchNorm tensors: kjit folds them at load), runs `kjit model run` on the same
input, compares every output with PyTorch in float64 (‖y−ref‖/‖ref‖ ≤ 2e-3 with TF32), then times
batch 1 and 16: PyTorch eager, torch.compile (default and "reduce-overhead", which replays CUDA
graphs), kjit's forward and kjit's CUDA graph replay. One JSON object per line, then a table.

  python3 examples/yolov8n/compare.py [--kjit build/kjit] [--batches 1 16] [--iters 100]
"""
import argparse
import json
import os
import struct
import statistics
import subprocess
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.float32).reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__"}


class Graph(nn.Module):
    """The kjit graph, node by node, in PyTorch."""

    def __init__(self, graph):
        super().__init__()
        self.graph = graph
        self.layers = nn.ModuleDict()
        channels = {i["name"]: i["shape"][1] for i in graph["inputs"]}
        for n in graph["nodes"]:
            a, name, key = n.get("attrs", {}), n["name"], n["name"].replace(".", "_")
            if n["op"] == "conv2d_bn_silu":
                k, s, p = a.get("kernel", 1), a.get("stride", 1), a.get("pad", 0)
                conv = nn.Conv2d(channels[n["inputs"][0]], a["c_out"], k, s, p, groups=a.get("groups", 1), bias=False)
                bn = nn.BatchNorm2d(a["c_out"], eps=a.get("bn_eps", 1e-5))
                self.layers[key] = nn.Sequential(conv, bn, nn.SiLU())
                channels[name] = a["c_out"]
            elif n["op"] == "maxpool2d":
                self.layers[key] = nn.MaxPool2d(a["kernel"], a.get("stride", a["kernel"]), a.get("pad", 0))
                channels[name] = channels[n["inputs"][0]]
            elif n["op"] == "upsample_nearest2d":
                self.layers[key] = nn.Upsample(scale_factor=a.get("scale", 2), mode="nearest")
                channels[name] = channels[n["inputs"][0]]
            elif n["op"] == "concat":
                channels[name] = sum(channels[i] for i in n["inputs"])
            else:
                channels[name] = channels[n["inputs"][0]]

    def forward(self, images):
        values = {self.graph["inputs"][0]["name"]: images}
        for n in self.graph["nodes"]:  # yolov8n.json lists nodes in a valid order
            ins = [values[i] for i in n["inputs"]]
            if n["op"] == "add":
                values[n["name"]] = ins[0] + ins[1]
            elif n["op"] == "concat":
                values[n["name"]] = torch.cat(ins, dim=1)
            else:
                values[n["name"]] = self.layers[n["name"].replace(".", "_")](ins[0])
        return [values[o] for o in self.graph["outputs"]]


def randomise(model, generator):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                fan_in = m.weight[0].numel()
                m.weight.uniform_(-1.7 / fan_in ** 0.5, 1.7 / fan_in ** 0.5, generator=generator)
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 2.0, generator=generator)
                m.bias.uniform_(-1.0, 1.0, generator=generator)
                m.running_mean.uniform_(-0.2, 0.2, generator=generator)
                m.running_var.uniform_(0.5, 2.0, generator=generator)


def weights_of(model, graph):
    out = {}
    for n in graph["nodes"]:
        if n["op"] != "conv2d_bn_silu":
            continue
        conv, bn, _ = model.layers[n["name"].replace(".", "_")]
        out[n["name"] + ".weight"] = conv.weight.detach().cpu().numpy()
        for torch_name, kjit_name in (("weight", "bn.weight"), ("bias", "bn.bias"), ("running_mean", "bn.running_mean"),
                                      ("running_var", "bn.running_var")):
            out[f'{n["name"]}.{kjit_name}'] = getattr(bn, torch_name).detach().cpu().numpy()
    return out


def time_ms(fn, iters):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(iters):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        ms.append(start.elapsed_time(stop))
    return sorted(ms)[len(ms) // 2]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kjit", default="build/kjit")
    parser.add_argument("--graph", default=os.path.join(HERE, "yolov8n.json"))
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--start-runs", type=int, default=5,
                        help="new processes (warm cache) whose start-up split is reported as medians")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    graph = json.load(open(args.graph))
    generator = torch.Generator().manual_seed(2026)
    model = Graph(graph)
    randomise(model, generator)
    model = model.cuda().eval()
    reference = Graph(graph).cuda().double().eval()
    reference.load_state_dict(model.state_dict())
    work = tempfile.mkdtemp()
    weights = os.path.join(work, "weights.safetensors")
    write_safetensors(weights, weights_of(model, graph))
    print(json.dumps({"context": {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                  "parameters": sum(p.numel() for p in model.parameters())}}), flush=True)
    rows = []
    for batch in args.batches:
        shape = [batch] + graph["inputs"][0]["shape"][1:]
        images = torch.empty(shape).uniform_(-1, 1, generator=generator)
        inputs, outputs = os.path.join(work, "in.safetensors"), os.path.join(work, "out.safetensors")
        write_safetensors(inputs, {graph["inputs"][0]["name"]: images.numpy()})
        def kjit_run(*extra, timed=True):
            started = time.time()
            timing = ["--graph", "--iters", str(args.iters), "--save-outputs", outputs] if timed else ["--iters", "1"]
            run = subprocess.run([args.kjit, "model", "run", args.graph, "--weights", weights, "--batch", str(batch),
                                  "--json", "--input", inputs, *timing, *extra], capture_output=True, text=True)
            if run.returncode != 0:
                raise SystemExit(f"kjit model run failed:\n{run.stderr}")
            return json.loads(run.stdout), time.time() - started

        # Unfused (every concat input copied, every add its own launch), then fused; the fused
        # run twice, the second a new process with every kernel in the cache (its start-up split).
        kjit_unfused, _ = kjit_run("--no-zero-copy-concat", "--no-fused-add", "--no-chained-ops")
        kjit_run()
        kjit, kjit_wall = kjit_run()
        starts = [kjit_run(timed=False)[0]["start_ms"] for _ in range(args.start_runs)]
        got = read_safetensors(outputs)
        with torch.no_grad():
            ref = reference(images.cuda().double())
        errors = {}
        for name, r in zip(graph["outputs"], ref):
            r = r.cpu().numpy()
            errors[name] = float(np.linalg.norm(got[name].astype(np.float64) - r) / np.linalg.norm(r))
        x = images.cuda()
        with torch.no_grad():
            eager = time_ms(lambda: model(x), args.iters)
            compiled = torch.compile(model)
            t = time.time()
            compiled(x)
            compile_s = time.time() - t
            compiled_ms = time_ms(lambda: compiled(x), args.iters)
            graphs = torch.compile(model, mode="reduce-overhead")
            graphs(x), graphs(x)
            graphs_ms = time_ms(lambda: graphs(x), args.iters)
        row = {"batch": batch, "max_error": max(errors.values()), "errors": errors, "eager_ms": eager,
               "compile_ms": compiled_ms, "compile_reduce_overhead_ms": graphs_ms, "compile_s": compile_s,
               "kjit_forward_ms": kjit["forward_ms"], "kjit_replay_ms": kjit["replay_ms"],
               "kjit_node_sum_ms": kjit["node_sum_ms"], "kjit_process_s": kjit_wall,
               "kjit_launches": kjit["launches"], "kjit_start_ms": kjit["start_ms"], "kjit_start_runs": starts,
               "kjit_unfused_launches": kjit_unfused["launches"], "kjit_unfused_forward_ms": kjit_unfused["forward_ms"],
               "kjit_unfused_replay_ms": kjit_unfused["replay_ms"], "kjit_nodes": kjit["nodes"],
               "kjit_unfused_nodes": kjit_unfused["nodes"]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    print("\n| batch | max ‖y−ref‖/‖ref‖ | eager ms | torch.compile ms | compile reduce-overhead ms "
          "| kjit forward ms | kjit graph replay ms | replay / torch.compile | replay / reduce-overhead |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['batch']} | {r['max_error']:.2e} | {r['eager_ms']:.3f} | {r['compile_ms']:.3f} "
              f"| {r['compile_reduce_overhead_ms']:.3f} | {r['kjit_forward_ms']:.3f} | {r['kjit_replay_ms']:.3f} "
              f"| {r['kjit_replay_ms'] / r['compile_ms']:.2f} | {r['kjit_replay_ms'] / r['compile_reduce_overhead_ms']:.2f} |")
    print("\n| batch | launches, unfused → fused | kjit forward ms, unfused → fused "
          "| kjit replay ms, unfused → fused | fused forward / reduce-overhead | fused replay / reduce-overhead "
          "| start to first output ms (new process, warm cache) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ro = r["compile_reduce_overhead_ms"]
        print(f"| {r['batch']} | {r['kjit_unfused_launches']} → {r['kjit_launches']} "
              f"| {r['kjit_unfused_forward_ms']:.3f} → {r['kjit_forward_ms']:.3f} "
              f"| {r['kjit_unfused_replay_ms']:.3f} → {r['kjit_replay_ms']:.3f} | {r['kjit_forward_ms'] / ro:.2f} "
              f"| {r['kjit_replay_ms'] / ro:.2f} | {r['kjit_start_ms']['total']:.1f} |")
    if args.start_runs:
        # Every part's median over the new processes; the total's range too (the parts' medians
        # need not add up to the total's).
        parts = [("graph_read_plan_weights_check", "graph read, plan, weights check"), ("tuned_picks", "tuned picks"),
                 ("buffers", "buffers"), ("kernels_read_and_loaded", "kernels read + loaded"),
                 ("kernel_cache_reads_thread_sum", "of which cache reads (thread sum)"),
                 ("module_loads_thread_sum", "module loads (thread sum)"), ("weights_upload", "weights upload"),
                 ("first_forward", "first forward"), ("first_output_read", "first output read")]
        print(f"\n| batch | start to first output ms, median (min–max) of {args.start_runs} new processes | "
              + " | ".join(name for _, name in parts) + " |")
        print("|---|---|" + "---|" * len(parts))
        for r in rows:
            totals = [s["total"] for s in r["kjit_start_runs"]]
            cells = [f"{statistics.median(s.get(k, float('nan')) for s in r['kjit_start_runs']):.2f}" for k, _ in parts]
            print(f"| {r['batch']} | {statistics.median(totals):.1f} ({min(totals):.1f}–{max(totals):.1f}) | "
                  + " | ".join(cells) + " |")
    bad = [r for r in rows if r["max_error"] > 2e-3]
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
