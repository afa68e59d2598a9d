#!/usr/bin/env python3
"""Markdown tables for docs/BENCHMARKS.md from bench/run-jit-bench's rows (one JSON per line)."""
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]


def pick(**match):
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def one(**match):
    found = pick(**match)
    return found[0] if found else None


def fmt(v, digits=1):
    return "—" if v is None else f"{v:,.{digits}f}"


def ratio(a, b):
    return "—" if a is None or b is None or b == 0 else f"{a / b:.2f}"


ctx = one(bench="context") or {}
print(f"- Date {ctx.get('date')}; card: {ctx.get('card')}; CPU: {ctx.get('cpu')} ({ctx.get('cores')} cores); "
      f"NVRTC {ctx.get('nvrtc')}.")
print("- axpby: f32, 256 threads × 4 items, n = 65,536. conv: the 1x1 conv GEMM kernel, tiles 128x64x32x8, "
      "256→256 channels at 28×28, batch 1. Medians throughout.\n")

print("### Host-only costs (no GPU involved)\n")
print("| kernel | construct µs | key ns | memoised key ns | SQLite hit µs | new Runtime's first hit µs "
      "| memory hit ns | entry KB |")
print("|---|---|---|---|---|---|---|---|")
for r in pick(bench="host"):
    print(f"| {r['kernel']} | {fmt(r['construct_us'])} | {fmt(r['key_ns'], 0)} | {fmt(r['memo_key_ns'])} "
          f"| {fmt(r['sqlite_hit_us'])} | {fmt(r['runtime_first_hit_us'])} | {fmt(r['memory_hit_ns'])} "
          f"| {fmt(r['entry_bytes'] / 1024, 0)} |")

steps = ["open_us", "construct_us", "key_us", "find_us", "compile_us", "store_us", "load_us", "launch_us", "total_us"]
for bench, title in (("cold", "Cold start: new process, empty cache"),
                     ("warm", "Warm-cache start: new process, populated cache")):
    print(f"\n### {title} (µs; context creation reported apart, not included)\n")
    print("| kernel | runs | context | open cache | construct | key | lookup | NVRTC | store | module load "
          "| launch + sync | **steps total** | **end to end** |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for kernel in ("axpby", "conv"):
        s, e = one(bench=bench, mode="steps", kernel=kernel), one(bench=bench, mode="e2e", kernel=kernel)
        if not s:
            continue
        cells = [fmt(s.get(k)) for k in steps]
        print(f"| {kernel} | {s['runs']} | {fmt(s.get('context_us'))} | " + " | ".join(cells[:-1]) +
              f" | **{cells[-1]}** | **{fmt(e.get('total_us')) if e else '—'}**"
              f"{'' if not e or e.get('launched') else ' (compiled, not launched: no GPU)'} |")

hot = pick(bench="hot", tool=None)
if hot:
    print("\n### Hot launch: host time per launch (ns)\n")
    print("| kernel | path | launches | median | p90 | / raw cuLaunchKernel |")
    print("|---|---|---|---|---|---|")
    for r in hot:
        print(f"| {r['kernel']} | {r['path']} | {r['launches']} | {fmt(r['median_ns'], 0)} | {fmt(r['p90_ns'], 0)} "
              f"| {ratio(r['median_ns'], r['raw_median_ns'])} |")

peers = [r for r in rows if r.get("tool")]
if peers:
    print("\n### Against CuPy and Triton (same run)\n")
    print("| kernel | measure | kjit | CuPy | Triton | CuPy / kjit | Triton / kjit |")
    print("|---|---|---|---|---|---|---|")
    for kernel in ("axpby", "conv"):
        def kjit(bench):
            e = one(bench=bench, mode="e2e", kernel=kernel)
            return e and e.get("total_us")

        kjit_hot = next((r["median_ns"] / 1000 for r in hot if r["kernel"] == kernel
                         and r["path"] in ("typed launch",)), None)
        for label, bench in (("cold: construction → first launch done, ms", "cold"),
                             ("warm cache, new process: construction → first launch done, ms", "warm")):
            k = kjit(bench)
            c, t = (one(bench=bench, tool=tool, kernel=kernel) for tool in ("cupy", "triton"))
            cv, tv = c and c["first_launch_us"], t and t["first_launch_us"]
            print(f"| {kernel} | {label} | {fmt(k and k / 1000, 3)} | {fmt(cv and cv / 1000, 3)} "
                  f"| {fmt(tv and tv / 1000, 3)} | {ratio(cv, k)} | {ratio(tv, k)} |")
        c, t = (one(bench="hot", tool=tool, kernel=kernel) for tool in ("cupy", "triton"))
        cv, tv = c and c["median_ns"] / 1000, t and t["median_ns"] / 1000
        print(f"| {kernel} | hot: host time per launch, µs | {fmt(kjit_hot, 2)} | {fmt(cv, 2)} | {fmt(tv, 2)} "
              f"| {ratio(cv, kjit_hot)} | {ratio(tv, kjit_hot)} |")
        for what, key in (("import, ms (Python peers; kjit: none)", "import_us"),
                          ("context + inputs, ms (excluded above)", "context_us")):
            ks = one(bench="warm", mode="e2e", kernel=kernel)
            k = ks.get(key) if ks else None
            c, t = (one(bench="warm", tool=tool, kernel=kernel) for tool in ("cupy", "triton"))
            print(f"| {kernel} | {what} | {fmt(k and k / 1000, 1) if key == 'context_us' else '—'} "
                  f"| {fmt(c and c[key] / 1000, 1)} | {fmt(t and t[key] / 1000, 1)} | | |")
    versions = {r["tool"]: r.get("version") for r in peers if r.get("version")}
    if versions:
        print("\nPeers: " + "; ".join(f"{tool} {v}" for tool, v in sorted(versions.items())) + ".")
    for r in pick(bench="error"):
        print(f"\n{r['tool']} {r['kernel']} failed: {r['error'][-300:]}")

jobs = pick(bench="warm_jobs")
if jobs:
    base = next((r["seconds"] for r in jobs if r["jobs"] == 1), None)
    print(f"\n### Parallel `kjit warm -j N` (full configuration list, sm_90, empty cache; "
          f"{ctx.get('cores')} cores)\n")
    print("| N | kernels compiled | failed | wall s | speedup over N = 1 | speedup / N |")
    print("|---|---|---|---|---|---|")
    for r in jobs:
        speedup = base / r["seconds"] if base else None
        print(f"| {r['jobs']} | {r['compiled']} | {r['failed']} | {fmt(r['seconds'], 2)} | {fmt(speedup, 2)} "
              f"| {fmt(speedup and speedup / r['jobs'], 2)} |")
