// RuntimeOp's defaults: an op overrides only the few methods it needs.
#include <doctest/doctest.h>

#include <kjit/runtime_op.hpp>

#include "ops/op_test_support.hpp"
#include "support.hpp"

using namespace kjit;
using test::fake;
using test::Recorder;

TEST_CASE("RuntimeOp defaults: an op overrides only what it needs") {
    struct Minimal final : RuntimeOp {
        Kernel k = test::scale_kernel();
        std::size_t n_activation_inputs() const override { return 1; }
        void pack_args(const OpCall& call, ArgVisitor& v) const override {
            v.visit_ptr(call.inputs[0].data);
            v.visit_ptr(call.output);
            v.visit_i32(static_cast<std::int32_t>(call.output_shape.back()));
        }
        Dims block() const override { return {128, 1, 1}; }  // its kernel has no launch bounds
        Dims grid(ShapeView shape) const override { return {static_cast<unsigned>(shape.back() / 128 + 1), 1, 1}; }
        const Kernel& kernel_for_launch(std::size_t) const override { return k; }
    } op;
    const Shape shape{4, 1000};
    const ShapeView inputs[] = {shape};
    CHECK(op.param_shapes(inputs, shape).empty());
    CHECK(op.param_names().empty());
    CHECK_FALSE(op.param_fold({}).has_value());
    CHECK(op.forward_output_row_elems(shape) == 1000);
    CHECK(op.forward_output_row_stride(shape) == 1000);
    CHECK_FALSE(op.param_init_data(0).has_value());
    const Shape resolved{4, 1000};
    CHECK(op.compute_concrete_output_shape(inputs, resolved) == resolved);
    CHECK(op.n_launches() == 1);
    CHECK(op.grid_for_launch(0, inputs, shape) == op.grid(shape));
    CHECK(op.shared_bytes_for_launch(0) == 0);
    CHECK(op.cluster_for_launch(0) == Dims{1, 1, 1});
    Recorder a, b;
    const Tensor in[] = {{fake(0x10), shape}};
    const OpCall call{in, {}, fake(0x20), shape, 1000};
    op.pack_args(call, a);
    op.pack_args_for_launch(0, call, b);
    CHECK(a.args == b.args);
    // No backward: zero launches, and running one is an error that says so.
    CHECK_FALSE(op.has_backward());
    CHECK(op.n_backward_launches() == 0);
    CHECK(op.backward_grad_output_row_stride(shape) == 1000);
    CHECK(op.backward_block() == op.block());
    CHECK(op.backward_grid(inputs, shape) == op.grid(shape));
    CHECK(&op.backward_kernel_for_launch(0) == &op.k);
    Recorder none;
    op.pack_backward_args(BackwardCall{call, nullptr, 0, {}, {}}, none);
    CHECK(none.args.empty());
}

TEST_CASE("RuntimeOp defaults: the block is the one the kernel was compiled for") {
    struct Bounded final : RuntimeOp {
        Kernel k = test::axpby();  // __launch_bounds__(256)
        std::size_t n_activation_inputs() const override { return 1; }
        void pack_args(const OpCall&, ArgVisitor&) const override {}
        Dims grid(ShapeView) const override { return {1, 1, 1}; }
        const Kernel& kernel_for_launch(std::size_t) const override { return k; }
    } op;
    CHECK(op.block() == Dims{256, 1, 1});
    CHECK(op.backward_block() == Dims{256, 1, 1});
}
