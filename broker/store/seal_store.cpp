// The store's side of sealed file lists: each seal's root, count and bytes
// as its receipt commits to them, and the seals a peer's decision carried
// with a run (migration 15).
#include <sqlite3.h>

#include "broker/store/sql.hpp"
#include "broker/store/store.hpp"

namespace shardnet::broker {

using namespace sql;

namespace sql {

std::span<const Sql> seal_statements() {
    static const Sql table[] = {
        {"put_sealed_list", "INSERT OR REPLACE INTO sealed_lists (run, name, root, count, bytes, receipt_seq, receipt_digest) "
                            "VALUES (?,?,?,?,?,?,?)"},
        {"sealed_list", "SELECT root, count, bytes, receipt_seq, receipt_digest FROM sealed_lists WHERE run = ? AND name = ?"},
        {"put_carried_seal", "INSERT OR REPLACE INTO carried_seals (run, name, attempt, ranks, parent, sealed_by, root, count, bytes, "
                             "receipt_seq, receipt_digest, files, received) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"},
        {"carried_seal", "SELECT run, name, attempt, ranks, parent, sealed_by, root, count, bytes, receipt_seq, receipt_digest, files, "
                         "received FROM carried_seals WHERE run = ? AND name = ?"},
        {"carried_seals", "SELECT run, name, attempt, ranks, parent, sealed_by, root, count, bytes, receipt_seq, receipt_digest, files, "
                          "received FROM carried_seals WHERE run = ? ORDER BY received DESC, name DESC LIMIT ?"},
        {"keep_newest_carried", "DELETE FROM carried_seals WHERE run = ?1 AND name NOT IN "
                                "(SELECT name FROM carried_seals WHERE run = ?1 ORDER BY received DESC, name DESC LIMIT ?2)"},
        {"forget_carried_seals", "DELETE FROM carried_seals WHERE run IN (SELECT id FROM runs WHERE state IN "
                                 "('SUCCEEDED', 'FAILED', 'CANCELLED') AND updated < ?)"},
    };
    return table;
}

}  // namespace sql

namespace {

Store::CarriedSealRow carried_row(sqlite3_stmt *s) {
    return Store::CarriedSealRow{col_text(s, 0), col_text(s, 1), sqlite3_column_int64(s, 2), sqlite3_column_int64(s, 3), col_text(s, 4),
                                 col_text(s, 5),
                                 Store::SealedListRow{col_text(s, 6), sqlite3_column_int64(s, 7), sqlite3_column_int64(s, 8),
                                                      sqlite3_column_int64(s, 9), col_text(s, 10)},
                                 col_text(s, 11), sqlite3_column_double(s, 12)};
}

}  // namespace

void Store::put_sealed_list(const std::string &run, const std::string &name, const SealedListRow &r) {
    auto *s = stmt("put_sealed_list");
    Done done{s};
    Binder(s).text(run).text(name).text(r.root).integer(r.count).integer(r.bytes).integer(r.receipt_seq).text(r.receipt_digest);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("storing a seal's file list", rc);
}

std::optional<Store::SealedListRow> Store::sealed_list(const std::string &run, const std::string &name) {
    auto *s = stmt("sealed_list");
    Done done{s};
    Binder(s).text(run).text(name);
    if (!row(s)) return std::nullopt;
    return SealedListRow{col_text(s, 0), sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2), sqlite3_column_int64(s, 3), col_text(s, 4)};
}

void Store::put_carried_seal(const CarriedSealRow &r) {
    auto *s = stmt("put_carried_seal");
    Done done{s};
    Binder(s).text(r.run).text(r.name).integer(r.attempt).integer(r.ranks).text(r.parent).text(r.sealed_by).text(r.list.root)
        .integer(r.list.count).integer(r.list.bytes).integer(r.list.receipt_seq).text(r.list.receipt_digest).text(r.files).real(r.received);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("storing a carried seal", rc);
}

std::optional<Store::CarriedSealRow> Store::carried_seal(const std::string &run, const std::string &name) {
    auto *s = stmt("carried_seal");
    Done done{s};
    Binder(s).text(run).text(name);
    if (!row(s)) return std::nullopt;
    return carried_row(s);
}

std::vector<Store::CarriedSealRow> Store::carried_seals(const std::string &run, int limit) {
    auto *s = stmt("carried_seals");
    Done done{s};
    Binder(s).text(run).integer(limit);
    std::vector<CarriedSealRow> out;
    while (row(s)) out.push_back(carried_row(s));
    return out;
}

void Store::keep_newest_carried(const std::string &run, int keep) {
    auto *s = stmt("keep_newest_carried");
    Done done{s};
    Binder(s).text(run).integer(keep);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("pruning a run's carried seals", rc);
}

long long Store::forget_carried_seals(double finished_before) {
    auto *s = stmt("forget_carried_seals");
    Done done{s};
    Binder(s).real(finished_before);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("forgetting finished runs' carried seals", rc);
    return sqlite3_changes(sqlite3_db_handle(s));
}

}  // namespace shardnet::broker
