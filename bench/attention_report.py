# The attention tables for docs/BENCHMARKS.md from one run: kjit's rows (`kjit run
# flash_attention2 --json`) and its peers' (bench/attention_peers.py), TFLOP/s (4·B·H·S·SK·D,
# over the pairs the causal mask keeps) one call per CUDA-graph replay, and back to back.
#   python3 bench/attention_report.py KJIT_JSONL PEERS_JSONL
import json
import sys

SDPA = ('flash', 'efficient', 'cudnn', 'default')


def tflops(flops, us):
    return flops / us / 1e6 if us else None


def cell(x, digits=0):
    return '—' if x is None else f'{x:.{digits}f}'


def main():
    kjit = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    lines = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
    context, peers = lines[0], {p['problem']: p for p in lines[1:]}
    print(f"Ceilings in this run ({context['device']}, torch {context['torch']}, cuDNN {context['cudnn']}): "
          f"dense 8192³ matmul {context['matmul_bf16_tflops']:.0f} TFLOP/s bf16, "
          f"{context['matmul_f16_tflops']:.0f} f16.\n")
    for timing, key in (('one call per graph replay', 'us'), ('back to back, 20 calls a graph', 'b2b_us')):
        print(f'TFLOP/s, {timing}:\n')
        print('| problem | kjit config | kjit | ' + ' | '.join(f'SDPA {b}' for b in SDPA) +
              ' | Triton | kjit / best SDPA | kjit / Triton | error |')
        print('|---|---|---|' + '---|' * (len(SDPA) + 4))
        for row in kjit:
            p = peers.get(row['problem'], {})
            mine = tflops(row['flops'], row['median_us' if key == 'us' else 'b2b_us'])
            others = {n: tflops(row['flops'], p.get(n, {}).get(key)) for n in SDPA + ('triton',)}
            best = max((others[n] for n in SDPA if others[n]), default=None)
            ratio = lambda other: f'**{mine / other:.2f}**' if other else '—'
            print(f"| {row['problem']} | {row['config']} | {cell(mine)} | " +
                  ' | '.join(cell(others[n]) for n in SDPA) +
                  f" | {cell(others['triton'])} | {ratio(best)} | {ratio(others['triton'])} | "
                  f"{row['relative_error']:.1e}{'' if row['passed'] else ' FAILED'} |")
        print()
    failed = [p for p in peers.values() for n in SDPA if 'error' in p.get(n, {})]
    if failed:
        print('Backends that refused a problem: ' +
              '; '.join(sorted({f"{n}: {p[n]['error']}" for p in failed for n in SDPA if 'error' in p.get(n, {})})))


if __name__ == '__main__':
    main()
