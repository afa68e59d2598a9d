// How a warp-specialised Hopper block (a producer warpgroup, consumer warpgroups, one block a
// multiprocessor) shares the register file: one definition for the GEMM and attention kernels,
// and for host code. Plain constexpr C++ only.
#pragma once

namespace kjit {

struct RegisterSplit {
    int consumers;  ///< consumer warpgroups
    int producer;   ///< registers a thread setmaxnreg leaves the producer warpgroup

    /// Registers a thread at launch: the 64K register file over the block's threads, in the
    /// 8-register units setmaxnreg moves (__launch_bounds__(threads, 1) caps ptxas there).
    constexpr int launch() const { return 65536 / (128 * (consumers + 1)) / 8 * 8; }
    /// What each consumer warpgroup raises itself to: its launch share and an equal part of what
    /// the producer gave up (setmaxnreg.inc waits for registers the block has freed, so the sum
    /// may not exceed them).
    constexpr int consumer() const { return launch() + (launch() - producer) / consumers / 8 * 8; }
};

}  // namespace kjit
