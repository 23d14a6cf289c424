// The broker's durable state: SQLite in WAL mode with synchronous=FULL, so
// that a record is on disk before its 2xx leaves. Every call runs on the
// store's own thread (post()); SQL lives in named, prepared statements.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/store/attempt_store.hpp"
#include "broker/store/decision_store.hpp"
#include "broker/store/node_store.hpp"
#include "broker/store/policy_store.hpp"
#include "broker/store/receipt_store.hpp"
#include "broker/store/seal_store.hpp"
#include "broker/store/store_error.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace shardnet::broker {

struct RunRow {
    std::string id, owner, state, manifest;
    long long attempt = 1;
    long long world_size = 0;
    double created = 0, updated = 0;
    long long owner_uid = -1;   // -1: not known yet
    long long recover_to = 0, recover_nodes = 0;   // RECOVERING here: the new attempt and its nodes
    std::string requeue = "federated";             // federated, local or off
};

struct EventRow {
    long long id = 0;
    std::string run;
    double time = 0;
    std::string kind, cause, evidence;  // evidence: JSON text
};

class Store {
public:
    // Opens (creating and migrating) the database. Every failure, here and
    // in the calls below, throws StoreError: SQLite's extended code and
    // message, what was being done, and for a full disk, an I/O error or a
    // lock held too long, that cause and the database's path first.
    explicit Store(const std::string &path, int busy_ms = 2000);
    ~Store();

    // The store's parts, one per area, each with its SQL in its own file.
    ReceiptStore &receipts() { return receipts_; }
    AttemptStore &attempts() { return attempts_; }
    SealStore &seals() { return seals_; }
    DecisionStore &decisions() { return decisions_; }
    PolicyStore &policy() { return policy_; }
    NodeStore &nodes() { return nodes_; }
    // Their rows, under the names they had as the Store's own.
    using ReceiptRow = ReceiptStore::ReceiptRow;
    using TreeHeadRow = ReceiptStore::TreeHeadRow;
    using KeyUse = ReceiptStore::KeyUse;
    using AttemptRow = AttemptStore::AttemptRow;
    using JobSpecRow = AttemptStore::JobSpecRow;
    using RankRow = AttemptStore::RankRow;
    using AttemptStartRow = AttemptStore::AttemptStartRow;
    using WorkerRow = AttemptStore::WorkerRow;
    using SealedListRow = SealStore::SealedListRow;
    using CarriedSealRow = SealStore::CarriedSealRow;
    using WrittenDecision = DecisionStore::WrittenDecision;
    using Forwarding = DecisionStore::Forwarding;
    using Received = DecisionStore::Received;
    using MovedRow = DecisionStore::MovedRow;
    using WitnessedRow = DecisionStore::WitnessedRow;
    using ExposureRow = PolicyStore::ExposureRow;
    using RecoveryRow = PolicyStore::RecoveryRow;
    using PolicyRow = PolicyStore::PolicyRow;
    using NodeRow = NodeStore::NodeRow;
    using NodeFaultRow = NodeStore::NodeFaultRow;

    std::vector<RunRow> load_runs();
    // A run's created and updated times (one row by its key), or none.
    std::optional<std::pair<double, double>> run_times(const std::string &run);
    void insert_run(const RunRow &r);
    void update_run(const std::string &id, const std::string &state, long long attempt, double now);
    long long insert_event(const EventRow &e);
    std::vector<EventRow> list_events(const std::string &run, long long after_id, int limit);
    // Whether a STRAGGLER event of the run's attempt names node (SQLite
    // filters the run's events; no row is copied out).
    bool straggler_named(const std::string &run, long long attempt, const std::string &node);
    // A run's newest n events, oldest first; how many it has.
    std::vector<EventRow> last_events(const std::string &run, int n);
    long long count_events(const std::string &run);
    std::string integrity_check();
    void update_manifest(const std::string &run, const std::string &manifest, const std::string &owner);
    void set_run_owner(const std::string &id, const std::string &owner, long long owner_uid);
    // When the run was created here (its row), or nullopt.
    std::optional<double> run_created(const std::string &id);
    // A RECOVERING run's wait: the attempt that must heartbeat, from how
    // many nodes (0, 0: no wait here).
    void set_recovering(const std::string &id, long long attempt, long long nodes);
    void set_requeue(const std::string &id, const std::string &requeue);

    // Runs fn inside one transaction (all or nothing).
    void transaction(const std::function<void()> &fn);
    // The most pages the database may have (SQLite's max_page_count): past
    // it a write fails as on a full disk. Tests use it to fill the database
    // without filling a filesystem. Returns the limit now in force.
    long long limit_pages(long long pages);

private:
    friend class StorePart;   // the parts run their SQL through stmt, row and fail

    sqlite3_stmt *stmt(const char *name);
    void exec(const char *sql);
    void migrate();
    [[noreturn]] void fail(const std::string &what, int rc);
    // The next row of a read: true, or false at its end; a StoreError otherwise.
    bool row(sqlite3_stmt *s);

    std::string path_;
    int busy_ms_;
    sqlite3 *db_ = nullptr;
    std::map<std::string, sqlite3_stmt *> prepared_;
    ReceiptStore receipts_{*this};
    AttemptStore attempts_{*this};
    SealStore seals_{*this};
    DecisionStore decisions_{*this};
    PolicyStore policy_{*this};
    NodeStore nodes_{*this};
};

}  // namespace shardnet::broker
