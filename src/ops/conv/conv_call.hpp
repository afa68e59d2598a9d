// What the conv ops' pack_args share: the tensors checked and visited in kernel order, and a
// general conv's sizes resolved against its attributes.
#pragma once
#include <kjit/conv.hpp>

namespace kjit::detail {

/// x, the three parameters and y, checked and visited in kernel order.
void visit_conv_tensors(const OpCall& call, ArgVisitor& visitor);

/// NCHW input and output of a general conv, checked against the attributes.
struct ConvCall {
    Conv2dShape shape;
    int oh, ow;
};
[[nodiscard]] ConvCall resolve_conv_call(const Conv2dAttrs& attrs, const OpCall& call);

/// The sizes of a 1×1 stride-1 conv call (input and output checked against each other): the
/// GEMM's B images of M = OH·OW columns, K = C_IN, N = C_OUT, and y's row stride.
struct PointwiseCall {
    std::int32_t batch, c_in, c_out, m, y_row_stride;
};
[[nodiscard]] PointwiseCall resolve_pointwise_call(const OpCall& call);

/// Elements from one image of x to the next (C_IN·H·W where tight) and of y (C_OUT·y_row_stride
/// where tight): a planner's channel slices of wider tensors are further apart. Checked.
struct ImageStrides {
    std::int64_t x, y;
};
[[nodiscard]] ImageStrides image_strides(const OpCall& call);
/// Visits them and the residual (OpCall::residual, may be null), as the kernels that take them
/// end their arguments.
void visit_image_strides(const OpCall& call, ArgVisitor& visitor);

/// The ints the general kernels take, in their order up to y_row_stride.
void visit_conv_ints(const ConvCall& c, const Conv2dAttrs& a, int output_row_stride, ArgVisitor& visitor);

/// Throws UsageError for attributes the general kernels do not take (one stride and one padding
/// for both axes, dilation 1).
void require_general_attrs(const Conv2dAttrs& a);

}  // namespace kjit::detail
