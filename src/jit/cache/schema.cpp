// The cache file's schema.
#include "jit/cache/schema.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

namespace kjit::detail::schema {

const std::array<ColumnDef, column::count> kernel_columns{{
    {"key", "TEXT PRIMARY KEY NOT NULL"},
    {"readable_id", "TEXT NOT NULL"},
    {"kernel_name", "TEXT NOT NULL"},
    {"arch", "TEXT NOT NULL"},
    {"nvrtc_version", "TEXT NOT NULL"},
    {"options", "TEXT NOT NULL"},
    {"ptx", "BLOB NOT NULL"},
    {"cubin", "BLOB NOT NULL"},
    {"log", "TEXT NOT NULL"},
    {"registers", "INTEGER NOT NULL"},
    {"spill_store_bytes", "INTEGER NOT NULL"},
    {"spill_load_bytes", "INTEGER NOT NULL"},
    {"shared_static_bytes", "INTEGER NOT NULL"},
    {"stack_frame_bytes", "INTEGER NOT NULL"},
    {"constant_bytes", "INTEGER NOT NULL"},
    {"barriers", "INTEGER NOT NULL"},
    {"compile_ms", "REAL NOT NULL"},
    {"created_at", "INTEGER NOT NULL"},
    {"last_used_at", "INTEGER NOT NULL"},
    {"hit_count", "INTEGER NOT NULL"},
    {"ptx_checksum", "INTEGER NOT NULL"},
    {"cubin_checksum", "INTEGER NOT NULL"},
    {"log_checksum", "INTEGER NOT NULL"},
    {"meta_checksum", "INTEGER NOT NULL"},
}};

namespace {

/// The kernels table `db`.`table`. A rowid table, its key in a separate index: each row holds
/// hundreds of kilobytes of PTX and cubin, and a WITHOUT ROWID table keeps whole rows in its key
/// b-tree, where every comparison of a lookup reads the whole row it compares with.
std::string kernels_table_sql(std::string_view db, std::string_view table) {
    std::vector<std::string> columns;
    for (const auto& c : kernel_columns) columns.push_back(fmt::format("    {} {}", c.name, c.type));
    return fmt::format("CREATE TABLE IF NOT EXISTS {}.{} (\n{}\n);", db, table, fmt::join(columns, ",\n"));
}

}  // namespace

std::string rowid_kernels_sql() {
    return fmt::format(R"sql({0}
INSERT INTO main.kernels_rebuilt ({1}) SELECT {1} FROM main.kernels;
DROP TABLE main.kernels;
ALTER TABLE main.kernels_rebuilt RENAME TO kernels;
CREATE INDEX IF NOT EXISTS main.kernels_by_name ON kernels (kernel_name, arch);
)sql",
                       kernels_table_sql("main", "kernels_rebuilt"), select_list());
}

std::string tables_sql(std::string_view db) {
    return fmt::format(R"sql(
CREATE TABLE IF NOT EXISTS {0}.kjit_schema (version INTEGER NOT NULL);
{1}
CREATE INDEX IF NOT EXISTS {0}.kernels_by_name ON kernels (kernel_name, arch);
CREATE TABLE IF NOT EXISTS {0}.claims (
    key TEXT PRIMARY KEY NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS {0}.tuned (
    kernel TEXT NOT NULL,
    shape TEXT NOT NULL,
    device TEXT NOT NULL,
    arch TEXT NOT NULL,
    config TEXT NOT NULL,
    microseconds REAL NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (kernel, shape, device, arch)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS {0}.tuned_winners (
    kernel TEXT NOT NULL,
    shape TEXT NOT NULL,
    device TEXT NOT NULL,
    arch TEXT NOT NULL,
    driver TEXT NOT NULL,
    source_hash TEXT NOT NULL,
    config TEXT NOT NULL,
    microseconds REAL NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (kernel, shape, device, arch, driver, source_hash)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS {0}.remote_counters (
    name TEXT PRIMARY KEY NOT NULL,
    value INTEGER NOT NULL
) WITHOUT ROWID;
)sql",
                       db, kernels_table_sql(db, "kernels"));
}

std::string select_list(bool with_ptx_and_log) {
    std::vector<std::string_view> names;
    for (int i = 0; i < column::count; ++i)
        names.push_back(!with_ptx_and_log && (i == column::ptx || i == column::log) ? "NULL" : kernel_columns[i].name);
    return fmt::format("{}", fmt::join(names, ", "));
}

std::string insert_sql(std::string_view table) {
    const std::vector<std::string_view> marks(column::count, "?");
    return fmt::format("INSERT OR REPLACE INTO {} ({}) VALUES ({})", table, select_list(), fmt::join(marks, ","));
}

std::string table_info_sql(std::string_view db) { return fmt::format("PRAGMA {}.table_info(kernels)", db); }

}  // namespace kjit::detail::schema
