// The store's side of federation: decisions received from peers (applied
// at most once, by id, and only as the broker that sent it), and reads of
// where a decision of this broker's sent a run (decisions the peer
// accepted), for the run's onward view (federation/onward.hpp).
#include <algorithm>
#include <sqlite3.h>

#include "broker/store/sql.hpp"
#include "broker/store/store.hpp"

namespace shardnet::broker {

using namespace sql;

namespace sql {

std::span<const Sql> federation_statements() {
    static const Sql table[] = {
        {"insert_received", "INSERT OR IGNORE INTO received_decisions (id, from_broker, run, to_attempt, state, result, created) "
                            "VALUES (?,?,?,?,'received',?,?)"},
        {"get_received", "SELECT state, result, from_broker, run, to_attempt FROM received_decisions WHERE id = ?"},
        {"finish_received", "UPDATE received_decisions SET state = ?, result = ? WHERE id = ?"},
        {"moved_to", "SELECT peer, to_attempt, coalesce(new_job, 0) FROM decisions WHERE run = ? AND state = 'delivered' "
                     "AND peer IS NOT NULL ORDER BY to_attempt DESC, created DESC LIMIT 1"},
        {"last_events", "SELECT id, run, time, kind, cause, evidence FROM events WHERE run = ? ORDER BY id DESC LIMIT ?"},
        {"count_events", "SELECT count(*) FROM events WHERE run = ?"},
        // A peer reads a run's story when it took the run (a decision of ours
        // it accepted) or handed it here (one we applied).
        {"story_peer", "SELECT 1 FROM decisions WHERE run = ?1 AND peer = ?2 AND state = 'delivered' UNION ALL "
                       "SELECT 1 FROM received_decisions WHERE run = ?1 AND from_broker = ?2 AND state = 'applied' LIMIT 1"},
        {"witnessed_head", "SELECT peer, size, root, envelope, seen, conflict FROM witnessed_heads WHERE peer = ?"},
        {"witnessed_heads", "SELECT peer, size, root, envelope, seen, conflict FROM witnessed_heads ORDER BY peer"},
        {"put_witnessed_head", "INSERT INTO witnessed_heads (peer, size, root, envelope, seen) VALUES (?1, ?2, ?3, ?4, ?5) "
                               "ON CONFLICT (peer) DO UPDATE SET size = ?2, root = ?3, envelope = ?4, seen = ?5"},
        {"witness_conflict", "UPDATE witnessed_heads SET conflict = ?2 WHERE peer = ?1 AND conflict = ''"},
    };
    return table;
}

}  // namespace sql

bool Store::insert_received(const std::string &id, const std::string &from, const std::string &run, long long to, double now,
                            const std::string &result) {
    auto *s = stmt("insert_received");
    Done done{s};
    Binder(s).text(id).text(from).text(run).integer(to).text(result).real(now);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("writing received decision " + id, rc);
    return sqlite3_changes(db_) == 1;
}

std::optional<Store::Received> Store::get_received(const std::string &id) {
    auto *s = stmt("get_received");
    Done done{s};
    Binder(s).text(id);
    if (!row(s)) return std::nullopt;
    return Received{col_text(s, 0), col_text(s, 1), col_text(s, 2), col_text(s, 3), sqlite3_column_int64(s, 4)};
}

void Store::finish_received(const std::string &id, const std::string &state, const std::string &result) {
    auto *s = stmt("finish_received");
    Done done{s};
    Binder(s).text(state).text(result).text(id);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("updating received decision " + id, rc);
}

std::optional<Store::MovedRow> Store::moved_to(const std::string &run) {
    auto *s = stmt("moved_to");
    Done done{s};
    Binder(s).text(run);
    if (!row(s)) return std::nullopt;
    return MovedRow{col_text(s, 0), sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2)};
}

namespace {
Store::WitnessedRow witnessed_row(sqlite3_stmt *s) {
    return Store::WitnessedRow{col_text(s, 0), sqlite3_column_int64(s, 1), col_text(s, 2), col_text(s, 3), sqlite3_column_double(s, 4),
                               col_text(s, 5)};
}
}  // namespace

std::vector<EventRow> Store::last_events(const std::string &run, int n) {
    auto *s = stmt("last_events");
    Done done{s};
    Binder(s).text(run).integer(n);
    std::vector<EventRow> out;
    while (row(s))
        out.push_back(EventRow{sqlite3_column_int64(s, 0), col_text(s, 1), sqlite3_column_double(s, 2), col_text(s, 3), col_text(s, 4),
                               col_text(s, 5)});
    std::reverse(out.begin(), out.end());
    return out;
}

long long Store::count_events(const std::string &run) {
    auto *s = stmt("count_events");
    Done done{s};
    Binder(s).text(run);
    return row(s) ? sqlite3_column_int64(s, 0) : 0;
}

bool Store::story_peer(const std::string &run, const std::string &peer) {
    auto *s = stmt("story_peer");
    Done done{s};
    Binder(s).text(run).text(peer);
    return row(s);
}

std::optional<Store::WitnessedRow> Store::witnessed_head(const std::string &peer) {
    auto *s = stmt("witnessed_head");
    Done done{s};
    Binder(s).text(peer);
    if (!row(s)) return std::nullopt;
    return witnessed_row(s);
}

std::vector<Store::WitnessedRow> Store::witnessed_heads() {
    auto *s = stmt("witnessed_heads");
    Done done{s};
    std::vector<WitnessedRow> out;
    while (row(s)) out.push_back(witnessed_row(s));
    return out;
}

void Store::put_witnessed_head(const WitnessedRow &r) {
    auto *s = stmt("put_witnessed_head");
    Done done{s};
    Binder(s).text(r.peer).integer(r.size).text(r.root).text(r.envelope).real(r.seen);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("keeping the log head witnessed of broker " + r.peer, rc);
}

void Store::witness_conflict(const std::string &peer, const std::string &evidence) {
    auto *s = stmt("witness_conflict");
    Done done{s};
    Binder(s).text(peer).text(evidence);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("keeping a conflict witnessed of broker " + peer, rc);
}

}  // namespace shardnet::broker
