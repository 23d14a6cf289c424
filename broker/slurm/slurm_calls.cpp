#include "broker/slurm/slurm_calls.hpp"

#include <chrono>
#include <thread>

#include "broker/slurm/slurm_view.hpp"

namespace shardnet::broker {

namespace {
double mono_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

int SlurmCalls::query(const std::string &slurm_conf, const std::vector<std::string> &argv, std::string &out) {
    const auto key = std::make_pair(slurm_conf, argv);
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = cache_.find(key);
        if (it != cache_.end() && mono_now() - it->second.at < cache_ms_ / 1000.0) {
            hits_.fetch_add(1, std::memory_order_relaxed);
            out = it->second.out;
            return it->second.rc;
        }
    }
    return fresh(slurm_conf, argv, out);
}

int SlurmCalls::fresh(const std::string &slurm_conf, const std::vector<std::string> &argv, std::string &out) {
    const double at = mono_now();
    int rc = call(slurm_conf, argv, out, false);
    std::lock_guard<std::mutex> lock(mu_);
    if (cache_.size() > 4096) cache_.clear();  // bounded: old answers are worthless anyway
    cache_[std::make_pair(slurm_conf, argv)] = Answer{at, rc, out};
    return rc;
}

int SlurmCalls::change(const std::string &slurm_conf, const std::vector<std::string> &argv, std::string &out) {
    const int rc = call(slurm_conf, argv, out, true);
    drop_cache(slurm_conf);
    return rc;
}

void SlurmCalls::drop_cache(const std::string &slurm_conf) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = cache_.begin(); it != cache_.end();)
        it = it->first.first == slurm_conf ? cache_.erase(it) : std::next(it);
}

bool SlurmCalls::slurmd_answers(const std::string &addr, int port, int timeout_ms) {
    return tcp_answers(addr, port, timeout_ms);
}

int SlurmCalls::change_as(const std::string &slurm_conf, const std::vector<std::string> &argv, const RunAs &as, std::string &out) {
    if (ping_first_ && !controller_up(slurm_conf)) {
        out = "slurmctld is down (scontrol ping)";
        return -1;
    }
    calls_.fetch_add(1, std::memory_order_relaxed);
    const int rc = run_slurm_as(slurm_conf, argv, as, out);
    drop_cache(slurm_conf);
    return rc;
}

bool SlurmCalls::controller_up(const std::string &slurm_conf) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = up_.find(slurm_conf);
        if (it != up_.end() && mono_now() - it->second.first < 2.0) return it->second.second;
    }
    std::string out;
    calls_.fetch_add(1, std::memory_order_relaxed);
    const bool up = run_slurm(slurm_conf, {"scontrol", "ping"}, out) == 0 && out.find("UP") != std::string::npos;
    std::lock_guard<std::mutex> lock(mu_);
    up_[slurm_conf] = {mono_now(), up};
    return up;
}

int SlurmCalls::call(const std::string &slurm_conf, const std::vector<std::string> &argv, std::string &out, bool with_stderr) {
    if (ping_first_ && !(argv.size() == 2 && argv[0] == "scontrol" && argv[1] == "ping") && !controller_up(slurm_conf)) {
        out = "slurmctld is down (scontrol ping)";
        return -1;
    }
    // Throttle: within any one second, at most max_per_second calls to a
    // cluster; the caller (the broker's Slurm thread) waits for its turn.
    for (;;) {
        double wait = 0;
        {
            std::lock_guard<std::mutex> lock(mu_);
            auto &times = recent_[slurm_conf];
            const double now = mono_now();
            while (!times.empty() && now - times.front() >= 1.0) times.erase(times.begin());
            if (int(times.size()) < max_per_second_) {
                times.push_back(now);
                break;
            }
            wait = 1.0 - (now - times.front());
        }
        std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    }
    calls_.fetch_add(1, std::memory_order_relaxed);
    return run_slurm(slurm_conf, argv, out, with_stderr);
}

}  // namespace shardnet::broker
