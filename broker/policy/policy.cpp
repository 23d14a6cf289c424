// The checkpoint policy of runs with --shardnet-ckpt-every=auto: measured
// here (write time per seal, step time, node exposure and interruptions,
// each recovery's phases), computed (policy/estimate.hpp over
// common/ckpt_model.hpp), kept with hysteresis, and handed to the run's
// agents in the heartbeat answer. See doc/checkpoint-policy.md.
#include <boost/json.hpp>
#include <set>

#include "broker/policy/estimate.hpp"
#include "broker/policy/policy_module.hpp"
#include "broker/core/api_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

namespace {

json::value measured_json(const std::optional<policy::Measured> &m) {
    if (!m) return nullptr;
    return json::object{{"value", m->value}, {"samples", m->samples}, {"source", m->source}};
}

ckpt::Bounds bounds_of(const BrokerConfig::CkptPolicy &p) {
    ckpt::Bounds b;
    b.min_seconds = p.min_seconds;
    b.max_seconds = p.max_seconds;
    b.min_steps = p.min_steps;
    b.hysteresis = p.hysteresis;
    return b;
}

// The heartbeat answer that hands a policy version to the run's agents.
std::shared_ptr<const std::string> answer_json(long long version, long long steps, double seconds) {
    return std::make_shared<const std::string>(json::serialize(json::object{
        {"policy", json::object{{"version", version}, {"every_steps", steps}, {"seconds", seconds}, {"model", "daly"}}}}));
}

}  // namespace

void Policy::load_policies() {
    auto runs = runs_.write();
    for (auto &p : store_->policy().load_policies()) {
        auto it = runs.find(p.run);
        if (it == runs.end()) continue;
        RunInfo &info = it->second;
        info.policy_version = p.version;
        info.policy_steps = p.every_steps;
        info.policy_detail = std::make_shared<const std::string>(p.detail);
        info.policy_answer = answer_json(p.version, p.every_steps, p.seconds);
    }
}

// One summary's pass over the policies (store thread): node exposure, the
// recoveries whose first step came, and each auto run's interval.
struct Policy::PolicyPass {
    Policy &s;
    const std::vector<WorkerSummary> &workers;
    const double now;
    // A run to look at, as memory has it now.
    struct Look { std::string run; long long attempt, version, steps; RunInfo::RecoveryClock clock; bool running; };
    std::vector<Look> look;
    std::map<std::string, std::vector<const WorkerSummary *>> of_run;

    void count_exposure();
    bool gather();
    void close_recoveries();
    void recompute(const Look &l, const std::vector<policy::Phases> &phases, double node_seconds, long long interruptions,
                   const json::array &tiers_json);
};

namespace {

json::array tiers_json(const std::vector<policy::Phases> &phases) {
    json::array out;
    for (const auto &t : policy::by_tier(phases))
        out.push_back(json::object{{"tier", t.tier}, {"recoveries", t.n}, {"detect", t.mean.detect}, {"place", t.mean.place},
                                   {"start", t.mean.start}, {"restore", t.mean.restore}, {"total", t.mean.total()}});
    return out;
}

// What a policy was computed from, for GET /v1/runs/R/policy.
json::object policy_detail(const std::string &run, long long attempt, double now, const BrokerConfig::CkptPolicy &conf,
                           const ckpt::Bounds &bounds, const policy::Inputs &in, double node_seconds, long long interruptions,
                           const json::array &tiers) {
    json::object detail{{"run", run}, {"auto", true}, {"attempt", attempt}, {"computed_at", now},
                        {"bounds", json::object{{"min_seconds", bounds.min_seconds}, {"max_seconds", bounds.max_seconds},
                                                {"min_steps", bounds.min_steps}, {"hysteresis", bounds.hysteresis}}}};
    json::object mtbf{{"value", in.node_mtbf.value / double(in.nodes)}, {"node_value", in.node_mtbf.value}, {"nodes", in.nodes},
                      {"node_hours_observed", node_seconds / 3600}, {"interruptions", interruptions},
                      {"prior_node_hours", conf.mtbf_node_hours}, {"samples", in.node_mtbf.samples}, {"source", in.node_mtbf.source}};
    detail["inputs"] = json::object{{"write_seconds", measured_json(in.write)}, {"step_seconds", measured_json(in.step)},
                                    {"mtbf_seconds", mtbf},
                                    {"restart_seconds", json::object{{"value", in.restart.value}, {"samples", in.restart.samples},
                                                                     {"source", in.restart.source}, {"tiers", tiers}}}};
    return detail;
}

}  // namespace

// 1. Node-seconds since the last count: each live node of a run once (a
// batch script and its step on one node are one node). A gap longer than
// two summaries (the broker was stopped) is not counted.
void Policy::PolicyPass::count_exposure() {
    const double dt = s.exposure_at_ > 0 ? std::min(now - s.exposure_at_, 2.0 * s.cfg_.summary_seconds) : 0;
    s.exposure_at_ = now;
    // A run counts no more nodes than its attempt has ranks (its tokens say
    // how many): a job that reports under made-up node names cannot raise
    // every run's M.
    std::map<std::string, long long> cap;   // run -> most nodes counted (absent: not capped, an admin's)
    {
        auto runs = s.runs_.read();
        for (const auto &[id, info] : runs)
            if (auto j = info.jobs.find(info.attempt); j != info.jobs.end() && j->second.world > 0) cap[id] = j->second.world;
    }
    std::map<std::string, std::set<std::string>> live;   // cluster -> run/node
    std::map<std::string, std::set<std::string>> per_run;
    for (const auto &ws : workers) {
        const WorkerState &w = ws.w;
        if (w.ended || w.faulted || w.watch_only || w.last_seen < now - double(w.interval) * s.cfg_.detector_misses) continue;
        const std::string node = ws.node.substr(0, ws.node.find('/'));
        auto &seen = per_run[ws.run];
        if (auto c = cap.find(ws.run); c != cap.end() && !seen.count(node) && (long long)seen.size() >= c->second) continue;
        seen.insert(node);
        live[w.cluster].insert(ws.run + '\n' + node);
    }
    if (dt > 0)
        s.transact([&] {
            for (const auto &[cluster, nodes] : live) s.store_->policy().add_exposure(cluster, dt * double(nodes.size()), 0);
        });
}

// 2. The runs to look at: false when there is none.
bool Policy::PolicyPass::gather() {
    {
        auto runs = s.runs_.read();
        for (const auto &[id, info] : runs)
            if ((info.ckpt_auto && info.state == RunState::running) || info.clock.recovered_at > 0)
                look.push_back(Look{id, info.attempt, info.policy_version, info.policy_steps, info.clock,
                                    info.ckpt_auto && info.state == RunState::running});
    }
    if (look.empty()) return false;
    for (const auto &ws : workers) of_run[ws.run].push_back(&ws);
    return true;
}

// 3. A recovery whose new attempt made its first step: its phases are
// complete, and one more sample of R.
void Policy::PolicyPass::close_recoveries() {
    for (const auto &l : look) {
        if (l.clock.recovered_at <= 0 || l.clock.to != l.attempt) continue;
        double first = 0;
        for (const auto *ws : of_run[l.run])
            if (ws->w.attempt == l.attempt && ws->w.first_step_time > 0 && (first == 0 || ws->w.first_step_time < first)) first = ws->w.first_step_time;
        const bool stale = now - l.clock.recovered_at > 3600;   // never stepped: not a sample
        if (first == 0 && !stale) continue;
        if (first > 0 && l.clock.fault_at > 0 && l.clock.placed_at > 0) {
            Store::RecoveryRow row{l.run, l.attempt, l.clock.tier, std::max(0.0, l.clock.fault_at - l.clock.last_seen),
                                   std::max(0.0, l.clock.placed_at - l.clock.fault_at), std::max(0.0, l.clock.recovered_at - l.clock.placed_at),
                                   std::max(0.0, first - l.clock.recovered_at), now};
            s.transact([&] { s.store_->policy().insert_recovery(row); });
        }
        auto runs = s.runs_.write();
        if (auto it = runs.find(l.run); it != runs.end() && it->second.clock.to == l.clock.to) it->second.clock = {};
    }
}

// 4. An auto run's interval from what is measured now.
void Policy::PolicyPass::recompute(const Look &l, const std::vector<policy::Phases> &phases, double node_seconds,
                                    long long interruptions, const json::array &tiers) {
    const auto &conf = s.cfg_.ckpt_policy;
    const ckpt::Bounds bounds = bounds_of(conf);
    policy::Inputs in;
    in.write = policy::write_cost(s.store_->policy().write_samples(l.run, 9));
    std::vector<policy::Progress> progress;
    std::set<std::string> nodes, batch_nodes;
    for (const auto *ws : of_run[l.run]) {
        if (ws->w.attempt != l.attempt || ws->w.watch_only) continue;
        (is_batch_worker(ws->node) ? batch_nodes : nodes).insert(ws->node.substr(0, ws->node.find('/')));
        progress.push_back(policy::Progress{ws->w.first_step, ws->w.step, ws->w.first_step_time, ws->w.step_time});
    }
    in.step = policy::step_time(progress);
    in.nodes = (long long)std::max<std::size_t>(1, nodes.empty() ? batch_nodes.size() : nodes.size());
    in.node_mtbf = policy::node_mtbf(node_seconds, interruptions, conf.mtbf_node_hours * 3600);
    in.restart = policy::restart_cost(phases, conf.restart_seconds);
    const auto result = policy::compute(in, bounds);

    json::object detail = policy_detail(l.run, l.attempt, now, conf, bounds, in, node_seconds, interruptions, tiers);
    long long version = l.version, steps = l.steps;
    bool changed = false;
    if (result) {
        changed = policy::worth_changing(l.version ? std::optional<long long>(l.steps) : std::nullopt, *result, in, bounds);
        if (changed) version = l.version + 1, steps = result->steps;
        detail["computed"] = json::object{{"every_steps", result->steps}, {"seconds", result->seconds}, {"daly_seconds", result->daly},
                                          {"young_seconds", result->young}, {"optimum_seconds", result->optimum},
                                          {"expected_waste", result->waste}, {"mtbf_seconds", result->mtbf}};
        detail["line"] = policy::summary_line(*result, in);
    } else {
        detail["waiting_for"] = !in.write ? "the write time of a sealed checkpoint (its ranks' \"checkpointing\" to \"committed\")"
                                          : "two steps of progress from a worker";
    }
    detail["version"] = version;
    detail["every_steps"] = version ? json::value(steps) : json::value(nullptr);
    detail["state"] = version ? "in_force" : "measuring";
    auto text = std::make_shared<const std::string>(json::serialize(detail));
    std::shared_ptr<const std::string> answer;
    if (changed) {
        answer = answer_json(version, result->steps, result->seconds);
        try {
            s.transact([&] {
                s.store_->policy().upsert_policy(Store::PolicyRow{l.run, version, result->steps, result->seconds, *text, now});
                s.event(l.run, "POLICY", std::string(detail.at("line").as_string()) + (l.version ? " (was " + std::to_string(l.steps) + ")" : ""),
                        json::serialize(json::object{{"version", version}, {"every_steps", result->steps}, {"seconds", result->seconds},
                                                     {"write_seconds", in.write->value}, {"step_seconds", in.step->value},
                                                     {"mtbf_seconds", result->mtbf}, {"restart_seconds", in.restart.value},
                                                     {"expected_waste", result->waste}}),
                        now);
            });
        } catch (const std::exception &e) {
            log_warn("checkpoint policy not written; computed again at the next summary", l.run, e.what());
            return;
        }
    }
    auto runs = s.runs_.write();
    auto it = runs.find(l.run);
    if (it == runs.end()) return;
    it->second.policy_detail = text;
    if (changed && it->second.policy_version == l.version) {
        it->second.policy_version = version;
        it->second.policy_steps = steps;
        it->second.policy_answer = answer;
        // Connections cached the old version: their next heartbeat looks again.
        runs.bump();
    }
}

void Policy::measure_policies(const std::vector<WorkerSummary> &workers, double now) {
    PolicyPass pass{*this, workers, now, {}, {}};
    pass.count_exposure();
    if (!pass.gather()) return;
    pass.close_recoveries();
    double node_seconds = 0;
    long long interruptions = 0;
    for (const auto &e : store_->policy().exposure()) node_seconds += e.node_seconds, interruptions += e.interruptions;
    std::vector<policy::Phases> phases;
    for (const auto &r : store_->policy().recoveries(100)) phases.push_back(policy::Phases{r.tier, r.detect, r.place, r.start, r.restore});
    const json::array tiers = tiers_json(phases);
    for (const auto &l : pass.look)
        if (l.running) pass.recompute(l, phases, node_seconds, interruptions, tiers);
}

void Policy::get_policy(const std::string &id, const TokenEntry &who, const Reply &reply) {
    std::shared_ptr<const std::string> detail;
    bool autom = false;
    {
        auto runs = runs_.read();
        auto it = runs.find(id);
        if (it == runs.end() || !may_see(who, id, &it->second)) return reply(error_response(404, "no_run", "no run " + id));
        detail = it->second.policy_detail;
        autom = it->second.ckpt_auto || it->second.policy_version > 0;
    }
    if (detail) return reply(ApiResponse{200, *detail, "application/json"});
    if (!autom)
        return reply(ok_json(200, json::object{{"run", id}, {"auto", false}, {"state", "fixed"},
                                               {"message", "no agent of this run asked for a policy: its interval is the job's own "
                                                           "(--shardnet-ckpt-every=STEPS), or it has not heartbeat since the broker started"}}));
    return reply(ok_json(200, json::object{{"run", id}, {"auto", true}, {"state", "measuring"}, {"version", 0},
                                           {"waiting_for", "the next summary (detector.summary_seconds)"}}));
}

}  // namespace shardnet::broker
