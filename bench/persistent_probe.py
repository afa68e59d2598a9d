#!/usr/bin/env python3
"""Would a persistent kernel per group of layers pay at batch 1? (issue 16, item 3)

A persistent kernel replaces the launches between a group's layers with grid-wide barriers,
so it saves at most the time the device spends between kernels. This measures both sides on
the device at hand, each in a CUDA graph as kjit replays a model:
  - launch: N back-to-back launches of an empty kernel, one block per SM (the floor a
    layer boundary costs in a graph),
  - barrier: one kernel, one block per SM, crossing N grid-wide barriers (what a layer
    boundary costs inside a persistent kernel),
and, with --kjit, the YOLOv8n graph's replay against the sum of its kernels' own durations
(ncu, serialised): the difference is the most a persistent kernel could take away.

    bench/persistent_probe.py [--kjit build/kjit --batch 1]
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

import cupy as cp

SOURCE = r"""
extern "C" __global__ void empty_kernel(int* sink) {
    if (sink != nullptr && threadIdx.x == 0) sink[blockIdx.x] = 1;  // never taken: keeps the launch real
}

// Every block waits at each of `rounds` barriers until all blocks have arrived. The counter
// only grows, so round r is done once it reaches (r + 1) * gridDim.x.
extern "C" __global__ void barrier_kernel(unsigned* arrived, int rounds) {
    for (int r = 0; r < rounds; ++r) {
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(arrived, 1u);
            const unsigned target = (r + 1u) * gridDim.x;
            unsigned seen;
            do {
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(arrived));
            } while (seen < target);
        }
        __syncthreads();
    }
}
"""


def replay_us(graph, stream, reps=50):
    """Median µs of one replay of `graph` over `reps` replays, after a warm-up."""
    start, end = cp.cuda.Event(), cp.cuda.Event()
    graph.launch(stream)
    stream.synchronize()
    times = []
    for _ in range(reps):
        start.record(stream)
        graph.launch(stream)
        end.record(stream)
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def capture(stream, body):
    stream.begin_capture()
    body()
    return stream.end_capture()


def probe(rounds):
    module = cp.RawModule(code=SOURCE, options=("-std=c++17",))
    empty, barrier = module.get_function("empty_kernel"), module.get_function("barrier_kernel")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    stream = cp.cuda.Stream(non_blocking=True)
    rows = []
    with stream:
        null = cp.uint64(0)
        for blocks_per_sm in (1, 2):
            grid = sms * blocks_per_sm
            launches = capture(stream, lambda: [empty((grid,), (256,), (null,)) for _ in range(rounds)])
            one = capture(stream, lambda: empty((grid,), (256,), (null,)))
            per_launch = (replay_us(launches, stream) - replay_us(one, stream)) / (rounds - 1)
            arrived = cp.zeros(1, dtype=cp.uint32)

            def barriers(n):
                arrived.fill(0)
                barrier((grid,), (256,), (arrived, cp.int32(n)))

            many = capture(stream, lambda: barriers(rounds))
            few = capture(stream, lambda: barriers(1))
            per_barrier = (replay_us(many, stream) - replay_us(few, stream)) / (rounds - 1)
            rows.append((grid, per_launch, per_barrier))
    return sms, rows


def random_weights(graph_path):
    """A safetensors file of random weights for the graph, made as the model bench makes them."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "yolov8n"))
    import torch
    from compare import Graph, randomise, weights_of, write_safetensors

    graph = json.load(open(graph_path))
    model = Graph(graph)
    randomise(model, torch.Generator().manual_seed(2026))
    path = os.path.join(tempfile.mkdtemp(), "weights.safetensors")
    write_safetensors(path, weights_of(model, graph))
    return path


def kernel_durations_us(kjit, graph, weights, batch, launches):
    """Each kernel's duration (ncu, serialised, clocks and caches untouched) over one forward,
    the second one of `kjit model run` (the first is the start-up's)."""
    cmd = ["ncu", "--csv", "--metrics", "gpu__time_duration.sum", "--cache-control", "none", "--clock-control",
           "none", "--launch-skip", str(launches), "--launch-count", str(launches), kjit, "model", "run", graph,
           "--weights", weights, "--batch", str(batch), "--iters", "1"]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    table = text[text.index('"ID"'):]
    durations = []
    for row in csv.DictReader(io.StringIO(table)):
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[row["Metric Unit"]]
        durations.append((row["Kernel Name"], float(row["Metric Value"].replace(",", "")) * scale))
    return durations


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=256)
    parser.add_argument("--kjit", help="kjit's CLI, to measure the YOLOv8n graph's gaps")
    parser.add_argument("--graph", default="examples/yolov8n/yolov8n.json")
    parser.add_argument("--batch", type=int, nargs="+", default=[1])
    args = parser.parse_args()

    sms, rows = probe(args.rounds)
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {sms} SMs; {args.rounds} rounds, "
          "medians of 50 graph replays")
    print("| blocks | empty launch in a graph, µs each | grid-wide barrier in one kernel, µs each |")
    print("|---|---|---|")
    for grid, per_launch, per_barrier in rows:
        print(f"| {grid} | {per_launch:.2f} | {per_barrier:.2f} |")
    if not args.kjit:
        return
    weights = random_weights(args.graph)
    print()
    # Negative: the replay is shorter than its kernels run one by one (programmatic dependent
    # launch overlaps each kernel's start with the last one's end), so no idle time is left.
    print("| batch | launches | replay ms | sum of kernel durations ms | replay − sum ms | per launch µs |")
    print("|---|---|---|---|---|---|")
    for batch in args.batch:
        run = json.loads(subprocess.run([args.kjit, "model", "run", args.graph, "--weights", weights, "--batch",
                                         str(batch), "--iters", "200", "--graph", "--json"], check=True,
                                        capture_output=True, text=True).stdout)
        launches = run["launches"]
        durations = kernel_durations_us(args.kjit, args.graph, weights, batch, launches)
        if len(durations) != launches:
            sys.exit(f"ncu saw {len(durations)} kernels for {launches} launches")
        busy = sum(d for _, d in durations) / 1000.0
        gap = run["replay_ms"] - busy
        print(f"| {batch} | {launches} | {run['replay_ms']:.3f} | {busy:.3f} | {gap:.3f} | "
              f"{gap * 1000.0 / launches:.2f} |")
        if os.environ.get("PROBE_KERNELS"):
            for name, d in durations:
                print(f"    {d:8.2f} µs  {name}")


if __name__ == "__main__":
    main()
