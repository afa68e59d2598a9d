// A second process for the tests: prints a cache key, or compiles into a shared cache.
//   kjit_test_helper key                     the key of axpby<f32,256,4> for sm_90
//   kjit_test_helper warm DIR ITEMS...       compiles axpby<f32,256,ITEMS> into DIR; prints NVRTC runs
//   kjit_test_helper flip FILE               flips one byte inside the first stored cubin of a cache file
//   kjit_test_helper corrupt-index FILE      overwrites the root page of a cache file's kernels_by_name index
//   kjit_test_helper sql FILE SQL            runs SQL on a cache file
//   kjit_test_helper weights GRAPH BATCH OUT [SKIP]
//       writes random F32 weights for every parameter slot of GRAPH planned for BATCH (on an
//       H200's traits) to the safetensors file OUT, leaving out the key SKIP
//   kjit_test_helper winner DIR GRAPH BATCH NODE CONFIG
//       stores in the cache at DIR a tuned winner CONFIG for conv or attention node NODE of GRAPH
//       planned for BATCH on an H200 (driver 580.159.04), tied to that configuration's kernel source
//   kjit_test_helper warm-list DIR THREADS N [FSIZE]
//       compiles scale<1..N> for sm_90 into DIR with THREADS threads through one Runtime; with
//       FSIZE, first limits the size of any file it writes to FSIZE bytes (RLIMIT_FSIZE: a full
//       disk). Prints "compiles=C warnings=W persistent=P"; exits 0 unless a compile failed.
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <kjit/model.hpp>
#include <kjit/tuning.hpp>

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
            (void)runtime.compile(kjit::test::axpby(kjit::Scalar::f32, std::atoll(argv[i])),
                                  kjit::test::options_for("sm_90"));
        std::printf("%llu\n", static_cast<unsigned long long>(runtime.stats().compiles));
        return runtime.cache().persistent() ? 0 : 1;
    }
    if (command == "flip" && argc == 3) {
        sqlite3* db = nullptr;
        if (sqlite3_open(argv[2], &db) != SQLITE_OK) return 1;
        const char* sql =
            "UPDATE kernels SET cubin = substr(cubin, 1, 99) || CAST(X'A5' AS BLOB) || substr(cubin, 101) "
            "WHERE key = (SELECT min(key) FROM kernels)";
        const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
        const int changed = sqlite3_changes(db);
        sqlite3_close(db);
        return rc == SQLITE_OK && changed == 1 ? 0 : 1;
    }
    if (command == "winner" && argc == 7) {
        std::ifstream in(argv[3]);
        const std::string graph((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const kjit::DeviceTraits h200{132, 232448, kjit::Arch(9, 0)};
        const kjit::ModelPlan plan = kjit::ModelPlan::from_json(graph, std::atoi(argv[4]), h200);
        kjit::Cache cache(argv[2]);
        for (const auto& [node, l] : plan.conv_layers()) {
            if (plan.nodes()[node].name != argv[5]) continue;
            const auto op = kjit::make_conv2d_bn_silu(l.attrs, l.shape, argv[6], h200);
            kjit::store_tuned(cache, {"conv2d_bn_silu", kjit::conv2d_problem_key(l.attrs, l.shape), "NVIDIA H200",
                                      "sm_90", "580.159.04", op->kernel().source_hash(), argv[6], 10.0});
            return 0;
        }
        for (const auto& [node, shape] : plan.attention_layers()) {
            if (plan.nodes()[node].name != argv[5]) continue;
            const auto& attention = dynamic_cast<const kjit::AttentionForwardOp&>(*plan.nodes()[node].op);
            const auto op = attention.with_tiles(kjit::parse_attention_config(argv[6]));
            kjit::store_tuned(
                cache, {std::string(kjit::attention_family), kjit::attention_tuning_key(shape, attention.layout()),
                        "NVIDIA H200", "sm_90", "580.159.04", op->kernel().source_hash(), argv[6], 10.0});
            return 0;
        }
        return 1;
    }
    if (command == "weights" && (argc == 5 || argc == 6)) {
        std::ifstream in(argv[2]);
        const std::string graph((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const kjit::ModelPlan plan = kjit::ModelPlan::from_json(graph, std::atoi(argv[3]),
                                                                kjit::DeviceTraits{132, 232448, kjit::Arch(9, 0)});
        std::vector<std::vector<float>> values;
        std::vector<kjit::NamedTensor> named;
        for (const auto& node : plan.nodes())
            for (const auto& p : node.params)
                if (argc == 5 || p.key != argv[5]) values.emplace_back(kjit::element_count(p.shape), 0.5f);
        std::size_t i = 0;
        for (const auto& node : plan.nodes())
            for (const auto& p : node.params)
                if (argc == 5 || p.key != argv[5]) named.push_back({p.key, p.shape, values[i++]});
        kjit::write_safetensors(argv[4], named);
        return 0;
    }
    if (command == "sql" && argc == 4) {  // runs SQL on a cache file (a schema damaged by hand)
        sqlite3* db = nullptr;
        if (sqlite3_open(argv[2], &db) != SQLITE_OK) return 1;
        const int rc = sqlite3_exec(db, argv[3], nullptr, nullptr, nullptr);
        sqlite3_close(db);
        return rc == SQLITE_OK ? 0 : 1;
    }
    if (command == "corrupt-index" && argc == 3) {  // the kernels_by_name index's root page overwritten
        sqlite3* db = nullptr;
        if (sqlite3_open(argv[2], &db) != SQLITE_OK) return 1;
        sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
        long long page_size = 0, root = 0;
        const auto integer = [db](const char* sql) {
            sqlite3_stmt* s = nullptr;
            long long v = 0;
            if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
                v = sqlite3_column_int64(s, 0);
            sqlite3_finalize(s);
            return v;
        };
        page_size = integer("PRAGMA page_size");
        root = integer("SELECT rootpage FROM sqlite_master WHERE name = 'kernels_by_name'");
        sqlite3_close(db);
        if (page_size <= 0 || root <= 0) return 1;
        std::FILE* f = std::fopen(argv[2], "r+b");
        if (!f || std::fseek(f, (root - 1) * page_size, SEEK_SET) != 0) return 1;
        const std::string junk(static_cast<std::size_t>(page_size), '\xff');
        const bool written = std::fwrite(junk.data(), 1, junk.size(), f) == junk.size();
        return std::fclose(f) == 0 && written ? 0 : 1;
    }
    if (command == "warm-list" && (argc == 5 || argc == 6)) {
        if (argc == 6) {
            ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG
            const rlimit limit{std::strtoull(argv[5], nullptr, 10), std::strtoull(argv[5], nullptr, 10)};
            if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return 3;
        }
        std::atomic<int> warnings{0};
        kjit::set_log_sink([&](kjit::LogLevel level, std::string_view message) {
            if (level == kjit::LogLevel::warning)
                ++warnings, std::fprintf(stderr, "warning: %.*s\n", static_cast<int>(message.size()), message.data());
        });
        kjit::Runtime runtime(argv[2]);
        const int n = std::atoi(argv[4]);
        std::atomic<int> next{0}, failures{0};
        std::vector<std::thread> threads(std::atoi(argv[3]));
        for (auto& t : threads)
            t = std::thread([&] {
                for (int i; (i = next++) < n;) {
                    try {
                        (void)runtime.compile(kjit::test::scale_kernel("", i + 1), kjit::test::options_for("sm_90"));
                    } catch (const std::exception& e) {
                        ++failures;
                        std::fprintf(stderr, "kjit_test_helper: %s\n", e.what());
                    }
                }
            });
        for (auto& t : threads) t.join();
        std::printf("compiles=%llu warnings=%d persistent=%d\n",
                    static_cast<unsigned long long>(runtime.stats().compiles), warnings.load(),
                    runtime.cache().persistent() ? 1 : 0);
        std::fflush(stdout);
        return failures ? 1 : 0;
    }
    std::fprintf(stderr,
                 "usage: kjit_test_helper key | warm DIR ITEMS... | flip FILE | warm-list DIR THREADS N [FSIZE]\n");
    return 2;
} catch (const std::exception& e) {
    std::fprintf(stderr, "kjit_test_helper: %s\n", e.what());
    return 1;
}
