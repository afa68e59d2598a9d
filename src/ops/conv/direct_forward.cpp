// The direct conv op (the fallback for grouped layers the other kernels leave): its tile rules,
// its shared-memory plan, grid and argument order.
#include <algorithm>

#include <fmt/format.h>
#include <kjit/conv.hpp>

#include "kjit/ceil_div.cuh"
#include "ops/conv/conv_call.hpp"
#include "ops/op_checks.hpp"

namespace kjit {

using detail::check_rank4;
using detail::require;

unsigned Conv2dBnSiluDirectForward::threads(const DirectTiles& t) {
    return static_cast<unsigned>((t.block_oc / 4) * (t.block_ow / 4));
}

std::span<const DirectTiles> Conv2dBnSiluDirectForward::configurations() {
    static const std::vector<DirectTiles> list = [] {
        std::vector<DirectTiles> l;
        for (int oc : {16, 32, 64})
            for (int ow : {16, 32, 64})
                if (threads({oc, ow}) >= 32) l.push_back({oc, ow});
        return l;
    }();
    return list;
}

namespace {
DirectTiles validated(DirectTiles t) {
    require(t.block_oc > 0 && t.block_ow > 0, "direct tile constants must be positive: BLOCK_OC {}, BLOCK_OW {}",
            t.block_oc, t.block_ow);
    require(t.block_oc % 4 == 0 && t.block_ow % 4 == 0,
            "BLOCK_OC = {} and BLOCK_OW = {} must be multiples of 4 (each thread computes 4x4 outputs)", t.block_oc,
            t.block_ow);
    const unsigned n = Conv2dBnSiluDirectForward::threads(t);
    require(n >= 32 && n <= 1024 && n % 32 == 0,
            "BLOCK_OC/4 * BLOCK_OW/4 = {} threads: must be a multiple of 32 between 32 and 1024", n);
    return t;
}

Conv2dBnSiluDirectForward::KernelType direct_kernel(const DirectTiles& t) {
    return {"conv2d_bn_silu_direct_forward",
            {{"BLOCK_OC", std::int64_t{t.block_oc}}, {"BLOCK_OW", std::int64_t{t.block_ow}}},
            Conv2dBnSiluDirectForward::threads(validated(t))};
}
}  // namespace

Conv2dBnSiluDirectForward::Conv2dBnSiluDirectForward(int block_oc, int block_ow, const Conv2dAttrs& attrs,
                                                     const Conv2dShape& shape, int max_shared_bytes)
    : Conv2dOp(direct_kernel({block_oc, block_ow}), attrs), tiles_{block_oc, block_ow}, shape_(shape) {
    (void)conv2d_output_size(attrs, shape);
    detail::require_general_attrs(attrs);
    // Shared-memory plan: per input channel staged, the input rows of every group a block can
    // touch plus that channel's weights for the block's output channels.
    const int cin_pg = shape.c_in / attrs.groups, cout_pg = shape.c_out / attrs.groups;
    const int groups_max = std::min(attrs.groups, (block_oc - 1) / cout_pg + 2);
    const int cols = (block_ow - 1) * attrs.stride_w + attrs.kernel_w;
    const long long per_channel = 4LL * (1LL * groups_max * attrs.kernel_h * cols +
                                         1LL * block_oc * attrs.kernel_h * attrs.kernel_w);
    const long long budget = std::min<long long>(max_shared_bytes, 64 * 1024);  // leaves room for 2+ blocks/SM
    require(per_channel <= max_shared_bytes,
            "a {}x{} kernel with BLOCK_OC {} / BLOCK_OW {} needs {} bytes of shared memory per input channel: the "
            "target allows {}. Use smaller tiles",
            attrs.kernel_h, attrs.kernel_w, block_oc, block_ow, per_channel, max_shared_bytes);
    step_channels_ = static_cast<int>(std::clamp<long long>(budget / per_channel, 1, std::min(cin_pg, 32)));
    shared_bytes_ = static_cast<unsigned>(step_channels_ * per_channel);
}

void Conv2dBnSiluDirectForward::pack_args(const OpCall& call, ArgVisitor& visitor) const {
    const auto conv = detail::resolve_conv_call(attrs(), call);
    require(conv.shape.c_in == shape_.c_in && conv.shape.c_out == shape_.c_out,
            "this op was planned for {} -> {} channels, not {} -> {}: dispatch a new op", shape_.c_in, shape_.c_out,
            conv.shape.c_in, conv.shape.c_out);
    detail::visit_conv_tensors(call, visitor);
    detail::visit_conv_ints(conv, attrs(), call.output_row_stride, visitor);
    visitor.visit_i32(step_channels_);
}

Dims Conv2dBnSiluDirectForward::grid(ShapeView output_shape) const {
    check_rank4(output_shape, "output y");
    const std::size_t z = output_shape[0] * ceil_div<std::size_t>(output_shape[1], tiles_.block_oc);
    require(output_shape[2] <= 65535 && z <= 65535, "grid ({}, {}) exceeds CUDA's 65535 limit on y/z: split the batch",
            output_shape[2], z);
    return {static_cast<unsigned>(ceil_div<std::size_t>(output_shape[3], tiles_.block_ow)),
            static_cast<unsigned>(output_shape[2]), static_cast<unsigned>(z)};
}

}  // namespace kjit
