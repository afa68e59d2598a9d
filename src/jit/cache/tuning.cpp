// Tuned winners, in the cache database's `tuned_winners` table.
#include <kjit/tuning.hpp>

#include "jit/cache/cache_impl.hpp"

namespace kjit {
using detail::sqlite::Database;

namespace {
constexpr const char* columns = "kernel, shape, device, arch, driver, source_hash, config, microseconds, created_at";

TunedConfig row_of(detail::sqlite::Statement& s) {
    return {s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5), s.text(6), s.real(7), s.integer(8)};
}
}  // namespace

void store_tuned(Cache& cache, const TunedConfig& w) {
    detail::CacheAccess::impl(cache).with_database([&](const Database& db) {
        db.prepare(fmt::format("INSERT OR REPLACE INTO tuned_winners ({}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", columns))
            .bind(w.kernel, w.shape, w.device, w.arch, w.driver, w.source_hash, w.config, w.microseconds,
                  detail::unix_now())
            .run("storing a tuned winner");
        return 0;
    });
}

std::vector<TunedConfig> tuned_configs(Cache& cache) {
    return detail::CacheAccess::impl(cache).with_database([&](const Database& db) {
        std::vector<TunedConfig> all;
        auto s = db.prepare(
            fmt::format("SELECT {} FROM tuned_winners ORDER BY kernel, shape, device, arch, created_at DESC", columns));
        while (s.step()) all.push_back(row_of(s));
        return all;
    });
}

std::vector<TunedConfig> find_tuned(Cache& cache, const std::string& kernel, const std::string& shape,
                                    const std::string& device, const std::string& arch, const std::string& driver) {
    auto& impl = detail::CacheAccess::impl(cache);
    std::lock_guard lock(impl.mutex);
    std::vector<TunedConfig> found;
    if (!impl.db) return found;
    try {
        auto s = impl.db->prepare(fmt::format(
            "SELECT {} FROM tuned_winners WHERE kernel = ? AND shape = ? AND device = ? AND arch = ? AND driver = ? "
            "ORDER BY created_at DESC",
            columns));
        s.bind(kernel, shape, device, arch, driver);
        while (s.step()) found.push_back(row_of(s));
    } catch (const detail::sqlite::Failure&) {
        found.clear();  // a winner that cannot be read is one dispatch does without
    }
    return found;
}

std::size_t clear_tuned(Cache& cache) {
    return detail::CacheAccess::impl(cache).with_database([&](const Database& db) {
        db.exec("DELETE FROM tuned_winners");
        const auto removed = static_cast<std::size_t>(db.changes());
        db.exec("DELETE FROM tuned");  // winners of kjits before tuned_winners: never used now
        return removed;
    });
}

}  // namespace kjit
