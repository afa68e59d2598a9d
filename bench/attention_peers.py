# The peers of kjit's attention kernel, on the problems kjit ran (its `kjit run flash_attention2
# --json` rows): torch.nn.functional.scaled_dot_product_attention with each backend this card
# offers (flash, efficient, cuDNN) and with torch's own choice, and the autotuned Triton kernel
# (bench/attention_triton.py). Each timed as kjit is: one call per CUDA-graph replay (median
# over ITERS replays) and back to back (20 calls a graph). Also the ceiling measured in the same
# run: a dense matmul of the dtype, and a device-to-device copy. Prints one JSON line per problem
# and one for the ceilings.
#   python3 bench/attention_peers.py KJIT_JSONL ITERS
import contextlib
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from attention_problem import problem
from attention_triton import attention as triton_attention
from graph_timing import BACK_TO_BACK, median_us


BACKENDS = {'flash': SDPBackend.FLASH_ATTENTION, 'efficient': SDPBackend.EFFICIENT_ATTENTION,
            'cudnn': SDPBackend.CUDNN_ATTENTION, 'default': None}


def peers(p, iters, flops):
    dtype = torch.bfloat16 if p['dtype'] == 'bf16' else torch.float16
    B, H, HK, S, SK, D = p['batch'], p['heads'], p['kv_heads'], p['seq'], p['kv_seq'], p['head_dim']
    q = torch.randn(B, H, S, D, device='cuda', dtype=dtype)
    k = torch.randn(B, HK, SK, D, device='cuda', dtype=dtype)
    v = torch.randn(B, HK, SK, D, device='cuda', dtype=dtype)
    gqa = H != HK
    out = {}
    reference = None
    b2b_iters = max(3, iters // 10)
    for name, backend in BACKENDS.items():
        def call():
            return F.scaled_dot_product_attention(q, k, v, is_causal=p['causal'], enable_gqa=gqa)
        try:
            with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():  # default: torch's pick
                o = call()
                us = median_us(call, iters)
                b2b = median_us(call, b2b_iters, BACK_TO_BACK)
            reference = o if reference is None else reference
            out[name] = dict(us=us, b2b_us=b2b, tflops=flops / us / 1e6)
        except RuntimeError as e:  # the backend does not take this problem on this card
            out[name] = dict(error=str(e).splitlines()[0][:160])
    try:
        triton_attention(q, k, v, p['causal'])  # autotunes
        o, _ = triton_attention(q, k, v, p['causal'])
        call = lambda: triton_attention(q, k, v, p['causal'])
        us = median_us(call, iters)
        out['triton'] = dict(us=us, b2b_us=median_us(call, b2b_iters, BACK_TO_BACK), tflops=flops / us / 1e6)
        if reference is not None:  # the Triton kernel agrees with SDPA
            out['triton']['relative_error_vs_sdpa'] = float(
                (o.float() - reference.float()).norm() / reference.float().norm())
    except Exception as e:  # e.g. a shape its tiles do not take
        out['triton'] = dict(error=str(e).splitlines()[0][:160] if str(e) else type(e).__name__)
    return out


def ceilings(iters):
    """Dense matmul TFLOP/s of each dtype, 8192³, timed as the kernels are."""
    result = {}
    for name, dtype in (('bf16', torch.bfloat16), ('f16', torch.float16)):
        a = torch.randn(8192, 8192, device='cuda', dtype=dtype)
        b = torch.randn(8192, 8192, device='cuda', dtype=dtype)
        c = torch.empty(8192, 8192, device='cuda', dtype=dtype)
        us = median_us(lambda: torch.matmul(a, b, out=c), iters)
        result[f'matmul_{name}_tflops'] = 2 * 8192 ** 3 / us / 1e6
    # Memory: a 1 GiB device-to-device copy reads and writes 2 GiB (what decoding is bound by).
    src = torch.empty(1 << 30, device='cuda', dtype=torch.uint8)
    dst = torch.empty_like(src)
    result['copy_gbs'] = 2 * src.numel() / median_us(lambda: dst.copy_(src), iters) / 1e3
    return result


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    iters = int(sys.argv[2])
    torch.backends.cuda.matmul.allow_tf32 = False
    print(json.dumps(dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                          cudnn=torch.backends.cudnn.version(), **ceilings(iters))), flush=True)
    for row in rows:
        p = problem(row['problem'])
        print(json.dumps(dict(problem=row['problem'], **peers(p, iters, row['flops']))), flush=True)
        torch.cuda.empty_cache()


if __name__ == '__main__':
    main()
