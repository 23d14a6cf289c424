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
#include <unistd.h>
#include <set>
#include <sstream>
#include <sys/stat.h>

#include "http_client.hpp"
#include "parse_util.hpp"
#include "safe_path.hpp"
#include "service.hpp"
#include "service_util.hpp"
#include "slurm_job.hpp"
#include "slurm_view.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

void Service::receive_decision(const ApiRequest &req, const TokenEntry &who, const Reply &reply) {
    json::error_code ec;
    json::value v = json::parse(req.body, ec);
    if (ec || !v.is_object()) return reply(error_response(400, "bad_json", "body is not a JSON object"));
    Fields f{v.as_object(), {}, {}};
    std::string id, from, run, script, owner, resume, manifest;
    long long to = 0;
    if (!f.str("id", id) || !f.str("from_broker", from) || !f.str("run", run) || !f.integer("to_attempt", 2, 1000000, to) ||
        !f.str("script", script) || !f.str("owner", owner, false) || !f.str("resume", resume) || !f.str("manifest", manifest, false))
        return reply(bad_field(f));
    if (!is_safe_name(run)) return reply(error_response(400, "bad_field", "run: not a valid run id", "run"));
    if (id.size() > 200 || has_control_chars(id)) return reply(error_response(400, "bad_field", "id: not a decision id", "id"));
    auto *spec_v = v.as_object().if_contains("spec");
    if (!spec_v || !spec_v->is_object()) return reply(error_response(400, "bad_field", "spec: expected an object", "spec"));
    // The manifest is kept for later requeues: checked like a created run's.
    if (!manifest.empty()) {
        json::error_code mec;
        json::value mv = json::parse(manifest, mec);
        if (mec || !mv.is_object()) return reply(error_response(400, "bad_field", "manifest: expected a JSON object", "manifest"));
        if (auto *mr = mv.as_object().if_contains("requires")) {
            Requirements r;
            if (!mr->is_object()) return reply(error_response(400, "bad_field", "manifest.requires: expected an object", "manifest"));
            if (auto err = requirements_from_json(mr->as_object(), r); !err.empty())
                return reply(error_response(400, "bad_field", "manifest." + err, "manifest"));
        }
    }
    Requirements want;
    if (auto *r = v.as_object().if_contains("requires"); r && r->is_object())
        if (auto err = requirements_from_json(r->as_object(), want); !err.empty())
            return reply(error_response(400, "bad_field", err, "requires"));
    post_answering(slurm_thread_, "receive decision", reply, [this, id, from, run, to, script, resume, manifest,
                                                             spec = spec_v->as_object(), want, by = who.name,
                                                             peer_users = who.users](const Reply &reply) {
        const double now = wall_now();
        // The user is resolved here, by name, on this host: another site's
        // uid and gid numbers mean nothing here and are never used.
        const std::string user = spec.if_contains("user") && spec.at("user").is_string() ? std::string(spec.at("user").as_string()) : "";
        SubmitAs as;
        if (!user.empty() && user.size() <= 64 && !has_control_chars(user)) as.uid = user_uid(user, &as.gid);
        // The job this decision makes carries a nonce in its comment, kept
        // here before sbatch: after a crash between the two, only a job with
        // it counts as submitted (a comment is the user's to set, the nonce
        // is not theirs to know).
        std::string nonce = random_id().substr(4);
        const bool fresh = store_wait([&] {
            return store_->insert_received(id, from, run, to, now, json::serialize(json::object{{"nonce", nonce}}));
        });
        if (!fresh) {
            auto prev = store_wait([&] { return store_->get_received(id); });
            if (prev) {
                json::error_code pec;
                json::value pv = json::parse(prev->second, pec);
                const json::value *n = !pec && pv.is_object() ? pv.as_object().if_contains("nonce") : nullptr;
                nonce = n && n->is_string() ? std::string(n->as_string()) : "";
            }
            if (prev && prev->first != "received")  // answered before: the same answer again, nothing redone
                return reply(ApiResponse{prev->first == "applied" ? 200u : 409u, prev->second, "application/json"});
            // Received, but this broker stopped before answering: Slurm knows
            // whether the job was submitted. A comment is the user's to set,
            // so only a job of the decision's own user counts.
            if (as.uid >= 0 && !nonce.empty())
                for (const auto &[name, conf] : cfg_.clusters) {
                    std::string out;
                    if (slurm_calls_.fresh(conf, {std::begin(kSqueueJson), std::end(kSqueueJson)}, out) != 0) continue;
                    const long long job = submitted_for(out, "shardnet-decision:" + id + ":" + nonce, as.uid);
                    if (job <= 0) continue;
                    record_attempt(run, to, name, job);
                    json::object res{{"accepted", true}, {"cluster", name}, {"job", job}, {"redelivered", true}};
                    store_wait([&] { store_->finish_received(id, "applied", json::serialize(res)); return 0; });
                    return reply(ok_json(200, res));
                }
        }
        auto nodes_v = spec.if_contains("nodes");
        Requirements req = want;
        if (nodes_v && nodes_v->is_int64() && nodes_v->as_int64() > 0) req.nodes = int(nodes_v->as_int64());
        const std::string ckpt = spec.if_contains("ckpt_dir") && spec.at("ckpt_dir").is_string()
                                     ? std::string(spec.at("ckpt_dir").as_string()) : "";
        Placement p = place(req, local_offers(ckpt), "");
        json::array rejected;
        for (const auto &r : p.rejected) rejected.push_back(json::object{{"cluster", r.cluster}, {"reason", r.reason}});
        auto refuse = [&](const std::string &why) {
            json::object res{{"error", json::object{{"code", "no_capacity"}, {"message", why}}}, {"rejected", rejected}};
            store_wait([&] { store_->finish_received(id, "refused", json::serialize(res)); return 0; });
            reply(ApiResponse{409, json::serialize(res), "application/json"});
        };
        if (as.uid < 0) return refuse("user '" + user + "' of the decision is not known on this broker's host");
        if (!peer_users.empty() && std::find(peer_users.begin(), peer_users.end(), user) == peer_users.end())
            return refuse("peer " + by + " may not submit for user '" + user + "' here (tokens[].users)");
        if (std::string why = peer_may_take(run, to, as.uid); !why.empty()) return refuse(why);
        if (p.cluster.empty()) return refuse("no compatible capacity at broker " + cfg_.broker_name);
        std::string err;
        const long long job = submit_attempt(p.cluster, spec, script, run, to, resume, p.nodes, id + ":" + nonce, as, err);
        if (!job) return refuse(err);
        bool known = false;
        {
            std::shared_lock lock(runs_mu_);
            known = runs_.count(run) > 0;
        }
        json::object res{{"accepted", true}, {"broker", cfg_.broker_name}, {"cluster", p.cluster}, {"job", job},
                         {"nodes", json::value_from(p.nodes)}, {"fabric", p.fabric}};
        json::object ev = res;
        ev["decision"] = id;
        ev["from_broker"] = from;
        ev["rejected"] = rejected;
        ev["resume"] = resume;
        store_wait([&] {
            try {
                transact([&] {
                    if (known) {
                        store_->update_run(run, "RECOVERING", to, now);
                        store_->update_manifest(run, manifest.empty() ? "{}" : manifest, user);
                    } else {
                        store_->insert_run(RunRow{run, user, "RECOVERING", manifest.empty() ? "{}" : manifest, to, 0, now, now, as.uid});
                    }
                    store_->set_run_owner(run, user, as.uid);
                    store_->upsert_attempt(Store::AttemptRow{run, to, p.cluster, job, 0});
                    event(run, "RECEIVED", "decision " + id + " from broker " + from + " (peer " + by + ")", json::serialize(ev), now);
                    event(run, "PLACEMENT", p.cluster + " " + join(p.nodes) + ": job " + std::to_string(job) + ", attempt " +
                          std::to_string(to) + " (fabric " + p.fabric + ")", json::serialize(ev), now);
                    event(run, "RECOVERING", "attempt " + std::to_string(to) + " submitted with --shardnet-resume=" + resume,
                          json::serialize(ev), now);
                    store_->finish_received(id, "applied", json::serialize(res));
                });
            } catch (const std::exception &e) {
                // The job runs; the peer's resend finds it by its nonce.
                log_warn("decision " + id + " applied (job " + std::to_string(job) + ") but not written", run, e.what());
                throw;
            }
            return 0;
        });
        // Memory after the database holds it.
        {
            std::unique_lock lock(runs_mu_);
            RunInfo &info = runs_[run];
            if (!known) info.state = RunState::recovering;   // a new run: (new) -> RECOVERING
            else set_state(run, info, RunState::recovering);
            info.owner = user;
            info.owner_uid = as.uid;
            info.jobs[to] = AttemptJob{p.cluster, job, 0};
            info.attempt = to;
            info.expected_nodes = (long long)p.nodes.size();
            info.recover_to = to;
            info.manifest = manifest.empty() ? "{}" : manifest;
            runs_generation_.fetch_add(1, std::memory_order_release);
        }
        reply(ok_json(200, res));
    });
}

std::string Service::peer_may_take(const std::string &run, long long to, long long uid) const {
    // A peer may start a run id this broker does not know (but not a local
    // job's default id), or take back one this broker handed away (MOVED),
    // at a later attempt; never a run that lives here.
    std::shared_lock lock(runs_mu_);
    auto it = runs_.find(run);
    if (it == runs_.end()) {
        const std::string why = reserved_run_id(run);
        return why.empty() ? "" : "run " + why.substr(4);
    }
    if (it->second.state != RunState::moved)
        return "run " + run + " is " + state_name(it->second.state) + " at broker " + cfg_.broker_name +
               ": a peer may only hand back a run that this broker moved to it";
    if (it->second.owner_uid >= 0 && it->second.owner_uid != uid)
        return "run " + run + " exists at broker " + cfg_.broker_name + " and belongs to another user";
    if (to <= it->second.attempt)
        return "run " + run + " is at attempt " + std::to_string(it->second.attempt) + " here; attempt " + std::to_string(to) +
               " is not later";
    return "";
}

void Service::cancel_stale(const std::string &cluster, long long job) {
    auto conf = cfg_.clusters.find(cluster);
    if (job <= 0 || conf == cfg_.clusters.end()) return;
    {
        std::lock_guard<std::mutex> lock(stale_mu_);
        if (!stale_cancelled_.insert(cluster + "/" + std::to_string(job)).second) return;
    }
    post_guarded(slurm_thread_, "cancel stale job", [this, slurm_conf = conf->second, job] {
        std::string ignored;
        slurm_calls_.change(slurm_conf, {"scancel", std::to_string(job)}, ignored);
    });
}

namespace {

// Answers from a peer that cannot be read before a decision ends. Not
// passed on to the next peer: a bad 200 may still mean the peer submitted
// the job, and two attempts must never run.
constexpr int kMaxBadAnswers = 5;

void back_off(double &next, double &delay) {
    delay = std::min(std::max(delay * 2, 0.25), 8.0);   // 0.25, 0.5, 1, ... 8 s
    next = wall_now() + delay;
}

void log_line(const char *level, const char *msg, json::object fields) {
    fields["t"] = wall_now();
    fields["level"] = level;
    fields["msg"] = msg;
    std::fprintf(stderr, "%s\n", json::serialize(fields).c_str());
}

// What a decision's payload (this broker's own JSON, read back from the
// database) says; read without trusting its shape all the same.
struct PayloadView {
    long long from = 0, to = 0;
    std::string local_rejected, old_cluster;
    long long old_job = 0;
};

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
    if (const json::value *spec = o->if_contains("spec"); spec && spec->is_object()) {
        p.old_cluster = string(spec->get_object(), "cluster");
        p.old_job = integer(spec->get_object(), "job");
    }
    return p;
}

}  // namespace

void Service::forward_loop() {
    std::map<std::string, ForwardRetry> retries;   // by decision id
    HttpClient client;
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(forward_mu_);
            forward_cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopping_; });
            if (stopping_) return;
        }
        std::vector<Store::Forwarding> pending;
        if (!guarded("forwarder: reading decisions", [&] { pending = store_wait([this] { return store_->forwarding_decisions(); }); }))
            continue;
        std::set<std::string> ids;
        for (const auto &f : pending) {
            ids.insert(f.id);
            ForwardRetry &r = retries[f.id];
            if (r.next > wall_now()) continue;
            // One decision that fails (the store, a bug) waits its backoff
            // like an undelivered one; the others go on.
            if (!guarded("forwarder: decision " + f.id, [&] { forward_one(client, f, r); })) back_off(r.next, r.delay);
        }
        std::erase_if(retries, [&](const auto &kv) { return !ids.count(kv.first); });
    }
}

void Service::forward_one(HttpClient &client, const Store::Forwarding &f, ForwardRetry &retry) {
    auto peer = std::find_if(cfg_.peers.begin(), cfg_.peers.end(), [&](const auto &p) { return p.name == f.peer; });
    if (peer == cfg_.peers.end()) return;
    HttpRequest r;
    r.url = peer->url + "/v1/decisions";
    r.body = f.payload;
    r.bearer = peer->token;
    r.ca_file = peer->ca_file;
    r.timeout_ms = 5000;
    HttpResponse res = client.send(r);
    // The peer answered (or sent more than is read): what it said decides.
    if (res.status == 200 || res.status == 409 || res.too_large) {
        PeerDecision answer = parse_peer_decision(res);
        if (answer.kind == PeerDecision::Kind::bad) return bad_answer(f, answer, retry);
        return forwarded(f, answer);
    }
    // No answer (down, slow, 5xx): it may come; resent until it does.
    back_off(retry.next, retry.delay);
    log_line("warn", "decision not delivered", {{"decision", f.id}, {"peer", f.peer},
                                                {"why", res.status ? "HTTP " + std::to_string(res.status) : res.error},
                                                {"retry_in", retry.delay}});
}

void Service::bad_answer(const Store::Forwarding &f, const PeerDecision &answer, ForwardRetry &retry) {
    const int n = ++retry.bad_answers;
    const PayloadView p = read_payload(f.payload);
    const double now = wall_now();
    json::object ev{{"decision", f.id}, {"peer", f.peer}, {"field", answer.field}, {"error", answer.error},
                    {"bad_answers", n}, {"limit", kMaxBadAnswers}};
    log_line("warn", "bad answer from a peer", ev);
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
        std::shared_lock lock(runs_mu_);
        if (auto it = runs_.find(f.run); it != runs_.end()) attempt = it->second.attempt;
    }
    // The database first (a store_wait that throws leaves memory alone).
    store_wait([&] {
        transact([&] {
            store_->apply_decision(f.id, "failed", 0);
            if (attempt > 0) store_->update_run(f.run, "DEGRADED", attempt, now);
            event(f.run, "PLACEMENT", "no placement for attempt " + std::to_string(p.to) + ": broker " + f.peer + " answered decision " +
                  f.id + " unreadably " + std::to_string(n) + " times (last: " + answer.error + "); the decision ends",
                  json::serialize(ev), now);
        });
        return 0;
    });
    back_to_degraded(f.run);
}

void Service::back_to_degraded(const std::string &run) {
    std::unique_lock lock(runs_mu_);
    if (auto it = runs_.find(run); it != runs_.end() && it->second.state == RunState::recovering)
        set_state(run, it->second, RunState::degraded);
}

void Service::forwarded(const Store::Forwarding &f, const PeerDecision &answer) {
    const PayloadView p = read_payload(f.payload);
    const long long to = p.to;
    const double now = wall_now();
    json::object ev = answer.evidence;
    ev["decision"] = f.id;
    ev["peer"] = f.peer;
    if (answer.kind == PeerDecision::Kind::accepted) {
        // The successor has a place: the old attempt's job ends now.
        if (!p.old_cluster.empty() && p.old_job > 0) cancel_stale(p.old_cluster, p.old_job);
        store_wait([&] {
            transact([&] {
                store_->apply_decision(f.id, "delivered", answer.job);
                store_->update_run(f.run, "MOVED", to, now);
                event(f.run, "MOVED", "run handed to broker " + f.peer + ": attempt " + std::to_string(to) + " runs as job " +
                      std::to_string(answer.job) + " on " + answer.cluster, json::serialize(ev), now);
            });
            return 0;
        });
        std::unique_lock lock(runs_mu_);
        if (auto it = runs_.find(f.run); it != runs_.end() && set_state(f.run, it->second, RunState::moved))
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
                store_->forward_decision(f.id, std::next(it)->name, f.payload);
                event(f.run, "PLACEMENT", "broker " + f.peer + " refused (" + why + "); trying broker " + std::next(it)->name,
                      json::serialize(ev), now);
            } else {
                store_->apply_decision(f.id, "unplaced", 0);
                store_->update_run(f.run, "DEGRADED", to - 1, now);
                event(f.run, "PLACEMENT", "no placement for attempt " + std::to_string(to) + p.local_rejected + "; broker " + f.peer +
                      " refused (" + why + ")", json::serialize(ev), now);
            }
        });
        return 0;
    });
    if (!more) back_to_degraded(f.run);
}

}  // namespace shardnet::broker
