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

void RunRegistry::Writer::touch(const std::string &run, const RunInfo *info) {
    // Most writers reach one run; a load reaches all of them.
    if (touched_.size() < 16) {
        for (const auto &b : touched_)
            if (b.run == run) return;
    } else {
        if (many_.empty())
            for (const auto &b : touched_) many_.insert(b.run);
        if (!many_.insert(run).second) return;
    }
    touched_.push_back(info ? Before{run, count_key(*info), !is_final(info->state)} : Before{run, {}, false});
}

void RunRegistry::Writer::settle() {
    if (touched_.empty() || !lock_.owns_lock()) return;
    auto &counts = reg_->open_by_owner_;
    for (const auto &b : touched_) {
        if (b.open && !b.owner.empty())
            if (auto c = counts.find(b.owner); c != counts.end() && --c->second <= 0) counts.erase(c);
        auto it = runs_->find(b.run);
        if (it != runs_->end() && !is_final(it->second.state) && !it->second.owner.empty()) ++counts[count_key(it->second)];
    }
    touched_.clear();
    many_.clear();
}

std::string RunRegistry::count_key(const RunInfo &info) {
    if (info.owner.empty()) return "";
    // A run a peer's decision made here starts here at a later attempt.
    const bool by_peer = !info.jobs.empty() && info.jobs.begin()->first > 1;
    return by_peer ? std::string(kPeerMade) + info.owner : info.owner;
}

long long RunRegistry::Writer::open_of(const std::string &owner) {
    settle();
    auto it = reg_->open_by_owner_.find(owner);
    return it == reg_->open_by_owner_.end() ? 0 : it->second;
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
