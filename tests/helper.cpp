// A second process for the tests: prints a cache key, or compiles into a shared cache.
//   kjit_test_helper key                     the key of axpby<f32,256,4> for sm_90
//   kjit_test_helper warm DIR ITEMS...       compiles axpby<f32,256,ITEMS> into DIR; prints NVRTC runs
//   kjit_test_helper flip FILE               flips one byte inside the first stored cubin of a cache file
#include <sqlite3.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "support.hpp"

int main(int argc, char** argv) try {
    const std::string command = argc > 1 ? argv[1] : "";
    if (command == "key" && argc == 2) {
        std::printf("%s\n", kjit::test::axpby().key(kjit::test::options_for("sm_90")).hex().c_str());
        return 0;
    }
    if (command == "warm" && argc >= 4) {
        kjit::Runtime runtime(argv[2]);
        for (int i = 3; i < argc; ++i)
            (void)runtime.compile(kjit::test::axpby(kjit::Scalar::f32, std::atoll(argv[i])), kjit::test::options_for("sm_90"));
        std::printf("%llu\n", static_cast<unsigned long long>(runtime.stats().compiles));
        return runtime.cache().persistent() ? 0 : 1;
    }
    if (command == "flip" && argc == 3) {
        sqlite3* db = nullptr;
        if (sqlite3_open(argv[2], &db) != SQLITE_OK) return 1;
        const char* sql = "UPDATE kernels SET cubin = substr(cubin, 1, 99) || CAST(X'A5' AS BLOB) || substr(cubin, 101) "
                          "WHERE key = (SELECT min(key) FROM kernels)";
        const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
        const int changed = sqlite3_changes(db);
        sqlite3_close(db);
        return rc == SQLITE_OK && changed == 1 ? 0 : 1;
    }
    std::fprintf(stderr, "usage: kjit_test_helper key | warm DIR ITEMS... | flip FILE\n");
    return 2;
} catch (const std::exception& e) {
    std::fprintf(stderr, "kjit_test_helper: %s\n", e.what());
    return 1;
}
