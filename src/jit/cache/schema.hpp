// The cache file's tables, and the one column list of the kernels table that CREATE TABLE,
// INSERT, SELECT and the row codec share.
#pragma once
#include <array>
#include <string>
#include <string_view>

namespace kjit::detail::schema {

/// Columns of `kernels`, in their stored order; the value is the column's index in a SELECT of
/// select_list() and, plus one, its parameter index in insert_sql().
namespace column {
enum : int {
    key,
    readable_id,
    kernel_name,
    arch,
    nvrtc_version,
    options,
    ptx,
    cubin,
    log,
    registers,
    spill_store_bytes,
    spill_load_bytes,
    shared_static_bytes,
    stack_frame_bytes,
    constant_bytes,
    barriers,
    compile_ms,
    created_at,
    last_used_at,
    hit_count,
    ptx_checksum,
    cubin_checksum,
    log_checksum,
    meta_checksum,
    count
};
}  // namespace column

struct ColumnDef {
    std::string_view name;
    std::string_view type;
};
extern const std::array<ColumnDef, column::count> kernel_columns;

/// Every table, created if missing, in database `db` ("main" or an attached one). Changes are
/// additive only: a kjit that does not know a table ignores it. (`tuned` holds winners of kjits
/// before `tuned_winners`, which ties each to a driver and a kernel source; none reads it now.)
[[nodiscard]] std::string tables_sql(std::string_view db);
/// Rebuilds main.kernels, made WITHOUT ROWID by kjits before 2026-12-05, as the rowid table
/// tables_sql makes: same columns, same rows, same schema version (both layouts read and write
/// alike), lookups no longer reading whole rows. Run inside a transaction.
[[nodiscard]] std::string rowid_kernels_sql();
/// The kernels columns for a SELECT; without PTX and log they read as NULL (what loading needs).
[[nodiscard]] std::string select_list(bool with_ptx_and_log = true);
/// INSERT OR REPLACE of one kernels row into `table`, parameters in column order.
[[nodiscard]] std::string insert_sql(std::string_view table = "kernels");
/// SQL listing the kernels table's columns in database `db` (PRAGMA table_info): the caller
/// compares them with kernel_columns, so that a table missing some reads as "not a kjit cache",
/// not as an SQL error on the first query.
[[nodiscard]] std::string table_info_sql(std::string_view db);

}  // namespace kjit::detail::schema
