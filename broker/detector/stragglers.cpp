#include "broker/detector/stragglers.hpp"

#include <boost/json.hpp>
#include <cstdio>

#include "broker/core/api_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;

namespace {

std::string fixed2(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", v);
    return b;
}

}  // namespace

bool Stragglers::take(const std::string &run, long long attempt, const std::string &node) {
    std::lock_guard<std::mutex> lock(named_mu_);
    return named_.erase(key(run, attempt, node)) > 0;
}

void Stragglers::tick(double now) {
    const StragglerParams &p = params_;
    if (p.fraction <= 0 || now < next_) return;
    next_ = now + p.window_seconds;
    workers_.for_each([this](const std::string &run, const std::string &worker, const WorkerState &w) { watch_.see(run, worker, w); });
    std::vector<Straggler> found = watch_.end(now);
    if (found.empty()) return;
    {
        // Only of an attempt its run still runs (not one being recovered or over).
        auto runs = runs_.read();
        std::erase_if(found, [&](const Straggler &s) {
            auto it = runs.find(s.run);
            return it == runs.end() || it->second.attempt != s.attempt || it->second.state != RunState::running;
        });
    }
    struct Named {
        std::string run, node, cause, evidence;
        long long attempt;
    };
    std::vector<Named> named;
    for (const Straggler &s : found) {
        const std::string node = s.worker.substr(0, s.worker.find('/'));
        const std::string cause = "node " + node + " ran " + fixed2(s.rate) + " steps/s for " + std::to_string(p.windows) + " window(s) of " +
                                  std::to_string(int(p.window_seconds)) + " s, under " + fixed2(p.fraction) + " x the median " +
                                  fixed2(s.median) + " steps/s of its step's " + std::to_string(s.peers) + " nodes";
        const json::object ev{{"node", node},         {"worker", s.worker},   {"attempt", s.attempt},
                              {"job", s.job},         {"cluster", s.cluster}, {"rate", s.rate},
                              {"median", s.median},   {"fraction", p.fraction}, {"window_seconds", p.window_seconds},
                              {"windows", p.windows}, {"nodes", (long long)s.peers}};
        named.push_back(Named{s.run, node, cause, json::serialize(ev), s.attempt});
    }
    // One store job for the window's stragglers, each event its own transaction.
    on_store([this, named = std::move(named), now] {
        for (const Named &n : named) {
            try {
                transact([&] { event(n.run, "STRAGGLER", n.cause, n.evidence, now); });
            } catch (const std::exception &e) {
                detail::log_warn("STRAGGLER event not written", n.run, e.what());
                continue;
            }
            std::lock_guard<std::mutex> lock(named_mu_);
            if (named_.size() < 100000) named_.insert(key(n.run, n.attempt, n.node));
        }
    });
}

}  // namespace shardnet::broker
