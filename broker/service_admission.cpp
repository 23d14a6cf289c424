// A job's worker reporting for the first time. The token says which job
// reports (slurmstepd took it from Slurm), but the node and step are the
// job's own words: the node must be one of the job's nodes as Slurm lists
// them, and the job's workers that still report stay within its task count
// from Slurm, so that a job can neither pose as a node it does not hold nor
// grow the broker's tables without bound. Slurm is read once per job (and
// again only when the answer may have changed: job_allocations.hpp), off
// the I/O threads; a known worker's heartbeat is never held up by it.
#include <algorithm>
#include <boost/asio/post.hpp>

#include "broker/core/api_util.hpp"
#include "broker/service.hpp"

namespace shardnet::broker {

using namespace detail;

namespace {

std::string job_name(const TokenEntry &who) { return who.cluster + "/" + std::to_string(who.job); }

}  // namespace

bool Service::run_takes(std::string_view run, const TokenEntry &who, long long attempt) const {
    const std::string key(run);
    auto runs = runs_.read();
    auto it = runs.find(key);
    const RunInfo *info = it == runs.end() ? nullptr : &it->second;
    return refuse_worker(info, key, who, attempt).empty() && !(info && info->attempt > attempt);
}

Service::Admission Service::admit_worker(const ApiRequest &req, const TokenEntry &who, const Reply &reply, double now,
                                         std::string_view run, std::string_view node, std::string_view worker, long long attempt,
                                         bool ended, bool looked_up, std::unique_lock<std::mutex> &hold) {
    const std::string node_name(node);
    // A job of a cluster this broker does not run: Slurm cannot be asked,
    // so the largest step task count its tokens carried (slurmstepd's
    // word: this one's, or an earlier step's of the same job) is the cap,
    // and one batch script. A one-task helper step beside an 8-task one
    // counts against 8, not 1.
    if (!cfg_.clusters.count(who.cluster)) {
        const long long tasks = runs_.with_run(std::string(run), [&](const RunInfo *info) {
            long long most = (long long)who.world;
            if (!info) return most;
            if (auto j = info->jobs.find(attempt); j != info->jobs.end() && j->second.cluster == who.cluster && j->second.job == (long long)who.job)
                most = std::max(most, j->second.world);
            return most;
        });
        return within_tasks(reply, who, run, worker, attempt, ended, tasks, false, hold);
    }
    JobAllocations::Answer a = allocations_.judge(who.cluster, (long long)who.job, node_name, now);
    if (a.verdict == JobAllocations::Verdict::ask && looked_up)   // read a moment ago, and already forgotten: a flood of jobs
        a = {JobAllocations::Verdict::unavailable, 0, "the job's nodes were read and not kept"};
    if (a.verdict == JobAllocations::Verdict::ask) {
        // Copies: the connection reuses its request, and the token's entry
        // may be swept before Slurm answers. No connection cache: the
        // session waits for this answer and uses it for nothing else.
        ApiRequest later{req.method, req.target, req.bearer, req.body, nullptr};
        // A read of the job under way already (its other nodes' first
        // heartbeats, or one job's flood): this one waits for its answer,
        // and comes back here once it is in.
        auto again = [this, later, who, reply] {
            post_answering(slurm_thread_, "slurm", reply, [this, later, who](const Reply &reply) { heartbeats(later, who, reply, wall_now(), true); });
        };
        if (!allocations_.start_read(who.cluster, (long long)who.job, std::move(again))) return Admission::asked;
        post_answering(slurm_thread_, "slurm", reply, [this, later = std::move(later), who = who](const Reply &reply) {
            Allocation alloc;
            // Always put, even when the read throws: the heartbeats waiting for it are run then.
            try {
                alloc.error = read_allocation(*slurm_, cfg_.clusters.at(who.cluster), (long long)who.job, alloc);
            } catch (const std::exception &e) {
                alloc.error = std::string("reading Slurm failed: ") + e.what();
            }
            alloc.at = wall_now();
            allocations_.put(who.cluster, (long long)who.job, std::move(alloc));
            heartbeats(later, who, reply, wall_now(), true);
        });
        return Admission::asked;
    }
    if (a.verdict == JobAllocations::Verdict::unavailable) {
        ApiResponse r = error_response(503, "slurm_unavailable", "the nodes of job " + job_name(who) + " could not be read from Slurm (" +
                                       a.error + "); node " + node_name + " is not taken until they are; report again");
        r.retry_after = unsigned(JobAllocations::kRetrySeconds);
        reply(std::move(r));
        return Admission::answered;
    }
    if (a.verdict == JobAllocations::Verdict::not_member) {
        count(c_refused);
        reply(error_response(403, "not_this_job", "node " + node_name + " is not one of job " + job_name(who) + "'s nodes (as Slurm lists them)",
                             "node"));
        return Admission::answered;
    }
    return within_tasks(reply, who, run, worker, attempt, ended, a.tasks, true, hold);
}

// Its last report adds no worker that reports. A batch script's is no
// task's: with Slurm, one per node of the job at most (NODE/batch);
// without, one.
Service::Admission Service::within_tasks(const Reply &reply, const TokenEntry &who, std::string_view run, std::string_view worker,
                                         long long attempt, bool ended, long long tasks, bool from_slurm, std::unique_lock<std::mutex> &hold) {
    const bool batch = is_batch_worker(worker);
    if (ended || (batch && from_slurm)) return Admission::admitted;
    const long long cap = batch ? 1 : tasks;
    hold = admission_.hold();
    // Ended workers of the attempt beyond a few per task are forgotten here.
    const auto live = workers_.live(std::string(run), attempt, who.cluster, (long long)who.job, std::size_t(cap) * 4 + 16, batch);
    if ((long long)live.count < cap) return Admission::admitted;
    hold.unlock();
    count(c_refused);
    std::string some;
    for (const auto &w : live.some) some += (some.empty() ? "" : ", ") + w;
    const std::string has = batch ? "has one batch script" : "has " + std::to_string(cap) + " task" + (cap == 1 ? "" : "s");
    reply(error_response(409, "too_many_workers", "job " + job_name(who) + " " + has +
                         (from_slurm ? " (Slurm)" : " (its token's step: cluster " + who.cluster + " is not one this broker runs)") + "; " +
                         std::to_string(live.count) + " of its workers already report for attempt " + std::to_string(attempt) +
                         " of run " + std::string(run) + " (" + some + (live.count > live.some.size() ? ", ..." : "") + "); worker " +
                         std::string(worker) + " is refused", "node"));
    return Admission::answered;
}

}  // namespace shardnet::broker
