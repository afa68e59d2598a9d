// kjit/op_timing.hpp — how long an op's forward takes on the GPU, timed as a layer costs inside
// a captured network: one forward per CUDA-graph replay, the median over many.
#pragma once
#include <kjit/runtime_op.hpp>

namespace kjit {

/// Median µs of one forward of `call` over `iters` CUDA-graph replays, after one untimed call
/// (which compiles or loads the kernels) and one untimed replay.
[[nodiscard]] double time_forward(const RuntimeOp& op, Runtime& runtime, const Stream& stream, const OpCall& call,
                                  int iters);

}  // namespace kjit
