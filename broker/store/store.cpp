#include "broker/store/store.hpp"

#include <algorithm>
#include <sqlite3.h>

#include "broker/store/sql.hpp"
#include <stdexcept>

namespace shardnet::broker {

namespace {

// Schema migrations, in order; user_version counts how many have run.
const char *const kMigrations[] = {
    R"(CREATE TABLE runs (id TEXT PRIMARY KEY, owner TEXT NOT NULL, state TEXT NOT NULL, attempt INTEGER NOT NULL,
                          manifest TEXT NOT NULL, world_size INTEGER NOT NULL, created REAL NOT NULL, updated REAL NOT NULL);
       CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT NOT NULL, time REAL NOT NULL,
                            kind TEXT NOT NULL, cause TEXT NOT NULL, evidence TEXT NOT NULL);
       CREATE INDEX events_run ON events (run, id);
       CREATE TABLE nodes (host TEXT PRIMARY KEY, hash TEXT NOT NULL, descriptor TEXT NOT NULL, updated REAL NOT NULL);
       CREATE TABLE commits (run TEXT NOT NULL, attempt INTEGER NOT NULL, name TEXT NOT NULL, rank INTEGER NOT NULL,
                             files TEXT NOT NULL, time REAL NOT NULL, PRIMARY KEY (run, attempt, name, rank));
       CREATE TABLE checkpoints (run TEXT NOT NULL, name TEXT NOT NULL, attempt INTEGER NOT NULL, ranks INTEGER NOT NULL,
                                 parent TEXT NOT NULL, sealed_at REAL NOT NULL, PRIMARY KEY (run, name));
       CREATE TABLE workers (run TEXT NOT NULL, attempt INTEGER NOT NULL, node TEXT NOT NULL, ranks TEXT NOT NULL,
                             last_seen REAL NOT NULL, last_step INTEGER, PRIMARY KEY (run, attempt, node));)",
    R"(CREATE TABLE decisions (id TEXT PRIMARY KEY, run TEXT NOT NULL, from_attempt INTEGER NOT NULL,
                               to_attempt INTEGER NOT NULL, cluster TEXT NOT NULL, exclude TEXT NOT NULL,
                               old_job INTEGER NOT NULL, new_job INTEGER, state TEXT NOT NULL, created REAL NOT NULL);)",
    // 3: what each attempt's job was (so that a requeue does not need the
    // failed cluster's slurmctld), decisions sent to peer brokers, and
    // decisions received from them (applied at most once, by id).
    R"(CREATE TABLE job_specs (run TEXT NOT NULL, attempt INTEGER NOT NULL, cluster TEXT NOT NULL, job INTEGER NOT NULL,
                               spec TEXT NOT NULL, script TEXT NOT NULL, PRIMARY KEY (run, attempt));
       ALTER TABLE decisions ADD COLUMN peer TEXT;
       ALTER TABLE decisions ADD COLUMN payload TEXT;
       CREATE TABLE received_decisions (id TEXT PRIMARY KEY, from_broker TEXT NOT NULL, run TEXT NOT NULL,
                                        to_attempt INTEGER NOT NULL, state TEXT NOT NULL, result TEXT NOT NULL,
                                        created REAL NOT NULL);)",
    // 4: who owns a run (the uid its first job ran as, checked with Slurm)
    // and which job runs each attempt, as this broker recorded it: a worker
    // token must name that job to report for the attempt.
    R"(ALTER TABLE runs ADD COLUMN owner_uid INTEGER NOT NULL DEFAULT -1;
       CREATE TABLE attempts (run TEXT NOT NULL, attempt INTEGER NOT NULL, cluster TEXT NOT NULL, job INTEGER NOT NULL,
                              world INTEGER NOT NULL, PRIMARY KEY (run, attempt));)",
    // 5: a run's newest sealed checkpoint is one index step, however long
    // its history (a seal names its parent; a requeue resumes from it).
    R"(CREATE INDEX checkpoints_run_sealed ON checkpoints (run, sealed_at);)",
    // 6: a RECOVERING run waits for attempt recover_to's heartbeats from
    // recover_nodes nodes; kept, so that a broker restarted meanwhile still
    // ends the wait with RECOVERED (0: not waiting here, e.g. a decision at a peer).
    R"(ALTER TABLE runs ADD COLUMN recover_to INTEGER NOT NULL DEFAULT 0;
       ALTER TABLE runs ADD COLUMN recover_nodes INTEGER NOT NULL DEFAULT 0;)",
    // 7: where the run may be requeued (--shardnet-requeue, from its first
    // job's heartbeats): a restarted broker honours off and local too.
    R"(ALTER TABLE runs ADD COLUMN requeue TEXT NOT NULL DEFAULT 'federated';)",
    // 8: enough of each worker to watch it again after a restart: its
    // interval, whether it ended (or faulted already), whether it is a
    // node of an allocation without a worker yet (watch only).
    R"(ALTER TABLE workers ADD COLUMN interval INTEGER NOT NULL DEFAULT 0;
       ALTER TABLE workers ADD COLUMN ended INTEGER NOT NULL DEFAULT 0;
       ALTER TABLE workers ADD COLUMN watch_only INTEGER NOT NULL DEFAULT 0;
       ALTER TABLE workers ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
       ALTER TABLE workers ADD COLUMN job INTEGER NOT NULL DEFAULT 0;)",
    // 9: a local decision's nonce, in its job's comment: after a crash
    // between sbatch and 'applied', only a job with it is the decision's.
    R"(ALTER TABLE decisions ADD COLUMN nonce TEXT NOT NULL DEFAULT '';)",
    // 10: what the checkpoint policy measures (doc/checkpoint-policy.md):
    // each rank's write time of a checkpoint (the seal keeps the slowest),
    // node-seconds observed and interruptions per cluster, each recovery's
    // phases, and the interval in force per run.
    R"(ALTER TABLE commits ADD COLUMN write_seconds REAL;
       ALTER TABLE checkpoints ADD COLUMN write_seconds REAL;
       CREATE TABLE exposure (cluster TEXT PRIMARY KEY, node_seconds REAL NOT NULL, interruptions INTEGER NOT NULL);
       CREATE TABLE recoveries (run TEXT NOT NULL, attempt INTEGER NOT NULL, tier TEXT NOT NULL, detect REAL NOT NULL,
                                place REAL NOT NULL, start REAL NOT NULL, restore REAL NOT NULL, at REAL NOT NULL,
                                PRIMARY KEY (run, attempt));
       CREATE TABLE ckpt_policies (run TEXT PRIMARY KEY, version INTEGER NOT NULL, every_steps INTEGER NOT NULL,
                                   seconds REAL NOT NULL, detail TEXT NOT NULL, updated REAL NOT NULL);)",
    // 11: signed receipts (doc/receipts.md), written in the transaction of
    // the record each attests: one row per receipt, chained per run by seq;
    // the Merkle log's perfect subtrees (level 0: the leaves), each kept
    // once complete, so that a root or a proof is O(log n) reads; signed
    // tree heads, by size; each signing key's first and last use (GET
    // /v1/keys answers without a scan of the receipts).
    R"(CREATE TABLE receipts (run TEXT NOT NULL, seq INTEGER NOT NULL, attempt INTEGER NOT NULL, kind TEXT NOT NULL,
                              time REAL NOT NULL, envelope TEXT NOT NULL, digest TEXT NOT NULL UNIQUE,
                              log_index INTEGER NOT NULL UNIQUE, keyid TEXT NOT NULL, PRIMARY KEY (run, seq));
       CREATE INDEX receipts_kind ON receipts (run, attempt, kind);
       CREATE TABLE log_nodes (level INTEGER NOT NULL, idx INTEGER NOT NULL, hash BLOB NOT NULL, PRIMARY KEY (level, idx)) WITHOUT ROWID;
       CREATE TABLE tree_heads (size INTEGER PRIMARY KEY, root BLOB NOT NULL, envelope TEXT NOT NULL, time REAL NOT NULL);
       CREATE TABLE receipt_keys (keyid TEXT PRIMARY KEY, first REAL NOT NULL, last REAL NOT NULL, receipts INTEGER NOT NULL);)",
    // 12: what an attempt-started receipt waits for: each rank's node and
    // environment as its agent reported them, and what the broker knew when
    // it made the attempt (its job, the planned nodes, the decision, the
    // chain link of a peer's run), kept until the ranks are in; each signing
    // key's public half, so that a key rotated away stays listed at /v1/keys.
    R"(CREATE TABLE attempt_ranks (run TEXT NOT NULL, attempt INTEGER NOT NULL, rank INTEGER NOT NULL, node TEXT NOT NULL,
                                   environment TEXT NOT NULL, PRIMARY KEY (run, attempt, rank)) WITHOUT ROWID;
       CREATE TABLE attempt_starts (run TEXT NOT NULL, attempt INTEGER NOT NULL, cluster TEXT NOT NULL, job INTEGER NOT NULL,
                                    nodes TEXT NOT NULL, cause TEXT NOT NULL,
                                    from_seq INTEGER NOT NULL, from_digest TEXT NOT NULL, PRIMARY KEY (run, attempt));
       ALTER TABLE receipt_keys ADD COLUMN pem TEXT NOT NULL DEFAULT '';)",
    // 13: bad-node memory: every node fault a run saw (inventory/bad_nodes.cpp).
    R"(CREATE TABLE node_faults (cluster TEXT NOT NULL, node TEXT NOT NULL, time REAL NOT NULL, run TEXT NOT NULL, cause TEXT NOT NULL);
       CREATE INDEX node_faults_node ON node_faults (cluster, node, time);
       CREATE INDEX node_faults_time ON node_faults (time);)",
    // 14: the peers' log heads this broker witnessed (federation/witness.hpp):
    // the last consistent one of each, and the first conflict seen since.
    R"(CREATE TABLE witnessed_heads (peer TEXT PRIMARY KEY, size INTEGER NOT NULL, root TEXT NOT NULL, envelope TEXT NOT NULL,
                                    seen REAL NOT NULL, conflict TEXT NOT NULL DEFAULT '');)",
    // 15: each seal's file list as its receipt commits to it (the Merkle
    // root, count and bytes of file_list.hpp, and the receipt's seq and
    // digest); the seals a peer's decision carried with a run it handed
    // here (store/seal_store.cpp), served to the run's tokens like its own.
    R"(CREATE TABLE sealed_lists (run TEXT NOT NULL, name TEXT NOT NULL, root TEXT NOT NULL, count INTEGER NOT NULL,
                                 bytes INTEGER NOT NULL, receipt_seq INTEGER NOT NULL, receipt_digest TEXT NOT NULL,
                                 PRIMARY KEY (run, name)) WITHOUT ROWID;
       CREATE TABLE carried_seals (run TEXT NOT NULL, name TEXT NOT NULL, attempt INTEGER NOT NULL, ranks INTEGER NOT NULL,
                                  parent TEXT NOT NULL, sealed_by TEXT NOT NULL, root TEXT NOT NULL, count INTEGER NOT NULL,
                                  bytes INTEGER NOT NULL, receipt_seq INTEGER NOT NULL, receipt_digest TEXT NOT NULL,
                                  files TEXT NOT NULL, received REAL NOT NULL, PRIMARY KEY (run, name));)",
    // 16: a run's seals in seal order (rowid) a page at a time, and its
    // newest, without sorting all of them (store/seal_store.cpp).
    R"(CREATE INDEX IF NOT EXISTS checkpoints_run ON checkpoints (run);)",
};

using sql::Sql;
using sql::Done;
using sql::Binder;
using sql::col_text;

const Sql kStatements[] = {
    {"load_runs", "SELECT id, owner, state, attempt, manifest, world_size, created, updated, owner_uid, recover_to, recover_nodes, requeue FROM runs"},
    {"set_requeue", "UPDATE runs SET requeue = ? WHERE id = ?"},
    {"set_recovering", "UPDATE runs SET recover_to = ?, recover_nodes = ? WHERE id = ?"},
    {"insert_run", "INSERT INTO runs (id, owner, state, attempt, manifest, world_size, created, updated, owner_uid, requeue) "
                   "VALUES (?,?,?,?,?,?,?,?,?,?)"},
    {"set_owner", "UPDATE runs SET owner = ?, owner_uid = ? WHERE id = ?"},
    {"run_created", "SELECT created FROM runs WHERE id = ?"},
    {"update_run", "UPDATE runs SET state = ?, attempt = ?, updated = ? WHERE id = ?"},
    {"insert_event", "INSERT INTO events (run, time, kind, cause, evidence) VALUES (?,?,?,?,?)"},
    {"list_events", "SELECT id, run, time, kind, cause, evidence FROM events WHERE run = ? AND id > ? ORDER BY id LIMIT ?"},
    {"straggler_named", "SELECT 1 FROM events WHERE run = ?1 AND kind = 'STRAGGLER' AND json_valid(evidence) "
                        "AND json_extract(evidence, '$.attempt') = ?2 AND json_extract(evidence, '$.node') = ?3 LIMIT 1"},
    {"last_events", "SELECT id, run, time, kind, cause, evidence FROM events WHERE run = ? ORDER BY id DESC LIMIT ?"},
    {"count_events", "SELECT count(*) FROM events WHERE run = ?"},
    {"run_times", "SELECT created, updated FROM runs WHERE id = ?"},
    {"update_manifest", "UPDATE runs SET manifest = ?, owner = ? WHERE id = ?"},
    {"begin", "BEGIN IMMEDIATE"},
    {"commit", "COMMIT"},
    {"rollback", "ROLLBACK"},
};

}  // namespace

Store::Store(const std::string &path, int busy_ms) : path_(path), busy_ms_(busy_ms) {
    int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) fail("cannot open database '" + path + "'", rc);
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, busy_ms);
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=FULL");  // acknowledged means on disk
    // A checkpoint (every wal_autocheckpoint pages, 4 MB) rewinds the WAL;
    // this also gives back what a burst grew it by, so that the -wal file
    // stays small. A checkpoint that fails on a full disk is retried at the
    // next commit; the WAL then keeps what it holds (nothing is lost).
    exec("PRAGMA journal_size_limit=8388608");
    exec("PRAGMA foreign_keys=ON");
    migrate();
    auto prepare = [&](const Sql &s) {
        sqlite3_stmt *st = nullptr;
        rc = sqlite3_prepare_v3(db_, s.text, -1, SQLITE_PREPARE_PERSISTENT, &st, nullptr);
        if (rc != SQLITE_OK) fail(std::string("preparing ") + s.name, rc);
        prepared_[s.name] = st;
    };
    for (const auto &s : kStatements) prepare(s);
    for (const auto &s : sql::receipt_statements()) prepare(s);
    for (const auto &s : sql::attempt_statements()) prepare(s);
    for (const auto &s : sql::policy_statements()) prepare(s);
    for (const auto &s : sql::node_statements()) prepare(s);
    for (const auto &s : sql::decision_statements()) prepare(s);
    for (const auto &s : sql::seal_statements()) prepare(s);
}

Store::~Store() {
    for (auto &[_, st] : prepared_) sqlite3_finalize(st);
    if (db_) sqlite3_close(db_);
}

bool Store::row(sqlite3_stmt *s) {
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    // An error part-way through a read is an error, not a shorter answer.
    fail(std::string("reading (") + (sqlite3_sql(s) ? std::string(sqlite3_sql(s)).substr(0, 40) : "?") + ")", rc);
}

void Store::fail(const std::string &what, int rc) {
    // The handle's extended code when it is about this failure (rc may be
    // a primary code only); rc otherwise.
    const int handle_code = db_ ? sqlite3_extended_errcode(db_) : rc;
    const int code = (handle_code & 0xff) == (rc & 0xff) ? handle_code : rc;
    std::string msg = what + ": " + (db_ && code == handle_code ? sqlite3_errmsg(db_) : sqlite3_errstr(code)) +
                      " (SQLite extended code " + std::to_string(code) + ")";
    switch (store_fault_of(code)) {
    case StoreFault::full: msg = "database disk is full: " + path_ + "; " + msg; break;
    case StoreFault::io: msg = "database I/O error: " + path_ + "; " + msg; break;
    case StoreFault::busy:
        msg = "database locked by another process past store_busy_ms (" + std::to_string(busy_ms_) + " ms): " + path_ +
              "; " + msg;
        break;
    case StoreFault::other: break;
    }
    throw StoreError(msg, code);
}

void Store::exec(const char *sql) {
    char *err = nullptr;
    int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
        std::string m = err ? err : "";
        sqlite3_free(err);
        fail(std::string("executing '") + std::string(sql).substr(0, 40) + "': " + m, rc);
    }
}

void Store::migrate() {
    sqlite3_stmt *st = nullptr;
    sqlite3_prepare_v2(db_, "PRAGMA user_version", -1, &st, nullptr);
    int version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    const int target = int(sizeof kMigrations / sizeof *kMigrations);
    if (version > target)
        throw StoreError("database schema version " + std::to_string(version) + " is newer than this broker (" +
                             std::to_string(target) + "): " + path_, SQLITE_ERROR);
    for (int v = version; v < target; ++v) {
        exec("BEGIN IMMEDIATE");
        exec(kMigrations[v]);
        exec(("PRAGMA user_version=" + std::to_string(v + 1)).c_str());
        exec("COMMIT");
    }
}

sqlite3_stmt *Store::stmt(const char *name) { return prepared_.at(name); }

sqlite3_stmt *StorePart::stmt(const char *name) { return store_.stmt(name); }
bool StorePart::row(sqlite3_stmt *s) { return store_.row(s); }
void StorePart::fail(const std::string &what, int rc) { store_.fail(what, rc); }
sqlite3 *StorePart::db() { return store_.db_; }

void Store::transaction(const std::function<void()> &fn) {
    auto rollback = [this] {
        Done d{stmt("rollback")};
        sqlite3_step(stmt("rollback"));
    };
    // A transaction left open by a failure SQLite did not roll back itself
    // (a ROLLBACK that failed on an I/O error) would make every later BEGIN
    // fail with "within a transaction": end it first.
    if (!sqlite3_get_autocommit(db_)) rollback();
    {
        Done d{stmt("begin")};
        sqlite3_reset(stmt("begin"));
        if (int rc = sqlite3_step(stmt("begin")); rc != SQLITE_DONE) fail("BEGIN", rc);
    }
    try {
        fn();
    } catch (...) {
        rollback();
        throw;
    }
    Done d{stmt("commit")};
    sqlite3_reset(stmt("commit"));
    if (int rc = sqlite3_step(stmt("commit")); rc != SQLITE_DONE) {
        // A COMMIT that failed (SQLITE_BUSY) leaves the transaction open:
        // without this every later BEGIN fails ("within a transaction").
        try {
            fail("COMMIT", rc);
        } catch (const StoreError &) {
            rollback();
            throw;
        }
    }
}

std::vector<RunRow> Store::load_runs() {
    auto *s = stmt("load_runs");
    Done done{s};
    Binder b(s);
    std::vector<RunRow> out;
    while (row(s))
        out.push_back(RunRow{col_text(s, 0), col_text(s, 1), col_text(s, 2), col_text(s, 4), sqlite3_column_int64(s, 3),
                             sqlite3_column_int64(s, 5), sqlite3_column_double(s, 6), sqlite3_column_double(s, 7),
                             sqlite3_column_int64(s, 8), sqlite3_column_int64(s, 9), sqlite3_column_int64(s, 10), col_text(s, 11)});
    return out;
}

void Store::set_recovering(const std::string &id, long long attempt, long long nodes) {
    auto *s = stmt("set_recovering");
    Done done{s};
    Binder(s).integer(attempt).integer(nodes).text(id);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("updating run " + id, rc);
}

void Store::set_run_owner(const std::string &id, const std::string &owner, long long owner_uid) {
    auto *s = stmt("set_owner");
    Done done{s};
    Binder(s).text(owner).integer(owner_uid).text(id);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("setting the owner of run " + id, rc);
}

std::optional<double> Store::run_created(const std::string &id) {
    auto *s = stmt("run_created");
    Done done{s};
    Binder(s).text(id);
    if (!row(s)) return std::nullopt;
    return sqlite3_column_double(s, 0);
}

void Store::insert_run(const RunRow &r) {
    auto *s = stmt("insert_run");
    Done done{s};
    Binder(s).text(r.id).text(r.owner).text(r.state).integer(r.attempt).text(r.manifest).integer(r.world_size)
        .real(r.created).real(r.updated).integer(r.owner_uid).text(r.requeue);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("inserting run " + r.id, rc);
}

void Store::set_requeue(const std::string &id, const std::string &requeue) {
    auto *s = stmt("set_requeue");
    Done done{s};
    Binder(s).text(requeue).text(id);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("updating run " + id, rc);
}

void Store::update_run(const std::string &id, const std::string &state, long long attempt, double now) {
    auto *s = stmt("update_run");
    Done done{s};
    Binder(s).text(state).integer(attempt).real(now).text(id);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("updating run " + id, rc);
}

long long Store::insert_event(const EventRow &e) {
    auto *s = stmt("insert_event");
    Done done{s};
    Binder(s).text(e.run).real(e.time).text(e.kind).text(e.cause).text(e.evidence);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("inserting event", rc);
    return sqlite3_last_insert_rowid(db_);
}

std::vector<EventRow> Store::list_events(const std::string &run, long long after_id, int limit) {
    auto *s = stmt("list_events");
    Done done{s};
    Binder(s).text(run).integer(after_id).integer(limit);
    std::vector<EventRow> out;
    while (row(s))
        out.push_back(EventRow{sqlite3_column_int64(s, 0), col_text(s, 1), sqlite3_column_double(s, 2), col_text(s, 3),
                               col_text(s, 4), col_text(s, 5)});
    return out;
}

bool Store::straggler_named(const std::string &run, long long attempt, const std::string &node) {
    auto *s = stmt("straggler_named");
    Done done{s};
    Binder(s).text(run).integer(attempt).text(node);
    return row(s);
}

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

std::optional<std::pair<double, double>> Store::run_times(const std::string &run) {
    auto *s = stmt("run_times");
    Done done{s};
    Binder(s).text(run);
    if (!row(s)) return std::nullopt;
    return std::pair{sqlite3_column_double(s, 0), sqlite3_column_double(s, 1)};
}

void Store::update_manifest(const std::string &run, const std::string &manifest, const std::string &owner) {
    auto *s = stmt("update_manifest");
    Done done{s};
    Binder(s).text(manifest).text(owner).text(run);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("updating run " + run, rc);
}

long long Store::limit_pages(long long pages) {
    sqlite3_stmt *st = nullptr;
    const std::string sql = "PRAGMA max_page_count=" + std::to_string(pages);
    if (int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr); rc != SQLITE_OK) fail("limiting the database's pages", rc);
    const long long now = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return now;
}

std::string Store::integrity_check() {
    sqlite3_stmt *st = nullptr;
    sqlite3_prepare_v2(db_, "PRAGMA integrity_check", -1, &st, nullptr);
    std::string r = sqlite3_step(st) == SQLITE_ROW ? col_text(st, 0) : "no answer";
    sqlite3_finalize(st);
    return r;
}

}  // namespace shardnet::broker
