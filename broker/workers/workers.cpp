#include "broker/workers/workers.hpp"

#include <cmath>
#include <cstring>

namespace shardnet::broker {

const char *fault_words(FaultKind k) {
    switch (k) {
    case FaultKind::silent: return "missed heartbeats";
    case FaultKind::stalled: return "progress stalled";
    case FaultKind::no_worker: return "has no worker yet";
    case FaultKind::ended_by_slurm: return "ended by Slurm";
    }
    return "suspected";
}

void WorkerTable::file(long long slot, std::string key) {
    std::lock_guard<std::mutex> lock(wheel_mu_);
    wheel_[slot].push_back(std::move(key));
}

double WorkerTable::deadline(const WorkerState &w) const {
    double hb = w.last_seen + double(w.interval) * misses_;
    double stall = (w.step >= 0 ? w.progress_time : w.last_seen) + stall_;
    return std::max(std::min(hb, stall), w.hold_until);
}

void WorkerTable::suspect(const std::string &run, const std::string &node, double until) {
    std::string key = run + '\n' + node;
    {
        Shard &s = shard(key);
        std::lock_guard<std::mutex> lock(s.mu);
        auto it = s.map.find(key);
        if (it == s.map.end() || it->second.slot != 0) return;
        it->second.faulted = false;
        it->second.suspected = true;
        it->second.hold_until = until;
        it->second.slot = static_cast<long long>(std::ceil(until));
    }
    file(static_cast<long long>(std::ceil(until)), std::move(key));
}

void WorkerTable::unwatch(const std::string &run, const std::string &key, long long attempt) {
    std::string k = run + '\n' + key;
    Shard &s = shard(k);
    std::lock_guard<std::mutex> lock(s.mu);
    auto [it, fresh] = s.map.try_emplace(k);
    if (fresh) indexed(k);
    WorkerState &w = it->second;
    if (w.attempt > attempt) return;
    w.attempt = attempt;
    w.watch_only = true;
    w.ended = true;  // kept, ended: a watch() that comes later for this attempt finds it
}

void WorkerTable::retire(const std::string &run, const std::string &node, bool unfault) {
    std::string key = run + '\n' + node;
    Shard &s = shard(key);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end()) return;
    it->second.ended = true;
    if (unfault) it->second.faulted = false;
}

void WorkerTable::watch(const std::string &run, const std::string &node, long long attempt, int interval, double now,
                        const std::string &cluster, long long job) {
    std::string key = run + '\n' + node;
    long long file_at = 0;
    {
        Shard &s = shard(key);
        std::lock_guard<std::mutex> lock(s.mu);
        auto [it, fresh] = s.map.try_emplace(key);
        if (fresh) indexed(key);
        if (!fresh && it->second.attempt >= attempt) return;  // watched already, or its worker came first
        WorkerState &w = it->second;
        w = WorkerState{};
        w.attempt = attempt;
        w.interval = interval;
        w.last_seen = w.progress_time = now;
        w.cluster = cluster;
        w.job = job;
        w.watch_only = true;
        w.slot = file_at = static_cast<long long>(std::ceil(now + double(interval) * misses_));
    }
    file(file_at, std::move(key));
}

bool WorkerTable::beat(std::string_view run, std::string_view node, long long attempt, int interval, int ranks,
                       std::optional<long long> step, bool ended, double now, std::string_view cluster, long long job,
                       bool checkpointing) {
    // Built on the stack: finding a known worker allocates and copies
    // nothing but the key's bytes.
    char buf[512];
    std::string long_key;
    std::string_view key;
    if (run.size() + 1 + node.size() <= sizeof buf) {
        std::memcpy(buf, run.data(), run.size());
        buf[run.size()] = '\n';
        std::memcpy(buf + run.size() + 1, node.data(), node.size());
        key = std::string_view(buf, run.size() + 1 + node.size());
    } else {
        key = long_key = std::string(run) + '\n' + std::string(node);
    }
    long long file_at = 0;
    bool fresh = false;
    {
        const std::size_t hash = KeyHash{}(key);
        Shard &s = shards_[hash % kShards];
        std::lock_guard<std::mutex> lock(s.mu);
        auto it = s.map.find(Hashed{key, hash});
        if (it == s.map.end()) {
            it = s.map.try_emplace(std::string(key)).first;
            indexed(it->first);
        }
        WorkerState &w = it->second;
        if (attempt != w.attempt) w = WorkerState{}, w.attempt = attempt, w.progress_time = now, fresh = true;
        w.interval = interval;
        w.ranks = ranks;
        w.last_seen = now;
        if (step && *step > w.step) {
            if (w.first_step < 0) w.first_step = *step, w.first_step_time = now;
            w.step = *step;
            w.progress_time = w.step_time = now;
        }
        if (checkpointing) w.progress_time = w.ckpt_time = now;  // writing a checkpoint is progress, not a hang
        // Retired after its silence was judged no failure (its job ended or
        // ending in Slurm), and reporting again for the same attempt: Slurm
        // started the job again (its own requeue). Watched again, as new.
        if (w.ended && w.faulted && !ended) w.faulted = false;
        w.ended = ended;
        w.suspected = false;
        w.hold_until = 0;
        if (w.cluster != cluster) w.cluster = cluster;
        w.job = job;
        // A worker sits in the wheel once, under its deadline when it was
        // filed. Heartbeats only move the deadline; when the old slot comes
        // due, expire() files the worker again under the new one. So a
        // heartbeat costs the wheel nothing, and the wheel holds one entry
        // per worker.
        if (ended || w.faulted || w.slot != 0) return fresh;
        w.slot = static_cast<long long>(std::ceil(deadline(w)));
        file_at = w.slot;
    }
    file(file_at, std::string(key));
    return fresh;
}

std::vector<Fault> WorkerTable::expire(double now) {
    std::vector<std::string> due;
    {
        std::lock_guard<std::mutex> lock(wheel_mu_);
        while (!wheel_.empty() && double(wheel_.begin()->first) <= now) {
            auto &v = wheel_.begin()->second;
            due.insert(due.end(), std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
            wheel_.erase(wheel_.begin());
        }
    }
    std::vector<Fault> faults;
    std::vector<std::pair<long long, std::string>> refile;
    for (auto &key : due) {
        Shard &s = shard(key);
        std::lock_guard<std::mutex> lock(s.mu);
        auto it = s.map.find(key);
        if (it == s.map.end()) continue;
        WorkerState &w = it->second;
        w.slot = 0;
        if (w.ended || w.faulted) continue;
        double d = deadline(w);
        if (d > now) {  // heartbeats moved the deadline: file it there
            w.slot = static_cast<long long>(std::ceil(d));
            refile.emplace_back(w.slot, std::move(key));
            continue;
        }
        w.faulted = true;
        auto nl = key.find('\n');
        bool missed = w.last_seen + double(w.interval) * misses_ <= now;
        faults.push_back(Fault{key.substr(0, nl), key.substr(nl + 1), w.attempt,
                               fault_words(w.watch_only ? FaultKind::no_worker : missed ? FaultKind::silent : FaultKind::stalled), w,
                               w.watch_only ? FaultKind::no_worker : missed ? FaultKind::silent : FaultKind::stalled});
    }
    if (!refile.empty()) {
        std::lock_guard<std::mutex> lock(wheel_mu_);
        for (auto &[slot, key] : refile) wheel_[slot].push_back(std::move(key));
    }
    return faults;
}

void WorkerTable::fence(const std::string &run, long long attempt) {
    std::vector<std::string> gone;
    for (const auto &key : keys_of(run)) {
        Shard &s = shard(key);
        std::lock_guard<std::mutex> lock(s.mu);
        if (auto it = s.map.find(key); it != s.map.end() && it->second.attempt < attempt) {
            s.map.erase(it);
            gone.push_back(key);
        }
    }
    unindexed(gone);
}

void WorkerTable::indexed(const std::string &key) {
    std::lock_guard<std::mutex> lock(index_mu_);
    by_run_[key.substr(0, key.find('\n'))].insert(key);
}

void WorkerTable::unindexed(const std::vector<std::string> &keys) {
    if (keys.empty()) return;
    std::lock_guard<std::mutex> lock(index_mu_);
    for (const auto &key : keys) {
        auto it = by_run_.find(key.substr(0, key.find('\n')));
        if (it == by_run_.end()) continue;
        it->second.erase(key);
        if (it->second.empty()) by_run_.erase(it);
    }
}

std::vector<std::string> WorkerTable::keys_of(const std::string &run) const {
    std::lock_guard<std::mutex> lock(index_mu_);
    auto it = by_run_.find(run);
    return it == by_run_.end() ? std::vector<std::string>{} : std::vector<std::string>(it->second.begin(), it->second.end());
}

bool WorkerTable::known(std::string_view run, std::string_view node, long long attempt, std::string_view cluster, long long job) const {
    std::string key;
    key.reserve(run.size() + 1 + node.size());
    key.append(run).append(1, '\n').append(node);
    const Shard &s = shards_[KeyHash{}(key) % kShards];
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(std::string_view(key));
    return it != s.map.end() && it->second.attempt == attempt && !it->second.watch_only && it->second.job == job && it->second.cluster == cluster;
}

WorkerTable::Live WorkerTable::live(const std::string &run, long long attempt, const std::string &cluster, long long job, std::size_t keep_ended,
                                    bool batch) {
    Live out;
    std::size_t ended = 0;
    const std::string prefix = run + '\n';
    auto mine = [&](const std::string &key, const WorkerState &w) {
        return key.compare(0, prefix.size(), prefix) == 0 && w.attempt == attempt && w.job == job && w.cluster == cluster && !w.watch_only &&
               is_batch_worker(key) == batch;
    };
    const std::vector<std::string> keys = keys_of(run);
    for (const auto &key : keys) {
        Shard &s = shard(key);
        std::lock_guard<std::mutex> lock(s.mu);
        auto it = s.map.find(key);
        if (it == s.map.end() || !mine(key, it->second)) continue;
        const WorkerState &w = it->second;
        if (w.ended) { ++ended; continue; }
        if (w.faulted) continue;   // silent past its deadline: its node is dead or its step gone (a relaunch replaces it)
        ++out.count;
        if (out.some.size() < 8) out.some.push_back(key.substr(prefix.size()));
    }
    if (ended <= keep_ended) return out;
    std::vector<std::string> gone;
    for (const auto &key : keys) {
        Shard &s = shard(key);
        std::lock_guard<std::mutex> lock(s.mu);
        // A filed worker's key is looked up again when its slot comes due, and skipped when gone.
        if (auto it = s.map.find(key); it != s.map.end() && it->second.ended && mine(key, it->second)) {
            s.map.erase(it);
            gone.push_back(key);
        }
    }
    unindexed(gone);
    return out;
}

std::size_t WorkerTable::size() const {
    std::size_t n = 0;
    for (const auto &s : shards_) {
        std::lock_guard<std::mutex> lock(s.mu);
        n += s.map.size();
    }
    return n;
}

void WorkerTable::for_each(const std::function<void(const std::string &, const std::string &, const WorkerState &)> &fn) const {
    for (const auto &s : shards_) {
        std::lock_guard<std::mutex> lock(s.mu);
        for (const auto &[key, w] : s.map) {
            auto nl = key.find('\n');
            fn(key.substr(0, nl), key.substr(nl + 1), w);
        }
    }
}

std::vector<std::pair<std::string, WorkerState>> WorkerTable::of_run(const std::string &run, bool with_watches) const {
    std::vector<std::pair<std::string, WorkerState>> out;
    const std::size_t skip = run.size() + 1;
    for (const auto &key : keys_of(run)) {
        const Shard &s = shards_[KeyHash{}(key) % kShards];
        std::lock_guard<std::mutex> lock(s.mu);
        if (auto it = s.map.find(key); it != s.map.end() && (with_watches || !it->second.watch_only)) out.emplace_back(key.substr(skip), it->second);
    }
    return out;
}

}  // namespace shardnet::broker
