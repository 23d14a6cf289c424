// The broker's shared context (core.hpp): the store thread and its
// transactions with their events, live event streams, retries, counters.
#include "broker/core/core.hpp"

#include <thread>

#include <boost/json.hpp>
#include <chrono>

#include "broker/core/api_util.hpp"
#include "broker/slurm/slurm_view.hpp"
#include "broker/trust/refusals.hpp"
#include "broker/util/thread_guard.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

Core::Core(const BrokerConfig &cfg, std::unique_ptr<Store> store, std::unique_ptr<Slurm> slurm, std::shared_ptr<PeerLink> peers)
    : cfg_(cfg), store_(std::move(store)), workers_(cfg.detector_misses, cfg.stall_seconds), slurm_(std::move(slurm)),
      peers_(std::move(peers)) {}

double wall_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void Core::count(Counter c) {
    static std::atomic<int> next{0};
    thread_local int slot = next.fetch_add(1) % kSlots;
    slots_[slot].c[c].fetch_add(1, std::memory_order_relaxed);
}

unsigned long long Core::total(Counter c) const {
    unsigned long long n = 0;
    for (const auto &s : slots_) n += s.c[c].load(std::memory_order_relaxed);
    return n;
}

// An exception out of a job would end the store thread, and with it the
// broker: the guard logs and counts it instead.
// Each job is counted from its posting to its end, thrown or not: what a
// drain cut short is said by number.
namespace {
struct Counted {
    std::atomic<int> &n;
    explicit Counted(std::atomic<int> &count) : n(count) {}
    ~Counted() { n.fetch_sub(1, std::memory_order_relaxed); }
};
}  // namespace

bool Core::settle(double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int quiet = 0;
    while (quiet < 2) {
        if (std::chrono::steady_clock::now() > end) return false;
        quiet = jobs_in_flight.load(std::memory_order_acquire) == 0 ? quiet + 1 : 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

void Core::on_store(std::function<void()> job) {
    store_jobs_.fetch_add(1, std::memory_order_relaxed);
    post_guarded(store_thread_, "store", [this, job = std::move(job)] {
        Counted c(store_jobs_);
        job();
    });
}

void Core::on_store(const Reply &reply, std::function<void(const Reply &)> job) {
    store_jobs_.fetch_add(1, std::memory_order_relaxed);
    post_answering(store_thread_, "store", reply, [this, job = std::move(job)](const Reply &r) {
        Counted c(store_jobs_);
        job(r);
    });
}

void Core::event(const std::string &run, const std::string &kind, const std::string &cause, const std::string &evidence,
                    double now) {
    count(c_events);
    // Every string an event holds reaches the API, the live streams, the
    // dashboard and receipts: valid UTF-8, whatever bytes a job or Slurm
    // put in its cause (the evidence is JSON: only its strings change).
    EventRow e{0, run, now, kind, valid_utf8(cause), valid_utf8(evidence)};
    e.id = store_->insert_event(e);
    pending_events_.push_back(std::move(e));
}

namespace detail {
json::object event_object(const EventRow &e) {
    json::error_code ec;
    json::value ev = json::parse(e.evidence, ec);
    return json::object{{"id", e.id}, {"time", e.time}, {"kind", e.kind}, {"cause", e.cause}, {"evidence", ec ? json::value(e.evidence) : ev}};
}

std::string sse_message(const EventRow &e) {
    // The run second, as stream readers have always had it.
    json::object o = event_object(e), data_o{{"id", e.id}, {"run", e.run}};
    for (auto &kv : o)
        if (kv.key() != "id") data_o[kv.key()] = std::move(kv.value());
    std::string data = json::serialize(data_o);
    return "id: " + std::to_string(e.id) + "\nevent: " + e.kind + "\ndata: " + data + "\n\n";
}
}  // namespace detail

bool Core::write_event(const std::string &run, const std::string &kind, const std::string &cause, const std::string &evidence,
                          double now) {
    return store_wait([&] {
        try {
            transact([&] { event(run, kind, cause, evidence, now); });
            return true;
        } catch (const std::exception &e) {
            log_warn(kind + " event not written", run, e.what());
            return false;
        }
    });
}

void Core::transact(const std::function<void()> &fn) {
    pending_events_.clear();
    try {
        store_->transaction(fn);
    } catch (...) {
        pending_events_.clear();
        throw;
    }
    if (pending_events_.empty()) return;
    auto runs = runs_.read();
    std::lock_guard<std::mutex> lock(sinks_mu_);
    for (const auto &e : pending_events_) {
        auto [b, end] = sinks_.equal_range(e.run);
        const auto run = runs.find(e.run);
        for (auto it = b; it != end;) {
            auto sink = it->second.lock();
            // A follower that may no longer see the run (its owner changed)
            // gets nothing more of it.
            if (!sink || !sink->open || !may_see(sink->who, e.run, run == runs.end() ? nullptr : &run->second)) {
                if (sink) sink->open = false;
                it = sinks_.erase(it);
                continue;
            }
            sink->push(sse_message(e));
            ++it;
        }
    }
    pending_events_.clear();
}

void Core::retry_later(double delay, const char *what, std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(retry_mu_);
    retries_.push_back(Retry{wall_now() + delay, what, std::move(fn), {}});
}

bool Core::retry_once(const std::string &key, double delay, const char *what, std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(retry_mu_);
    for (const auto &r : retries_)
        if (r.key == key) return false;
    retries_.push_back(Retry{wall_now() + delay, what, std::move(fn), key});
    return true;
}

void Core::run_retries(double now) {
    std::vector<Retry> due;
    {
        std::lock_guard<std::mutex> lock(retry_mu_);
        for (auto it = retries_.begin(); it != retries_.end();)
            if (it->at <= now) { due.push_back(std::move(*it)); it = retries_.erase(it); }
            else ++it;
    }
    for (auto &r : due) guarded(r.what, r.fn);
}

void Core::follow(const std::string &run, const std::shared_ptr<EventSink> &sink) {
    std::lock_guard<std::mutex> lock(sinks_mu_);
    sinks_.emplace(run, sink);
}

std::string Core::refuse_worker(const RunInfo *info, const std::string &run, const TokenEntry &who, long long attempt) const {
    return broker::refuse_worker(info, run, who, attempt, cfg_);
}

std::optional<ApiResponse> Core::refuse_attempt_writer(const std::string &id, const TokenEntry &who, long long attempt,
                                                          long long &world, const char *what) {
    if (!who.run.empty() && who.run != id) return error_response(403, "forbidden", std::string("this token may not send ") + what + " for run " + id);
    if (who.attempt && who.attempt != (unsigned long long)attempt)
        return error_response(403, "forbidden", "this token is for attempt " + std::to_string(who.attempt), "attempt");
    if (!who.bound && who.scope != Scope::admin)
        return error_response(403, "forbidden", std::string(what) + " need a per-job worker token (derived from a worker key) or an admin token");
    auto runs = runs_.read();
    auto it = runs.find(id);
    // Another user's run answers as a missing one does, word for word: a
    // job that names it in --shardnet learns nothing of whether it exists.
    if (it == runs.end() || !may_see(who, id, &it->second)) return error_response(404, "no_run", "no run " + id);
    if (who.bound) {
        std::string why = refuse_worker(&it->second, id, who, attempt);
        // Never a claim: only a job the broker already recorded for the
        // attempt (its heartbeat came first) may write for it.
        if (why.empty() && (it->second.owner_uid < 0 || !it->second.jobs.count(attempt)))
            why = "run " + id + " has no job of this token's recorded for attempt " + std::to_string(attempt) + "; a heartbeat comes first";
        if (!why.empty()) {
            count(c_refused);
            return error_response(403, "not_this_job", why, "attempt");
        }
    }
    if (it->second.attempt != attempt)
        return error_response(409, "stale_attempt", "run " + id + " is at attempt " + std::to_string(it->second.attempt) + "; " + what +
                              " of attempt " + std::to_string(attempt) + " are refused", "attempt");
    // The attempt's ranks as the broker knows them (the largest step its
    // tokens named), never what the body says: one rank claiming
    // world_size=1 seals nothing.
    if (who.bound) {
        auto rec = it->second.jobs.find(attempt);
        world = std::max<long long>(rec != it->second.jobs.end() ? rec->second.world : 0, (long long)who.world);
    }
    return std::nullopt;
}

std::optional<std::set<std::string>> Core::job_nodes(const std::string &cluster, long long job, std::string &why) {
    Allocation a;
    if (why = read_allocation(*slurm_, cfg_.clusters.at(cluster), job, a); !why.empty()) return std::nullopt;
    a.at = wall_now();
    std::set<std::string> nodes = a.nodes;
    allocations_.put(cluster, job, std::move(a));   // what a new worker's heartbeat is checked against
    return nodes;
}

}  // namespace shardnet::broker
