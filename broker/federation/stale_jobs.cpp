#include "broker/federation/stale_jobs.hpp"

#include "broker/core/api_util.hpp"

namespace shardnet::broker {

using namespace detail;

void StaleJobs::cancel_stale(const std::string &cluster, long long job) {
    auto conf = cfg_.clusters.find(cluster);
    if (job <= 0 || conf == cfg_.clusters.end()) return;
    {
        std::lock_guard<std::mutex> lock(stale_mu_);
        if (!stale_cancelled_.insert(cluster + "/" + std::to_string(job)).second) return;
    }
    post_guarded(slurm_thread_, "cancel stale job", [this, slurm_conf = conf->second, job] {
        std::string ignored;
        slurm_->change(slurm_conf, {"scancel", std::to_string(job)}, ignored);
    });
}

}  // namespace shardnet::broker
