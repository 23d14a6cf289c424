// The store's side of signed receipts: the receipts (one row each, chained
// per run by seq), the Merkle log's perfect subtrees, signed tree heads.
// Every write here runs inside the transaction of the record a receipt
// attests (a seal, a FAULT, an attempt's job): both are kept or neither.
#include <sqlite3.h>

#include "broker/store/sql.hpp"
#include "broker/store/store.hpp"

namespace shardnet::broker {

using namespace sql;

namespace sql {

std::span<const Sql> receipt_statements() {
    static const Sql table[] = {
        {"last_receipt", "SELECT run, seq, attempt, kind, time, envelope, digest, log_index, keyid FROM receipts WHERE run = ? "
                         "ORDER BY seq DESC LIMIT 1"},
        {"has_receipt", "SELECT 1 FROM receipts WHERE run = ? AND attempt = ? AND kind = ? LIMIT 1"},
        {"insert_receipt", "INSERT INTO receipts (run, seq, attempt, kind, time, envelope, digest, log_index, keyid) "
                           "VALUES (?,?,?,?,?,?,?,?,?)"},
        {"list_receipts", "SELECT run, seq, attempt, kind, time, envelope, digest, log_index, keyid FROM receipts WHERE run = ? AND seq > ? "
                          "ORDER BY seq LIMIT ?"},
        // The primary key's b-tree: the last leaf is one step.
        {"log_size", "SELECT idx FROM log_nodes WHERE level = 0 ORDER BY idx DESC LIMIT 1"},
        {"log_node", "SELECT hash FROM log_nodes WHERE level = ? AND idx = ?"},
        {"put_log_node", "INSERT INTO log_nodes (level, idx, hash) VALUES (?,?,?)"},
        {"last_tree_head", "SELECT size, root, envelope, time FROM tree_heads ORDER BY size DESC LIMIT 1"},
        {"tree_head", "SELECT size, root, envelope, time FROM tree_heads WHERE size = ?"},
        {"insert_tree_head", "INSERT OR REPLACE INTO tree_heads (size, root, envelope, time) VALUES (?,?,?,?)"},
        {"key_uses", "SELECT keyid, first, last, receipts, pem FROM receipt_keys ORDER BY first"},
        {"use_key", "INSERT INTO receipt_keys (keyid, first, last, receipts) VALUES (?1, ?2, ?2, 1) ON CONFLICT (keyid) DO UPDATE SET "
                    "first = CASE WHEN receipts = 0 THEN ?2 ELSE min(first, ?2) END, last = max(last, ?2), receipts = receipts + 1"},
        {"record_key", "INSERT INTO receipt_keys (keyid, first, last, receipts, pem) VALUES (?1, 0, 0, 0, ?2) ON CONFLICT (keyid) DO UPDATE SET "
                       "pem = CASE WHEN pem = '' THEN ?2 ELSE pem END"},
    };
    return table;
}

}  // namespace sql

namespace {

ReceiptStore::ReceiptRow receipt_row(sqlite3_stmt *s) {
    return ReceiptStore::ReceiptRow{col_text(s, 0), sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2), col_text(s, 3),
                             sqlite3_column_double(s, 4), col_text(s, 5), col_text(s, 6), sqlite3_column_int64(s, 7), col_text(s, 8)};
}

ReceiptStore::TreeHeadRow head_row(sqlite3_stmt *s) {
    return ReceiptStore::TreeHeadRow{sqlite3_column_int64(s, 0), col_blob(s, 1), col_text(s, 2), sqlite3_column_double(s, 3)};
}

}  // namespace

std::optional<ReceiptStore::ReceiptRow> ReceiptStore::last_receipt(const std::string &run) {
    auto *s = stmt("last_receipt");
    Done done{s};
    Binder(s).text(run);
    if (!row(s)) return std::nullopt;
    return receipt_row(s);
}

bool ReceiptStore::has_receipt(const std::string &run, long long attempt, const std::string &kind) {
    auto *s = stmt("has_receipt");
    Done done{s};
    Binder(s).text(run).integer(attempt).text(kind);
    return row(s);
}

void ReceiptStore::insert_receipt(const ReceiptRow &r) {
    auto *s = stmt("insert_receipt");
    Done done{s};
    Binder(s).text(r.run).integer(r.seq).integer(r.attempt).text(r.kind).real(r.time).text(r.envelope).text(r.digest)
        .integer(r.log_index).text(r.keyid);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE)
        fail("storing receipt " + std::to_string(r.seq) + " (" + r.kind + ") of run " + r.run, rc);
    auto *k = stmt("use_key");
    Done done_k{k};
    Binder(k).text(r.keyid).real(r.time);
    if (int rc = sqlite3_step(k); rc != SQLITE_DONE) fail("recording the use of signing key " + r.keyid, rc);
}

std::vector<ReceiptStore::ReceiptRow> ReceiptStore::list_receipts(const std::string &run, long long after, long long limit) {
    auto *s = stmt("list_receipts");
    Done done{s};
    Binder(s).text(run).integer(after).integer(limit);
    std::vector<ReceiptRow> out;
    while (row(s)) out.push_back(receipt_row(s));
    return out;
}

long long ReceiptStore::log_size() {
    auto *s = stmt("log_size");
    Done done{s};
    Binder b(s);
    return row(s) ? sqlite3_column_int64(s, 0) + 1 : 0;
}

std::string ReceiptStore::log_node(int level, long long index) {
    auto *s = stmt("log_node");
    Done done{s};
    Binder(s).integer(level).integer(index);
    return row(s) ? col_blob(s, 0) : "";
}

void ReceiptStore::put_log_node(int level, long long index, const std::string &hash) {
    auto *s = stmt("put_log_node");
    Done done{s};
    Binder(s).integer(level).integer(index).blob(hash);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE)
        fail("storing log node " + std::to_string(level) + "/" + std::to_string(index), rc);
}

std::optional<ReceiptStore::TreeHeadRow> ReceiptStore::last_tree_head() {
    auto *s = stmt("last_tree_head");
    Done done{s};
    Binder b(s);
    if (!row(s)) return std::nullopt;
    return head_row(s);
}

std::optional<ReceiptStore::TreeHeadRow> ReceiptStore::tree_head(long long size) {
    auto *s = stmt("tree_head");
    Done done{s};
    Binder(s).integer(size);
    if (!row(s)) return std::nullopt;
    return head_row(s);
}

void ReceiptStore::insert_tree_head(const TreeHeadRow &h) {
    auto *s = stmt("insert_tree_head");
    Done done{s};
    Binder(s).integer(h.size).blob(h.root).text(h.envelope).real(h.time);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("storing the log's tree head of size " + std::to_string(h.size), rc);
}

std::vector<ReceiptStore::KeyUse> ReceiptStore::key_uses() {
    auto *s = stmt("key_uses");
    Done done{s};
    Binder b(s);
    std::vector<KeyUse> out;
    while (row(s))
        out.push_back(KeyUse{col_text(s, 0), sqlite3_column_double(s, 1), sqlite3_column_double(s, 2), sqlite3_column_int64(s, 3), col_text(s, 4)});
    return out;
}

void ReceiptStore::record_key(const std::string &keyid, const std::string &pem) {
    auto *s = stmt("record_key");
    Done done{s};
    Binder(s).text(keyid).text(pem);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("recording signing key " + keyid, rc);
}

}  // namespace shardnet::broker
