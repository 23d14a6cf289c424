#include "service.hpp"

#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <openssl/rand.h>

#include "heartbeat_body.hpp"
#include "parse_util.hpp"
#include "service_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;
using namespace std::literals;

double wall_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

ApiResponse error_response(unsigned status, const std::string &code, const std::string &message, const std::string &field) {
    json::object e{{"code", code}, {"message", message}};
    if (!field.empty()) e["field"] = field;
    return ApiResponse{status, json::serialize(json::object{{"error", std::move(e)}}), "application/json"};
}


Service::Service(const BrokerConfig &cfg, std::unique_ptr<Store> store)
    : cfg_(cfg), store_(std::move(store)), slurm_calls_(cfg.slurm_cache_ms, cfg.slurm_max_per_second),
      workers_(cfg.detector_misses, cfg.stall_seconds) {
    auths_.push_back(std::make_unique<Auth>(cfg.tokens, cfg.rate_per_token, cfg.rate_burst, cfg.worker_keys));
    auth_ = auths_.back().get();
    for (auto &r : store_->load_runs()) {
        RunInfo info{r.owner, state_from_name(r.state).value_or(RunState::failed), r.attempt, r.world_size};
        if (!state_from_name(r.state)) log_warn("unknown run state in the database, read as FAILED", r.id, r.state);
        info.manifest = r.manifest;
        info.owner_uid = r.owner_uid;
        runs_[r.id] = std::move(info);
    }
    for (auto &a : store_->load_attempts())
        if (auto it = runs_.find(a.run); it != runs_.end()) it->second.jobs[a.attempt] = AttemptJob{a.cluster, a.job, a.world};
    // Decisions for peers left 'forwarding' (a crash after writing one) are
    // sent again: the peer applies each id at most once.
    // A forwarder that threw starts over (after its 200 ms wait), rather
    // than leave the decisions unsent.
    if (!cfg_.peers.empty())
        forwarder_ = std::thread([this] {
            while (!guarded("forwarder", [this] { forward_loop(); })) {}
        });
}

Service::~Service() {
    {
        std::lock_guard<std::mutex> lock(forward_mu_);
        stopping_ = true;
    }
    forward_cv_.notify_all();
    if (forwarder_.joinable()) forwarder_.join();
    query_pool_.join();
    slurm_thread_.join();
    store_thread_.join();
}

void Service::count(Counter c) {
    static std::atomic<int> next{0};
    thread_local int slot = next.fetch_add(1) % kSlots;
    slots_[slot].c[c].fetch_add(1, std::memory_order_relaxed);
}

unsigned long long Service::total(Counter c) const {
    unsigned long long n = 0;
    for (const auto &s : slots_) n += s.c[c].load(std::memory_order_relaxed);
    return n;
}

// An exception out of a job would end the store thread, and with it the
// broker: the guard logs and counts it instead.
void Service::on_store(std::function<void()> job) { post_guarded(store_thread_, "store", std::move(job)); }

void Service::on_store(const Reply &reply, std::function<void(const Reply &)> job) {
    post_answering(store_thread_, "store", reply, std::move(job));
}

void Service::drain() {
    std::promise<void> done;
    on_store([&done] { done.set_value(); });
    done.get_future().wait();
}

void Service::reload(const BrokerConfig &cfg) {
    std::lock_guard<std::mutex> lock(auths_mu_);
    auths_.push_back(std::make_unique<Auth>(cfg.tokens, cfg.rate_per_token, cfg.rate_burst, cfg.worker_keys));
    auth_ = auths_.back().get();
}

void Service::event(const std::string &run, const std::string &kind, const std::string &cause, const Json &evidence,
                    double now) {
    count(c_events);
    EventRow e{0, run, now, kind, cause, evidence};
    e.id = store_->insert_event(e);
    pending_events_.push_back(std::move(e));
}

namespace {
std::string sse_message(const EventRow &e) {
    json::error_code ec;
    json::value ev = json::parse(e.evidence, ec);
    std::string data = json::serialize(json::object{{"id", e.id}, {"run", e.run}, {"time", e.time}, {"kind", e.kind},
                                                    {"cause", e.cause}, {"evidence", ec ? json::value(e.evidence) : ev}});
    return "id: " + std::to_string(e.id) + "\nevent: " + e.kind + "\ndata: " + data + "\n\n";
}
}  // namespace

void Service::transact(const std::function<void()> &fn) {
    pending_events_.clear();
    try {
        store_->transaction(fn);
    } catch (...) {
        pending_events_.clear();
        throw;
    }
    if (pending_events_.empty()) return;
    std::shared_lock runs_lock(runs_mu_);
    std::lock_guard<std::mutex> lock(sinks_mu_);
    for (const auto &e : pending_events_) {
        auto [b, end] = sinks_.equal_range(e.run);
        const auto run = runs_.find(e.run);
        for (auto it = b; it != end;) {
            auto sink = it->second.lock();
            // A follower that may no longer see the run (its owner changed)
            // gets nothing more of it.
            if (!sink || !sink->open || !may_see(sink->who, e.run, run == runs_.end() ? nullptr : &run->second)) {
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

std::optional<ApiResponse> Service::follow_events(const ApiRequest &req, std::shared_ptr<EventSink> sink) {
    count(c_requests);
    const TokenEntry *who = nullptr;
    switch (auth_.load(std::memory_order_acquire)->check(req.bearer, who, wall_now(), req.conn_cache)) {
    case Auth::Verdict::ok: break;
    case Auth::Verdict::rate_limited: return error_response(429, "rate_limited", "too many requests for this token");
    default: return error_response(401, "bad_token", "a known bearer token is required");
    }
    std::string path = req.target, query;
    if (auto q = path.find('?'); q != std::string::npos) { query = path.substr(q + 1); path.resize(q); }
    auto parts = split_path(path);
    if (parts.size() != 4 || parts[0] != "v1" || parts[1] != "runs" || parts[3] != "events")
        return error_response(404, "no_route", "GET " + path + " cannot be followed");
    const std::string id = parts[2];
    {
        std::shared_lock lock(runs_mu_);
        auto it = runs_.find(id);
        if (it == runs_.end() || !may_see(*who, id, &it->second)) return error_response(404, "no_run", "no run " + id);
    }
    const long long after = query_int(query, "after", 0);
    sink->who = *who;
    // Backlog and registration in one store-thread job: events are only
    // written there, so the stream has no gap and no repeat.
    on_store([this, id, after, sink] {
        for (const auto &e : store_->list_events(id, after, 1000000)) sink->push(sse_message(e));
        std::lock_guard<std::mutex> lock(sinks_mu_);
        sinks_.emplace(id, sink);
    });
    return std::nullopt;
}

bool Service::may_see(const TokenEntry &who, const std::string &run, const RunInfo *info) const {
    switch (who.scope) {
    case Scope::admin: return true;
    case Scope::user: return info && !who.user.empty() && info->owner == who.user;
    // A job's token sees its own run, and only while the run is its user's:
    // naming someone else's run in --shardnet shows nothing of it.
    case Scope::worker:
        return !who.run.empty() && who.run == run && (!who.bound || !info || info->owner_uid < 0 || (unsigned long long)info->owner_uid == who.uid);
    case Scope::peer: return false;
    }
    return false;
}

void Service::handle(const ApiRequest &req, const Reply &reply) {
    count(c_requests);
    const double now = wall_now();
    // Compared as views with their lengths known: the hot path copies and
    // measures nothing.
    const std::string_view target = req.target, method = req.method;
    const std::size_t q = target.find('?');
    const std::string_view path_sv = target.substr(0, q);
    // HEAD is GET without the body (the HTTP layer drops it).
    const bool get = method == "GET"sv || method == "HEAD"sv, post = method == "POST"sv;
    if (get && path_sv == "/v1/health"sv) return reply(ok_json(200, json::object{{"ok", true}}));
    if (get && path_sv == "/metrics"sv) return reply(ApiResponse{200, metrics(), "text/plain; version=0.0.4"});

    const TokenEntry *who = nullptr;
    Auth::Verdict verdict = auth_.load(std::memory_order_acquire)->check(req.bearer, who, now, req.conn_cache);
    if (verdict == Auth::Verdict::missing) { count(c_auth_failures); return reply(error_response(401, "no_token", "an Authorization: Bearer token is required")); }
    if (verdict == Auth::Verdict::invalid) { count(c_auth_failures); return reply(error_response(401, "bad_token", "the bearer token is not known to this broker")); }
    if (verdict == Auth::Verdict::rate_limited) { count(c_rate_limited); return reply(error_response(429, "rate_limited", "too many requests for this token")); }

    if (post && path_sv == "/v1/heartbeats"sv) {  // the hot path
        if (who->scope != Scope::worker && who->scope != Scope::admin)
            return reply(error_response(403, "forbidden", "heartbeats need a worker or admin token"));
        return heartbeats(req, *who, reply, now);
    }
    const std::string path(path_sv), query(q == std::string_view::npos ? std::string_view() : target.substr(q + 1));
    const auto parts = split_path(path);
    auto is = [&](std::initializer_list<const char *> want) {
        if (parts.size() != want.size()) return false;
        std::size_t i = 0;
        for (const char *w : want) {
            if (std::string(w) != "*" && parts[i] != w) return false;
            ++i;
        }
        return true;
    };
    const bool worker_ok = who->scope == Scope::worker || who->scope == Scope::admin;
    const bool user_ok = who->scope == Scope::user || who->scope == Scope::admin;

    if (is({"v1", "heartbeats"}) && post) {
        if (!worker_ok) return reply(error_response(403, "forbidden", "heartbeats need a worker or admin token"));
        return heartbeats(req, *who, reply, now);
    }
    if (is({"v1", "nodes"}) && post) {
        // The inventory placement trusts: the site's probe token, not a job's
        // (a user's agent could otherwise describe any node as it likes).
        if (!worker_ok || who->bound)
            return reply(error_response(403, "forbidden", "node descriptors need the site's worker token (shardnet-probe) or an admin token"));
        return put_node(req, reply, now);
    }
    if (is({"v1", "nodes"}) && get) return get_nodes("", reply);
    if (is({"v1", "nodes", "*"}) && get) return get_nodes(parts[2], reply);
    if (is({"v1", "clusters"}) && get) {
        json::array cs;
        for (const auto &[name, conf] : cfg_.clusters) cs.push_back(json::object{{"name", name}, {"local", true}});
        return reply(ok_json(200, json::object{{"broker_cluster", cfg_.cluster}, {"clusters", std::move(cs)}}));
    }
    if (is({"v1", "capacity"}) && get) {
        if (who->scope == Scope::worker) return reply(error_response(403, "forbidden", "capacity needs a user, peer or admin token"));
        return capacity(query, who->scope != Scope::peer, reply);   // a peer asks for this broker's own clusters
    }
    if (is({"v1", "decisions"}) && post) {
        if (who->scope != Scope::peer && who->scope != Scope::admin)
            return reply(error_response(403, "forbidden", "decisions come from peer brokers (peer or admin token)"));
        return receive_decision(req, *who, reply);
    }
    if (is({"v1", "runs"}) && post) {
        if (!user_ok) return reply(error_response(403, "forbidden", "creating runs needs a user or admin token"));
        return create_run(req, *who, reply, now);
    }
    if (is({"v1", "runs"}) && get) return list_runs(*who, reply);
    if (is({"v1", "runs", "*"}) && get) return get_run(parts[2], *who, reply);
    if (is({"v1", "runs", "*", "cancel"}) && post) return cancel_run(parts[2], *who, reply, now);
    if (is({"v1", "runs", "*", "events"}) && get) return list_events(parts[2], query, *who, reply);
    if (is({"v1", "runs", "*", "checkpoints"}) && get) return list_checkpoints(parts[2], *who, reply);
    if (is({"v1", "runs", "*", "checkpoints", "*", "commit"}) && post) {
        if (!worker_ok) return reply(error_response(403, "forbidden", "commits need a worker or admin token"));
        return commit(parts[2], parts[4], req, *who, reply, now);
    }
    count(c_errors);
    if (const char *allow = allowed_methods(parts)) {
        ApiResponse r = error_response(405, "method_not_allowed", req.method + " " + path + ": this resource takes " + allow);
        r.allow = allow;
        return reply(std::move(r));
    }
    return reply(error_response(404, "no_route", req.method + " " + path + " is not part of API v1"));
}

const char *Service::allowed_methods(const std::vector<std::string> &p) {
    constexpr const char *get = "GET, HEAD", *post = "POST", *both = "GET, HEAD, POST";
    const std::size_t n = p.size();
    if (n == 1 && p[0] == "metrics") return get;
    if (n < 2 || p[0] != "v1") return nullptr;
    const std::string &r = p[1];
    if (n == 2) {
        if (r == "health" || r == "clusters" || r == "capacity") return get;
        if (r == "heartbeats" || r == "decisions") return post;
        if (r == "nodes" || r == "runs") return both;
        return nullptr;
    }
    if (r == "nodes") return n == 3 ? get : nullptr;
    if (r != "runs") return nullptr;
    if (n == 3) return get;
    if (n == 4) return p[3] == "cancel" ? post : (p[3] == "events" || p[3] == "checkpoints") ? get : nullptr;
    if (n == 6 && p[3] == "checkpoints" && p[5] == "commit") return post;
    return nullptr;
}

void Service::create_run(const ApiRequest &req, const TokenEntry &who, const Reply &reply, double now) {
    json::error_code ec;
    json::value v = json::parse(req.body, ec);
    if (ec || !v.is_object()) return reply(error_response(400, "bad_json", "body is not a JSON object"));
    Fields f{v.as_object(), {}, {}};
    std::string id;
    long long world = 0;
    if (!f.str("id", id, false) || !f.integer("world_size", 0, 1 << 24, world, false)) return reply(bad_field(f));
    if (id.empty()) id = random_id();
    if (!is_safe_name(id)) return reply(error_response(400, "bad_field", "id: 1-64 of [A-Za-z0-9._-]", "id"));
    auto *manifest = v.as_object().if_contains("manifest");
    if (manifest && !manifest->is_object()) return reply(error_response(400, "bad_field", "manifest: expected an object", "manifest"));
    if (manifest)
        if (auto *reqs = manifest->as_object().if_contains("requires")) {
            Requirements r;
            if (!reqs->is_object()) return reply(error_response(400, "bad_field", "manifest.requires: expected an object", "manifest.requires"));
            if (auto err = requirements_from_json(reqs->as_object(), r); !err.empty())
                return reply(error_response(400, "bad_field", "manifest." + err, "manifest." + err.substr(0, err.find(':'))));
        }
    std::string manifest_text = manifest ? json::serialize(*manifest) : "{}";
    // A run belongs to a Unix account: a user token's own; an admin names
    // one ("owner") or leaves the run to the first job that reports for it.
    std::string owner = who.user;
    if (who.scope == Scope::admin && !f.str("owner", owner, false)) return reply(bad_field(f));
    long long owner_uid = -1;
    if (!owner.empty() && (owner_uid = user_uid(owner)) < 0)
        return reply(error_response(400, "bad_field", "owner: no account '" + owner + "' on this broker's host", "owner"));
    if (std::string why = reserved_run_id(id); !why.empty()) return reply(error_response(400, "bad_field", why, "id"));
    {
        std::unique_lock lock(runs_mu_);
        if (runs_.count(id)) return reply(error_response(409, "exists", "run " + id + " exists", "id"));
        runs_[id] = RunInfo{owner, RunState::pending, 1, world};
        runs_[id].manifest = manifest_text;
        runs_[id].owner_uid = owner_uid;
        runs_generation_.fetch_add(1, std::memory_order_release);
    }
    on_store(reply, [this, id, owner, owner_uid, manifest_text, world, now](const Reply &reply) {
        try {
            transact([&] {
                store_->insert_run(RunRow{id, owner, "PENDING", manifest_text, 1, world, now, now, owner_uid});
                event(id, "PENDING", "run created" + (owner.empty() ? std::string(" for the first job to report") : " by " + owner),
                      manifest_text, now);
            });
            reply(ok_json(201, run_json(id, owner, "PENDING", 1, world)));
        } catch (const std::exception &e) {
            undo_run(id, std::nullopt);   // the id is free again: nothing of it was kept
            reply(error_response(500, "store", e.what()));
        }
    });
}

void Service::list_runs(const TokenEntry &who, const Reply &reply) {
    json::array out;
    std::shared_lock lock(runs_mu_);
    for (const auto &[id, info] : runs_)
        if (may_see(who, id, &info)) out.push_back(run_json(id, info.owner, state_name(info.state), info.attempt, info.world_size));
    lock.unlock();
    reply(ok_json(200, json::object{{"runs", std::move(out)}}));
}

void Service::get_run(const std::string &id, const TokenEntry &who, const Reply &reply) {
    RunInfo info;
    {
        std::shared_lock lock(runs_mu_);
        auto it = runs_.find(id);
        if (it == runs_.end() || !may_see(who, id, &it->second)) return reply(error_response(404, "no_run", "no run " + id));
        info = it->second;
    }
    json::object r = run_json(id, info.owner, state_name(info.state), info.attempt, info.world_size);
    json::array workers;
    // Worker groups: one per attempt and role ("batch": the batch script's
    // node; "step": the nodes of srun steps, which carry the ranks).
    std::map<std::pair<long long, std::string>, json::object> groups;
    const double now = wall_now();
    for (const auto &[node, w] : workers_.of_run(id)) {
        const std::string role = node.size() > 6 && node.compare(node.size() - 6, 6, "/batch") == 0 ? "batch" : "step";
        const char *health = w.faulted ? "faulted" : w.ended ? "ended" : w.suspected ? "suspect"
                           : now - w.last_seen > 2.0 * w.interval ? "late" : "healthy";
        json::object o{{"node", node}, {"role", role}, {"attempt", w.attempt}, {"ranks", w.ranks},
                       {"health", health}, {"last_seen", w.last_seen}, {"interval", w.interval},
                       {"ended", w.ended}, {"faulted", w.faulted}};
        if (w.step >= 0) o["step"] = w.step; else o["step"] = nullptr;
        workers.push_back(std::move(o));
        auto &g = groups[{w.attempt, role}];
        if (g.empty()) g = json::object{{"attempt", w.attempt}, {"role", role}, {"workers", 0}, {"ranks", 0}, {"healthy", 0}};
        g["workers"] = g["workers"].as_int64() + 1;
        g["ranks"] = g["ranks"].as_int64() + w.ranks;
        if (std::string_view(health) == "healthy") g["healthy"] = g["healthy"].as_int64() + 1;
    }
    json::array gs;
    for (auto &[k, g] : groups) gs.push_back(std::move(g));
    r["workers"] = std::move(workers);
    r["groups"] = std::move(gs);
    reply(ok_json(200, r));
}

void Service::cancel_run(const std::string &id, const TokenEntry &who, const Reply &reply, double now) {
    {
        std::shared_lock lock(runs_mu_);
        auto it = runs_.find(id);
        if (it == runs_.end() || !may_see(who, id, &it->second) || who.scope == Scope::worker)
            return reply(error_response(404, "no_run", "no run " + id));
        if (!transition_allowed(it->second.state, RunState::cancelled))
            return reply(error_response(409, "final", "run " + id + " is " + state_name(it->second.state) + " already"));
    }
    // The database first; memory only once it holds the change.
    on_store(reply, [this, id, now, by = who.name](const Reply &reply) {
        long long attempt = 0;
        {
            std::shared_lock lock(runs_mu_);
            auto it = runs_.find(id);
            if (it == runs_.end()) return reply(error_response(404, "no_run", "no run " + id));
            if (!transition_allowed(it->second.state, RunState::cancelled))
                return reply(error_response(409, "final", "run " + id + " is " + state_name(it->second.state) + " already"));
            attempt = it->second.attempt;
        }
        try {
            transact([&] {
                store_->update_run(id, "CANCELLED", attempt, now);
                event(id, "CANCELLED", "cancelled by " + by, "{}", now);
            });
        } catch (const std::exception &e) {
            return reply(error_response(500, "store", e.what()));   // nothing changed, here or there
        }
        {
            std::unique_lock lock(runs_mu_);
            if (auto it = runs_.find(id); it != runs_.end()) set_state(id, it->second, RunState::cancelled);
        }
        reply(ok_json(200, json::object{{"id", id}, {"state", "CANCELLED"}}));
    });
}

void Service::list_events(const std::string &id, const std::string &query, const TokenEntry &who, const Reply &reply) {
    {
        std::shared_lock lock(runs_mu_);
        auto it = runs_.find(id);
        if (it == runs_.end() || !may_see(who, id, &it->second)) return reply(error_response(404, "no_run", "no run " + id));
    }
    long long after = query_int(query, "after", 0), limit = std::min<long long>(query_int(query, "limit", 1000), 10000);
    on_store(reply, [this, id, after, limit](const Reply &reply) {
        json::array out;
        for (const auto &e : store_->list_events(id, after, int(limit))) {
            json::error_code ec;
            json::value ev = json::parse(e.evidence, ec);
            out.push_back(json::object{{"id", e.id}, {"time", e.time}, {"kind", e.kind}, {"cause", e.cause},
                                       {"evidence", ec ? json::value(e.evidence) : ev}});
        }
        reply(ok_json(200, json::object{{"events", std::move(out)}}));
    });
}

std::string Service::metrics() const {
    std::string s;
    auto line = [&](const char *name, const char *help, unsigned long long v, const char *type = "counter") {
        s += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + std::to_string(v) + "\n";
    };
    line("shardnet_requests_total", "HTTP requests handled", total(c_requests));
    line("shardnet_heartbeats_total", "heartbeats accepted", total(c_heartbeats));
    line("shardnet_faults_total", "FAULT events raised", total(c_faults));
    line("shardnet_events_total", "events recorded", total(c_events));
    line("shardnet_seals_total", "checkpoints sealed", total(c_seals));
    line("shardnet_rate_limited_total", "requests answered 429", total(c_rate_limited));
    line("shardnet_auth_failures_total", "requests answered 401", total(c_auth_failures));
    line("shardnet_worker_refusals_total", "worker reports refused: not the token's job, run or attempt", total(c_refused));
    line("shardnet_failed_jobs_total", "jobs on the broker's threads that threw (logged, then dropped)", failed_jobs());
    line("shardnet_slurm_calls_total", "commands run against slurmctld", slurm_calls_.calls());
    line("shardnet_slurm_cache_hits_total", "Slurm queries answered from the cache", slurm_calls_.cache_hits());
    line("shardnet_workers_tracked", "workers in the failure detector", workers_.size(), "gauge");
    {
        std::shared_lock lock(runs_mu_);
        line("shardnet_runs", "runs known", runs_.size(), "gauge");
    }
    return s;
}

}  // namespace shardnet::broker
