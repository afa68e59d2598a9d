// The remote tier's counters (kjit/cache.hpp's RemoteCounters): arithmetic, and the totals a
// cache file keeps in its `remote_counters` table, one row per counter.
#include <array>
#include <utility>

#include "jit/cache/cache_impl.hpp"
#include "jit/cache/entry_row.hpp"

namespace kjit {
using detail::sqlite::Database;

namespace {
using Field = std::uint64_t RemoteCounters::*;
constexpr std::array<std::pair<const char*, Field>, 9> fields{{
    {"hits", &RemoteCounters::hits},
    {"misses", &RemoteCounters::misses},
    {"errors", &RemoteCounters::errors},
    {"timeouts", &RemoteCounters::timeouts},
    {"rejected", &RemoteCounters::rejected},
    {"skipped", &RemoteCounters::skipped},
    {"published", &RemoteCounters::published},
    {"bytes_down", &RemoteCounters::bytes_down},
    {"bytes_up", &RemoteCounters::bytes_up},
}};
}  // namespace

RemoteCounters& RemoteCounters::operator+=(const RemoteCounters& other) noexcept {
    for (const auto& [name, field] : fields) this->*field += other.*field;
    return *this;
}

RemoteCounters operator-(RemoteCounters a, const RemoteCounters& b) noexcept {
    for (const auto& [name, field] : fields) a.*field -= b.*field;
    return a;
}

void Cache::add_remote_counters(const RemoteCounters& counts) {
    impl_->with_database([&](const Database& db) {
        detail::sqlite::Transaction transaction(db);
        auto add = db.prepare(
            "INSERT INTO remote_counters (name, value) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value");
        for (const auto& [name, field] : fields) {
            add.bind(name, static_cast<std::int64_t>(counts.*field)).run("adding the remote tier's counters");
            add.reset();
        }
        transaction.commit();
        return 0;
    });
}

RemoteCounters Cache::remote_counters() {
    return impl_->with_database([&](const Database& db) {
        RemoteCounters totals;
        auto s = db.prepare("SELECT name, value FROM remote_counters");
        while (s.step())
            for (const auto& [name, field] : fields)
                if (s.text(0) == name) totals.*field = static_cast<std::uint64_t>(s.integer(1));
        return totals;
    });
}

std::vector<CacheKey> Cache::keys() {
    return impl_->with_database([&](const Database& db) {
        std::vector<CacheKey> all;
        auto s = db.prepare("SELECT key FROM kernels");
        while (s.step()) all.push_back(detail::parse_key(s.text(0)));
        return all;
    });
}

}  // namespace kjit
