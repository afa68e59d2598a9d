// Graphs more than one test file runs: planned without a GPU (test_plan.cpp) and run on one
// (test_loaded_model_gpu.cpp).
#pragma once
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace kjit::test {

/// Concats of every kind of input: convs that write and read channel slices at any image stride
/// (a, c) and a depthwise one that takes tight images only (b), an add read by a max pool, a
/// nested concat, a graph input, one value twice, and a concat that is a graph output; 7-channel
/// slices of 11 x 13 planes, so that some start off 16-byte alignment.
inline constexpr const char* concat_graph = R"({
  "inputs": [{"name": "x", "shape": ["B", 4, 11, 13]}],
  "outputs": ["cat", "head"],
  "nodes": [
    {"name": "a", "op": "conv2d_bn_silu", "inputs": ["x"], "attrs": {"c_out": 7}},
    {"name": "b", "op": "conv2d_bn_silu", "inputs": ["a"], "attrs": {"c_out": 7, "kernel": 3, "pad": 1, "groups": 7}},
    {"name": "r", "op": "add", "inputs": ["b", "a"]},
    {"name": "p", "op": "maxpool2d", "inputs": ["r"], "attrs": {"kernel": 3, "stride": 1, "pad": 1}},
    {"name": "c", "op": "conv2d_bn_silu", "inputs": ["r"], "attrs": {"c_out": 6, "kernel": 3, "pad": 1}},
    {"name": "inner", "op": "concat", "inputs": ["a", "b"]},
    {"name": "cat", "op": "concat", "inputs": ["inner", "r", "p", "x", "p", "c"]},
    {"name": "head", "op": "conv2d_bn_silu", "inputs": ["cat"], "attrs": {"c_out": 6}}
  ]
})";

/// Residual adds as C2f has them: a conv's output plus a value both live in one concat (fused at
/// any batch), one whose output the concat copies (fused at batch 1 only: the layouts differ
/// after), one after a depthwise conv (which adds no residual), and one after a conv whose output
/// the caller reads too.
inline constexpr const char* residual_graph = R"({
  "inputs": [{"name": "x", "shape": ["B", 8, 12, 12]}],
  "outputs": ["cat", "u", "r4"],
  "nodes": [
    {"name": "s", "op": "conv2d_bn_silu", "inputs": ["x"], "attrs": {"c_out": 8}},
    {"name": "m1", "op": "conv2d_bn_silu", "inputs": ["s"], "attrs": {"c_out": 8, "kernel": 3, "pad": 1}},
    {"name": "r1", "op": "add", "inputs": ["m1", "s"]},
    {"name": "m2", "op": "conv2d_bn_silu", "inputs": ["r1"], "attrs": {"c_out": 8, "kernel": 3, "pad": 1}},
    {"name": "r2", "op": "add", "inputs": ["r1", "m2"]},
    {"name": "d", "op": "conv2d_bn_silu", "inputs": ["r2"], "attrs": {"c_out": 8, "kernel": 3, "pad": 1, "groups": 8}},
    {"name": "r3", "op": "add", "inputs": ["d", "r2"]},
    {"name": "cat", "op": "concat", "inputs": ["s", "r1", "r2", "r3"]},
    {"name": "u", "op": "conv2d_bn_silu", "inputs": ["cat"], "attrs": {"c_out": 8}},
    {"name": "r4", "op": "add", "inputs": ["u", "x"]}
  ]
})";

/// Chained max pools: SPPF's three 5x5 ones, all in a concat with the conv they start from (one
/// of them also read by an add); five 3x3 ones after it, of which the kernel runs four in one
/// launch; and a strided pool, which keeps no size and so ends the chain. 5 channels of 11 x 13.
inline constexpr const char* sppf_graph = R"({
  "inputs": [{"name": "x", "shape": ["B", 6, 11, 13]}],
  "outputs": ["head", "t", "q6"],
  "nodes": [
    {"name": "a", "op": "conv2d_bn_silu", "inputs": ["x"], "attrs": {"c_out": 5}},
    {"name": "p1", "op": "maxpool2d", "inputs": ["a"], "attrs": {"kernel": 5, "stride": 1, "pad": 2}},
    {"name": "p2", "op": "maxpool2d", "inputs": ["p1"], "attrs": {"kernel": 5, "stride": 1, "pad": 2}},
    {"name": "p3", "op": "maxpool2d", "inputs": ["p2"], "attrs": {"kernel": 5, "stride": 1, "pad": 2}},
    {"name": "cat", "op": "concat", "inputs": ["a", "p1", "p2", "p3"]},
    {"name": "head", "op": "conv2d_bn_silu", "inputs": ["cat"], "attrs": {"c_out": 6}},
    {"name": "t", "op": "add", "inputs": ["p2", "a"]},
    {"name": "q1", "op": "maxpool2d", "inputs": ["p3"], "attrs": {"kernel": 3, "stride": 1, "pad": 1}},
    {"name": "q2", "op": "maxpool2d", "inputs": ["q1"], "attrs": {"kernel": 3, "stride": 1, "pad": 1}},
    {"name": "q3", "op": "maxpool2d", "inputs": ["q2"], "attrs": {"kernel": 3, "stride": 1, "pad": 1}},
    {"name": "q4", "op": "maxpool2d", "inputs": ["q3"], "attrs": {"kernel": 3, "stride": 1, "pad": 1}},
    {"name": "q5", "op": "maxpool2d", "inputs": ["q4"], "attrs": {"kernel": 3, "stride": 1, "pad": 1}},
    {"name": "q6", "op": "maxpool2d", "inputs": ["q5"], "attrs": {"kernel": 3, "stride": 2, "pad": 1}}
  ]
})";

/// Attention in a graph: f32 q, k, v [B, H, S, D] cast to `dtype`, attention (attrs `attrs`),
/// cast back. Outputs: the f32 result and attention's own, in `dtype`.
inline std::string attention_graph(std::string_view dtype, std::string_view attrs, int heads = 8, int kv_heads = 2,
                                   int seq = 100, int kv_seq = 300, int head_dim = 64) {
    return fmt::format(R"({{
  "inputs": [{{"name": "q", "shape": ["B", {0}, {2}, {4}]}}, {{"name": "k", "shape": ["B", {1}, {3}, {4}]}},
             {{"name": "v", "shape": ["B", {1}, {3}, {4}]}}],
  "outputs": ["out", "attn"],
  "nodes": [
    {{"name": "q16", "op": "cast", "inputs": ["q"], "attrs": {{"to": "{5}"}}}},
    {{"name": "k16", "op": "cast", "inputs": ["k"], "attrs": {{"to": "{5}"}}}},
    {{"name": "v16", "op": "cast", "inputs": ["v"], "attrs": {{"to": "{5}"}}}},
    {{"name": "attn", "op": "attention", "inputs": ["q16", "k16", "v16"], "attrs": {6}}},
    {{"name": "out", "op": "cast", "inputs": ["attn"], "attrs": {{"to": "f32"}}}}
  ]
}})",
                       heads, kv_heads, seq, kv_seq, head_dim, dtype, attrs);
}

}  // namespace kjit::test
