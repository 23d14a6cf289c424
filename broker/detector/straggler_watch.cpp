#include "broker/detector/straggler_watch.hpp"

#include <algorithm>
#include <map>

namespace shardnet::broker {

namespace {

// A worker whose rate means something: a node of an srun step that has
// reported a step, still reporting.
bool judged_kind(const std::string &worker, const WorkerState &w) {
    return !is_batch_worker(worker) && !w.watch_only && !w.ended && !w.faulted && w.ranks > 0 && w.step >= 0;
}

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

void StragglerWatch::see(const std::string &run, const std::string &worker, const WorkerState &w) {
    if (p_.fraction > 0) seen_.push_back(Seen{run, worker, w});
}

std::vector<Straggler> StragglerWatch::end(double now) {
    struct Judged {
        const Seen *seen;
        Sample *sample;
        double rate;
    };
    std::map<std::string, std::vector<Judged>> groups;   // run '\n' attempt '\n' STEP
    std::unordered_map<std::string, Sample> next;
    next.reserve(seen_.size());
    for (const Seen &s : seen_) {
        const std::string key = s.run + '\n' + s.worker;
        const WorkerState &w = s.state;
        Sample cur{w.attempt, w.step, now, 0, false, w.step_time};
        auto prev = samples_.find(key);
        const bool same = prev != samples_.end() && prev->second.attempt == w.attempt;
        if (same) cur.slow = prev->second.slow, cur.named = prev->second.named;
        Sample &slot = next[key] = cur;
        // No report of a new step since the last window: nothing to judge it by.
        if (!same || !judged_kind(s.worker, w) || prev->second.step < 0 || w.step_time <= prev->second.step_time) continue;
        // A checkpoint written in the window paused this node's steps: not
        // judged this window (its count of slow windows stays as it was).
        if (w.ckpt_time >= prev->second.time) continue;
        const double rate = double(w.step - prev->second.step) / (w.step_time - prev->second.step_time);
        const auto slash = s.worker.find('/');
        const std::string step = slash == std::string::npos ? std::string() : s.worker.substr(slash);
        groups[s.run + '\n' + std::to_string(w.attempt) + '\n' + step].push_back(Judged{&s, &slot, rate});
    }
    std::vector<Straggler> named;
    for (auto &[group, members] : groups) {
        if (members.size() < 2) continue;
        std::vector<double> rates;
        for (const auto &m : members) rates.push_back(m.rate);
        const double median = median_of(std::move(rates));
        if (median <= 0) continue;   // the whole group stopped: a stall, not a straggler
        for (auto &m : members) {
            Sample &smp = *m.sample;
            if (m.rate >= p_.fraction * median) {
                smp.slow = 0, smp.named = false;
                continue;
            }
            if (++smp.slow < p_.windows || smp.named) continue;
            smp.named = true;
            const WorkerState &w = m.seen->state;
            named.push_back(Straggler{m.seen->run, m.seen->worker, w.attempt, w.job, w.cluster, m.rate, median, members.size()});
        }
    }
    samples_ = std::move(next);
    seen_.clear();
    return named;
}

}  // namespace shardnet::broker
