// Federation: decisions handed between brokers. The sender keeps each one
// 'forwarding' and resends it with backoff until the peer answers; the peer
// applies each decision id at most once (received_decisions), and the run's
// ownership moves with it. A peer's answers are untrusted input.
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <unistd.h>
#include <set>
#include <sstream>
#include <sys/stat.h>

#include "common/http_client.hpp"
#include "common/parse_util.hpp"
#include "common/safe_path.hpp"
#include "broker/federation/forwarder.hpp"
#include "broker/peers/peer_link.hpp"
#include "broker/recovery/job_environment.hpp"
#include "broker/util/log.hpp"
#include "broker/core/api_util.hpp"
#include "broker/slurm/slurm_job.hpp"
#include "broker/slurm/slurm_view.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

namespace {

// Answers from a peer that cannot be read before a decision ends. Not
// passed on to the next peer: a bad 200 may still mean the peer submitted
// the job, and two attempts must never run.
constexpr int kMaxBadAnswers = 5;

void back_off(double &next, double &delay) {
    delay = std::min(std::max(delay * 2, 0.25), 8.0);   // 0.25, 0.5, 1, ... 8 s
    next = wall_now() + delay;
}


// What a decision's payload (this broker's own JSON, read back from the
// database) says; read without trusting its shape all the same.
struct PayloadView {
    long long from = 0, to = 0;
    std::string local_rejected, old_cluster, excluded;
    long long old_job = 0, heartbeat = 0;
};

// A peer's default body limit (limits.body_bytes), less room for headers.
constexpr std::size_t kDecisionBodyBudget = (1u << 20) - 4096;

// body without its "sealed" (the same bytes when it has none).
std::string without_seals(const std::string &body) {
    json::error_code ec;
    json::value v = json::parse(body, ec);
    if (ec || !v.is_object() || !v.as_object().erase("sealed")) return body;
    return json::serialize(v);
}

PayloadView read_payload(const std::string &text) {
    PayloadView p;
    json::error_code ec;
    json::value v = json::parse(text, ec);
    const json::object *o = ec ? nullptr : v.if_object();
    if (!o) return p;
    auto integer = [](const json::object &obj, const char *k) {
        const json::value *x = obj.if_contains(k);
        return x && x->is_int64() ? x->get_int64() : 0LL;
    };
    auto string = [](const json::object &obj, const char *k) {
        const json::value *x = obj.if_contains(k);
        return x && x->is_string() ? std::string(x->get_string()) : std::string();
    };
    p.to = integer(*o, "to_attempt");
    p.from = integer(*o, "from_attempt");
    if (p.from <= 0 && p.to > 1) p.from = p.to - 1;
    p.local_rejected = string(*o, "local_rejected");
    p.excluded = string(*o, "excluded");
    if (const json::value *spec = o->if_contains("spec"); spec && spec->is_object()) {
        p.old_cluster = string(spec->get_object(), "cluster");
        p.old_job = integer(spec->get_object(), "job");
        p.heartbeat = integer(spec->get_object(), "heartbeat");
    }
    return p;
}

}  // namespace

void Forwarder::start() {
    if (cfg_.peers.empty() || forwarder_.joinable()) return;
    forwarder_ = std::thread([this] {
        while (!guarded("forwarder", [this] { forward_loop(); })) {}
    });
}

void Forwarder::stop() {
    forward_signal_.stop();
    if (forwarder_.joinable()) forwarder_.join();
}

void Forwarder::forward_loop() {
    std::map<std::string, ForwardRetry> retries;   // by decision id
    double next_witness = wall_now() + 5;          // the peers' log heads (witness_api.cpp), soon after the start
    for (;;) {
        if (forward_signal_.wait(std::chrono::milliseconds(200))) return;
        // One round at a time, on the query pool (it waits on the peers).
        if (cfg_.witness_seconds > 0 && wall_now() >= next_witness) {
            next_witness = wall_now() + cfg_.witness_seconds;
            witnesses_.start_round();
        }
        std::vector<Store::Forwarding> pending;
        if (!guarded("forwarder: reading decisions", [&] { pending = store_wait([this] { return store_->decisions().forwarding_decisions(); }); }))
            continue;
        std::set<std::string> ids;
        for (const auto &f : pending) {
            ids.insert(f.id);
            ForwardRetry &r = retries[f.id];
            if (r.next > wall_now()) continue;
            // One decision that fails (the store, a bug) waits its backoff
            // like an undelivered one; the others go on.
            if (!guarded("forwarder: decision " + f.id, [&] { forward_one(f, r); })) back_off(r.next, r.delay);
        }
        std::erase_if(retries, [&](const auto &kv) { return !ids.count(kv.first); });
    }
}

// The run's kept environment goes with its decision, on the peer link only:
// read from the root-only file as it is sent, never written into the
// stored payload (the database keeps no user's variables).
std::string Forwarder::with_environment(const std::string &payload) {
    json::error_code ec;
    json::value v = json::parse(payload, ec);
    const json::object *o = ec ? nullptr : v.if_object();
    const json::value *run = o ? o->if_contains("run") : nullptr;
    if (!run || !run->is_string()) return payload;
    std::string err;
    const std::string dir = private_dir(cfg_.database, err);
    const std::string id(run->as_string());
    auto kept = dir.empty() ? std::nullopt : read_environment_file(dir, id, err);
    if (!kept) {
        if (!err.empty()) log_warn("the run's environment does not go with its decision", id, err);
        else log_json("info", "no environment is kept for the run: its decision goes without one", json::object{{"run", id}});
        return payload;
    }
    // Only the run's owner's, kept for one of its jobs (job_environment.hpp).
    long long owner = -1;
    {
        auto runs = runs_.read();
        if (auto it = runs.find(id); it != runs.end()) owner = it->second.owner_uid;
    }
    if (owner < 0) owner = kept->origin.uid;   // a run whose jobs report with an admin token: its spec's owner (checked below)
    if (std::string whose = environment_is_runs(core_, id, owner, kept->origin); !whose.empty()) {
        log_warn("the run's environment does not go with its decision", id, whose);
        return payload;
    }
    json::array env;
    for (auto &e : kept->entries()) env.emplace_back(std::move(e));
    v.as_object()["environment"] = std::move(env);
    return json::serialize(v);
}

void Forwarder::forward_one(const Store::Forwarding &f, ForwardRetry &retry) {
    auto peer = std::find_if(cfg_.peers.begin(), cfg_.peers.end(), [&](const auto &p) { return p.name == f.peer; });
    if (peer == cfg_.peers.end()) return;
    HttpRequest r;
    r.url = peer->url + "/v1/decisions";
    r.body = with_environment(f.payload);
    // The seals a decision carries (seals/carried.hpp) are a courtesy to the
    // resume at the peer: they never keep the run from moving. A body past
    // a peer's default limit, or one it answered 413, goes without them.
    if (retry.without_seals || r.body.size() > kDecisionBodyBudget) {
        if (std::string lighter = without_seals(r.body); lighter.size() < r.body.size()) {
            log_json("warn", "the run's sealed checkpoints do not go with its decision",
                     {{"decision", f.id}, {"peer", f.peer}, {"bytes", r.body.size()},
                      {"why", retry.without_seals ? "the peer answered 413" : "the decision would pass 1 MiB"}});
            r.body = std::move(lighter);
        }
    }
    r.bearer = peer->token;
    r.ca_file = peer->ca_file;
    r.timeout_ms = 5000;
    HttpResponse res = peers_->send(r);
    // The peer answered (or sent more than is read): what it said decides.
    if (res.status == 200 || res.status == 409 || res.too_large) {
        PeerDecision answer = parse_peer_decision(res);
        if (answer.kind == PeerDecision::Kind::bad) return bad_answer(f, answer, retry);
        return forwarded(f, answer);
    }
    // Too large for the peer: once more without the seals, which may be all
    // it was (then 413 again is a bad answer like any other).
    if (res.status == 413 && !retry.without_seals && f.payload.find("\"sealed\"") != std::string::npos) {
        retry.without_seals = true;
        back_off(retry.next, retry.delay);
        return;
    }
    // A 4xx other than 408/429: the peer read the decision and will never
    // take it as it is (a field it refuses). Resending the same bytes
    // cannot help: a bad answer, which ends the decision after a few.
    if (res.status >= 400 && res.status < 500 && res.status != 408 && res.status != 429) {
        PeerDecision refused;
        refused.kind = PeerDecision::Kind::bad;
        refused.field = "status";
        std::string said = res.body.substr(0, 200);
        for (char &c : said)
            if ((unsigned char)c < 0x20 || c == 0x7f) c = ' ';
        refused.error = "status: HTTP " + std::to_string(res.status) + " " + said;
        return bad_answer(f, refused, retry);
    }
    // No answer (down, slow, 5xx): it may come; resent until it does.
    back_off(retry.next, retry.delay);
    log_json("warn", "decision not delivered", {{"decision", f.id}, {"peer", f.peer},
                                                {"why", res.status ? "HTTP " + std::to_string(res.status) : res.error},
                                                {"retry_in", retry.delay}});
}

void Forwarder::bad_answer(const Store::Forwarding &f, const PeerDecision &answer, ForwardRetry &retry) {
    const int n = ++retry.bad_answers;
    const PayloadView p = read_payload(f.payload);
    const double now = wall_now();
    json::object ev{{"decision", f.id}, {"peer", f.peer}, {"field", answer.field}, {"error", answer.error},
                    {"bad_answers", n}, {"limit", kMaxBadAnswers}};
    log_json("warn", "bad answer from a peer", ev);
    if (n < kMaxBadAnswers) {
        back_off(retry.next, retry.delay);
        ev["retry_in"] = retry.delay;
        char delay[32];
        std::snprintf(delay, sizeof delay, "%.2f", retry.delay);
        store_wait([&] {
            transact([&] {
                event(f.run, "DELIVERY", "broker " + f.peer + " answered decision " + f.id + " with " + answer.error + "; retry " +
                      std::to_string(n) + " of " + std::to_string(kMaxBadAnswers - 1) + " in " + delay + " s", json::serialize(ev), now);
            });
            return 0;
        });
        return;
    }
    // The decision ends here, so that no restart ever sends it again; the
    // run waits, DEGRADED, as with no placement.
    long long attempt = p.from;
    if (attempt <= 0) {
        auto runs = runs_.read();
        if (auto it = runs.find(f.run); it != runs.end()) attempt = it->second.attempt;
    }
    // The database first (a store_wait that throws leaves memory alone).
    store_wait([&] {
        transact([&] {
            store_->decisions().apply_decision(f.id, "failed", 0);
            if (attempt > 0) hooks_.store_state(f.run, RunState::degraded, attempt, now);
            event(f.run, "PLACEMENT", "no placement for attempt " + std::to_string(p.to) + ": broker " + f.peer + " answered decision " +
                  f.id + " unreadably " + std::to_string(n) + " times (last: " + answer.error + "); the decision ends",
                  json::serialize(ev), now);
        });
        return 0;
    });
    hooks_.back_to_degraded(f.run);
}

void Forwarder::forwarded(const Store::Forwarding &f, const PeerDecision &answer) {
    const PayloadView p = read_payload(f.payload);
    const long long to = p.to;
    const double now = wall_now();
    json::object ev = answer.evidence;
    ev["decision"] = f.id;
    ev["peer"] = f.peer;
    if (answer.kind == PeerDecision::Kind::accepted) {
        // The successor has a place: the old attempt's job ends now.
        if (!p.old_cluster.empty() && p.old_job > 0) stale_jobs_.cancel_stale(p.old_cluster, p.old_job);
        store_wait([&] {
            transact([&] {
                store_->decisions().apply_decision(f.id, "delivered", answer.job);
                hooks_.store_state(f.run, RunState::moved, to, now);
                event(f.run, "MOVED", "run handed to broker " + f.peer + ": attempt " + std::to_string(to) + " runs as job " +
                      std::to_string(answer.job) + " on " + answer.cluster, json::serialize(ev), now);
            });
            return 0;
        });
        auto runs = runs_.write();
        if (auto it = runs.find(f.run); it != runs.end() && runs.set_state(f.run, it->second, RunState::moved))
            it->second.attempt = std::max(it->second.attempt, to);
        return;
    }
    // Refused: the next peer, else nowhere.
    auto it = std::find_if(cfg_.peers.begin(), cfg_.peers.end(), [&](const auto &peer) { return peer.name == f.peer; });
    const bool more = it != cfg_.peers.end() && std::next(it) != cfg_.peers.end();
    const std::string why = answer.why.empty() ? "refused" : answer.why;
    store_wait([&] {
        transact([&] {
            if (more) {
                store_->decisions().forward_decision(f.id, std::next(it)->name, f.payload);
                event(f.run, "PLACEMENT", "broker " + f.peer + " refused (" + why + "); trying broker " + std::next(it)->name,
                      json::serialize(ev), now);
            } else {
                store_->decisions().apply_decision(f.id, "unplaced_here", 0);   // never a peer again, after a restart too
                hooks_.store_state(f.run, RunState::degraded, to - 1, now);
                event(f.run, "PLACEMENT", "no placement for attempt " + std::to_string(to) + p.local_rejected + "; broker " + f.peer +
                      " refused (" + why + "); this broker's own clusters again, their queues too", json::serialize(ev), now);
            }
        });
        return 0;
    });
    if (more) return;
    hooks_.back_to_degraded(f.run);
    // Every peer refused: the run may still wait in a queue of this
    // broker's clusters (the decision taken up again, as an unplaced one's
    // retry; never a peer again).
    if (p.old_cluster.empty() || p.old_job <= 0 || p.from <= 0) return;
    Fault fault{f.run, p.excluded, p.from, "", {}, FaultKind::silent};
    fault.state.cluster = p.old_cluster;
    fault.state.job = p.old_job;
    fault.state.interval = int(p.heartbeat);
    hooks_.requeue(fault, 0, true);
}

}  // namespace shardnet::broker
