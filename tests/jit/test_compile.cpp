// NVRTC: PTX and cubin for each target, the resource report, and the compile-error report.
#include <doctest/doctest.h>

#include <future>

#include "support.hpp"

using namespace kjit;

TEST_CASE("compiles to PTX and cubin for sm_80, sm_87, sm_90 and sm_90a") {
    for (const char* arch : {"sm_80", "sm_87", "sm_90", "sm_90a"}) {
        CAPTURE(std::string(arch));
        const Compiled c = compile(test::axpby(), test::options_for(arch));
        CAPTURE(c.log);
        CHECK(c.ptx.find(".entry axpby_entry_point") != std::string::npos);
        CHECK(c.ptx.find(std::string(".target ") + arch) != std::string::npos);
        REQUIRE(c.cubin.size() > 4);
        CHECK(std::string(reinterpret_cast<const char*>(c.cubin.data()) + 1, 3) == "ELF");
        CHECK(c.resources.registers > 0);
        CHECK(c.resources.spill_store_bytes == 0);
        CHECK(c.compile_ms > 0);
        CHECK(c.log.find("Compiling entry function 'axpby_entry_point'") != std::string::npos);
    }
}

TEST_CASE("entry points built for sm_90+ wait for the grid before them and release the next, older ones do not") {
    for (const char* arch : {"sm_80", "sm_87", "sm_90", "sm_90a"}) {
        CAPTURE(std::string(arch));
        const Compiled c = compile(test::axpby(), test::options_for(arch));
        const bool hopper = std::string_view(arch).starts_with("sm_9");
        CHECK((c.ptx.find("griddepcontrol.wait;") != std::string::npos) == hopper);
        CHECK((c.ptx.find("griddepcontrol.launch_dependents;") != std::string::npos) == hopper);
    }
}

TEST_CASE("compiling the same kernel again still gives ptxas' report (no driver cache in between)") {
    const Kernel k = test::scale_kernel("", 12345);
    for (int i = 0; i < 3; ++i) {
        const Compiled c = compile(k, test::options_for("sm_90"));
        CAPTURE(c.log);
        CHECK(c.resources.registers > 0);
    }
}

TEST_CASE("the resource report is read from ptxas' verbose log") {
    const std::string log =
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'other_entry_point' for 'sm_90'\n"
        "ptxas info    : Function properties for other_entry_point\n"
        "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 255 registers, used 0 barriers, 360 bytes cmem[0]\n"
        "ptxas info    : Compiling entry function 'k_entry_point' for 'sm_90'\n"
        "ptxas info    : Function properties for k_entry_point\n"
        "ptxas         .     16 bytes stack frame, 12 bytes spill stores, 20 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 33024 bytes smem, 392 bytes cmem[0]\n";
    const ResourceReport r = parse_ptxas_report(log, "k_entry_point");
    CHECK(r == ResourceReport{.registers = 40,
                              .spill_store_bytes = 12,
                              .spill_load_bytes = 20,
                              .shared_static_bytes = 33024,
                              .stack_frame_bytes = 16,
                              .constant_bytes = 392,
                              .barriers = 1});
    CHECK(parse_ptxas_report(log, "missing_entry_point") == ResourceReport{});
}

TEST_CASE("static shared memory shows in the report") {
    const Kernel k(KernelSpec{"staged", {{"N", std::int64_t{1024}}}, {{"x", {Scalar::f32, true}}}, 256},
                   "template <int N> __device__ void staged(float* x) {\n"
                   "    __shared__ float tile[N];\n"
                   "    tile[threadIdx.x] = x[threadIdx.x];\n"
                   "    __syncthreads();\n"
                   "    x[threadIdx.x] = tile[N - 1 - threadIdx.x];\n"
                   "}\n");
    const Compiled c = compile(k, test::options_for("sm_90"));
    CHECK(c.resources.shared_static_bytes == 4096);
    CHECK(c.resources.barriers == 1);
}

TEST_CASE("a compile error carries the id, the options, the log and the lines around it") {
    const Kernel broken(KernelSpec{"broken", {{"N", std::int64_t{7}}}, {{"x", {Scalar::f32, true}}}},
                        "template <int N>\n"
                        "__device__ void broken(float* x) {\n"
                        "    x[0] = undefined_name * N;\n"
                        "}\n");
    try {
        (void)compile(broken, test::options_for("sm_90"));
        FAIL("expected CompileError");
    } catch (const CompileError& e) {
        CHECK(e.readable_id() == "broken__f32__7");
        CHECK(e.options() == test::options_for("sm_90").canonical());
        CHECK(e.log().find("undefined_name") != std::string::npos);
        CHECK(e.source_excerpt().find(">     3 |     x[0] = undefined_name * N;") != std::string::npos);
        CHECK(e.source_excerpt().find("      1 | template <int N>") != std::string::npos);
        const std::string what = e.what();
        CHECK(what.find("broken__f32__7") != std::string::npos);
        CHECK(what.find("--gpu-architecture=sm_90") != std::string::npos);
        CHECK(what.find("undefined_name") != std::string::npos);
    }
}

TEST_CASE("a compile error inside an included header shows that header's lines") {
    // A macro that breaks the header where it calls fmaf: the first error is in kjit/bn_silu.cuh.
    const Kernel broken(KernelSpec{"uses_header", {}, {{"x", {Scalar::f32, true}}}},
                        "#define fmaf not_a_function\n"
                        "#include \"kjit/bn_silu.cuh\"\n"
                        "__device__ void uses_header(float* x) { x[0] = kjit::bn_silu(x[0], 1.0f, 0.0f); }\n");
    try {
        (void)compile(broken, test::options_for("sm_90"));
        FAIL("expected CompileError");
    } catch (const CompileError& e) {
        CAPTURE(e.log());
        CAPTURE(e.source_excerpt());
        CHECK(e.source_excerpt().starts_with("in kjit/bn_silu.cuh:\n"));
        const auto marked = e.source_excerpt().find("> ");
        REQUIRE(marked != std::string::npos);
        CHECK(e.source_excerpt().substr(marked, e.source_excerpt().find('\n', marked) - marked).find("fmaf(") !=
              std::string::npos);
    }
}

TEST_CASE("bad defines are rejected before NVRTC runs") {
    CompileOptions o = test::options_for("sm_90");
    o.defines = {{"1BAD", "x"}};
    CHECK_THROWS_WITH_AS((void)compile(test::axpby(), o), doctest::Contains("not a macro name"), UsageError);
    o.defines = {{"A", "1"}, {"A", "2"}};
    CHECK_THROWS_WITH_AS((void)compile(test::axpby(), o), doctest::Contains("given twice"), UsageError);
    o = CompileOptions{};
    o.arch = Arch(1, 0);
    CHECK_THROWS_WITH_AS((void)compile(test::axpby(), o), doctest::Contains("cannot compile for sm_10"), UsageError);
}

TEST_CASE("compiles run concurrently from many threads and agree with a serial compile") {
    const auto serial = compile(test::axpby(Scalar::f32, 1), test::options_for("sm_90"));
    std::vector<std::future<Compiled>> runs;
    for (int i = 0; i < 8; ++i)
        runs.push_back(std::async(std::launch::async, [i] {
            return compile(test::axpby(i % 2 ? Scalar::i32 : Scalar::f32, 1), test::options_for("sm_90"));
        }));
    for (int i = 0; i < 8; ++i) {
        const Compiled c = runs[i].get();
        if (i % 2 == 0) CHECK(c.cubin == serial.cubin);
        CHECK(c.ptx.find(".entry axpby_entry_point") != std::string::npos);
    }
}

TEST_CASE("the NVRTC version names the build") {
    CHECK(nvrtc_version().find(" build ") != std::string::npos);
    CHECK(nvrtc_version().find("unknown") == std::string::npos);
}
