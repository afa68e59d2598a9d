# The Triton peer of kjit's attention kernel: a fused attention forward in the style of Triton's
# fused-attention tutorial (one program per BLOCK_M query rows of one head, the online softmax
# over BLOCK_N-key tiles, the diagonal tiles masked apart from the rest), written here and
# autotuned over its tile shapes and pipeline depth. Tensors [B, H, S, D] with any strides.
import torch
import triton
import triton.language as tl


def _configs():
    return [triton.Config({'BLOCK_M': m, 'BLOCK_N': n}, num_stages=s, num_warps=w)
            for m, n, s, w in [(128, 64, 3, 4), (128, 64, 3, 8), (128, 128, 3, 8), (64, 64, 4, 4), (128, 32, 4, 4)]]


@triton.jit
def _tile(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, offs_m, offs_n, start, end, SK, qk_scale,
          MASKED: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr):
    for start_n in range(start, end, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptrs + start_n * stride_kn, mask=cols[None, :] < SK, other=0.0)
        qk = tl.dot(q, k) * qk_scale
        if MASKED:
            keep = cols[None, :] < SK
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            qk = tl.where(keep, qk, float('-inf'))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptrs + start_n * stride_vn, mask=cols[:, None] < SK, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_ij
    return acc, l_i, m_i


@triton.autotune(configs=_configs(), key=['HEAD_DIM', 'CAUSAL', 'S', 'SK'])
@triton.jit
def _attention_forward(Q, K, V, O, LSE, sm_scale, stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_kn,
                       stride_vb, stride_vh, stride_vn, stride_ob, stride_oh, stride_os, H, HK, S, SK,
                       HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b, h = bh // H, bh % H
    hk = h // (H // HK)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qs + offs_d[None, :],
                mask=offs_m[:, None] < S, other=0.0)
    k_ptrs = K + b * stride_kb + hk * stride_kh + offs_n[None, :] * stride_kn + offs_d[:, None]
    v_ptrs = V + b * stride_vb + hk * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :]
    m_i = tl.full([BLOCK_M], float('-inf'), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.44269504
    # Key tiles every row of the block sees in full, then those the mask (causal, ragged) cuts.
    end = tl.minimum((start_m + 1) * BLOCK_M, SK) if CAUSAL else SK
    full = tl.minimum(start_m * BLOCK_M + 1, SK) if CAUSAL else SK
    full = full // BLOCK_N * BLOCK_N
    acc, l_i, m_i = _tile(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, offs_m, offs_n, 0, full, SK,
                          qk_scale, False, CAUSAL, BLOCK_N)
    acc, l_i, m_i = _tile(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, offs_m, offs_n, full, end, SK,
                          qk_scale, True, CAUSAL, BLOCK_N)
    acc = acc / l_i[:, None]
    tl.store(LSE + bh * S + offs_m, (m_i + tl.math.log2(l_i)) * 0.6931471805599453, mask=offs_m < S)
    tl.store(O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_os + offs_d[None, :],
             acc.to(O.dtype.element_ty), mask=offs_m[:, None] < S)


def attention(q, k, v, causal, sm_scale=None):
    """O and LSE of q [B, H, S, D], k and v [B, HK, SK, D] (torch's is_causal mask)."""
    B, H, S, D = q.shape
    HK, SK = k.shape[1], k.shape[2]
    o = torch.empty_like(q)
    lse = torch.empty((B, H, S), device=q.device, dtype=torch.float32)
    scale = sm_scale if sm_scale is not None else D ** -0.5
    grid = lambda meta: (triton.cdiv(S, meta['BLOCK_M']), B * H)
    _attention_forward[grid](q, k, v, o, lse, scale, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
                             *o.stride()[:3], H, HK, S, SK, HEAD_DIM=D, CAUSAL=causal)
    return o, lse
