// What the broker recorded of each attempt (store/attempt_store.cpp):
// Store::attempts(). Its job, the job's Slurm spec, its ranks as their
// agents reported them, what a receipt of its start needs, its workers.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "broker/store/store_part.hpp"

namespace shardnet::broker {

class AttemptStore : StorePart {
public:
    explicit AttemptStore(Store &store) : StorePart(store) {}

    // The job that runs an attempt, as this broker recorded it (the first
    // job of attempt 1; the job it submitted for every later one).
    struct AttemptRow { std::string run; long long attempt = 0; std::string cluster; long long job = 0, world = 0; };
    void upsert_attempt(const AttemptRow &a);
    std::vector<AttemptRow> load_attempts();
    // The attempt's recorded job: cluster, Slurm job id, ranks.
    std::optional<AttemptRow> attempt_job(const std::string &run, long long attempt);
    // What an attempt's job was: its Slurm spec (JSON) and batch script.
    struct JobSpecRow { std::string cluster; long long job = 0; std::string spec, script; };
    void upsert_job_spec(const std::string &run, long long attempt, const JobSpecRow &j);
    std::optional<JobSpecRow> get_job_spec(const std::string &run, long long attempt);
    // An attempt's ranks as their agents reported them (POST
    // /v1/runs/RUN/ranks): node and environment (JSON object text, "null":
    // none reported). A rank's first report stands; insert_ranks answers how
    // many ranks of the attempt are in.
    struct RankRow { long long rank = 0; std::string node, environment; };
    long long insert_ranks(const std::string &run, long long attempt, const std::vector<RankRow> &rows);
    std::vector<RankRow> attempt_ranks(const std::string &run, long long attempt);
    // What the broker knew when it made an attempt, kept for its receipt
    // (written once the ranks are in): its job, the planned nodes (JSON
    // array), the decision (JSON object) and where a peer's chain goes on.
    // replace false: only when the attempt has none yet.
    struct AttemptStartRow {
        std::string cluster;
        long long job = 0;
        std::string nodes = "[]", cause = "{}";
        long long from_seq = 0;
        std::string from_digest;
    };
    void put_attempt_start(const std::string &run, long long attempt, const AttemptStartRow &a, bool replace = true);
    std::optional<AttemptStartRow> attempt_start(const std::string &run, long long attempt);
    void upsert_worker(const std::string &run, long long attempt, const std::string &node, const std::string &ranks,
                       double last_seen, long long last_step, long long interval = 0, bool ended = false, bool watch_only = false,
                       const std::string &cluster = "", long long job = 0);
    // Workers that had not ended (nor faulted) at the last summary.
    struct WorkerRow {
        std::string run;
        long long attempt = 0;
        std::string node;
        long long interval = 0;
        bool watch_only = false;
        std::string cluster;
        long long job = 0;
    };
    std::vector<WorkerRow> load_workers();
};

}  // namespace shardnet::broker
