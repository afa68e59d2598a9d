// Kernel sources: embedded, overridden by KJIT_KERNELS_DIR, their headers collected.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>

#include "support.hpp"

using namespace kjit;

TEST_CASE("headers included from kernels_src are collected, transitively and once") {
    const Kernel k = test::axpby();
    REQUIRE(k.headers().size() == 2);  // axpby.cu includes grid.cuh, which includes ceil_div.cuh
    CHECK(k.headers()[0].name == "kjit/ceil_div.cuh");
    CHECK(k.headers()[1].name == "kjit/grid.cuh");
    CHECK(k.headers()[1].content.find("block_index") != std::string::npos);
}

TEST_CASE("an unknown shipped kernel names the kernels that exist") {
    try {
        Kernel k(KernelSpec{"no_such_kernel", {}, {{"x", {Scalar::f32, true}}}});
        FAIL("expected UsageError");
    } catch (const UsageError& e) {
        const std::string what = e.what();
        CHECK(what.find("unknown kernel 'no_such_kernel'") != std::string::npos);
        CHECK(what.find("axpby") != std::string::npos);
    }
}

TEST_CASE("KJIT_KERNELS_DIR overrides the embedded sources") {
    test::TempDir dir;
    std::filesystem::create_directories(dir.path() / "kjit");
    std::ofstream(dir.path() / "axpby.cu") << "#include \"kjit/grid.cuh\"\n// edited body\n";
    std::ofstream(dir.path() / "kjit" / "grid.cuh") << "// edited header\n";
    ::setenv("KJIT_KERNELS_DIR", dir.path().c_str(), 1);
    const Kernel edited = test::axpby();
    ::unsetenv("KJIT_KERNELS_DIR");
    CHECK(edited.kernel_source() == "#include \"kjit/grid.cuh\"\n// edited body\n");
    REQUIRE(edited.headers().size() == 1);
    CHECK(edited.headers()[0].content == "// edited header\n");
    CHECK(test::axpby().kernel_source() != edited.kernel_source());  // embedded again once unset
}

TEST_CASE(
    "kernels of one spec share their state on the embedded sources, and from KJIT_KERNELS_DIR each is built afresh") {
    const Kernel a = test::axpby(Scalar::f32, 4), b = test::axpby(Scalar::f32, 4), other = test::axpby(Scalar::f32, 2);
    CHECK(&a.source() == &b.source());  // built once: one entry point generated, one source hashed
    CHECK(&a.source() != &other.source());
    CHECK(a.source_hash() != other.source_hash());
    // A kernel file edited between two kernels shows in the second.
    test::TempDir dir;
    std::ofstream(dir.path() / "axpby.cu") << "// first\n";
    ::setenv("KJIT_KERNELS_DIR", dir.path().c_str(), 1);
    const Kernel first = test::axpby(Scalar::f32, 4);
    std::ofstream(dir.path() / "axpby.cu") << "// second\n";
    const Kernel second = test::axpby(Scalar::f32, 4);
    ::unsetenv("KJIT_KERNELS_DIR");
    CHECK(first.kernel_source() == "// first\n");
    CHECK(second.kernel_source() == "// second\n");
    CHECK(&test::axpby(Scalar::f32, 4).source() == &a.source());  // embedded again, and shared
}
