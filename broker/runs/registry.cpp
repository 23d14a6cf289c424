// The run registry: the runs' map behind its lock (registry.hpp).
#include "broker/runs/registry.hpp"

#include <boost/json/object.hpp>
#include <stdexcept>

#include "broker/util/log.hpp"

namespace shardnet::broker {

bool RunRegistry::Writer::set_state(const std::string &run, RunInfo &info, RunState to) {
    if (!transition_allowed(info.state, to)) {
        log_json("warn", "state change refused",
                 boost::json::object{{"run", run}, {"why", std::string(state_name(info.state)) + " -> " + state_name(to) +
                                                              " is not in the run lifecycle"}});
        return false;
    }
    info.state = to;
    bump();
    return true;
}

void RunRegistry::undo(const std::string &run, const std::optional<RunInfo> &before) {
    {
        auto runs = write();
        if (before) runs[run] = *before;
        else runs.erase(run);
        runs.bump();
    }
    log_json("warn", "run change not written; memory put back as the database has it", boost::json::object{{"run", run}, {"why", ""}});
}

void RunRegistry::check_transition(const std::string &run, RunState to) const {
    auto runs = read();
    auto it = runs.find(run);
    if (it != runs.end() && it->second.state != to && !transition_allowed(it->second.state, to))
        throw std::runtime_error("run " + run + ": " + state_name(it->second.state) + " -> " + state_name(to) +
                                 " is not in the run lifecycle");
}

}  // namespace shardnet::broker
