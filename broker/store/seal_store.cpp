// The store's side of checkpoints: the ranks' commits and the seals, each
// seal's file list (root, count and bytes) as its receipt commits to it,
// and the seals a peer's decision carried with a run (migration 15).
#include <sqlite3.h>

#include "broker/store/seal_store.hpp"
#include "broker/store/sql.hpp"

namespace shardnet::broker {

using namespace sql;

namespace sql {

std::span<const Sql> seal_statements() {
    static const Sql table[] = {
        {"insert_commit", "INSERT OR REPLACE INTO commits (run, attempt, name, rank, files, time, write_seconds) VALUES (?,?,?,?,?,?,?)"},
        {"count_commits", "SELECT count(*) FROM commits WHERE run = ? AND attempt = ? AND name = ?"},
        {"commit_write_seconds", "SELECT max(write_seconds) FROM commits WHERE run = ? AND attempt = ? AND name = ?"},
        {"commit_files", "SELECT rank, files FROM commits WHERE run = ? AND attempt = ? AND name = ? ORDER BY rank"},
        {"is_sealed", "SELECT 1 FROM checkpoints WHERE run = ? AND name = ?"},
        {"seal", "INSERT INTO checkpoints (run, name, attempt, ranks, parent, sealed_at, write_seconds) VALUES (?,?,?,?,?,?,?)"},
        {"list_checkpoints", "SELECT run, name, attempt, ranks, parent, sealed_at FROM checkpoints WHERE run = ? ORDER BY rowid"},
        {"checkpoints_page", "SELECT run, name, attempt, ranks, parent, sealed_at, rowid FROM checkpoints WHERE run = ? AND rowid > ? "
                             "ORDER BY rowid LIMIT ?"},
        {"checkpoints_newest", "SELECT * FROM (SELECT run, name, attempt, ranks, parent, sealed_at, rowid AS seq FROM checkpoints "
                               "WHERE run = ? ORDER BY rowid DESC LIMIT ?) ORDER BY seq"},
        {"checkpoint", "SELECT run, name, attempt, ranks, parent, sealed_at, rowid FROM checkpoints WHERE run = ? AND name = ?"},
        {"last_checkpoint", "SELECT name FROM checkpoints WHERE run = ? ORDER BY rowid DESC LIMIT 1"},
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
        // A finished run's, one moved on to another broker, and those of a
        // run this broker has no row for (a decision answered again after a
        // crash): kept past ?1 by nobody's need.
        {"forget_carried_seals", "DELETE FROM carried_seals WHERE run IN (SELECT id FROM runs WHERE state IN "
                                 "('SUCCEEDED', 'FAILED', 'CANCELLED', 'MOVED') AND updated < ?1) "
                                 "OR (run NOT IN (SELECT id FROM runs) AND received < ?1)"},
    };
    return table;
}

}  // namespace sql

long long SealStore::insert_commit(const std::string &run, long long attempt, const std::string &name, long long rank,
                                   const std::string &files, double now, double write_seconds) {
    auto *s = stmt("insert_commit");
    Done done{s};
    Binder b(s);
    b.text(run).integer(attempt).text(name).integer(rank).text(files).real(now);
    if (write_seconds >= 0) b.real(write_seconds);   // else NULL: not measured
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("storing commit", rc);
    auto *c = stmt("count_commits");
    Done done_c{c};
    Binder(c).text(run).integer(attempt).text(name);
    return row(c) ? sqlite3_column_int64(c, 0) : 0;
}

double SealStore::commit_write_seconds(const std::string &run, long long attempt, const std::string &name) {
    auto *s = stmt("commit_write_seconds");
    Done done{s};
    Binder(s).text(run).integer(attempt).text(name);
    return row(s) && sqlite3_column_type(s, 0) != SQLITE_NULL ? sqlite3_column_double(s, 0) : -1;
}

std::vector<std::pair<long long, std::string>> SealStore::commit_files(const std::string &run, long long attempt, const std::string &name) {
    auto *s = stmt("commit_files");
    Done done{s};
    Binder(s).text(run).integer(attempt).text(name);
    std::vector<std::pair<long long, std::string>> out;
    while (row(s)) out.emplace_back(sqlite3_column_int64(s, 0), col_text(s, 1));
    return out;
}

bool SealStore::checkpoint_sealed(const std::string &run, const std::string &name) {
    auto *s = stmt("is_sealed");
    Done done{s};
    Binder(s).text(run).text(name);
    return row(s);
}

void SealStore::seal_checkpoint(const CheckpointRow &c) {
    auto *s = stmt("seal");
    Done done{s};
    Binder b(s);
    b.text(c.run).text(c.name).integer(c.attempt).integer(c.ranks).text(c.parent).real(c.sealed_at);
    if (c.write_seconds >= 0) b.real(c.write_seconds);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("sealing " + c.name, rc);
}

std::vector<CheckpointRow> SealStore::list_checkpoints(const std::string &run) {
    auto *s = stmt("list_checkpoints");
    Done done{s};
    Binder(s).text(run);
    std::vector<CheckpointRow> out;
    while (row(s))
        out.push_back(CheckpointRow{col_text(s, 0), col_text(s, 1), sqlite3_column_int64(s, 2), sqlite3_column_int64(s, 3),
                                    col_text(s, 4), sqlite3_column_double(s, 5)});
    return out;
}

namespace {

CheckpointRow checkpoint_row(sqlite3_stmt *s) {
    CheckpointRow c{col_text(s, 0), col_text(s, 1), sqlite3_column_int64(s, 2), sqlite3_column_int64(s, 3), col_text(s, 4),
                    sqlite3_column_double(s, 5)};
    c.seq = sqlite3_column_int64(s, 6);
    return c;
}

}  // namespace

std::vector<CheckpointRow> SealStore::checkpoints_page(const std::string &run, long long after, int limit) {
    return checkpoint_rows("checkpoints_page", run, after, limit);
}

std::vector<CheckpointRow> SealStore::newest_checkpoints(const std::string &run, int n) {
    return checkpoint_rows("checkpoints_newest", run, -1, n);
}

// after -1: a statement without it (the newest).
std::vector<CheckpointRow> SealStore::checkpoint_rows(const char *which, const std::string &run, long long after, int limit) {
    auto *s = stmt(which);
    Done done{s};
    Binder b(s);
    b.text(run);
    if (after >= 0) b.integer(after);
    b.integer(limit);
    std::vector<CheckpointRow> out;
    while (row(s)) out.push_back(checkpoint_row(s));
    return out;
}

std::optional<CheckpointRow> SealStore::checkpoint(const std::string &run, const std::string &name) {
    auto *s = stmt("checkpoint");
    Done done{s};
    Binder(s).text(run).text(name);
    if (!row(s)) return std::nullopt;
    return checkpoint_row(s);
}

std::string SealStore::last_checkpoint(const std::string &run) {
    auto *s = stmt("last_checkpoint");
    Done done{s};
    Binder(s).text(run);
    return row(s) ? col_text(s, 0) : "";
}

namespace {

SealStore::CarriedSealRow carried_row(sqlite3_stmt *s) {
    return SealStore::CarriedSealRow{col_text(s, 0), col_text(s, 1), sqlite3_column_int64(s, 2), sqlite3_column_int64(s, 3), col_text(s, 4),
                                     col_text(s, 5),
                                     SealStore::SealedListRow{col_text(s, 6), sqlite3_column_int64(s, 7), sqlite3_column_int64(s, 8),
                                                              sqlite3_column_int64(s, 9), col_text(s, 10)},
                                     col_text(s, 11), sqlite3_column_double(s, 12)};
}

}  // namespace

void SealStore::put_sealed_list(const std::string &run, const std::string &name, const SealedListRow &r) {
    auto *s = stmt("put_sealed_list");
    Done done{s};
    Binder(s).text(run).text(name).text(r.root).integer(r.count).integer(r.bytes).integer(r.receipt_seq).text(r.receipt_digest);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("storing a seal's file list", rc);
}

std::optional<SealStore::SealedListRow> SealStore::sealed_list(const std::string &run, const std::string &name) {
    auto *s = stmt("sealed_list");
    Done done{s};
    Binder(s).text(run).text(name);
    if (!row(s)) return std::nullopt;
    return SealedListRow{col_text(s, 0), sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2), sqlite3_column_int64(s, 3), col_text(s, 4)};
}

void SealStore::put_carried_seal(const CarriedSealRow &r) {
    auto *s = stmt("put_carried_seal");
    Done done{s};
    Binder(s).text(r.run).text(r.name).integer(r.attempt).integer(r.ranks).text(r.parent).text(r.sealed_by).text(r.list.root)
        .integer(r.list.count).integer(r.list.bytes).integer(r.list.receipt_seq).text(r.list.receipt_digest).text(r.files).real(r.received);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("storing a carried seal", rc);
}

std::optional<SealStore::CarriedSealRow> SealStore::carried_seal(const std::string &run, const std::string &name) {
    auto *s = stmt("carried_seal");
    Done done{s};
    Binder(s).text(run).text(name);
    if (!row(s)) return std::nullopt;
    return carried_row(s);
}

std::vector<SealStore::CarriedSealRow> SealStore::carried_seals(const std::string &run, int limit) {
    auto *s = stmt("carried_seals");
    Done done{s};
    Binder(s).text(run).integer(limit);
    std::vector<CarriedSealRow> out;
    while (row(s)) out.push_back(carried_row(s));
    return out;
}

void SealStore::keep_newest_carried(const std::string &run, int keep) {
    auto *s = stmt("keep_newest_carried");
    Done done{s};
    Binder(s).text(run).integer(keep);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("pruning a run's carried seals", rc);
}

long long SealStore::forget_carried_seals(double finished_before) {
    auto *s = stmt("forget_carried_seals");
    Done done{s};
    Binder(s).real(finished_before);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("forgetting finished runs' carried seals", rc);
    return sqlite3_changes(sqlite3_db_handle(s));
}

}  // namespace shardnet::broker
