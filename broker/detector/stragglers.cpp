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
    return named_.erase(run + '\n' + std::to_string(attempt) + '\n' + node) > 0;
}

void Stragglers::tick(double now) {
    const StragglerParams p{cfg_.straggler_fraction, double(cfg_.straggler_window_seconds), cfg_.straggler_windows};
    if (p.fraction <= 0 || now < next_) return;
    next_ = now + p.window_seconds;
    watch_.set_params(p);
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
    for (const Straggler &s : found) {
        const std::string node = s.worker.substr(0, s.worker.find('/'));
        const std::string cause = "node " + node + " ran " + fixed2(s.rate) + " steps/s for " + std::to_string(p.windows) + " window(s) of " +
                                  std::to_string(int(p.window_seconds)) + " s, under " + fixed2(p.fraction) + " x the median " +
                                  fixed2(s.median) + " steps/s of its step's " + std::to_string(s.peers) + " nodes";
        const json::object ev{{"node", node},         {"worker", s.worker},   {"attempt", s.attempt},
                              {"job", s.job},         {"cluster", s.cluster}, {"rate", s.rate},
                              {"median", s.median},   {"fraction", p.fraction}, {"window_seconds", p.window_seconds},
                              {"windows", p.windows}, {"nodes", (long long)s.peers}};
        on_store([this, run = s.run, attempt = s.attempt, node, cause, ev = json::serialize(ev), now] {
            try {
                transact([&] { event(run, "STRAGGLER", cause, ev, now); });
            } catch (const std::exception &e) {
                detail::log_warn("STRAGGLER event not written", run, e.what());
                return;
            }
            std::lock_guard<std::mutex> lock(named_mu_);
            if (named_.size() < 100000) named_.insert(run + '\n' + std::to_string(attempt) + '\n' + node);
        });
    }
}

}  // namespace shardnet::broker
