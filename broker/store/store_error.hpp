// What a failed database call throws: SQLite's extended code, what the
// broker was doing, and what kind of failure it is, so that a handler can
// answer a full disk (retry later) apart from a bug (500).
#pragma once
#include <stdexcept>
#include <string>

namespace shardnet::broker {

enum class StoreFault {
    full,         // SQLITE_FULL: the disk (or the database's page limit) is full
    io,           // SQLITE_IOERR_* / SQLITE_CANTOPEN: the disk failed a read, write or sync
    busy,         // SQLITE_BUSY / SQLITE_LOCKED past store_busy_ms: another process holds it
    other,        // a constraint, a corrupt file, a bug: not for a client to wait out
};

// The kind of an extended (or primary) SQLite result code.
StoreFault store_fault_of(int sqlite_code) noexcept;
// "full", "io", "busy", "other".
const char *store_fault_name(StoreFault f) noexcept;

class StoreError : public std::runtime_error {
public:
    StoreError(const std::string &message, int sqlite_code)
        : std::runtime_error(message), code_(sqlite_code), fault_(store_fault_of(sqlite_code)) {}
    int sqlite_code() const noexcept { return code_; }
    StoreFault fault() const noexcept { return fault_; }

private:
    int code_;
    StoreFault fault_;
};

}  // namespace shardnet::broker
