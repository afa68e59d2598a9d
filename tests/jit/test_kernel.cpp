// Kernel objects: entry-point generation, readable ids, validation.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>

#include "jit/entry_point.hpp"
#include "support.hpp"

using namespace kjit;

TEST_CASE("entry point is generated from the signature and the constants") {
    const Kernel k = test::axpby(Scalar::f32, 4);
    CHECK(k.name() == "axpby");
    CHECK(k.entry_point_name() == "axpby_entry_point");
    CHECK(k.entry_point_source() ==
          "extern \"C\" __global__ void __launch_bounds__(256) axpby_entry_point(float* x, float* y, float alpha, "
          "float beta, long long n)\n{\n" +
              detail::grid_dependency_prologue(false) + "    axpby<float, 256, 4>(x, y, alpha, beta, n);\n}\n");
    CHECK(k.source() == k.kernel_source() + "\n\n" + k.entry_point_source());
    CHECK(k.kernel_source().find("__device__ __forceinline__ void axpby") != std::string::npos);
}

TEST_CASE("tensor-map parameters stay in parameter space, launch bounds can promise blocks per SM, sm_90a only") {
    KernelSpec spec{"tma", {}, {{"map", {Scalar::tensor_map}}, {"n", {Scalar::i32}}}, 384};
    spec.min_blocks_per_multiprocessor = 1;
    spec.only_for = Arch(9, 0, 'a');
    const Kernel k(spec, "__device__ void tma(const kjit::TensorMap&, int) {}");
    CHECK(k.entry_point_source() ==
          "#include \"kjit/tensor_map.cuh\"\n\nextern \"C\" __global__ void __launch_bounds__(384, 1) "
          "tma_entry_point(const __grid_constant__ kjit::TensorMap map, int n)\n{\n" +
              detail::grid_dependency_prologue(false) + "    tma(map, n);\n}\n");
    CHECK(k.target(Arch(9, 0)) == Arch(9, 0, 'a'));
    CHECK(k.runs_on(Arch(9, 0)));
    CHECK_FALSE(k.runs_on(Arch(8, 0)));
    CHECK(test::axpby(Scalar::f32, 4).target(Arch(8, 0)) == Arch(8, 0));
    spec.max_threads_per_block = 0;
    CHECK_THROWS_WITH_AS(Kernel(spec, ""), doctest::Contains("launch bounds need both"), UsageError);
    const KernelSpec pointer_to_map{"bad", {}, {{"map", {Scalar::tensor_map, true}}}};
    CHECK_THROWS_AS(Kernel(pointer_to_map, ""), UsageError);
}

TEST_CASE("a body that waits for the previous grid itself: the entry point only releases the next one") {
    KernelSpec spec{"early", {}, {{"n", {Scalar::i32}}}};
    spec.waits_in_body = true;
    const Kernel k(spec, "__device__ void early(int) {}");
    CHECK(k.entry_point_source() == "extern \"C\" __global__ void early_entry_point(int n)\n{\n" +
                                        detail::grid_dependency_prologue(true) + "    early(n);\n}\n");
    CHECK(detail::grid_dependency_prologue(true).find("griddepcontrol.launch_dependents;") != std::string::npos);
    CHECK(detail::grid_dependency_prologue(true).find("griddepcontrol.wait") == std::string::npos);
    CHECK(detail::grid_dependency_prologue(false).find("griddepcontrol.wait;") != std::string::npos);
    spec.waits_in_body = false;
    CHECK(Kernel(spec, "__device__ void early(int) {}").key(test::options_for("sm_90")) !=
          k.key(test::options_for("sm_90")));  // a different entry point: a different cache entry
}

TEST_CASE("readable id joins name, pointer dtypes and constant values") {
    CHECK(test::axpby(Scalar::f32, 4).id() == "axpby__f32__f32__256__4");
    CHECK(test::axpby(Scalar::i32, 1).id() == "axpby__i32__i32__256__1");
    const Kernel mixed(KernelSpec{"mixed",
                                  {{"FLAG", true}, {"N", std::int64_t{-3}}},
                                  {{"a", {Scalar::f16, true}}, {"b", {Scalar::u8, true}}, {"c", {Scalar::f16, true}}}},
                       "template <bool FLAG, int N> __device__ void mixed(kjit::f16*, unsigned char*, kjit::f16*) {}");
    CHECK(mixed.id() == "mixed__f16__u8__true__-3");
    // 16-bit float parameters pull in kjit's storage types, so no CUDA header is needed.
    CHECK(mixed.entry_point_source().starts_with("#include \"kjit/types.cuh\""));
    CHECK(mixed.entry_point_source().find("mixed<true, -3>(a, b, c);") != std::string::npos);
    REQUIRE(mixed.headers().size() == 1);
    CHECK(mixed.headers()[0].name == "kjit/types.cuh");
}

TEST_CASE("kernels with the same includes share one resolved copy of the headers, with the same content") {
    const auto make = [](std::int64_t n) {
        return Kernel(KernelSpec{"shared", {{"N", n}}, {{"a", {Scalar::f16, true}}}},
                      "template <int N> __device__ void shared(kjit::f16*) {}");
    };
    const Kernel one = make(1), two = make(2);
    REQUIRE(one.headers().size() == 1);
    CHECK(&one.headers() == &two.headers());  // resolved once per process, not per kernel
    CHECK(one.headers()[0].content.find("f16") != std::string::npos);
    CHECK(one.source_hash() != two.source_hash());  // the sources still differ, and so do the keys
}

TEST_CASE("a kernel without constants calls a plain function, no launch bounds when unset") {
    const Kernel k(KernelSpec{"plain", {}, {{"p", {Scalar::i32, true}}, {"n", {Scalar::u64}}}},
                   "__device__ void plain(int* p, unsigned long long n) {}");
    CHECK(k.entry_point_source() ==
          "extern \"C\" __global__ void plain_entry_point(int* p, unsigned long long n)\n{\n" +
              detail::grid_dependency_prologue(false) + "    plain(p, n);\n}\n");
    CHECK(k.id() == "plain__i32");
}

TEST_CASE("invalid specs are rejected with the rule that broke") {
    auto message = [](const KernelSpec& spec) {
        try {
            Kernel k(spec, "");
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const std::vector<Param> params{{"x", {Scalar::f32, true}}};
    CHECK(message({"bad-name", {}, params}).find("not a C identifier") != std::string::npos);
    CHECK(message({"k", {{"A", std::int64_t{1}}, {"A", std::int64_t{2}}}, params}).find("given twice") !=
          std::string::npos);
    CHECK(message({"k", {}, {{"x", {Scalar::f64, true}}}}).find("has type f64*") != std::string::npos);
    CHECK(message({"k", {}, {{"x", {Scalar::u8}}}}).find("has type u8") != std::string::npos);
    CHECK(message({"k", {}, {{"x", {Scalar::i32}}, {"x", {Scalar::i32}}}}).find("appears twice") != std::string::npos);
    CHECK(message({"k", {}, {}}).find("no parameters") != std::string::npos);
    CHECK(message({"k", {}, params, 2048}).find("at most 1024") != std::string::npos);
}
