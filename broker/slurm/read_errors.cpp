#include "broker/slurm/read_errors.hpp"

#include <boost/json/object.hpp>
#include <chrono>

#include "broker/util/log.hpp"

namespace shardnet::broker {

namespace {
double wall_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

void SlurmReadErrors::unreadable(const std::string &slurm_conf, const std::string &why) {
    const double now = wall_seconds();
    bool first = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto [it, inserted] = errors_.try_emplace(slurm_conf);
        Entry &e = it->second;
        first = inserted;
        if (inserted) e.since = now;
        e.why = why;
        e.last = now;
        ++e.count;
    }
    if (first)
        log_json("error", "Slurm's answer cannot be read; no verdict on its jobs until it can",
                 boost::json::object{{"slurm_conf", slurm_conf}, {"why", why}});
}

void SlurmReadErrors::readable(const std::string &slurm_conf) {
    Entry gone;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = errors_.find(slurm_conf);
        if (it == errors_.end()) return;
        gone = std::move(it->second);
        errors_.erase(it);
    }
    log_json("info", "Slurm's answers are read again",
             boost::json::object{{"slurm_conf", slurm_conf}, {"unreadable", gone.count}, {"for_seconds", wall_seconds() - gone.since}});
}

std::map<std::string, SlurmReadErrors::Entry> SlurmReadErrors::by_conf() const {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_;
}

}  // namespace shardnet::broker
