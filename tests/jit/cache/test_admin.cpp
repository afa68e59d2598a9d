// Cache management: prune, clear and count_stored.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <random>
#include <regex>
#include <thread>

#include "jit/cache/cache_test_support.hpp"

using namespace kjit;
using namespace kjit::test;
namespace fs = std::filesystem;

TEST_CASE("prune keeps the most recently used entries within the size, clear removes all") {
    test::TempDir dir;
    Cache cache(dir.path());
    for (std::uint64_t i = 1; i <= 5; ++i) cache.store(sample_entry(i));
    const std::uint64_t one = sample_entry().compiled.ptx.size() + sample_entry().compiled.cubin.size() +
                              sample_entry().compiled.log.size();
    CHECK(cache.prune(2 * one) == 3);
    CHECK(cache.entries().size() == 2);
    CHECK(cache.clear() == 2);
    CHECK(cache.entries().empty());
    CHECK(cache.verify().empty());
}

TEST_CASE("count_stored: how many of the keys the file holds, read apart from the cache's connection") {
    test::TempDir dir;
    Cache cache(dir.path());
    CHECK(cache.count_stored(std::vector{sample_entry(1).key}) == 0);
    for (std::uint64_t i = 1; i <= 3; ++i) cache.store(sample_entry(i));
    const std::vector keys{sample_entry(1).key, sample_entry(3).key, sample_entry(7).key};
    CHECK(cache.count_stored(keys) == 2);
    CHECK(cache.incidents().empty());
    // A fresh cache elsewhere holds none of them.
    const Cache elsewhere(dir.path() / "never-created");
    CHECK(elsewhere.count_stored(keys) == 0);
}
