#!/usr/bin/env python3
"""The peers of kjit's JIT-path benchmark, measured the way kjit_jit_bench measures kjit:
CuPy RawModule compiling kjit's own generated source (NVRTC plus CuPy's disk cache) and
Triton with an equivalent @triton.jit kernel (its JIT plus its disk cache).

  jit_peers.py SOURCES_DIR KERNELS_SRC [--runs N] [--launches N]

SOURCES_DIR is what `kjit_jit_bench source DIR` wrote. One JSON object per line:
  cold  - a new process, empty disk cache: kernel construction to first launch completed
  warm  - a new process, populated disk cache: the same (median of --runs processes)
  hot   - host time per launch in a warm process (median of --launches launches)
Import and context creation are reported beside the figures, never inside them.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


# ---- the kernels ---------------------------------------------------------------------------------

TRITON_SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def axpby(x_ptr, y_ptr, alpha, beta, n, BLOCK: tl.constexpr):
    # one program per BLOCK elements, as kjit's 256 threads x 4 items per tile
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    x = tl.load(x_ptr + offsets, mask=inside)
    y = tl.load(y_ptr + offsets, mask=inside)
    tl.store(y_ptr + offsets, alpha * x + beta * y, mask=inside)


@triton.jit
def conv1x1_bn_silu(x_ptr, w_ptr, scale_ptr, shift_ptr, y_ptr, C_IN, C_OUT, M,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # Y[C_OUT, M] = silu(scale * (W[C_OUT, C_IN] . X[C_IN, M]) + shift), TF32 dot, batch 1
    pixels = tl.program_id(0) * BM + tl.arange(0, BM)
    channels = tl.program_id(1) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    for k in range(0, C_IN, BK):
        w = tl.load(w_ptr + channels[:, None] * C_IN + (k + ks)[None, :],
                    mask=(channels[:, None] < C_OUT) & ((k + ks)[None, :] < C_IN), other=0.0)
        x = tl.load(x_ptr + (k + ks)[:, None] * M + pixels[None, :],
                    mask=((k + ks)[:, None] < C_IN) & (pixels[None, :] < M), other=0.0)
        acc += tl.dot(w, x, input_precision="tf32")
    scale = tl.load(scale_ptr + channels, mask=channels < C_OUT, other=0.0)
    shift = tl.load(shift_ptr + channels, mask=channels < C_OUT, other=0.0)
    v = acc * scale[:, None] + shift[:, None]
    v = v / (1.0 + tl.exp(-v))
    tl.store(y_ptr + channels[:, None] * M + pixels[None, :], v,
             mask=(channels[:, None] < C_OUT) & (pixels[None, :] < M))
'''


def triton_version():
    import triton
    return triton.__version__


def us_since(t):
    return (time.perf_counter() - t) * 1e6


# ---- one measurement, in its own process -------------------------------------------------------------

def child(tool, kernel, sources, kernels_src, launches):
    launch_info = json.load(open(os.path.join(sources, "launch.json")))[kernel]
    r = {"tool": tool, "kernel": kernel}
    t = time.perf_counter()
    import numpy as np
    if tool == "cupy":
        import cupy as cp
    else:
        import torch
        import importlib.util
        spec = importlib.util.spec_from_file_location("kjit_triton_kernels", os.path.join(sources, "triton_kernels.py"))
        kernels = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(kernels)  # defines the @triton.jit functions: nothing compiles yet
    r["import_us"] = us_since(t)
    r["version"] = cp.__version__ if tool == "cupy" else f"triton {triton_version()}, torch {torch.__version__}"

    # Context and inputs: random, never zeros.
    t = time.perf_counter()
    rng = np.random.default_rng(1)
    if kernel == "axpby":
        n = launch_info["n"]
        host = [rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2)]
    else:
        c_in, c_out, hw = launch_info["c_in"], launch_info["c_out"], launch_info["hw"]
        m = hw * hw
        host = [rng.uniform(-1, 1, size).astype(np.float32)
                for size in (c_in * m, c_out * c_in, c_out, c_out, c_out * m)]
    if tool == "cupy":
        dev = [cp.asarray(a) for a in host]
        sync = cp.cuda.Device(0).synchronize
    else:
        dev = [torch.from_numpy(a).cuda() for a in host]
        sync = torch.cuda.synchronize
    sync()
    r["context_us"] = us_since(t)

    # Construction to first launch completed.
    t = time.perf_counter()
    if tool == "cupy":
        source = open(os.path.join(sources, kernel + ".cu")).read()
        options = ("--std=c++17", "-default-device", "-I" + kernels_src)
        module = cp.RawModule(code=source, options=options)
        function = module.get_function(launch_info["entry"])
        if kernel == "axpby":
            args = (dev[0], dev[1], np.float32(2.0), np.float32(0.5), np.int64(n))
            shared = 0
        else:
            args = tuple(dev) + (np.int32(1), np.int32(c_in), np.int32(c_out), np.int32(m), np.int32(m))
            shared = launch_info["shared_bytes"]
            function.max_dynamic_shared_size_bytes = shared

        def launch():
            function((launch_info["grid"],), (launch_info["block"],), args, shared_mem=shared)
    else:
        if kernel == "axpby":
            grid = ((n + 1023) // 1024,)

            def launch():
                kernels.axpby[grid](dev[0], dev[1], 2.0, 0.5, n, BLOCK=1024, num_warps=8)
        else:
            grid = ((m + 127) // 128, (c_out + 63) // 64)

            def launch():
                kernels.conv1x1_bn_silu[grid](*dev, c_in, c_out, m, BM=128, BN=64, BK=32, num_warps=8, num_stages=3)
    launch()
    sync()
    r["first_launch_us"] = us_since(t)

    if launches:
        for _ in range(1000):
            launch()
        sync()
        samples = []
        for _ in range(launches // 100):
            for _ in range(100):
                t = time.perf_counter()
                launch()
                samples.append(us_since(t) * 1000)
            sync()
        samples.sort()
        r["hot_median_ns"] = samples[len(samples) // 2]
        r["hot_p90_ns"] = samples[int(0.9 * len(samples))]
    print(json.dumps(r))


def run_child(tool, kernel, sources, kernels_src, cache_dir, launches=0):
    env = dict(os.environ)
    env["CUPY_CACHE_DIR" if tool == "cupy" else "TRITON_CACHE_DIR"] = cache_dir
    out = subprocess.run([sys.executable, __file__, "--child", tool, kernel, sources, kernels_src, str(launches)],
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{tool} {kernel} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def median_of(runs):
    r = dict(runs[0])
    for k, v in r.items():
        if isinstance(v, float):
            r[k] = statistics.median(x[k] for x in runs)
    r["runs"] = len(runs)
    return r


def main():
    if sys.argv[1] == "--child":
        tool, kernel, sources, kernels_src, launches = sys.argv[2:7]
        child(tool, kernel, sources, kernels_src, int(launches))
        return
    sources, kernels_src = sys.argv[1], os.path.abspath(sys.argv[2])
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 5
    launches = int(sys.argv[sys.argv.index("--launches") + 1]) if "--launches" in sys.argv else 10000
    with open(os.path.join(sources, "triton_kernels.py"), "w") as f:
        f.write(TRITON_SOURCE)
    for tool in ("cupy", "triton"):
        for kernel in ("axpby", "conv"):
            try:
                with tempfile.TemporaryDirectory() as root:
                    cold = []
                    for i in range(max(1, runs // 3)):
                        cold.append(run_child(tool, kernel, sources, kernels_src, os.path.join(root, str(i))))
                    warm = [run_child(tool, kernel, sources, kernels_src, os.path.join(root, "0"))
                            for _ in range(runs)]
                    hot = run_child(tool, kernel, sources, kernels_src, os.path.join(root, "0"), launches)
                print(json.dumps(dict(median_of(cold), bench="cold")))
                print(json.dumps(dict(median_of(warm), bench="warm")))
                print(json.dumps({"bench": "hot", "tool": tool, "kernel": kernel, "launches": launches,
                                  "median_ns": hot["hot_median_ns"], "p90_ns": hot["hot_p90_ns"]}))
            except Exception as e:  # a missing peer must not hide the others
                print(json.dumps({"bench": "error", "tool": tool, "kernel": kernel, "error": str(e)}))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
