// Tuned winners, in the cache database's `tuned` table.
#include <kjit/tuning.hpp>

#include "jit/cache/cache_impl.hpp"

namespace kjit {
using detail::sqlite::Database;

void store_tuned(Cache& cache, const TunedConfig& w) {
    detail::CacheAccess::impl(cache).with_database([&](const Database& db) {
        db.prepare("INSERT OR REPLACE INTO tuned VALUES (?, ?, ?, ?, ?, ?, ?)")
            .bind(w.kernel, w.shape, w.device, w.arch, w.config, w.microseconds, detail::unix_now())
            .run("storing a tuned winner");
        return 0;
    });
}

std::vector<TunedConfig> tuned_configs(Cache& cache) {
    return detail::CacheAccess::impl(cache).with_database([&](const Database& db) {
        std::vector<TunedConfig> all;
        auto s = db.prepare("SELECT kernel, shape, device, arch, config, microseconds FROM tuned");
        while (s.step()) all.push_back({s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), s.real(5)});
        return all;
    });
}

std::optional<TunedConfig> find_tuned(Cache& cache, const std::string& kernel, const std::string& shape,
                                      const std::string& device, const std::string& arch) {
    auto& impl = detail::CacheAccess::impl(cache);
    std::lock_guard lock(impl.mutex);
    if (!impl.db) return std::nullopt;
    try {
        auto s = impl.db->prepare(
            "SELECT config, microseconds FROM tuned WHERE kernel = ? AND shape = ? AND device = ? AND arch = ?");
        if (!s.bind(kernel, shape, device, arch).step()) return std::nullopt;
        return TunedConfig{kernel, shape, device, arch, s.text(0), s.real(1)};
    } catch (const detail::sqlite::Failure&) {
        return std::nullopt;
    }
}

}  // namespace kjit
