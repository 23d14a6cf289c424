// The service's side of a run's state change: the database's (store_state,
// inside the caller's transaction, before memory changes through the run
// registry's set_state, runs/registry.hpp), checked against the lifecycle
// (runs/run_state.hpp), with what goes with a run's end; and retries.
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <stdexcept>

#include "broker/recovery/job_environment.hpp"
#include "broker/service.hpp"
#include "broker/core/api_util.hpp"
#include "broker/slurm/slurm_view.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

void Service::store_state(const std::string &run, RunState to, long long attempt, double now) {
    runs_.check_transition(run, to);
    store_->update_run(run, state_name(to), attempt, now);
    // Every end of a run passes here: its receipt, in the same transaction,
    // once (memory may say final already: the heartbeat's end goes first there).
    // A run's kept environment goes with its end (its values may be secrets).
    if (is_final(to)) {
        std::string ignored;
        if (const std::string dir = private_dir(cfg_.database, ignored); !dir.empty()) forget_environment_file(dir, run);
    }
    if (is_final(to) && cfg_.receipts.on() && !store_->receipts().has_receipt(run, attempt, "run-ended"))
        receipts_.write_receipt(receipt::Kind::run_ended, run, attempt, json::object{{"state", state_name(to)}}, {}, now);
}




void Service::back_to_degraded(const std::string &run) {
    auto runs = runs_.write();
    if (auto it = runs.find(run); it != runs.end() && it->second.state == RunState::recovering)
        runs.set_state(run, it->second, RunState::degraded);
}

}  // namespace shardnet::broker
