// A small RAII layer over SQLite: a connection, prepared statements with typed binds and
// columns, a transaction that rolls back on every exit path but commit(), and busy retries.
// Every failure is a sqlite::Failure; the cache decides at its boundary what one means.
#pragma once
#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace kjit::detail::sqlite {

/// What went wrong, with SQLite's extended code.
struct Failure {
    std::string what;
    int code = SQLITE_ERROR;
    /// The file itself is broken (not a database, or corrupt): no retry or wait can help.
    [[nodiscard]] bool damaged() const noexcept {
        return (code & 0xff) == SQLITE_CORRUPT || (code & 0xff) == SQLITE_NOTADB;
    }
};

/// A blob column or parameter.
using Bytes = std::span<const std::byte>;

class Statement {
public:
    explicit Statement(sqlite3_stmt* statement) noexcept : statement_(statement) {}

    /// Binds `values` to parameters 1, 2, … in order (text, blob, integers, doubles). Text is
    /// copied; blobs are not: they must outlive the statement's next step().
    template <class... Values>
    Statement& bind(const Values&... values) {
        int index = 0;
        (bind_one(++index, values), ...);
        return *this;
    }
    void bind_one(int index, std::string_view text);
    void bind_one(int index, const std::string& text) { bind_one(index, std::string_view(text)); }
    void bind_one(int index, const char* text) { bind_one(index, std::string_view(text)); }
    void bind_one(int index, Bytes blob);
    void bind_one(int index, std::int64_t value);
    void bind_one(int index, int value) { bind_one(index, std::int64_t{value}); }
    void bind_one(int index, double value);

    /// Runs to the next row: true for a row, false when done. Retries while another
    /// connection holds the lock; throws Failure otherwise.
    bool step();
    /// step() for a statement that returns no rows.
    void run(std::string_view what);
    /// Ready to bind and step again (bindings cleared).
    void reset() noexcept;

    [[nodiscard]] std::string text(int column) const;
    [[nodiscard]] Bytes blob(int column) const;
    [[nodiscard]] std::int64_t integer(int column) const;
    [[nodiscard]] double real(int column) const;

private:
    struct Finalize {
        void operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }
    };
    std::unique_ptr<sqlite3_stmt, Finalize> statement_;
};

class Database {
public:
    /// Opens `file` with SQLite's `flags`; throws Failure (the handle is closed) when it cannot.
    Database(const std::filesystem::path& file, int flags);

    [[nodiscard]] sqlite3* handle() const noexcept { return db_.get(); }
    [[nodiscard]] Statement prepare(std::string_view sql) const;
    /// Runs `sql` (one or more statements, no rows), retrying while another connection holds the lock.
    void exec(std::string_view sql) const;
    /// Rows the last statement changed.
    [[nodiscard]] std::int64_t changes() const noexcept;
    [[nodiscard]] bool read_only() const noexcept;
    [[nodiscard]] bool has_table(std::string_view name) const;
    /// Throws Failure for `rc`, with this connection's message (and extended code) for `what`.
    [[noreturn]] void fail(int rc, std::string_view what) const;

private:
    struct Close {
        void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
    };
    std::unique_ptr<sqlite3, Close> db_;
};

/// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless commit() ran.
class Transaction {
public:
    explicit Transaction(const Database& db);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    void commit();

private:
    const Database& db_;
    bool done_ = false;
};

/// ATTACH DATABASE `file` AS `name` on construction, DETACH on destruction (after any
/// transaction on it has ended).
class Attachment {
public:
    Attachment(const Database& db, const std::filesystem::path& file, std::string name);
    ~Attachment();
    Attachment(const Attachment&) = delete;
    Attachment& operator=(const Attachment&) = delete;

private:
    const Database& db_;
    std::string name_;
};

}  // namespace kjit::detail::sqlite
