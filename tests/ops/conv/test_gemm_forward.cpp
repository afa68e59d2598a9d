// The tensor-core conv ops on the CPU: shapes, grid and argument order, tile rules, split-K, and
// every configuration compiled for every arch.
#include <doctest/doctest.h>

#include <future>

#include <kjit/conv.hpp>
#include <kjit/registry.hpp>

#include "ops/op_test_support.hpp"
#include "support.hpp"

using namespace kjit;
using test::error_of;
using test::fake;
using test::Recorder;

TEST_CASE("GEMM op: names, parameter shapes, row elems, grid and argument order over many shapes") {
    const Conv2dBnSiluGemmForward op(64, 32, 16, 8);
    CHECK(op.kernel().name() == "conv2d_bn_silu_gemm_forward");
    CHECK(op.kernel().id() == "conv2d_bn_silu_gemm_forward__f32__64__32__16__8");
    CHECK(op.tiles().block_m == 64);
    CHECK(op.tiles().block_n == 32);
    CHECK(op.tiles().block_k == 16);
    CHECK(op.tiles().group_m == 8);
    CHECK(op.n_activation_inputs() == 1);
    CHECK(std::vector<std::string_view>(op.param_names().begin(), op.param_names().end()) ==
          std::vector<std::string_view>{"weight", "bn_scale", "bn_shift"});
    CHECK(op.block() == Dims{64, 1, 1});  // 2 warps of 32 columns
    CHECK(op.kernel().entry_point_source().find("__launch_bounds__(64)") != std::string::npos);
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
                    op.pack_args({in, params, fake(0x500), y, stride}, r);
                    REQUIRE(r.args.size() == 13);
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
                    CHECK(r.i(10) == static_cast<std::int64_t>(k * hw * hw));  // tight images
                    CHECK(r.i(11) == static_cast<std::int64_t>(n) * stride);
                    CHECK(r.p(12) == nullptr);                             // no residual
                    ArgPack pack(op.kernel().params(), op.kernel().id());  // the kernel's own signature accepts them
                    op.pack_args({in, params, fake(0x500), y, stride}, pack);
                    pack.check_complete();
                }
    // Channel slices of wider tensors, and a residual to add: strides and pointer passed through.
    Recorder r;
    const Shape x{2, 8, 4, 4}, y{2, 16, 4, 4};
    const Tensor in[] = {{fake(0x100), x, 12 * 16}};
    void* const params[] = {fake(0x200), fake(0x300), fake(0x400)};
    op.pack_args({in, params, fake(0x500), y, 16, 20 * 16, fake(0x600)}, r);
    CHECK(r.i(10) == 12 * 16);
    CHECK(r.i(11) == 20 * 16);
    CHECK(r.p(12) == fake(0x600));
    const Tensor overlapping[] = {{fake(0x100), x, 7 * 16}};
    CHECK(error_of([&] {
              op.pack_args({overlapping, params, fake(0x500), y, 16}, r);
          }).find("image stride 112 is below its images' 128 elements") != std::string::npos);
}
TEST_CASE("GEMM op: bad tensors are refused with the reason") {
    const Conv2dBnSiluGemmForward op(32, 16, 16, 8);
    const Shape x{2, 8, 4, 4}, y{2, 16, 4, 4};
    const Tensor in[] = {{fake(0x100), x}};
    void* const params[] = {fake(0x200), fake(0x300), fake(0x400)};
    void* const null_param[] = {fake(0x200), nullptr, fake(0x400)};
    Recorder r;
    CHECK(error_of([&] {
              op.pack_args({in, null_param, fake(0x500), y, 16}, r);
          }).find("bn_scale is a null pointer") != std::string::npos);
    CHECK(error_of([&] {
              op.pack_args({in, params, fake(0x500), y, 15}, r);
          }).find("below the row length") != std::string::npos);
    const Shape wrong_size{2, 16, 5, 4};
    CHECK(error_of([&] {
              op.pack_args({in, params, fake(0x500), wrong_size, 20}, r);
          }).find("keeps batch and size") != std::string::npos);
    const Shape huge_x{70000, 8, 256, 256}, huge_y{70000, 16, 256, 256};
    const Tensor huge_in[] = {{fake(0x100), huge_x}};
    CHECK(error_of([&] {
              op.pack_args({huge_in, params, fake(0x500), huge_y, 65536}, r);
          }).find("32-bit") != std::string::npos);
}
TEST_CASE("split-K: clusters of split_k blocks per tile, shared memory for the partial tile") {
    const Conv2dBnSiluGemmForward plain(64, 32, 16, 8);
    const Conv2dBnSiluGemmForward split(64, 32, 16, 8, default_max_shared_bytes, 4);
    CHECK(split.kernel().id() == plain.kernel().id());  // the same kernel: split-K is how it is launched
    CHECK(plain.cluster_for_launch(0) == Dims{1, 1, 1});
    CHECK(split.cluster_for_launch(0) == Dims{4, 1, 1});
    const Shape y{1, 512, 7, 7};
    CHECK(split.grid(y)[0] == 4 * plain.grid(y)[0]);
    CHECK(plain.shared_bytes_for_launch(0) == GemmTiles{64, 32, 16, 8}.shared_bytes());
    CHECK(split.shared_bytes_for_launch(0) >= 64u * 32 * 4);
    CHECK(GemmTiles{128, 128, 16, 8}.shared_bytes(2) == 128u * 128 * 4);  // the partial tile is the larger
    CHECK(error_of([] { Conv2dBnSiluGemmForward(64, 32, 16, 8, default_max_shared_bytes, 0); }).find("split_k = 0") !=
          std::string::npos);
    CHECK(error_of([] {
              Conv2dBnSiluGemmForward(64, 32, 16, 8, default_max_shared_bytes, 9);
          }).find("between 1 and 8") != std::string::npos);
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
    const Conv2dAttrs a{
        .kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1, .groups = 2};
    const Conv2dBnSiluForward op({64, 32, 16, 8}, a);
    CHECK(op.kernel().id() == "conv2d_bn_silu_forward__f32__64__32__16__8");
    CHECK(op.block() == Dims{64, 1, 1});
    CHECK(op.kernel().entry_point_source().find("__launch_bounds__(64)") != std::string::npos);
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
    op.pack_args({in, params, fake(0x500), y, 72}, r);
    REQUIRE(r.args.size() == 21);
    const std::int64_t expected[] = {3, 16, 15, 17, 40, 8, 9, 3, 3, 2, 1, 2, 72, 16 * 15 * 17, 40 * 72};
    for (std::size_t k = 0; k < 15; ++k) CHECK(r.i(5 + k) == expected[k]);
    CHECK(r.p(20) == nullptr);
    ArgPack pack(op.kernel().params(), op.kernel().id());
    op.pack_args({in, params, fake(0x500), y, 72}, pack);
    pack.check_complete();
    const Shape wrong{3, 40, 7, 9};
    CHECK(error_of([&] {
              op.pack_args({in, params, fake(0x500), wrong, 72}, r);
          }).find("does not match") != std::string::npos);
    CHECK(error_of([&] { Conv2dBnSiluForward({48, 32, 16, 8}, a); }).find("BLOCK_M = 48") != std::string::npos);
}
TEST_CASE("every configuration of the conv kernels compiles for sm_80, sm_87 and sm_90") {
    std::vector<Kernel> kernels;
    std::size_t arch_specific = 0;  // the four TMA kernels: sm_90a only, checked by their own test
    for (const auto& family : shipped_kernels())
        if (family.name.starts_with("conv2d_bn_silu"))
            for (auto& k : family.configurations()) {
                if (k.only_for()) ++arch_specific;
                else kernels.push_back(std::move(k));
            }
    // The depthwise kernel: 3x3 s1 and s2 and 7x7 on every tile; ResNeXt's 3x3 groups of 4, 8
    // and 16 channels (strides 1 and 2) on the tiles whose windows fit in 48 KB.
    std::size_t grouped = 0;
    for (const int stride : {1, 2})
        for (const int width : {4, 8, 16})
            for (const auto& t : DepthwiseTiles::configurations())
                grouped +=
                    t.shared_bytes(
                        {.kernel_h = 3, .kernel_w = 3, .stride_h = stride, .stride_w = stride, .pad_h = 1, .pad_w = 1},
                        width) <= 48 * 1024;
    CHECK(grouped >= 8);
    REQUIRE(kernels.size() == 2 * GemmTiles::configurations().size() +
                                  Conv2dBnSiluDirectForward::configurations().size() +
                                  3 * DepthwiseTiles::configurations().size() + grouped);
    REQUIRE(arch_specific == 4 * Sm90Tiles::configurations().size());
    std::vector<test::CompileJob> jobs;
    for (const auto& k : kernels)
        for (const char* arch : {"sm_80", "sm_87", "sm_90"}) jobs.push_back({&k, arch});
    test::compile_each(jobs, [](const test::CompileJob& job, const Compiled& c) {
        const Kernel& k = *job.kernel;
        CAPTURE(k.id());
        CAPTURE(std::string(job.arch));
        CHECK(c.ptx.find(".entry " + k.entry_point_name()) != std::string::npos);
        CHECK(c.resources.spill_store_bytes == 0);
        if (k.name() == "conv2d_bn_silu_depthwise_forward" && k.id().ends_with("__true")) {
            // Its window is staged by 16-byte copies (4-byte where rows are not whole chunks)
            // and read back in 16-byte pieces.
            CHECK(c.ptx.find("cp.async.cg.shared.global") != std::string::npos);
            CHECK(c.ptx.find("ld.shared.v4.f32") != std::string::npos);
        } else if (k.name() == "conv2d_bn_silu_depthwise_forward") {
            // Unstaged: every thread reads x through the read-only path, no shared memory.
            CHECK(c.ptx.find("ld.global.nc.f32") != std::string::npos);
            CHECK(c.ptx.find("cp.async") == std::string::npos);
        } else if (k.name() != "conv2d_bn_silu_direct_forward") {
            CHECK(c.ptx.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") != std::string::npos);
        }
    });
}
TEST_CASE("the GEMM kernel's FMA path: on archs without TF32 MMA, and when asked for") {
    const Kernel k = Conv2dBnSiluGemmForward(64, 64, 32, 8).kernel();
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

TEST_CASE("the TMA kernels build for sm_90a only: TMA, wgmma and setmaxnreg, unserialised and unspilled") {
    const CompileOptions sm90a = test::options_for("sm_90a");
    const DeviceTraits h200{132, 232448, Arch(9, 0)};
    const Conv2dAttrs k3{.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
    std::vector<std::future<void>> running;
    for (const auto& t : Sm90Tiles::configurations())
        for (const Kernel& k :
             {Conv2dBnSiluGemmTmaForward(t, h200).kernel(), Conv2dBnSiluTmaForward(t, k3, h200).kernel(),
              Conv2dBnSiluGatherTmaForward(t, k3, h200).kernel(), Conv2dBnSiluNhwcTmaForward(t, k3, h200).kernel()}) {
            // The 1×1 kernel copies 3-D boxes ({pixels, channels, image}, or whole images) and
            // stores them, the implicit GEMM 4-D ones; the gathering kernel copies only W's 2-D boxes, gathers X
            // with cp.async that arrives on the stage's barrier, and stores y itself; the
            // channels-last kernel copies x in im2col mode and W's 3-D boxes, stores 2-D ones, and
            // reads both wgmma operands through descriptors.
            const bool gathers = k.name() == "conv2d_bn_silu_gather_tma_forward";
            const bool nhwc = k.name() == "conv2d_bn_silu_nhwc_tma_forward";
            const std::string load = gathers                                    ? "2d"
                                     : nhwc                                     ? "4d.shared::cluster.global.im2col"
                                     : k.name() == "conv2d_bn_silu_tma_forward" ? "4d"
                                                                                : "3d";
            const std::string store = nhwc ? "2d" : load;
            running.push_back(std::async(std::launch::async, [k, t, load, store, gathers, nhwc, &sm90a] {
                const Compiled c = compile(k, sm90a);
                // CHECK is not thread-safe in doctest: collect, check on the main thread.
                // Split-K's hand-over: arrivals on another block's barrier, partials read from it.
                std::vector<std::string> wanted = {
                    "wgmma.mma_async", "cp.async.bulk.tensor." + load, "mbarrier.try_wait",
                    "mbarrier.arrive.release.cluster.shared::cluster", "ld.shared::cluster.v4.f32"};
                wanted.push_back(gathers ? "cp.async.mbarrier.arrive.noinc"
                                         : "cp.async.bulk.tensor." + store + ".global.shared::cta");
                if (nhwc) wanted.push_back("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier");
                // The RS form reads A fragments into registers as tf32; the SS form has none.
                if (nhwc == (c.ptx.find("cvt.rna.tf32.f32") != std::string::npos))
                    throw UsageError(k.id() + (nhwc ? ": A fragments in the SS kernel" : ": no A fragments"));
                for (const std::string& instruction : wanted)
                    if (c.ptx.find(instruction) == std::string::npos) throw UsageError(k.id() + ": no " + instruction);
                if (gathers && c.ptx.find(".global.shared::cta") != std::string::npos)
                    throw UsageError(k.id() + ": a TMA store in the kernel that stores y itself");
                if (t.block_m > 64 && c.ptx.find("setmaxnreg.inc") == std::string::npos)
                    throw UsageError(k.id() + ": several consumer warpgroups without setmaxnreg");
                if (c.ptx.find("mma.sync") != std::string::npos)
                    throw UsageError(k.id() + ": mma.sync in the TMA kernel");
                // Each column policy's GEMM (two but in the gathering and channels-last kernels: 32-pixel boxes and
                // whole images, tap boxes and flattened rows) waits for the grid before once, after
                // its barrier setup (which that grid's tail overlaps).
                const int policies = gathers || nhwc ? 1 : 2;
                int waits = 0;
                for (auto at = c.ptx.find("griddepcontrol.wait"); at != std::string::npos;
                     at = c.ptx.find("griddepcontrol.wait", at + 1))
                    ++waits;
                if (waits != policies || c.ptx.find("mbarrier.init") > c.ptx.find("griddepcontrol.wait") ||
                    c.ptx.find("griddepcontrol.launch_dependents") == std::string::npos)
                    throw UsageError(k.id() + ": not one griddepcontrol.wait per column policy after mbarrier.init");
                // ptxas says why it serialised wgmma under several codes (C7513: a wgmma input written
                // while one is in flight, C7515: accumulators so written); C7508: setmaxnreg ignored.
                for (const char* warning : {"wgmma.mma_async instructions are serialized", "C7508"})
                    if (c.log.find(warning) != std::string::npos) throw UsageError(k.id() + ": ptxas warns " + warning);
                if (c.resources.spill_store_bytes || c.resources.spill_load_bytes || c.resources.stack_frame_bytes)
                    throw UsageError(k.id() + ": registers spill");
            }));
        }
    for (auto& f : running) CHECK_NOTHROW(f.get());
    const Kernel k = Conv2dBnSiluGemmTmaForward(Sm90Tiles::configurations().front(), h200).kernel();
    CHECK_THROWS_WITH_AS(compile(k, test::options_for("sm_90")), doctest::Contains("compiles for sm_90a only"),
                         UsageError);
    CHECK(k.target(Arch(9, 0)) == Arch(9, 0, 'a'));
    CHECK(k.runs_on(Arch(9, 0)));
    CHECK_FALSE(k.runs_on(Arch(8, 0)));
    CHECK_FALSE(k.runs_on(Arch(10, 0)));
}

TEST_CASE("the TMA op hands calls TMA cannot reach to the sm80 kernel, and refuses to pack them") {
    const DeviceTraits h200{132, 232448, Arch(9, 0)};
    const Conv2dBnSiluGemmTmaForward op({128, 128, 4, 8}, h200);
    const Shape x{2, 64, 8, 8}, y{2, 64, 8, 8};
    const Tensor inputs[] = {{fake(0x10000), x}}, odd[] = {{fake(0x10004), x}};
    void* const params[] = {fake(0x20000), fake(0x30000), fake(0x40000)};
    const OpCall aligned{inputs, params, fake(0x50000), y, 64}, padded{inputs, params, fake(0x50000), y, 66},
        misaligned{odd, params, fake(0x50000), y, 64};
    CHECK(&op.op_for(aligned) == &op);
    for (const OpCall* call : {&padded, &misaligned}) {
        const RuntimeOp& runs = op.op_for(*call);
        CHECK(&runs != &op);
        CHECK(runs.kernel_for_launch(0).name() == "conv2d_bn_silu_gemm_forward");
        CHECK(&op.op_for(*call) == &runs);  // one fallback, kept by the op
    }
    // Packed directly, the TMA kernel's arguments say what TMA cannot take, before the driver is asked.
    Recorder r;
    CHECK(error_of([&] { op.pack_args(padded, r); }).find("stride of dimension 1 is 264 bytes") != std::string::npos);
    CHECK(error_of([&] { op.pack_args(misaligned, r); }).find("input x") != std::string::npos);
    CHECK(error_of([&] { op.pack_args(misaligned, r); }).find("16-byte aligned") != std::string::npos);
    // The Hopper implicit GEMM stores y itself where TMA cannot write it (padded rows, an
    // unaligned y), and hands only an x TMA cannot read to the sm80 implicit GEMM.
    const Conv2dBnSiluTmaForward general({128, 128, 4, 8}, {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1},
                                         h200);
    const OpCall unaligned_y{inputs, params, fake(0x50004), y, 64};
    for (const OpCall* call : {&aligned, &padded, &unaligned_y}) CHECK(&general.op_for(*call) == &general);
    CHECK(general.op_for(misaligned).kernel_for_launch(0).name() == "conv2d_bn_silu_forward");
    CHECK(error_of([&] { general.pack_args(misaligned, r); }).find("input x") != std::string::npos);
    // Every other op runs its own calls.
    const Conv2dBnSiluGemmForward sm80(64, 64, 32, 8);
    CHECK(&sm80.op_for(padded) == &sm80);
}
