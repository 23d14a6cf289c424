// What each part of the store (receipt_store.hpp, seal_store.hpp...) shares:
// its Store, and the Store's named statements, reads and failures, so that a
// part's SQL runs exactly as it did when it was the Store's own.
#pragma once
#include <string>

struct sqlite3;
struct sqlite3_stmt;

namespace shardnet::broker {

class Store;

class StorePart {
protected:
    explicit StorePart(Store &store) : store_(store) {}

    sqlite3_stmt *stmt(const char *name);
    // The next row of a read: true, or false at its end; a StoreError otherwise.
    bool row(sqlite3_stmt *s);
    [[noreturn]] void fail(const std::string &what, int rc);
    sqlite3 *db();

    Store &store_;
};

}  // namespace shardnet::broker
