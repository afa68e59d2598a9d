"""A Triton kernel of kjit's fused algorithm, as a peer for kjit_conv_bench: Conv2d (NCHW, any
kernel size, stride, padding; groups 1) as an implicit GEMM on TF32 tensor cores, the BatchNorm
scale and shift and SiLU in its epilogue — one launch, like kjit's. Autotuned by Triton on the
first call per shape over the configurations below (small tiles included), as a user would.
"""
import torch
import triton
import triton.language as tl


def _configs():
    tiles = [  # BLOCK_M (pixels), BLOCK_N (channels), BLOCK_K, warps, stages
        (32, 32, 32, 2, 3), (64, 32, 32, 4, 3), (32, 64, 32, 4, 3), (64, 64, 32, 4, 3),
        (128, 64, 32, 4, 3), (64, 128, 32, 4, 3), (128, 128, 32, 8, 3), (128, 64, 16, 4, 4),
    ]
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k}, num_warps=w, num_stages=s)
            for m, n, k, w, s in tiles]


@triton.autotune(configs=_configs(), key=["B", "C", "H", "W", "N", "KH", "KW", "S", "P"])
@triton.jit
def _conv_bn_silu(x, w, scale, shift, y, B, C, H, W, N, OH, OW,
                  KH: tl.constexpr, KW: tl.constexpr, S: tl.constexpr, P: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    M = B * OH * OW
    K = C * KH * KW
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # output pixels (b, oh, ow)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)  # output channels
    b = rm // (OH * OW)
    pixel = rm % (OH * OW)
    oh = pixel // OW
    ow = pixel % OW
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)  # (channel, kh, kw), PyTorch's weight order
        c = rk // (KH * KW)
        tap = rk % (KH * KW)
        ih = oh[:, None] * S - P + (tap // KW)[None, :]
        iw = ow[:, None] * S - P + (tap % KW)[None, :]
        inside = (rm[:, None] < M) & (rk[None, :] < K) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        patch = tl.load(x + ((b[:, None] * C + c[None, :]) * H + ih) * W + iw, mask=inside, other=0.0)
        weight = tl.load(w + rn[None, :] * K + rk[:, None], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(patch, weight, input_precision="tf32")
    v = acc * tl.load(scale + rn, mask=rn < N, other=0.0)[None, :] + tl.load(shift + rn, mask=rn < N, other=0.0)[None, :]
    v = v / (1.0 + tl.exp(-v))
    tl.store(y + (b[:, None] * N + rn[None, :]) * (OH * OW) + pixel[:, None], v,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def conv_bn_silu(x, weight, scale, shift, stride, padding, out=None):
    """silu(scale · conv2d(x, weight) + shift) per output channel; weight [N, C, KH, KW]."""
    B, C, H, W = x.shape
    N, _, KH, KW = weight.shape
    OH, OW = (H + 2 * padding - KH) // stride + 1, (W + 2 * padding - KW) // stride + 1
    y = out if out is not None else torch.empty(B, N, OH, OW, device=x.device, dtype=x.dtype)
    grid = lambda meta: (triton.cdiv(B * OH * OW, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
    _conv_bn_silu[grid](x, weight.reshape(N, -1).contiguous(), scale, shift, y, B, C, H, W, N, OH, OW,
                        KH=KH, KW=KW, S=stride, P=padding)
    return y


def best_config():
    """The configuration the last autotuning chose, as text."""
    c = _conv_bn_silu.best_config
    return " ".join(f"{k}={v}" for k, v in c.kwargs.items()) + f" warps={c.num_warps} stages={c.num_stages}"
