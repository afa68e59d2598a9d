# A problem's key as kjit writes it (AttentionShape::key, "b2_h16_hk4_s1024_sk1024_d128_bf16_causal"),
# read back into its sizes: what the attention bench scripts share.
import re


def problem(key):
    m = re.fullmatch(r'b(\d+)_h(\d+)_hk(\d+)_s(\d+)_sk(\d+)_d(\d+)_(bf16|f16)(_causal)?', key)
    b, h, hk, s, sk, d = map(int, m.groups()[:6])
    return dict(batch=b, heads=h, kv_heads=hk, seq=s, kv_seq=sk, head_dim=d, dtype=m.group(7), causal=bool(m.group(8)))
