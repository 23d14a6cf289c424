// The store's side of attempts: the job that runs each (a worker token
// must name it), its Slurm spec and script (a requeue needs no slurmctld of
// the failed cluster), its ranks and what its start receipt needs, and its
// workers as last summed up (watched again after a restart).
#include <sqlite3.h>

#include "broker/store/attempt_store.hpp"
#include "broker/store/sql.hpp"

namespace shardnet::broker {

using namespace sql;

namespace sql {

std::span<const Sql> attempt_statements() {
    static const Sql table[] = {
        {"upsert_attempt", "INSERT INTO attempts (run, attempt, cluster, job, world) VALUES (?,?,?,?,?) "
                           "ON CONFLICT (run, attempt) DO UPDATE SET cluster = excluded.cluster, job = excluded.job, world = excluded.world"},
        {"load_attempts", "SELECT run, attempt, cluster, job, world FROM attempts"},
        {"attempt_job", "SELECT cluster, job, world FROM attempts WHERE run = ? AND attempt = ?"},
        {"upsert_job_spec", "INSERT OR REPLACE INTO job_specs (run, attempt, cluster, job, spec, script) VALUES (?,?,?,?,?,?)"},
        {"get_job_spec", "SELECT cluster, job, spec, script FROM job_specs WHERE run = ? AND attempt = ?"},
        {"insert_rank", "INSERT OR IGNORE INTO attempt_ranks (run, attempt, rank, node, environment) VALUES (?,?,?,?,?)"},
        {"count_ranks", "SELECT count(*) FROM attempt_ranks WHERE run = ? AND attempt = ?"},
        {"attempt_ranks", "SELECT rank, node, environment FROM attempt_ranks WHERE run = ? AND attempt = ? ORDER BY rank"},
        {"put_attempt_start", "INSERT OR REPLACE INTO attempt_starts (run, attempt, cluster, job, nodes, cause, from_seq, from_digest) "
                               "VALUES (?,?,?,?,?,?,?,?)"},
        {"add_attempt_start", "INSERT OR IGNORE INTO attempt_starts (run, attempt, cluster, job, nodes, cause, from_seq, from_digest) "
                              "VALUES (?,?,?,?,?,?,?,?)"},
        {"attempt_start", "SELECT cluster, job, nodes, cause, from_seq, from_digest FROM attempt_starts WHERE run = ? AND attempt = ?"},
        {"upsert_worker", "INSERT INTO workers (run, attempt, node, ranks, last_seen, last_step, interval, ended, watch_only, cluster, job) "
                          "VALUES (?,?,?,?,?,?,?,?,?,?,?) "
                          "ON CONFLICT (run, attempt, node) DO UPDATE SET ranks = excluded.ranks, "
                          "last_seen = excluded.last_seen, last_step = excluded.last_step, interval = excluded.interval, "
                          "ended = excluded.ended, watch_only = excluded.watch_only, cluster = excluded.cluster, job = excluded.job"},
        {"load_workers", "SELECT run, attempt, node, interval, watch_only, cluster, job FROM workers WHERE ended = 0 AND interval > 0"},
    };
    return table;
}

}  // namespace sql

void AttemptStore::upsert_attempt(const AttemptRow &a) {
    auto *s = stmt("upsert_attempt");
    Done done{s};
    Binder(s).text(a.run).integer(a.attempt).text(a.cluster).integer(a.job).integer(a.world);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("recording attempt " + std::to_string(a.attempt) + " of run " + a.run, rc);
}

std::vector<AttemptStore::AttemptRow> AttemptStore::load_attempts() {
    auto *s = stmt("load_attempts");
    Done done{s};
    Binder b(s);
    std::vector<AttemptRow> out;
    while (row(s))
        out.push_back(AttemptRow{col_text(s, 0), sqlite3_column_int64(s, 1), col_text(s, 2), sqlite3_column_int64(s, 3),
                                 sqlite3_column_int64(s, 4)});
    sqlite3_reset(s);
    return out;
}

std::optional<AttemptStore::AttemptRow> AttemptStore::attempt_job(const std::string &run, long long attempt) {
    auto *s = stmt("attempt_job");
    Done done{s};
    Binder(s).text(run).integer(attempt);
    if (!row(s)) return std::nullopt;
    return AttemptRow{run, attempt, col_text(s, 0), sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2)};
}

void AttemptStore::upsert_job_spec(const std::string &run, long long attempt, const JobSpecRow &j) {
    auto *s = stmt("upsert_job_spec");
    Done done{s};
    Binder(s).text(run).integer(attempt).text(j.cluster).integer(j.job).text(j.spec).text(j.script);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("storing the job of " + run, rc);
}

std::optional<AttemptStore::JobSpecRow> AttemptStore::get_job_spec(const std::string &run, long long attempt) {
    auto *s = stmt("get_job_spec");
    Done done{s};
    Binder(s).text(run).integer(attempt);
    if (!row(s)) return std::nullopt;
    return JobSpecRow{col_text(s, 0), sqlite3_column_int64(s, 1), col_text(s, 2), col_text(s, 3)};
}

long long AttemptStore::insert_ranks(const std::string &run, long long attempt, const std::vector<RankRow> &rows) {
    for (const auto &r : rows) {
        auto *s = stmt("insert_rank");
        Done done{s};
        Binder(s).text(run).integer(attempt).integer(r.rank).text(r.node).text(r.environment);
        if (int rc = sqlite3_step(s); rc != SQLITE_DONE)
            fail("storing rank " + std::to_string(r.rank) + " of run " + run + " attempt " + std::to_string(attempt), rc);
    }
    auto *s = stmt("count_ranks");
    Done done{s};
    Binder(s).text(run).integer(attempt);
    return row(s) ? sqlite3_column_int64(s, 0) : 0;
}

std::vector<AttemptStore::RankRow> AttemptStore::attempt_ranks(const std::string &run, long long attempt) {
    auto *s = stmt("attempt_ranks");
    Done done{s};
    Binder(s).text(run).integer(attempt);
    std::vector<RankRow> out;
    while (row(s)) out.push_back(RankRow{sqlite3_column_int64(s, 0), col_text(s, 1), col_text(s, 2)});
    return out;
}

void AttemptStore::put_attempt_start(const std::string &run, long long attempt, const AttemptStartRow &a, bool replace) {
    auto *s = stmt(replace ? "put_attempt_start" : "add_attempt_start");
    Done done{s};
    Binder(s).text(run).integer(attempt).text(a.cluster).integer(a.job).text(a.nodes).text(a.cause).integer(a.from_seq).text(a.from_digest);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("storing the start of run " + run + " attempt " + std::to_string(attempt), rc);
}

std::optional<AttemptStore::AttemptStartRow> AttemptStore::attempt_start(const std::string &run, long long attempt) {
    auto *s = stmt("attempt_start");
    Done done{s};
    Binder(s).text(run).integer(attempt);
    if (!row(s)) return std::nullopt;
    return AttemptStartRow{col_text(s, 0), sqlite3_column_int64(s, 1), col_text(s, 2), col_text(s, 3), sqlite3_column_int64(s, 4), col_text(s, 5)};
}

void AttemptStore::upsert_worker(const std::string &run, long long attempt, const std::string &node, const std::string &ranks,
                                 double last_seen, long long last_step, long long interval, bool ended, bool watch_only,
                                 const std::string &cluster, long long job) {
    auto *s = stmt("upsert_worker");
    Done done{s};
    Binder(s).text(run).integer(attempt).text(node).text(ranks).real(last_seen).integer(last_step).integer(interval)
        .integer(ended ? 1 : 0).integer(watch_only ? 1 : 0).text(cluster).integer(job);
    if (int rc = sqlite3_step(s); rc != SQLITE_DONE) fail("storing worker summary", rc);
}

std::vector<AttemptStore::WorkerRow> AttemptStore::load_workers() {
    auto *s = stmt("load_workers");
    Done done{s};
    Binder b(s);
    std::vector<WorkerRow> out;
    while (sqlite3_step(s) == SQLITE_ROW)
        out.push_back(WorkerRow{col_text(s, 0), sqlite3_column_int64(s, 1), col_text(s, 2), sqlite3_column_int64(s, 3),
                                sqlite3_column_int64(s, 4) != 0, col_text(s, 5), sqlite3_column_int64(s, 6)});
    return out;
}

}  // namespace shardnet::broker
