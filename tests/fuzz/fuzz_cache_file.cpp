// Fuzz target: a cache file from elsewhere. The bytes are written as a file and (a) imported
// into a fresh cache with Cache::import_from, (b) found at the cache path itself, where kjit
// must open it, or set it aside and start a fresh database. Never a crash; errors are kjit::Error.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <kjit/cache.hpp>
#include <kjit/error.hpp>
#include <kjit/log.hpp>

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const fs::path root = [] {
        kjit::set_log_sink([](kjit::LogLevel, std::string_view) {});  // warnings are expected here
        return fs::temp_directory_path() / ("kjit-fuzz-file-" + std::to_string(::getpid()));
    }();
    fs::remove_all(root);
    fs::create_directories(root / "fresh");
    fs::create_directories(root / "found");
    const fs::path file = root / "import.sqlite3";
    std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    fs::copy_file(file, root / "found" / kjit::Cache::file_name);
    try {
        kjit::Cache fresh(root / "fresh");
        (void)fresh.import_from(file);
        (void)fresh.entries();
    } catch (const kjit::Error&) {}
    try {
        kjit::Cache found(root / "found");
        (void)found.find(kjit::CacheKey{1, 2});
        (void)found.entries();
        (void)found.verify();
    } catch (const kjit::Error&) {}
    return 0;
}
