// The store's side of the checkpoint policy (doc/checkpoint-policy.md):
// seals' write times, node exposure and interruptions per cluster, each
// recovery's phases, and the interval in force per run (migration 10).
#include <sqlite3.h>

#include "broker/store/policy_store.hpp"
#include "broker/store/sql.hpp"

namespace shardnet::broker {

using namespace sql;

namespace sql {

std::span<const Sql> policy_statements() {
    static const Sql table[] = {
        {"write_samples", "SELECT write_seconds FROM checkpoints WHERE run = ? AND write_seconds IS NOT NULL ORDER BY sealed_at DESC LIMIT ?"},
        {"add_exposure", "INSERT INTO exposure (cluster, node_seconds, interruptions) VALUES (?1, ?2, ?3) ON CONFLICT (cluster) DO UPDATE SET "
                         "node_seconds = node_seconds + ?2, interruptions = interruptions + ?3"},
        {"exposure", "SELECT cluster, node_seconds, interruptions FROM exposure ORDER BY cluster"},
        {"insert_recovery", "INSERT OR REPLACE INTO recoveries (run, attempt, tier, detect, place, start, restore, at) VALUES (?,?,?,?,?,?,?,?)"},
        {"recoveries", "SELECT run, attempt, tier, detect, place, start, restore, at FROM recoveries ORDER BY at DESC LIMIT ?"},
        {"upsert_policy", "INSERT OR REPLACE INTO ckpt_policies (run, version, every_steps, seconds, detail, updated) VALUES (?,?,?,?,?,?)"},
        {"load_policies", "SELECT run, version, every_steps, seconds, detail, updated FROM ckpt_policies"},
    };
    return table;
}

}  // namespace sql

std::vector<double> PolicyStore::write_samples(const std::string &run, int limit) {
    auto *s = stmt("write_samples");
    Done done{s};
    Binder(s).text(run).integer(limit);
    std::vector<double> out;
    while (row(s)) out.push_back(sqlite3_column_double(s, 0));
    return out;
}

void PolicyStore::add_exposure(const std::string &cluster, double node_seconds, long long interruptions) {
    auto *s = stmt("add_exposure");
    Done done{s};
    Binder(s).text(cluster).real(node_seconds).integer(interruptions);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("storing node exposure", rc);
}

std::vector<PolicyStore::ExposureRow> PolicyStore::exposure() {
    auto *s = stmt("exposure");
    Done done{s};
    std::vector<ExposureRow> out;
    while (row(s)) out.push_back(ExposureRow{col_text(s, 0), sqlite3_column_double(s, 1), sqlite3_column_int64(s, 2)});
    return out;
}

void PolicyStore::insert_recovery(const RecoveryRow &r) {
    auto *s = stmt("insert_recovery");
    Done done{s};
    Binder(s).text(r.run).integer(r.attempt).text(r.tier).real(r.detect).real(r.place).real(r.start).real(r.restore).real(r.at);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("storing a recovery's phases", rc);
}

std::vector<PolicyStore::RecoveryRow> PolicyStore::recoveries(int limit) {
    auto *s = stmt("recoveries");
    Done done{s};
    Binder(s).integer(limit);
    std::vector<RecoveryRow> out;
    while (row(s))
        out.push_back(RecoveryRow{col_text(s, 0), sqlite3_column_int64(s, 1), col_text(s, 2), sqlite3_column_double(s, 3),
                                  sqlite3_column_double(s, 4), sqlite3_column_double(s, 5), sqlite3_column_double(s, 6),
                                  sqlite3_column_double(s, 7)});
    return out;
}

void PolicyStore::upsert_policy(const PolicyRow &p) {
    auto *s = stmt("upsert_policy");
    Done done{s};
    Binder(s).text(p.run).integer(p.version).integer(p.every_steps).real(p.seconds).text(p.detail).real(p.updated);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("storing the checkpoint policy", rc);
}

std::vector<PolicyStore::PolicyRow> PolicyStore::load_policies() {
    auto *s = stmt("load_policies");
    Done done{s};
    std::vector<PolicyRow> out;
    while (row(s))
        out.push_back(PolicyRow{col_text(s, 0), sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2), sqlite3_column_double(s, 3),
                                col_text(s, 4), sqlite3_column_double(s, 5)});
    return out;
}

}  // namespace shardnet::broker
