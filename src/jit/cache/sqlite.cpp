// The SQLite RAII layer: binds, steps with busy retries, transactions, attachments.
#include "jit/cache/sqlite.hpp"

#include <chrono>
#include <thread>

#include <fmt/format.h>

namespace kjit::detail::sqlite {
namespace {

constexpr int busy_timeout_ms = 10'000;
constexpr int busy_retries = 5;  // the busy handler already waits; these cover WAL snapshot races

bool busy(int rc) noexcept { return rc == SQLITE_BUSY || rc == SQLITE_LOCKED; }
void back_off(int attempt) { std::this_thread::sleep_for(std::chrono::milliseconds(1 + attempt)); }

[[noreturn]] void fail_on(sqlite3* db, int rc, std::string_view what) {
    if (db && (rc & 0xff) == SQLITE_ERROR) rc = sqlite3_extended_errcode(db);  // the specific reason
    throw Failure{fmt::format("{}: {} ({})", what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc), rc), rc};
}

}  // namespace

// ---- Statement --------------------------------------------------------------------------------

void Statement::bind_one(int index, std::string_view text) {
    sqlite3_bind_text(statement_.get(), index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}
void Statement::bind_one(int index, Bytes blob) {
    sqlite3_bind_blob(statement_.get(), index, blob.data(), static_cast<int>(blob.size()), SQLITE_STATIC);
}
void Statement::bind_one(int index, std::int64_t value) { sqlite3_bind_int64(statement_.get(), index, value); }
void Statement::bind_one(int index, double value) { sqlite3_bind_double(statement_.get(), index, value); }

bool Statement::step() {
    for (int attempt = 0;; ++attempt) {
        const int rc = sqlite3_step(statement_.get());
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        if (busy(rc) && attempt < busy_retries) {
            sqlite3_reset(statement_.get());
            back_off(attempt);
            continue;
        }
        sqlite3_reset(statement_.get());
        fail_on(sqlite3_db_handle(statement_.get()), rc, "running a statement");
    }
}

void Statement::run(std::string_view what) {
    try {
        if (step()) throw Failure{fmt::format("{}: the statement returned rows", what)};
    } catch (Failure& f) {
        f.what = fmt::format("{}: {}", what, f.what);
        throw;
    }
}

void Statement::reset() noexcept {
    sqlite3_reset(statement_.get());
    sqlite3_clear_bindings(statement_.get());
}

std::string Statement::text(int column) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(statement_.get(), column));
    return std::string(p ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(statement_.get(), column)));
}

Bytes Statement::blob(int column) const {
    const auto* p = static_cast<const std::byte*>(sqlite3_column_blob(statement_.get(), column));
    return {p, static_cast<std::size_t>(sqlite3_column_bytes(statement_.get(), column))};
}

std::int64_t Statement::integer(int column) const { return sqlite3_column_int64(statement_.get(), column); }
double Statement::real(int column) const { return sqlite3_column_double(statement_.get(), column); }

// ---- Database ---------------------------------------------------------------------------------

Database::Database(const std::filesystem::path& file, int flags) {
    sqlite3* raw = nullptr;
    const int rc = sqlite3_open_v2(file.c_str(), &raw, flags, nullptr);
    db_.reset(raw);
    if (rc != SQLITE_OK) fail(rc, "opening the database");
    sqlite3_busy_timeout(raw, busy_timeout_ms);
}

Statement Database::prepare(std::string_view sql) const {
    sqlite3_stmt* raw = nullptr;
    const int rc = sqlite3_prepare_v2(db_.get(), sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
    if (rc != SQLITE_OK) fail(rc, "preparing SQL");
    return Statement(raw);
}

void Database::exec(std::string_view sql) const {
    const std::string text(sql);  // sqlite3_exec takes a NUL-terminated string
    for (int attempt = 0;; ++attempt) {
        const int rc = sqlite3_exec(db_.get(), text.c_str(), nullptr, nullptr, nullptr);
        if (rc == SQLITE_OK) return;
        if (busy(rc) && attempt < busy_retries) {
            back_off(attempt);
            continue;
        }
        fail(rc, sql);
    }
}

std::int64_t Database::changes() const noexcept { return sqlite3_changes64(db_.get()); }
bool Database::read_only() const noexcept { return sqlite3_db_readonly(db_.get(), "main") == 1; }

bool Database::has_table(std::string_view name) const {
    auto s = prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?");
    s.bind(name);
    if (!s.step()) fail(SQLITE_ERROR, "reading the schema");
    return s.integer(0) == 1;
}

void Database::fail(int rc, std::string_view what) const { fail_on(db_.get(), rc, what); }

// ---- Transaction, Attachment --------------------------------------------------------------------

Transaction::Transaction(const Database& db) : db_(db) { db.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
    if (!done_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
    db_.exec("COMMIT");
    done_ = true;
}

Attachment::Attachment(const Database& db, const std::filesystem::path& file, std::string name)
    : db_(db), name_(std::move(name)) {
    auto attach = db.prepare(fmt::format("ATTACH DATABASE ? AS {}", name_));
    attach.bind(std::string_view(file.native())).run(fmt::format("attaching {}", file.string()));
}

Attachment::~Attachment() {
    sqlite3_exec(db_.handle(), fmt::format("DETACH DATABASE {}", name_).c_str(), nullptr, nullptr, nullptr);
}

}  // namespace kjit::detail::sqlite
