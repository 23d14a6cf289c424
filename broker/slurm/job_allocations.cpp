#include "broker/slurm/job_allocations.hpp"

#include <algorithm>
#include <vector>

#include "broker/slurm/slurm.hpp"
#include "broker/slurm/slurm_job.hpp"
#include "broker/slurm/slurm_view.hpp"

namespace shardnet::broker {

std::string read_allocation(Slurm &slurm, const std::string &conf, long long job, Allocation &out) {
    const std::vector<std::string> argv{std::begin(kSqueueJson), std::end(kSqueueJson)};
    std::string text;
    SlurmJob j;
    std::string why = slurm.query(conf, argv, text) != 0 ? "squeue failed" : find_job_noted(slurm, conf, text, job, j).why;
    // A job that just started may be newer than the cached answer: asked
    // once more, fresh (once per job: the answer is kept).
    if (!why.empty() || j.nodes.empty()) {
        j = SlurmJob{};
        why = slurm.fresh(conf, argv, text) != 0 ? "squeue failed" : find_job_noted(slurm, conf, text, job, j).why;
    }
    if (!why.empty()) return why;
    if (j.nodes.empty()) return "job " + std::to_string(job) + " has no nodes yet (state " + j.state + ")";
    const auto hosts = slurm_hostnames(slurm, conf, j.nodes);
    if (!hosts || hosts->empty()) return "no node list for job " + std::to_string(job);
    out.nodes = std::set<std::string>(hosts->begin(), hosts->end());
    out.tasks = std::max<long long>({j.tasks, j.node_count, (long long)out.nodes.size(), 1});
    out.error.clear();
    return "";
}

JobAllocations::Answer JobAllocations::judge(const std::string &cluster, long long job, const std::string &node, double now) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(key(cluster, job));
    if (it == jobs_.end()) return {};
    const Allocation &a = it->second;
    if (!a.error.empty()) {
        if (now - a.at >= kRetrySeconds) return {};
        return Answer{Verdict::unavailable, 0, a.error};
    }
    if (a.nodes.count(node)) return Answer{Verdict::member, a.tasks, ""};
    // Slurm may have requeued the job itself onto other nodes since.
    if (now - a.at >= kRecheckSeconds) return {};
    return Answer{Verdict::not_member, a.tasks, ""};
}

bool JobAllocations::start_read(const std::string &cluster, long long job, std::function<void()> again) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, first] = reads_.try_emplace(key(cluster, job));
    if (!first) it->second.push_back(std::move(again));
    return first;
}

void JobAllocations::put(const std::string &cluster, long long job, Allocation a) {
    std::vector<std::function<void()>> waiting;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (jobs_.size() >= kMaxJobs) {
            const double now = a.at;
            std::erase_if(jobs_, [now](const auto &kv) { return now - kv.second.at > kForgetSeconds; });
            if (jobs_.size() >= kMaxJobs) jobs_.clear();   // a flood of jobs: read Slurm again as they come
        }
        const std::string k = key(cluster, job);
        jobs_[k] = std::move(a);
        if (auto r = reads_.find(k); r != reads_.end()) {
            waiting = std::move(r->second);
            reads_.erase(r);
        }
    }
    for (auto &again : waiting) again();
}

std::size_t JobAllocations::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return jobs_.size();
}

}  // namespace shardnet::broker
