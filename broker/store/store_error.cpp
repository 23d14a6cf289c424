#include "broker/store/store_error.hpp"

#include <sqlite3.h>

namespace shardnet::broker {

StoreFault store_fault_of(int sqlite_code) noexcept {
    switch (sqlite_code & 0xff) {   // the primary code of an extended one
    case SQLITE_FULL: return StoreFault::full;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN: return StoreFault::io;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return StoreFault::busy;
    default: return StoreFault::other;
    }
}

const char *store_fault_name(StoreFault f) noexcept {
    switch (f) {
    case StoreFault::full: return "full";
    case StoreFault::io: return "io";
    case StoreFault::busy: return "busy";
    case StoreFault::other: break;
    }
    return "other";
}

}  // namespace shardnet::broker
