// Runs: the one place a run's state changes, in the database
// (store_state, inside the caller's transaction) and then in memory
// (set_state, after the commit), both checked against the lifecycle
// (run_state.hpp); what undoes a change the store refused, and retries.
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <stdexcept>

#include "broker/recovery/job_environment.hpp"
#include "broker/service.hpp"
#include "broker/api/api_util.hpp"
#include "broker/slurm/slurm_view.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

void Service::store_state(const std::string &run, RunState to, long long attempt, double now) {
    {
        std::shared_lock lock(runs_mu_);
        auto it = runs_.find(run);
        if (it != runs_.end() && it->second.state != to && !transition_allowed(it->second.state, to))
            throw std::runtime_error("run " + run + ": " + state_name(it->second.state) + " -> " + state_name(to) +
                                     " is not in the run lifecycle");
    }
    store_->update_run(run, state_name(to), attempt, now);
    // Every end of a run passes here: its receipt, in the same transaction,
    // once (memory may say final already: the heartbeat's end goes first there).
    // A run's kept environment goes with its end (its values may be secrets).
    if (is_final(to)) {
        std::string ignored;
        if (const std::string dir = private_dir(cfg_.database, ignored); !dir.empty()) forget_environment_file(dir, run);
    }
    if (is_final(to) && cfg_.receipts.on() && !store_->has_receipt(run, attempt, "run-ended"))
        write_receipt(receipt::Kind::run_ended, run, attempt, json::object{{"state", state_name(to)}}, {}, now);
}

bool Service::set_state(const std::string &run, RunInfo &info, RunState to) {
    if (!transition_allowed(info.state, to)) {
        detail::log_warn("state change refused", run, std::string(state_name(info.state)) + " -> " + state_name(to) + " is not in the run lifecycle");
        return false;
    }
    info.state = to;
    runs_generation_.fetch_add(1, std::memory_order_release);
    return true;
}

void Service::undo_run(const std::string &run, const std::optional<RunInfo> &before) {
    std::unique_lock lock(runs_mu_);
    if (before) runs_[run] = *before;
    else runs_.erase(run);
    runs_generation_.fetch_add(1, std::memory_order_release);
    log_warn("run change not written; memory put back as the database has it", run, "");
}

void Service::retry_later(double delay, const char *what, std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(retry_mu_);
    retries_.push_back(Retry{wall_now() + delay, what, std::move(fn), {}});
}

bool Service::retry_once(const std::string &key, double delay, const char *what, std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(retry_mu_);
    for (const auto &r : retries_)
        if (r.key == key) return false;
    retries_.push_back(Retry{wall_now() + delay, what, std::move(fn), key});
    return true;
}

void Service::run_retries(double now) {
    std::vector<Retry> due;
    {
        std::lock_guard<std::mutex> lock(retry_mu_);
        for (auto it = retries_.begin(); it != retries_.end();)
            if (it->at <= now) { due.push_back(std::move(*it)); it = retries_.erase(it); }
            else ++it;
    }
    for (auto &r : due) guarded(r.what, r.fn);
}

void Service::back_to_degraded(const std::string &run) {
    std::unique_lock lock(runs_mu_);
    if (auto it = runs_.find(run); it != runs_.end() && it->second.state == RunState::recovering)
        set_state(run, it->second, RunState::degraded);
}

}  // namespace shardnet::broker
