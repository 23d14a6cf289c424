// The store's side of requeue decisions and federation: this broker's own
// decisions (written before they are acted on, kept while forwarded to a
// peer), decisions received from peers (applied at most once, by id, and
// only as the broker that sent it), reads of where a decision of this
// broker's sent a run (decisions the peer accepted), for the run's onward
// view (federation/onward.hpp), and the peers' log heads witnessed here.
#include <sqlite3.h>

#include "broker/store/decision_store.hpp"
#include "broker/store/sql.hpp"

namespace shardnet::broker {

using namespace sql;

namespace sql {

std::span<const Sql> decision_statements() {
    static const Sql table[] = {
        {"insert_decision", "INSERT OR IGNORE INTO decisions (id, run, from_attempt, to_attempt, cluster, exclude, old_job, state, created, nonce) "
                            "VALUES (?,?,?,?,?,?,?,'written',?,?)"},
        {"get_decision", "SELECT state, nonce FROM decisions WHERE id = ?"},
        {"written_decisions", "SELECT id, run, from_attempt, cluster, exclude, old_job FROM decisions WHERE state = 'written' ORDER BY created"},
        {"unplaced_decisions", "SELECT id, run, from_attempt, cluster, exclude, old_job, created, state FROM decisions "
                               "WHERE state IN ('unplaced', 'unplaced_here') AND created >= ? ORDER BY created"},
        {"apply_decision", "UPDATE decisions SET state = ?, new_job = ? WHERE id = ?"},
        {"forward_decision", "UPDATE decisions SET state = 'forwarding', peer = ?, payload = ? WHERE id = ?"},
        {"forwarding_decisions", "SELECT id, run, peer, payload FROM decisions WHERE state = 'forwarding' ORDER BY created"},
        {"insert_received", "INSERT OR IGNORE INTO received_decisions (id, from_broker, run, to_attempt, state, result, created) "
                            "VALUES (?,?,?,?,'received',?,?)"},
        {"get_received", "SELECT state, result, from_broker, run, to_attempt FROM received_decisions WHERE id = ?"},
        {"finish_received", "UPDATE received_decisions SET state = ?, result = ? WHERE id = ?"},
        {"run_crossed", "SELECT 1 FROM decisions WHERE run = ?1 AND peer = ?2 UNION ALL "
                        "SELECT 1 FROM received_decisions WHERE run = ?1 AND from_broker = ?2 AND state = 'applied' LIMIT 1"},
        {"moved_to", "SELECT peer, to_attempt, coalesce(new_job, 0) FROM decisions WHERE run = ? AND state = 'delivered' "
                     "AND peer IS NOT NULL ORDER BY to_attempt DESC, created DESC LIMIT 1"},
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

bool DecisionStore::insert_decision(const std::string &id, const std::string &run, long long from, long long to,
                                    const std::string &cluster, const std::string &exclude, long long old_job, double now,
                                    const std::string &nonce) {
    auto *s = stmt("insert_decision");
    Done done{s};
    Binder(s).text(id).text(run).integer(from).integer(to).text(cluster).text(exclude).integer(old_job).real(now).text(nonce);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("writing decision " + id, rc);
    return sqlite3_changes(db()) == 1;
}

std::vector<DecisionStore::WrittenDecision> DecisionStore::written_decisions() {
    auto *s = stmt("written_decisions");
    Done done{s};
    Binder b(s);
    std::vector<WrittenDecision> out;
    while (row(s))
        out.push_back(WrittenDecision{col_text(s, 0), col_text(s, 1), sqlite3_column_int64(s, 2), col_text(s, 3), col_text(s, 4),
                                      sqlite3_column_int64(s, 5)});
    return out;
}

std::vector<DecisionStore::UnplacedDecision> DecisionStore::unplaced_decisions(double since) {
    auto *s = stmt("unplaced_decisions");
    Done done{s};
    Binder(s).real(since);
    std::vector<UnplacedDecision> out;
    while (row(s))
        out.push_back(UnplacedDecision{{col_text(s, 0), col_text(s, 1), sqlite3_column_int64(s, 2), col_text(s, 3), col_text(s, 4),
                                        sqlite3_column_int64(s, 5)},
                                       sqlite3_column_double(s, 6), col_text(s, 7) == "unplaced_here"});
    return out;
}

std::optional<std::pair<std::string, std::string>> DecisionStore::get_decision(const std::string &id) {
    auto *s = stmt("get_decision");
    Done done{s};
    Binder(s).text(id);
    if (!row(s)) return std::nullopt;
    return std::make_pair(col_text(s, 0), col_text(s, 1));
}

void DecisionStore::apply_decision(const std::string &id, const std::string &state, long long new_job) {
    auto *s = stmt("apply_decision");
    Done done{s};
    Binder(s).text(state).integer(new_job).text(id);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("updating decision " + id, rc);
}

void DecisionStore::forward_decision(const std::string &id, const std::string &peer, const std::string &payload) {
    auto *s = stmt("forward_decision");
    Done done{s};
    Binder(s).text(peer).text(payload).text(id);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("updating decision " + id, rc);
}

std::vector<DecisionStore::Forwarding> DecisionStore::forwarding_decisions() {
    auto *s = stmt("forwarding_decisions");
    Done done{s};
    Binder b(s);
    std::vector<Forwarding> out;
    while (row(s)) out.push_back({col_text(s, 0), col_text(s, 1), col_text(s, 2), col_text(s, 3)});
    return out;
}

bool DecisionStore::insert_received(const std::string &id, const std::string &from, const std::string &run, long long to, double now,
                                    const std::string &result) {
    auto *s = stmt("insert_received");
    Done done{s};
    Binder(s).text(id).text(from).text(run).integer(to).text(result).real(now);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("writing received decision " + id, rc);
    return sqlite3_changes(db()) == 1;
}

std::optional<DecisionStore::Received> DecisionStore::get_received(const std::string &id) {
    auto *s = stmt("get_received");
    Done done{s};
    Binder(s).text(id);
    if (!row(s)) return std::nullopt;
    return Received{col_text(s, 0), col_text(s, 1), col_text(s, 2), col_text(s, 3), sqlite3_column_int64(s, 4)};
}

void DecisionStore::finish_received(const std::string &id, const std::string &state, const std::string &result) {
    auto *s = stmt("finish_received");
    Done done{s};
    Binder(s).text(state).text(result).text(id);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("updating received decision " + id, rc);
}

std::optional<DecisionStore::MovedRow> DecisionStore::moved_to(const std::string &run) {
    auto *s = stmt("moved_to");
    Done done{s};
    Binder(s).text(run);
    if (!row(s)) return std::nullopt;
    return MovedRow{col_text(s, 0), sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2)};
}

namespace {
DecisionStore::WitnessedRow witnessed_row(sqlite3_stmt *s) {
    return DecisionStore::WitnessedRow{col_text(s, 0), sqlite3_column_int64(s, 1), col_text(s, 2), col_text(s, 3), sqlite3_column_double(s, 4),
                                       col_text(s, 5)};
}
}  // namespace

bool DecisionStore::story_peer(const std::string &run, const std::string &peer) {
    auto *s = stmt("story_peer");
    Done done{s};
    Binder(s).text(run).text(peer);
    return row(s);
}

bool DecisionStore::run_crossed(const std::string &run, const std::string &peer) {
    auto *s = stmt("run_crossed");
    Done done{s};
    Binder(s).text(run).text(peer);
    return row(s);
}

std::optional<DecisionStore::WitnessedRow> DecisionStore::witnessed_head(const std::string &peer) {
    auto *s = stmt("witnessed_head");
    Done done{s};
    Binder(s).text(peer);
    if (!row(s)) return std::nullopt;
    return witnessed_row(s);
}

std::vector<DecisionStore::WitnessedRow> DecisionStore::witnessed_heads() {
    auto *s = stmt("witnessed_heads");
    Done done{s};
    std::vector<WitnessedRow> out;
    while (row(s)) out.push_back(witnessed_row(s));
    return out;
}

void DecisionStore::put_witnessed_head(const WitnessedRow &r) {
    auto *s = stmt("put_witnessed_head");
    Done done{s};
    Binder(s).text(r.peer).integer(r.size).text(r.root).text(r.envelope).real(r.seen);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("keeping the log head witnessed of broker " + r.peer, rc);
}

void DecisionStore::witness_conflict(const std::string &peer, const std::string &evidence) {
    auto *s = stmt("witness_conflict");
    Done done{s};
    Binder(s).text(peer).text(evidence);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("keeping a conflict witnessed of broker " + peer, rc);
}

}  // namespace shardnet::broker
