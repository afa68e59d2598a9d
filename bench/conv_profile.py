"""ncu profiles of kjit's conv kernels on the layers where a bench run missed issue 12's targets
(or on layers named), for docs/BENCHMARKS.md: per layer, one launch of the kernel dispatch picks
(the run's own configuration) under `ncu --clock-control none --set full --import-source yes`,
then its duration, the throughputs ncu reports (SM, the busiest pipeline, L2, DRAM), registers,
grid and occupancy, the warp-state stall breakdown, and the SASS instructions that collect the most
stall samples — where the time goes.

  conv_profile.py --kjit BIN --from KJIT_JSONL TORCH_JSONL [--limit N] [--out DIR]
  conv_profile.py --kjit BIN --layer "BATCH CIN COUT HW KERNEL STRIDE [GROUPS]" [--config TEXT] [--channels-last] [--out DIR]
A channels-last run (kjit_conv_bench --nhwc) profiles `kjit run --channels-last`, dispatch's pick.
  conv_profile.py --parse DETAILS.txt SASS.csv      (the report from saved ncu pages)
"""
import argparse
import csv
import io
import os
import re
import subprocess
import sys

import conv_report  # bench/conv_report.py, beside this script

DETAILS = ("Duration", "Compute (SM) Throughput", "Memory Throughput", "L2 Cache Throughput", "DRAM Throughput",
           "Registers Per Thread", "Grid Size", "Block Size", "Achieved Occupancy", "Issued Warp Per Scheduler",
           "Warp Cycles Per Issued Instruction")


def run_args(row):
    """`kjit run conv2d_bn_silu` arguments for a bench row."""
    k, s = row["kernel"], row["stride"]
    args = ["--batch", row["batch"], "--cin", row["c_in"], "--cout", row["c_out"], "--hw", row["hw"], row["hw"]]
    if row.get("layout") == "nhwc":
        args += ["--channels-last"]
    if k != 1:
        args += ["--kernel-size", k, k, "--pad", k // 2]
    if s != 1:
        args += ["--stride", s]
    if row.get("groups", 1) != 1:
        args += ["--groups", row["groups"]]
    return [str(a) for a in args]


def parse_details(text):
    """ncu's details page as text: {metric: "value unit"} (first occurrence), the warp-state stall
    breakdown {reason: cycles per issued instruction}, and the busiest pipeline's line."""
    metrics, stalls, pipeline = {}, {}, ""
    for line in text.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) in (2, 3) and re.fullmatch(r"[\d,.]+", cells[-1]):
            name, value = cells[0], cells[-1] + (f" {cells[1]}" if len(cells) == 3 else "")
            if name.startswith("Stall "):
                stalls.setdefault(name[len("Stall "):], float(cells[-1].replace(",", "")))
            else:
                metrics.setdefault(name, value)
        if "highest-utilized pipeline" in line and not pipeline:
            pipeline = re.sub(r"\s+", " ", line.strip())
            pipeline = pipeline.split("INF ", 1)[-1].split(" based on")[0]
    return metrics, stalls, pipeline


SAMPLES = "Warp Stall Sampling (All Samples)"


def sass_rows(sass_csv):
    """ncu's source page as CSV: one dict per SASS instruction, its counters as ints."""
    rows = list(csv.reader(io.StringIO(sass_csv)))
    header = next(i for i, r in enumerate(rows) if "Source" in r and SAMPLES in r)
    names = rows[header]
    out = []
    for r in rows[header + 1:]:
        if len(r) != len(names):
            continue
        row = {"Source": r[names.index("Source")].strip()}
        for name, v in zip(names, r):
            if name == SAMPLES or (name.startswith("stall_") and "(Not Issued)" not in name):
                row[name] = int(float(v)) if v not in ("", "-") else 0
        out.append(row)
    return out


def top_instructions(rows, count=8):
    """The SASS instructions with the most warp stall samples: (samples, share, instruction, the
    three largest reasons)."""
    total = sum(r[SAMPLES] for r in rows) or 1
    out = []
    for r in sorted(rows, key=lambda r: -r[SAMPLES])[:count]:
        why = sorted(((n, k[len("stall_"):]) for k, n in r.items() if k.startswith("stall_")), reverse=True)[:3]
        out.append((r[SAMPLES], r[SAMPLES] / total, r["Source"], ", ".join(f"{name} {n}" for n, name in why if n)))
    return out


def by_opcode(rows, count=6):
    """Stall samples summed per SASS opcode (predicate and operands dropped): (opcode, share)."""
    totals = {}
    for r in rows:
        words = [w for w in r["Source"].split() if not w.startswith("@")]
        if words:
            totals[words[0]] = totals.get(words[0], 0) + r[SAMPLES]
    total = sum(totals.values()) or 1
    return [(op, n / total) for op, n in sorted(totals.items(), key=lambda kv: -kv[1])[:count]]


def report(title, details_text, sass_csv):
    metrics, stalls, pipeline = parse_details(details_text)
    print(f"\n#### {title}\n")
    print("| " + " | ".join(DETAILS) + " |\n|" + "---|" * len(DETAILS))
    print("| " + " | ".join(metrics.get(m, "-") for m in DETAILS) + " |\n")
    if pipeline:
        print(f"Busiest pipeline: {pipeline}.\n")
    if stalls:
        ranked = sorted(stalls.items(), key=lambda kv: -kv[1])
        print("Warp cycles per issued instruction by state: " +
              ", ".join(f"{k} {v:.2f}" for k, v in ranked if v >= 0.05) + ".\n")
    if sass_csv:
        rows = sass_rows(sass_csv)
        print("Stall samples by opcode: " + ", ".join(f"{op} {share:.0%}" for op, share in by_opcode(rows)) + ".\n")
        print("| stall samples | share | SASS | top reasons |\n|---|---|---|---|")
        for n, share, source, why in top_instructions(rows):
            print(f"| {n} | {share:.0%} | `{source}` | {why} |")


def profile(kjit, row, config, out_dir):
    """ncu over one launch of the layer's kernel; its details page and SASS source page."""
    base = os.path.join(out_dir, re.sub(r"[^\w.-]+", "_", f"{row['layer']} b{row['batch']}"))
    command = ["ncu", "--clock-control", "none", "--set", "full", "--import-source", "yes", "--launch-skip", "2",
               "--launch-count", "1", "-k", "regex:entry_point", "-f", "-o", base, kjit, "run", "conv2d_bn_silu",
               "--iters", "3", *run_args(row)]
    if config:
        command += ["--config", *config.split()]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    details = subprocess.run(["ncu", "--import", base + ".ncu-rep", "--print-details", "all"], check=True,
                             capture_output=True, text=True).stdout
    sass = subprocess.run(["ncu", "--import", base + ".ncu-rep", "--page", "source", "--csv", "--print-source",
                           "sass"], check=True, capture_output=True, text=True).stdout
    return details, sass


def missed_rows(kjit_jsonl, torch_jsonl):
    """The bench rows that miss a target, each once, in the targets' order."""
    kjit, _, head, peers = conv_report.load_run(kjit_jsonl, torch_jsonl)
    seen, out = set(), []
    for _, rows, met, _ in conv_report.targets(kjit, peers, head["ceilings"]):
        for r in rows:
            if not met(r) and (r["layer"], r["batch"]) not in seen:
                seen.add((r["layer"], r["batch"]))
                out.append(r)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kjit", help="the kjit command line binary")
    ap.add_argument("--from", dest="bench", nargs=2, metavar=("KJIT_JSONL", "TORCH_JSONL"))
    ap.add_argument("--layer", action="append", default=[], help='"BATCH CIN COUT HW KERNEL STRIDE [GROUPS]"')
    ap.add_argument("--config", help="configuration for --layer (default: dispatch's)")
    ap.add_argument("--channels-last", action="store_true", help="--layer on NHWC tensors, the channels-last kernel")
    ap.add_argument("--limit", type=int, default=12, help="at most this many missed rows")
    ap.add_argument("--out", default="/tmp/kjit-conv-profile")
    ap.add_argument("--parse", nargs=2, metavar=("DETAILS", "SASS_CSV"))
    a = ap.parse_args()
    if a.parse:
        report(a.parse[0], open(a.parse[0]).read(), open(a.parse[1]).read())
        return
    if not a.kjit:
        ap.error("--kjit is needed to profile")
    os.makedirs(a.out, exist_ok=True)
    jobs = []
    if a.bench:
        # A channels-last row names its tiles, not a configuration: dispatch picks them again.
        jobs += [(r, None if r.get("layout") == "nhwc" else r["dispatch"]) for r in missed_rows(*a.bench)[:a.limit]]
    for spec in a.layer:
        values = [int(v) for v in spec.split()]
        if len(values) not in (6, 7):
            ap.error(f'--layer "{spec}": give BATCH CIN COUT HW KERNEL STRIDE [GROUPS]')
        b, ci, co, hw, k, s, g = values + [1] * (7 - len(values))
        group = "" if g == 1 else "dw " if g == ci else f"g{g} "
        layer = f"{group}{k}x{k}{' s' + str(s) if s != 1 else ''} {ci}->{co} @{hw}"
        row = {"layer": layer, "batch": b, "c_in": ci, "c_out": co, "hw": hw, "kernel": k, "stride": s, "groups": g}
        if a.channels_last:
            row["layout"] = "nhwc"
        jobs.append((row, a.config))
    if not jobs:
        ap.error("name layers with --layer or a bench run with --from")
    for row, config in jobs:
        details, sass = profile(a.kjit, row, config, a.out)
        report(f"{row['layer']}, batch {row['batch']}" + (f" — {config}" if config else ""), details, sass)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
