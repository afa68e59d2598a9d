// The registry of shipped kernels.
#include <doctest/doctest.h>

#include <kjit/registry.hpp>

using namespace kjit;

TEST_CASE("the registry lists valid configurations of every shipped kernel") {
    int count = 0;
    for (const auto& family : shipped_kernels())
        for (const auto& k : family.configurations()) {
            CHECK(k.name() == family.name);
            ++count;
        }
    CHECK(count >= 4);
}
