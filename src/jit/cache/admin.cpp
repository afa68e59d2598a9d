// Cache management (kjit cache …): list, verify, clear, prune, export, import. Each needs a
// usable database and throws Error otherwise.
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <kjit/cache.hpp>
#include <kjit/error.hpp>

#include "jit/cache/cache_impl.hpp"
#include "jit/cache/entry_row.hpp"
#include "jit/cache/schema.hpp"
#include "jit/log.hpp"

namespace kjit {
namespace fs = std::filesystem;
using detail::sqlite::Attachment;
using detail::sqlite::Database;
using detail::sqlite::Transaction;

namespace {

/// Calls `row(decoded)` for every entry of `table` ("main.kernels", …).
template <class Row>
void each_entry(const Database& db, std::string_view table, Row&& row) {
    auto s = db.prepare(fmt::format("SELECT {} FROM {}", detail::schema::select_list(), table));
    while (s.step()) row(detail::decode_entry(s));
}

/// The schema version a cache file records (0: none), read without touching the file.
int schema_version_of(const fs::path& file) {
    const Database source(file, SQLITE_OPEN_READONLY);
    if (!source.has_table("kjit_schema")) return 0;
    auto v = source.prepare("SELECT version FROM kjit_schema");
    return v.step() ? static_cast<int>(v.integer(0)) : 0;
}

}  // namespace

std::vector<CacheEntry> Cache::entries() {
    return impl_->with_database([&](const Database& db) {
        std::vector<CacheEntry> all;
        each_entry(db, "main.kernels", [&](detail::DecodedEntry d) { all.push_back(std::move(d.entry)); });
        return all;
    });
}

std::vector<std::string> Cache::incidents() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->incidents;
}

std::vector<std::string> Cache::verify() {
    std::vector<std::string> faults = incidents();
    if (!faults.empty() && !persistent()) return faults;  // working from memory: no file to check
    impl_->with_database([&](const Database& db) {
        try {
            auto check = db.prepare("PRAGMA integrity_check");
            while (check.step())
                if (const std::string line = check.text(0); line != "ok") faults.push_back("integrity: " + line);
            each_entry(db, "main.kernels", [&](const detail::DecodedEntry& d) {
                if (!d.failed_checksum.empty())
                    faults.push_back(fmt::format("entry {} ({}, {}): {} checksum mismatch", d.entry.key.hex(),
                                                 d.entry.readable_id, d.entry.arch, d.failed_checksum));
            });
        } catch (const detail::sqlite::Failure& failure) {
            if (!failure.damaged()) throw;
            faults.push_back("integrity: " + failure.what);  // pages too damaged to read through
        }
    });
    return faults;
}

std::size_t Cache::count_stored(std::span<const CacheKey> keys) const {
    if (!fs::exists(impl_->path)) return 0;
    try {
        const Database file(impl_->path, SQLITE_OPEN_READONLY);
        auto present = file.prepare("SELECT 1 FROM kernels WHERE key = ?");
        return static_cast<std::size_t>(std::ranges::count_if(keys, [&](const CacheKey& key) {
            present.bind(key.hex());
            const bool found = present.step();
            present.reset();
            return found;
        }));
    } catch (const detail::sqlite::Failure&) {
        return 0;  // not a kjit cache this version can read: nothing of ours is in it
    }
}

std::size_t Cache::clear() {
    return impl_->with_database(
        [&](const Database& db) {
            db.exec("DELETE FROM kernels");
            return static_cast<std::size_t>(db.changes());
        },
        /*set_damaged_aside=*/true);
}

std::size_t Cache::prune(std::uint64_t max_bytes) {
    return impl_->with_database(
        [&](const Database& db) {
            std::vector<std::string> doomed;
            {
                auto s = db.prepare(
                    "SELECT key, length(ptx) + length(cubin) + length(log) FROM kernels "
                    "ORDER BY last_used_at DESC, created_at DESC");
                std::uint64_t kept_bytes = 0;
                while (s.step()) {
                    const auto bytes = static_cast<std::uint64_t>(s.integer(1));
                    if (kept_bytes + bytes <= max_bytes) kept_bytes += bytes;  // most recently used first stay
                    else doomed.push_back(s.text(0));
                }
            }
            Transaction t(db);
            auto del = db.prepare("DELETE FROM kernels WHERE key = ?");
            for (const auto& key : doomed) {
                del.bind(key).run("removing an entry");
                del.reset();
            }
            t.commit();
            db.exec("VACUUM");
            return doomed.size();
        },
        /*set_damaged_aside=*/true);
}

ExportReport Cache::export_to(const fs::path& file, const std::string& arch) {
    if (file.empty()) throw UsageError("export needs the name of the new cache file to write");
    if (fs::exists(file))
        throw UsageError(
            fmt::format("{} exists: export writes a new file; remove it or choose another name", file.string()));
    const fs::path dir = fs::absolute(file).parent_path();
    if (!fs::is_directory(dir))
        throw UsageError(fmt::format("cannot write {}: {} is not a directory; create it or choose another place",
                                     file.string(), dir.string()));
    if (::access(dir.c_str(), W_OK) != 0)
        throw UsageError(fmt::format("cannot write {}: its directory is not writable by this user", file.string()));
    return impl_->with_database([&](const Database& db) {
        try {
            const Attachment target(db, file, "export_target");
            Transaction t(db);
            db.exec(detail::schema::tables_sql("export_target"));
            db.exec(fmt::format("INSERT INTO export_target.kjit_schema (version) VALUES ({})", cache_schema_version));
            // A plain arch (sm_90) ships what its devices load: its own entries and its
            // arch-specific ones (sm_90a); a suffixed arch ships only itself.
            const bool plain = !arch.empty() && std::isdigit(static_cast<unsigned char>(arch.back()));
            auto copy = db.prepare(fmt::format("INSERT INTO export_target.kernels SELECT {} FROM main.kernels{}",
                                               detail::schema::select_list(),
                                               arch.empty() ? "" : " WHERE arch = ? OR arch = ?"));
            if (!arch.empty()) copy.bind(arch, plain ? arch + "a" : arch);
            copy.run("copying entries");
            ExportReport report{.exported = static_cast<std::size_t>(db.changes())};
            // Entries that fail their checksums would fail every load where they ship: left out.
            std::vector<std::string> bad;
            each_entry(db, "export_target.kernels", [&](const detail::DecodedEntry& d) {
                if (!d.failed_checksum.empty()) bad.push_back(d.entry.key.hex());
            });
            auto drop = db.prepare("DELETE FROM export_target.kernels WHERE key = ?");
            for (const auto& key : bad) {
                drop.bind(key).run("leaving out an entry that fails its checksum");
                drop.reset();
            }
            report.rejected = bad.size();
            report.exported -= bad.size();
            // The winners of the devices the entries are for (sm_90a entries: sm_90 devices').
            const std::string device_arch = plain || arch.empty() ? arch : arch.substr(0, arch.size() - 1);
            auto winners = db.prepare(
                fmt::format("INSERT INTO export_target.tuned_winners SELECT * FROM main.tuned_winners{}",
                            arch.empty() ? "" : " WHERE arch = ?"));
            if (!arch.empty()) winners.bind(device_arch);
            winners.run("copying tuned winners");
            report.winners = static_cast<std::size_t>(db.changes());
            t.commit();
            return report;
        } catch (...) {
            std::error_code ec;
            fs::remove(file, ec);  // nothing half-written stays behind
            throw;
        }
    });
}

ImportReport Cache::import_from(const fs::path& file) {
    if (!fs::is_regular_file(file))
        throw UsageError(
            fmt::format("{} is not a file: give the path of a cache exported with kjit cache export", file.string()));
    if (std::error_code ec; fs::equivalent(file, impl_->path, ec))
        throw UsageError(fmt::format("{} is this cache's own file: import another cache (kjit cache export writes one)",
                                     file.string()));
    return impl_->with_database([&](const Database& db) {
        auto not_a_cache = [&](std::string_view why) {
            return UsageError(fmt::format("{} is not a kjit cache ({}): give a file written by kjit cache export",
                                          file.string(), why));
        };
        int version = 0;
        try {
            version = schema_version_of(file);
        } catch (const detail::sqlite::Failure& f) {
            throw not_a_cache(f.what);
        }
        if (version != cache_schema_version)
            throw not_a_cache(version ? fmt::format("schema {}, this kjit reads {}", version, cache_schema_version)
                                      : std::string("no kjit_schema table"));

        ImportReport report;
        const Attachment source(db, file, "import_source");
        if (const std::string missing = detail::missing_kernel_columns(db, "import_source"); !missing.empty())
            throw not_a_cache(fmt::format("its kernels table lacks {}", missing));
        std::vector<CacheEntry> incoming;
        each_entry(db, "import_source.kernels", [&](detail::DecodedEntry d) {
            if (!d.failed_checksum.empty()) {
                ++report.rejected;
                detail::warn(fmt::format("import: entry {} ({}) in {} failed its {} checksum: not imported",
                                         d.entry.key.hex(), d.entry.readable_id, file.string(), d.failed_checksum));
                return;
            }
            incoming.push_back(std::move(d.entry));
        });
        Transaction t(db);
        // Tuned winners travel too; this cache's own winners stay.
        if (sqlite3_exec(db.handle(), "SELECT 1 FROM import_source.tuned_winners LIMIT 1", nullptr, nullptr, nullptr) ==
            SQLITE_OK) {
            db.exec("INSERT OR IGNORE INTO main.tuned_winners SELECT * FROM import_source.tuned_winners");
            report.winners = static_cast<std::size_t>(db.changes());
        }
        auto existing = db.prepare(fmt::format("SELECT {} FROM kernels WHERE key = ?", detail::schema::select_list()));
        for (const auto& e : incoming) {
            const bool valid_here = existing.bind(e.key.hex()).step() &&
                                    detail::decode_entry(existing).failed_checksum.empty();
            existing.reset();
            if (valid_here) {
                ++report.kept;
                continue;
            }
            impl_->insert(e);
            ++report.imported;
        }
        t.commit();
        return report;
    });
}

}  // namespace kjit
