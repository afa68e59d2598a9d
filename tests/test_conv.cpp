// Conv2d + BN + SiLU on the CPU: RuntimeOp shapes and argument order, tile validation,
// dispatch, the BN fold, the reference, and every configuration compiled for every arch.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <variant>

#include "support.hpp"

using namespace kjit;

namespace {

/// Records what pack_args visits, in order.
struct Recorder final : ArgVisitor {
    std::vector<std::variant<void*, std::int64_t, double, bool>> args;
    void visit_ptr(void* p) override { args.emplace_back(p); }
    void visit_bool(bool v) override { args.emplace_back(v); }
    void visit_i8(std::int8_t v) override { args.emplace_back(std::int64_t{v}); }
    void visit_i16(std::int16_t v) override { args.emplace_back(std::int64_t{v}); }
    void visit_i32(std::int32_t v) override { args.emplace_back(std::int64_t{v}); }
    void visit_i64(std::int64_t v) override { args.emplace_back(v); }
    void visit_u8(std::uint8_t v) override { args.emplace_back(std::int64_t{v}); }
    void visit_u16(std::uint16_t v) override { args.emplace_back(std::int64_t{v}); }
    void visit_u32(std::uint32_t v) override { args.emplace_back(std::int64_t{v}); }
    void visit_u64(std::uint64_t v) override { args.emplace_back(static_cast<std::int64_t>(v)); }
    void visit_f32(float v) override { args.emplace_back(double{v}); }
    void visit_f64(double v) override { args.emplace_back(v); }
    std::int64_t i(std::size_t k) const { return std::get<std::int64_t>(args.at(k)); }
    void* p(std::size_t k) const { return std::get<void*>(args.at(k)); }
};

void* fake(std::uintptr_t a) { return reinterpret_cast<void*>(a); }

std::string error_of(auto&& make) {
    try {
        make();
    } catch (const UsageError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("GEMM op: names, parameter shapes, row elems, grid and argument order over many shapes") {
    const Conv2dBnSiluGemmForward op(64, 32, 16, 8);
    CHECK(op.name() == "conv2d_bn_silu_gemm_forward");
    CHECK(op.id() == "conv2d_bn_silu_gemm_forward__f32__64__32__16__8");
    CHECK(op.block_m() == 64);
    CHECK(op.block_n() == 32);
    CHECK(op.block_k() == 16);
    CHECK(op.group_m() == 8);
    CHECK(op.n_activation_inputs() == 1);
    CHECK(std::vector<std::string_view>(op.param_names().begin(), op.param_names().end()) ==
          std::vector<std::string_view>{"weight", "bn_scale", "bn_shift"});
    CHECK(op.block() == Dims{64, 1, 1});  // 2 warps of 32 columns
    CHECK(op.entry_point_source().find("__launch_bounds__(64)") != std::string::npos);
    CHECK_FALSE(op.has_backward());
    CHECK(op.n_launches() == 1);
    CHECK(op.shared_bytes_for_launch(0) == (GemmTiles{64, 32, 16, 8}.shared_bytes()));

    for (std::size_t b : {1, 3, 32})
        for (std::size_t k : {1, 3, 64, 2048})
            for (std::size_t n : {1, 3, 64, 1000})
                for (std::size_t hw : {1, 7, 56}) {
                    CAPTURE(b);
                    CAPTURE(k);
                    CAPTURE(n);
                    CAPTURE(hw);
                    const Shape x{b, k, hw, hw}, y{b, n, hw, hw};
                    const ShapeView inputs[] = {x};
                    const auto shapes = op.param_shapes(inputs, y);
                    CHECK(shapes == std::vector<Shape>{{n, k, 1, 1}, {n}, {n}});
                    CHECK(op.forward_output_row_elems(y) == hw * hw);
                    CHECK(op.forward_output_row_stride(y) == hw * hw);
                    CHECK(op.compute_concrete_output_shape(inputs, y) == y);
                    CHECK(op.grid(y) == Dims{static_cast<unsigned>((b * hw * hw + 63) / 64 * ((n + 31) / 32)), 1, 1});
                    CHECK(op.grid_for_launch(0, inputs, y) == op.grid(y));

                    Recorder r;
                    const Tensor in[] = {{fake(0x100), x}};
                    void* const params[] = {fake(0x200), fake(0x300), fake(0x400)};
                    const int stride = static_cast<int>(hw * hw + 4);
                    op.pack_args(in, params, fake(0x500), y, stride, r);
                    REQUIRE(r.args.size() == 10);
                    CHECK(r.p(0) == fake(0x100));
                    CHECK(r.p(1) == fake(0x200));
                    CHECK(r.p(2) == fake(0x300));
                    CHECK(r.p(3) == fake(0x400));
                    CHECK(r.p(4) == fake(0x500));
                    CHECK(r.i(5) == static_cast<std::int64_t>(b));
                    CHECK(r.i(6) == static_cast<std::int64_t>(k));
                    CHECK(r.i(7) == static_cast<std::int64_t>(n));
                    CHECK(r.i(8) == static_cast<std::int64_t>(hw * hw));
                    CHECK(r.i(9) == stride);
                    ArgPack pack(op.params(), op.id());  // the kernel's own signature accepts them
                    op.pack_args(in, params, fake(0x500), y, stride, pack);
                    pack.check_complete();
                }
}

TEST_CASE("GEMM op: bad tensors are refused with the reason") {
    const Conv2dBnSiluGemmForward op(32, 16, 16, 8);
    const Shape x{2, 8, 4, 4}, y{2, 16, 4, 4};
    const Tensor in[] = {{fake(0x100), x}};
    void* const params[] = {fake(0x200), fake(0x300), fake(0x400)};
    void* const null_param[] = {fake(0x200), nullptr, fake(0x400)};
    Recorder r;
    CHECK(error_of([&] { op.pack_args(in, null_param, fake(0x500), y, 16, r); }).find("bn_scale is a null pointer") !=
          std::string::npos);
    CHECK(error_of([&] { op.pack_args(in, params, fake(0x500), y, 15, r); }).find("below the row length") !=
          std::string::npos);
    const Shape wrong_size{2, 16, 5, 4};
    CHECK(error_of([&] { op.pack_args(in, params, fake(0x500), wrong_size, 20, r); }).find("keeps batch and size") !=
          std::string::npos);
    const Shape huge_x{70000, 8, 256, 256}, huge_y{70000, 16, 256, 256};
    const Tensor huge_in[] = {{fake(0x100), huge_x}};
    CHECK(error_of([&] { op.pack_args(huge_in, params, fake(0x500), huge_y, 65536, r); }).find("32-bit") !=
          std::string::npos);
}

TEST_CASE("split-K: clusters of split_k blocks per tile, shared memory for the partial tile") {
    const Conv2dBnSiluGemmForward plain(64, 32, 16, 8);
    const Conv2dBnSiluGemmForward split(64, 32, 16, 8, default_max_shared_bytes, 4);
    CHECK(split.id() == plain.id());  // the same kernel: split-K is how it is launched
    CHECK(plain.cluster_for_launch(0) == Dims{1, 1, 1});
    CHECK(split.cluster_for_launch(0) == Dims{4, 1, 1});
    const Shape y{1, 512, 7, 7};
    CHECK(split.grid(y)[0] == 4 * plain.grid(y)[0]);
    CHECK(plain.shared_bytes_for_launch(0) == GemmTiles{64, 32, 16, 8}.shared_bytes());
    CHECK(split.shared_bytes_for_launch(0) >= 64u * 32 * 4);
    CHECK(GemmTiles{128, 128, 16, 8}.shared_bytes(2) == 128u * 128 * 4);  // the partial tile is the larger
    CHECK(error_of([] { Conv2dBnSiluGemmForward(64, 32, 16, 8, default_max_shared_bytes, 0); }).find("split_k = 0") !=
          std::string::npos);
    CHECK(error_of([] { Conv2dBnSiluGemmForward(64, 32, 16, 8, default_max_shared_bytes, 9); }).find("between 1 and 8") !=
          std::string::npos);
    const Conv2dBnSiluForward implicit_split({64, 32, 16, 8}, {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1},
                                             default_max_shared_bytes, 2);
    CHECK(implicit_split.cluster_for_launch(0) == Dims{2, 1, 1});
    CHECK(implicit_split.grid(y) == Dims{2 * 1 * 16, 1, 1});  // 49 columns: 1 tile; 512/32 rows: 16 tiles
}

TEST_CASE("GEMM constants are validated at construction, naming the rule") {
    CHECK(error_of([] { Conv2dBnSiluGemmForward(0, 32, 32, 8); }).find("must be positive") != std::string::npos);
    CHECK(error_of([] { Conv2dBnSiluGemmForward(64, -16, 32, 8); }).find("must be positive") != std::string::npos);
    CHECK(error_of([] { Conv2dBnSiluGemmForward(64, 64, 32, 0); }).find("must be positive") != std::string::npos);
    CHECK(error_of([] { Conv2dBnSiluGemmForward(48, 64, 32, 8); }).find("BLOCK_M = 48 must be 32, 64 or 128") !=
          std::string::npos);
    CHECK(error_of([] { Conv2dBnSiluGemmForward(64, 24, 32, 8); }).find("multiple of 16") != std::string::npos);
    CHECK(error_of([] { Conv2dBnSiluGemmForward(64, 80, 32, 8); }).find("multiple of 32 from 64 on") !=
          std::string::npos);
    CHECK(error_of([] { Conv2dBnSiluGemmForward(64, 64, 12, 8); }).find("multiple of 8 (the MMA's k)") !=
          std::string::npos);
    CHECK(error_of([] { Conv2dBnSiluGemmForward(128, 256, 64, 8); }).find("shared memory") != std::string::npos);
    CHECK(error_of([] { Conv2dBnSiluGemmForward(128, 128, 32, 8, 48 * 1024); }).find("the target allows 49152") !=
          std::string::npos);
    CHECK(error_of([] { Conv2dBnSiluGemmForward(128, 128, 32, 1); }) == "no error");
}

TEST_CASE("implicit-GEMM op: shapes, output size, grid over groups and argument order") {
    const Conv2dAttrs a{.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1, .groups = 2};
    const Conv2dBnSiluForward op({64, 32, 16, 8}, a);
    CHECK(op.id() == "conv2d_bn_silu_forward__f32__64__32__16__8");
    CHECK(op.block() == Dims{64, 1, 1});
    CHECK(op.entry_point_source().find("__launch_bounds__(64)") != std::string::npos);
    const Shape x{3, 16, 15, 17};
    const ShapeView inputs[] = {x};
    const Shape y = op.compute_concrete_output_shape(inputs, Shape{3, 40, 0, 0});
    CHECK(y == Shape{3, 40, 8, 9});
    CHECK(op.param_shapes(inputs, y) == std::vector<Shape>{{40, 8, 3, 3}, {40}, {40}});
    CHECK(op.forward_output_row_elems(y) == 72);
    // Columns: 3·8·9 = 216 → 4 tiles of 64; rows per group: 20 → 1 tile of 32; 2 groups.
    CHECK(op.grid(y) == Dims{4, 2, 1});
    CHECK(op.grid_for_launch(0, inputs, y) == op.grid(y));
    Recorder r;
    const Tensor in[] = {{fake(0x100), x}};
    void* const params[] = {fake(0x200), fake(0x300), fake(0x400)};
    op.pack_args(in, params, fake(0x500), y, 72, r);
    REQUIRE(r.args.size() == 18);
    const std::int64_t expected[] = {3, 16, 15, 17, 40, 8, 9, 3, 3, 2, 1, 2, 72};
    for (std::size_t k = 0; k < 13; ++k) CHECK(r.i(5 + k) == expected[k]);
    ArgPack pack(op.params(), op.id());
    op.pack_args(in, params, fake(0x500), y, 72, pack);
    pack.check_complete();
    const Shape wrong{3, 40, 7, 9};
    CHECK(error_of([&] { op.pack_args(in, params, fake(0x500), wrong, 72, r); }).find("does not match") !=
          std::string::npos);
    CHECK(error_of([&] { Conv2dBnSiluForward({48, 32, 16, 8}, a); }).find("BLOCK_M = 48") != std::string::npos);
}

TEST_CASE("direct op: shapes, output size, grid and argument order") {
    const Conv2dAttrs a{.kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1, .groups = 4};
    const Conv2dShape s{2, 16, 15, 17, 24};
    const Conv2dBnSiluDirectForward op(32, 16, a, s);
    CHECK(op.id() == "conv2d_bn_silu_direct_forward__f32__32__16");
    CHECK(op.block() == Dims{32, 1, 1});
    const Shape x{2, 16, 15, 17};
    const ShapeView inputs[] = {x};
    const Shape resolved{2, 24, 0, 0};
    const Shape y = op.compute_concrete_output_shape(inputs, resolved);
    CHECK(y == Shape{2, 24, 8, 9});
    CHECK(op.param_shapes(inputs, y) == std::vector<Shape>{{24, 4, 3, 3}, {24}, {24}});
    CHECK(op.forward_output_row_elems(y) == 72);
    CHECK(op.grid(y) == Dims{1, 8, 2});
    CHECK(op.step_channels() == 4);  // all of a group's 4 input channels in one step
    Recorder r;
    const Tensor in[] = {{fake(0x100), x}};
    void* const params[] = {fake(0x200), fake(0x300), fake(0x400)};
    op.pack_args(in, params, fake(0x500), y, 80, r);
    REQUIRE(r.args.size() == 19);
    const std::int64_t expected[] = {2, 16, 15, 17, 24, 8, 9, 3, 3, 2, 1, 4, 80, 4};
    for (std::size_t k = 0; k < 14; ++k) CHECK(r.i(5 + k) == expected[k]);
    ArgPack pack(op.params(), op.id());
    op.pack_args(in, params, fake(0x500), y, 80, pack);
    pack.check_complete();
}

TEST_CASE("direct constants and attributes are validated") {
    const Conv2dAttrs k3{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
    const Conv2dShape s{1, 8, 8, 8, 8};
    CHECK(error_of([&] { Conv2dBnSiluDirectForward(0, 32, k3, s); }).find("must be positive") != std::string::npos);
    CHECK(error_of([&] { Conv2dBnSiluDirectForward(18, 32, k3, s); }).find("multiples of 4") != std::string::npos);
    CHECK(error_of([&] { Conv2dBnSiluDirectForward(16, 16, k3, s); }).find("multiple of 32 between 32 and 1024") !=
          std::string::npos);
    Conv2dAttrs dilated = k3;
    dilated.dilation_h = 2;
    CHECK(error_of([&] { Conv2dBnSiluDirectForward(32, 32, dilated, s); }).find("dilation 2x1 is not supported") !=
          std::string::npos);
    Conv2dAttrs uneven = k3;
    uneven.stride_w = 2;
    CHECK(error_of([&] { Conv2dBnSiluDirectForward(32, 32, uneven, s); }).find("one stride") != std::string::npos);
    Conv2dAttrs grouped = k3;
    grouped.groups = 3;
    CHECK(error_of([&] { Conv2dBnSiluDirectForward(32, 32, grouped, s); }).find("must divide") != std::string::npos);
    const Conv2dAttrs huge{.kernel_h = 31, .kernel_w = 31, .pad_h = 15, .pad_w = 15};
    CHECK(error_of([&] { Conv2dBnSiluDirectForward(64, 64, huge, {1, 8, 64, 64, 64}, 48 * 1024); }).find("Use smaller tiles") !=
          std::string::npos);
}

TEST_CASE("dispatch: 1x1 GEMM, implicit GEMM for wide groups, direct for depthwise, errors for the rest") {
    const DeviceTraits h200{132, 232448};
    auto kernel = [&](const Conv2dAttrs& a, const Conv2dShape& s) {
        return dispatch_conv2d_bn_silu(a, s, h200)->kernel_for_launch(0).name();
    };
    const Conv2dShape s{8, 64, 28, 28, 128};
    CHECK(kernel({}, s) == "conv2d_bn_silu_gemm_forward");
    CHECK(kernel({.stride_h = 2, .stride_w = 2}, s) == "conv2d_bn_silu_forward");
    CHECK(kernel({.pad_h = 1, .pad_w = 1}, s) == "conv2d_bn_silu_forward");
    CHECK(kernel({.groups = 2}, s) == "conv2d_bn_silu_forward");
    CHECK(kernel({.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1}, s) == "conv2d_bn_silu_forward");
    CHECK(kernel({.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .groups = 64}, {8, 64, 28, 28, 64}) ==
          "conv2d_bn_silu_direct_forward");  // depthwise
    CHECK(kernel({.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .groups = 16}, s) ==
          "conv2d_bn_silu_direct_forward");  // 4 input channels per group
    // Unequal strides or paddings: no kernel takes them, and dispatch says so.
    CHECK(error_of([&] { (void)kernel({.kernel_h = 3, .kernel_w = 3, .stride_h = 1, .stride_w = 2, .pad_h = 1,
                                       .pad_w = 1}, s); })
              .find("one stride and one padding") != std::string::npos);
    CHECK(error_of([&] { (void)dispatch_conv2d_bn_silu({.kernel_h = 3, .kernel_w = 3, .stride_h = 1, .stride_w = 2},
                                                        s, h200); })
              .find("one stride") != std::string::npos);
    CHECK(error_of([&] { (void)dispatch_conv2d_bn_silu({.dilation_h = 2, .dilation_w = 2}, s, h200); })
              .find("dilation") != std::string::npos);
    CHECK(error_of([&] { (void)dispatch_conv2d_bn_silu({.groups = 3}, s, h200); }).find("must divide") !=
          std::string::npos);
    CHECK(error_of([&] { (void)dispatch_conv2d_bn_silu({.kernel_h = 40, .kernel_w = 40}, s, h200); })
              .find("does not fit") != std::string::npos);
    // Small problems get small tiles (enough blocks for the device); big ones big tiles.
    auto gemm = [&](const Conv2dShape& shape) {
        auto op = dispatch_conv2d_bn_silu({}, shape, h200);
        auto* g = dynamic_cast<Conv2dBnSiluGemmForward*>(op.get());
        REQUIRE(g != nullptr);
        return GemmTiles{g->block_m(), g->block_n(), g->block_k(), g->group_m()};
    };
    const auto small = gemm({1, 2048, 7, 7, 512});
    const auto big = gemm({32, 256, 56, 56, 64});
    CHECK(small.block_m * small.block_n < big.block_m * big.block_n);
    // Deep layers with few tiles are split over K on devices with clusters, never elsewhere.
    auto split_of = [&](const Conv2dShape& shape, const DeviceTraits& d) {
        auto op = dispatch_conv2d_bn_silu({}, shape, d);
        return dynamic_cast<Conv2dBnSiluGemmForward*>(op.get())->split_k();
    };
    CHECK(split_of({1, 2048, 7, 7, 512}, h200) > 1);
    CHECK(split_of({1, 2048, 7, 7, 512}, {132, 232448, false}) == 1);
    CHECK(split_of({32, 64, 56, 56, 256}, h200) == 1);
    // A device with little shared memory only gets configurations that fit it.
    const auto tight = dispatch_conv2d_bn_silu({}, {32, 256, 56, 56, 256}, {132, 48 * 1024});
    CHECK(tight->shared_bytes_for_launch(0) <= 48u * 1024);
}

TEST_CASE("BatchNorm folds to scale and shift, bad BN tensors are refused") {
    const std::vector<float> gamma{2, 0.5f}, beta{1, -1}, mean{0.5f, 2}, var{3, 0.25f};
    const auto bn = fold_batch_norm(gamma, beta, mean, var, 1e-5f);
    for (int c = 0; c < 2; ++c) {
        const double scale = gamma[c] / std::sqrt(double(var[c]) + 1e-5);
        CHECK(bn.scale[c] == doctest::Approx(scale));
        CHECK(bn.shift[c] == doctest::Approx(beta[c] - scale * mean[c]));
    }
    const std::vector<float> short_beta{1};
    CHECK(error_of([&] { (void)fold_batch_norm(gamma, short_beta, mean, var, 1e-5f); }).find("differ in length") !=
          std::string::npos);
    const std::vector<float> negative{-1, 1};
    CHECK(error_of([&] { (void)fold_batch_norm(gamma, beta, mean, negative, 0.0f); }).find("must be positive") !=
          std::string::npos);
}

TEST_CASE("the reference computes conv, BN and SiLU (checked by hand on a small case)") {
    // 1 image, 2 input channels 2x2, one 1x1 output channel and one 3x3 padded one, groups 1.
    const std::vector<float> x{1, 2, 3, 4, -1, 0, 1, 2};
    const std::vector<float> w1{0.5f, -1};
    const std::vector<float> scale{2}, shift{-1};
    const auto y = conv2d_bn_silu_reference(x, w1, scale, shift, {}, {1, 2, 2, 2, 1});
    REQUIRE(y.size() == 4);
    auto silu = [](double v) { return v / (1 + std::exp(-v)); };
    for (int p = 0; p < 4; ++p) CHECK(y[p] == doctest::Approx(silu(2 * (0.5 * x[p] - x[4 + p]) - 1)));
    std::vector<float> w3(18, 1.0f);  // sum of the 3x3 neighbourhood over both channels
    const auto y3 = conv2d_bn_silu_reference(x, w3, scale, shift, {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1},
                                             {1, 2, 2, 2, 1});
    for (int p = 0; p < 4; ++p) CHECK(y3[p] == doctest::Approx(silu(2 * 12.0 - 1)));  // every pixel sees all 8
}

TEST_CASE("every configuration of the conv kernels compiles for sm_80, sm_87 and sm_90") {
    std::vector<Kernel> kernels;
    for (const auto& family : shipped_kernels())
        if (family.name.starts_with("conv2d_bn_silu"))
            for (auto& k : family.configurations()) kernels.push_back(std::move(k));
    REQUIRE(kernels.size() ==
            2 * GemmTiles::configurations().size() + Conv2dBnSiluDirectForward::configurations().size());
    struct Job {
        const Kernel* kernel;
        const char* arch;
    };
    std::vector<Job> jobs;
    for (const auto& k : kernels)
        for (const char* arch : {"sm_80", "sm_87", "sm_90"}) jobs.push_back({&k, arch});
    // A few compiles at a time: NVRTC runs in parallel, the machine has few cores.
    const std::size_t width = std::max(2u, std::thread::hardware_concurrency());
    for (std::size_t first = 0; first < jobs.size(); first += width) {
        std::vector<std::future<Compiled>> running;
        for (std::size_t i = first; i < std::min(jobs.size(), first + width); ++i)
            running.push_back(std::async(std::launch::async, [&job = jobs[i]] {
                return compile(*job.kernel, test::options_for(job.arch));
            }));
        for (std::size_t i = first; i < std::min(jobs.size(), first + width); ++i) {
            const Compiled c = running[i - first].get();
            const Kernel& k = *jobs[i].kernel;
            CAPTURE(k.id());
            CAPTURE(std::string(jobs[i].arch));
            CHECK(c.ptx.find(".entry " + k.entry_point_name()) != std::string::npos);
            CHECK(c.resources.spill_store_bytes == 0);
            if (k.name() != "conv2d_bn_silu_direct_forward")
                CHECK(c.ptx.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") != std::string::npos);
        }
    }
}

TEST_CASE("the GEMM kernel's FMA path: on archs without TF32 MMA, and when asked for") {
    const Conv2dBnSiluGemmForward k(64, 64, 32, 8);
    const Compiled turing = compile(k, test::options_for("sm_75"));
    CHECK(turing.ptx.find("mma.sync") == std::string::npos);
    CHECK(turing.ptx.find("cp.async") == std::string::npos);
    CHECK(turing.ptx.find("fma.rn.f32") != std::string::npos);
    CompileOptions fma = test::options_for("sm_90");
    fma.defines.push_back({"KJIT_GEMM_FMA", "1"});
    const Compiled forced = compile(k, fma);
    CHECK(forced.ptx.find("mma.sync") == std::string::npos);
    CHECK(forced.ptx.find("cp.async") != std::string::npos);  // still pipelined
}

TEST_CASE("RuntimeOp defaults: an op overrides only what it needs") {
    struct Minimal final : RuntimeOp {
        Kernel k = test::scale_kernel();
        std::size_t n_activation_inputs() const override { return 1; }
        void pack_args(std::span<const Tensor> in, std::span<void* const>, void* out, ShapeView shape, int,
                       ArgVisitor& v) const override {
            v.visit_ptr(in[0].data);
            v.visit_ptr(out);
            v.visit_i32(static_cast<std::int32_t>(shape.back()));
        }
        Dims block() const override { return {128, 1, 1}; }
        Dims grid(ShapeView shape) const override { return {static_cast<unsigned>(shape.back() / 128 + 1), 1, 1}; }
        const Kernel& kernel_for_launch(std::size_t) const override { return k; }
    } op;
    const Shape shape{4, 1000};
    const ShapeView inputs[] = {shape};
    CHECK(op.param_shapes(inputs, shape).empty());
    CHECK(op.param_names().empty());
    CHECK(op.forward_output_row_elems(shape) == 1000);
    CHECK(op.forward_output_row_stride(shape) == 1000);
    CHECK_FALSE(op.param_init_data(0).has_value());
    const Shape resolved{4, 1000};
    CHECK(op.compute_concrete_output_shape(inputs, resolved) == resolved);
    CHECK(op.n_launches() == 1);
    CHECK(op.grid_for_launch(0, inputs, shape) == op.grid(shape));
    CHECK(op.shared_bytes_for_launch(0) == 0);
    Recorder a, b;
    const Tensor in[] = {{fake(0x10), shape}};
    op.pack_args(in, {}, fake(0x20), shape, 1000, a);
    op.pack_args_for_launch(0, in, {}, fake(0x20), shape, 1000, b);
    CHECK(a.args == b.args);
    CHECK_FALSE(op.has_backward());
    CHECK(op.n_backward_launches() == 0);
    CHECK(op.backward_grad_output_row_stride(shape) == 1000);
    CHECK_THROWS_WITH_AS((void)op.backward_block(), doctest::Contains("no backward pass"), UsageError);
    CHECK_THROWS_AS((void)op.backward_grid(inputs, shape), UsageError);
    CHECK_THROWS_AS(op.pack_backward_args(in, {}, nullptr, shape, nullptr, 0, {}, {}, a), UsageError);
}
