// SQLite helpers the store's files share (internal to broker/store/): a
// named statement, a statement reset when it goes out of scope, a binder,
// and reading a text column.
#pragma once
#include <span>
#include <sqlite3.h>
#include <string>

namespace shardnet::broker::sql {

struct Sql { const char *name; const char *text; };

// The receipt log's statements (store/receipt_store.cpp), prepared with
// the store's own when the database opens.
std::span<const Sql> receipt_statements();
// Attempts' (store/attempt_store.cpp), likewise.
std::span<const Sql> attempt_statements();
// The checkpoint policy's (store/policy_store.cpp), likewise.
std::span<const Sql> policy_statements();
// Nodes' and bad-node memory's (store/node_store.cpp), likewise.
std::span<const Sql> node_statements();
// Decisions' and federation reads' (store/decision_store.cpp), likewise.
std::span<const Sql> decision_statements();
// Commits', seals', sealed file lists' and carried seals' (store/seal_store.cpp), likewise.
std::span<const Sql> seal_statements();

// Resets a statement when it goes out of scope: a SELECT stepped to its
// first row only would otherwise hold its read transaction open (and pin
// the WAL), and the next BEGIN would fail.
struct Done {
    sqlite3_stmt *s;
    ~Done() { sqlite3_reset(s); }
};

class Binder {
public:
    Binder(sqlite3_stmt *s) : s_(s) { sqlite3_reset(s_); sqlite3_clear_bindings(s_); }
    Binder &text(const std::string &v) { sqlite3_bind_text(s_, ++i_, v.data(), int(v.size()), SQLITE_TRANSIENT); return *this; }
    Binder &blob(const std::string &v) { sqlite3_bind_blob(s_, ++i_, v.data(), int(v.size()), SQLITE_TRANSIENT); return *this; }
    Binder &integer(long long v) { sqlite3_bind_int64(s_, ++i_, v); return *this; }
    Binder &real(double v) { sqlite3_bind_double(s_, ++i_, v); return *this; }
private:
    sqlite3_stmt *s_;
    int i_ = 0;
};

inline std::string col_text(sqlite3_stmt *s, int i) {
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? reinterpret_cast<const char *>(t) : "";
}

inline std::string col_blob(sqlite3_stmt *s, int i) {
    const void *b = sqlite3_column_blob(s, i);
    return b ? std::string(static_cast<const char *>(b), std::size_t(sqlite3_column_bytes(s, i))) : "";
}

}  // namespace shardnet::broker::sql
