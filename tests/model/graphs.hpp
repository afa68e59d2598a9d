// Graphs more than one test file runs: planned without a GPU (test_plan.cpp) and run on one
// (test_loaded_model_gpu.cpp).
#pragma once

namespace kjit::test {

/// Concats of every kind of input: a conv's output, an add's read by a max pool, a nested concat,
/// a graph input, one value twice, and a concat that is a graph output; 7-channel slices of
/// 11 x 13 planes, so that some start off 16-byte alignment.
inline constexpr const char* concat_graph = R"({
  "inputs": [{"name": "x", "shape": ["B", 4, 11, 13]}],
  "outputs": ["cat", "head"],
  "nodes": [
    {"name": "a", "op": "conv2d_bn_silu", "inputs": ["x"], "attrs": {"c_out": 7}},
    {"name": "b", "op": "conv2d_bn_silu", "inputs": ["a"], "attrs": {"c_out": 7, "kernel": 3, "pad": 1}},
    {"name": "r", "op": "add", "inputs": ["b", "a"]},
    {"name": "p", "op": "maxpool2d", "inputs": ["r"], "attrs": {"kernel": 3, "stride": 1, "pad": 1}},
    {"name": "inner", "op": "concat", "inputs": ["a", "r"]},
    {"name": "cat", "op": "concat", "inputs": ["inner", "p", "x", "p"]},
    {"name": "head", "op": "conv2d_bn_silu", "inputs": ["cat"], "attrs": {"c_out": 6}}
  ]
})";

}  // namespace kjit::test
