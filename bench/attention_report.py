# The attention tables for docs/BENCHMARKS.md from one run: kjit's rows (`kjit run
# flash_attention2 --json`) and its peers' (bench/attention_peers.py), one call per CUDA-graph
# replay and back to back. TFLOP/s (4·B·H·S·SK·D, over the pairs the causal mask keeps); with
# --decode (few queries, long key caches) µs, and the GB/s kjit reads and writes (K, V, Q, O)
# against the copy bandwidth measured in the run. Ratios are kjit's speed over the peer's.
#   python3 bench/attention_report.py [--decode] KJIT_JSONL PEERS_JSONL
import json
import sys

from attention_problem import problem

SDPA = ('flash', 'efficient', 'cudnn', 'default')


def tflops(flops, us):
    return flops / us / 1e6 if us else None


def cell(x, digits=0):
    return '—' if x is None else f'{x:.{digits}f}'


def moved_bytes(p):
    """Bytes a forward must move: K and V read once, Q read, O written (2 bytes a value)."""
    kv = 2 * p['batch'] * p['kv_heads'] * p['kv_seq'] * p['head_dim']
    qo = 2 * p['batch'] * p['heads'] * p['seq'] * p['head_dim']
    return 2 * (kv + qo)


def main():
    decode = sys.argv[1] == '--decode'
    kjit_file, peers_file = sys.argv[2:4] if decode else sys.argv[1:3]
    kjit = [json.loads(l) for l in open(kjit_file) if l.strip()]
    lines = [json.loads(l) for l in open(peers_file) if l.strip()]
    context, peers = lines[0], {p['problem']: p for p in lines[1:]}
    print(f"Ceilings in this run ({context['device']}, torch {context['torch']}, cuDNN {context['cudnn']}): "
          f"dense 8192³ matmul {context['matmul_bf16_tflops']:.0f} TFLOP/s bf16, "
          f"{context['matmul_f16_tflops']:.0f} f16; device-to-device copy {context['copy_gbs']:.0f} GB/s.\n")
    for timing, key in (('one call per graph replay', 'us'), ('back to back, 20 calls a graph', 'b2b_us')):
        unit = 'µs (GB/s moved for kjit)' if decode else 'TFLOP/s'
        print(f'{unit}, {timing}:\n')
        print('| problem | kjit config | kjit | ' + ' | '.join(f'SDPA {b}' for b in SDPA) +
              ' | Triton | kjit / best SDPA | kjit / Triton | error |')
        print('|---|---|---|' + '---|' * (len(SDPA) + 4))
        for row in kjit:
            p = peers.get(row['problem'], {})
            us = row['median_us' if key == 'us' else 'b2b_us']
            peer_us = {n: p.get(n, {}).get(key) for n in SDPA + ('triton',)}
            best_us = min((peer_us[n] for n in SDPA if peer_us[n]), default=None)
            ratio = lambda other_us: f'**{other_us / us:.2f}**' if other_us else '—'
            if decode:
                gbs = moved_bytes(problem(row['problem'])) / us / 1e3
                mine, others = f'{us:.1f} ({gbs:.0f})', {n: cell(peer_us[n], 1) for n in peer_us}
            else:
                mine = cell(tflops(row['flops'], us))
                others = {n: cell(tflops(row['flops'], peer_us[n])) for n in peer_us}
            print(f"| {row['problem']} | {row['config']} | {mine} | " + ' | '.join(others[n] for n in SDPA) +
                  f" | {others['triton']} | {ratio(best_us)} | {ratio(peer_us['triton'])} | "
                  f"{row['relative_error']:.1e}{'' if row['passed'] else ' FAILED'} |")
        print()
    refused = {f"{n}: {p[n]['error']}" for p in peers.values() for n in SDPA + ('triton',) if 'error' in p.get(n, {})}
    if refused:
        print('Peers that refused a problem: ' + '; '.join(sorted(refused)))


if __name__ == '__main__':
    main()
