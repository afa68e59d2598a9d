// Damage recovery: a damaged file (not a database, corrupt, truncated) is moved aside with its
// WAL and index and replaced by a fresh database; any other unusable database turns the cache
// into an in-memory one for the rest of its life, with one warning.
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "jit/cache/cache_impl.hpp"
#include "jit/log.hpp"

namespace kjit {
namespace fs = std::filesystem;
using detail::sqlite::Failure;

detail::FileId detail::file_id(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? FileId{st.st_dev, st.st_ino} : FileId{};
}

void Cache::Impl::recover(const Failure& failure) {
    if (failure.damaged() && !read_only) set_aside(failure);
    else to_memory(failure);
}

/// Keeps the damaged files for inspection; entries in them are recompiled as needed.
void Cache::Impl::set_aside(const Failure& failure) {
    forget_hits();
    for (auto& f : find_statements) f.reset();
    db.reset();
    const fs::path aside = path.string() + fmt::format(".damaged-{}-{}", detail::unix_now(), ::getpid());
    std::error_code ec;
    if (detail::file_id(path) == opened) {  // else another process replaced it already: just reopen
        fs::rename(path, aside, ec);
        if (ec)
            return to_memory(Failure{
                fmt::format("{}; moving it aside to {} failed: {}", failure.what, aside.string(), ec.message())});
        // A stale WAL must never be replayed into the fresh database.
        for (const char* suffix : {"-wal", "-shm"}) {
            std::error_code ignored;
            fs::rename(path.string() + suffix, aside.string() + suffix, ignored);
        }
        incidents.push_back(
            fmt::format("damaged ({}): moved it to {} and started a fresh, empty cache", failure.what, aside.string()));
        detail::warn(
            fmt::format("the kernel cache {} is damaged ({}): moved it to {} and started a fresh one; "
                        "its kernels are recompiled as they are needed",
                        path.string(), failure.what, aside.string()));
    }
    try {
        open();
    } catch (const Failure& again) {
        to_memory(again);
    }
}

void Cache::Impl::to_memory(const Failure& failure) {
    incidents.push_back(fmt::format("unusable ({}): working from memory", failure.what));
    forget_hits();
    for (auto& f : find_statements) f.reset();
    db.reset();
    warn_once(fmt::format("cannot use the kernel cache {}: {}. Working from memory: compiled kernels are not saved.",
                          path.string(), failure.what));
}

}  // namespace kjit
