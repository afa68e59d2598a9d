// kjit/op_timing.hpp — how long an op's forward takes on the GPU, timed as a layer costs inside
// a captured network: one forward per CUDA-graph replay, the median over many.
#pragma once
#include <kjit/runtime_op.hpp>

namespace kjit {

/// Median µs of one forward of `call` over `iters` CUDA-graph replays, after one untimed call
/// (which compiles or loads the kernels) and one untimed replay. With `calls_per_graph` > 1 each
/// graph holds that many forwards back to back and the median replay is divided by it: what
/// the op costs between its neighbours in a network, its launch latency hidden.
[[nodiscard]] double time_forward(const RuntimeOp& op, Runtime& runtime, const Stream& stream, const OpCall& call,
                                  int iters, int calls_per_graph = 1);

}  // namespace kjit
