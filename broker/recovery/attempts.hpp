// Recovery's Slurm side (recovery/attempts.cpp): what an attempt's job was,
// captured from Slurm when the attempt starts (so that a requeue needs
// nothing from a cluster that may be gone), the submission of the next
// attempt as the job's owner, a job a decision submitted found again by its
// comment, and the job recorded as the one that may report for its attempt.
#pragma once
#include <boost/json/object.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "broker/core/module.hpp"
#include "broker/inventory/placement.hpp"
#include "broker/receipts/receipts_module.hpp"
#include "broker/recovery/specs_seen.hpp"

namespace shardnet::broker {

// A job's --shardnet-* options as its batch step's agent reports them
// (Attempts::capture_spec keeps them with the job's spec).
struct JobSays {
    std::string ckpt_every;
    long long max_attempts = 0;
    std::string fatal_exit;        // "3,7"
    bool requeue_timeout = false;  // --shardnet-on-timeout=requeue
    long long spares = 0;          // --shardnet-spares
    bool replace_stragglers = false;   // --shardnet-straggler=replace
};

class Attempts : Module {
public:
    // The batch step of an attempt Slurm requeued itself heartbeats again
    // (its spec captured anew): the verdicts' RESUMED event.
    using Resumed = std::function<void(const std::string &run, long long attempt, const std::string &cluster, long long job,
                                       const std::string &nodelist)>;
    Attempts(Core &core, Receipts &receipts, Resumed resumed) : Module(core), receipts_(receipts), resumed_(std::move(resumed)) {}

    // The batch step's first heartbeat of an attempt claims its spec's
    // capture once; released, the next one captures it again.
    bool claim_spec(const std::string &run, long long attempt) { return specs_seen_.claim(run, attempt); }
    void release_spec(const std::string &run, long long attempt) { specs_seen_.release(run, attempt); }
    // The first batch-step heartbeat of an attempt: keep its Slurm job spec
    // and batch script, so that a requeue needs nothing from that cluster.
    // It also starts watching the allocation's other nodes (WorkerTable::watch):
    // a node that dies before any worker there reported is a failure too.
    // says: the job's --shardnet-* options as its batch step's agent reports
    // them, kept with the spec so that every later attempt has them.
    void capture_spec(const std::string &run, long long attempt, const std::string &cluster, long long job,
                      const std::string &ckpt_dir, int interval, const JobSays &says = {});
    // nodelist, batch_host: the job's allocation as Slurm names it, when asked.
    std::optional<Store::JobSpecRow> capture_spec_now(const std::string &run, long long attempt, const std::string &cluster,
                                                      long long job, const std::string &ckpt_dir, std::string *nodelist = nullptr,
                                                      std::string *batch_host = nullptr, const JobSays &says = {});
    // sbatch of an attempt on a local cluster as the job's user; the new job
    // id, or 0 with err.
    // environment: the job's environment given with the call (a peer's
    // decision: kept on disk only once the job and the run exist here);
    // without it, the run's kept one, replayed only when it was written
    // for this owner and one of the run's jobs (job_environment.hpp).
    struct SubmitAs {
        long long uid = -1, gid = -1;
        const std::vector<std::string> *environment = nullptr;
    };
    long long submit_attempt(const std::string &cluster, const boost::json::object &spec, const std::string &script,
                             const std::string &run, long long to, const std::string &resume,
                             const Placement &where, const std::string &decision, const SubmitAs &as,
                             std::string &err, std::vector<std::string> *not_carried = nullptr);
    // A job a decision already submitted, found by the comment it was
    // given ("shardnet-decision:ID:NONCE") on any local cluster: a comment is
    // the user's to set, so only a job of that uid counts.
    // found: the job of the decision's user whose comment carries its marker.
    // Not found while a cluster's answer could not be had or read: unknown
    // (unread names which and why); submitting again could run it twice.
    struct Submitted {
        std::string cluster;
        long long job = 0;
        std::string unread;
        bool found() const { return job > 0; }
        bool unknown() const { return job <= 0 && !unread.empty(); }
    };
    Submitted find_submitted(const std::string &decision, long long uid);
    // The job the broker submitted for an attempt: the only job whose
    // tokens may report for it (memory and store; any thread but the store's).
    // nodes and cause: for the attempt's receipt (the decision that made it).
    void record_attempt(const std::string &run, long long attempt, const std::string &cluster, long long job,
                        const std::vector<std::string> &nodes = {}, const boost::json::object &cause = {},
                        const receipts::ChainLink &from = {});

private:
    // The environment attempt N is submitted with (NUL-terminated entries),
    // or nullopt: none given or kept for this owner and run (why: when one
    // could not be read).
    std::optional<std::string> kept_environment_for(const std::string &run, const SubmitAs &as, std::string &why,
                                                    std::vector<std::string> *not_carried);
    Receipts &receipts_;
    Resumed resumed_;
    SpecsSeen specs_seen_;   // attempts whose job spec is kept (recovery/specs_seen.hpp)
};

}  // namespace shardnet::broker
