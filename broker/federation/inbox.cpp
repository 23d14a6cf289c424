// Federation: decisions from peer brokers (POST /v1/decisions).
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

#include "common/http_client.hpp"
#include "common/parse_util.hpp"
#include "common/safe_path.hpp"
#include "broker/service.hpp"
#include "broker/recovery/job_environment.hpp"
#include "broker/api/api_util.hpp"
#include "broker/slurm/slurm_job.hpp"
#include "broker/slurm/slurm_view.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

namespace {

// What made a peer's attempt: the decision, the broker it came from and the
// receipt the sender's chain ended with; the owner as resolved here (a peer's
// uid numbers mean nothing on this host).
json::object cause_of(const std::string &id, const std::string &from, const receipts::ChainLink &link, const std::string &user, long long uid) {
    return json::object{{"decision", id}, {"from_broker", from},
                        {"from_receipt", link.empty() ? json::value(nullptr) : json::value(link.digest)}, {"user", user}, {"uid", uid}};
}

}  // namespace

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
    // Who sent it, as recorded (it grants access to the run's receipts):
    // the peer's token, never the name its body claims.
    const std::string sender = who.scope == Scope::peer ? who.name : from;
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
    // The run's requeue policy travels with it: a run that may only be
    // requeued locally stays so at the broker that takes it.
    std::string policy = "federated";
    if (auto *rq = spec_v->as_object().if_contains("requeue")) {
        const json::string *p = rq->if_string();
        if (!p || (*p != "federated" && *p != "local" && *p != "off"))
            return reply(error_response(400, "bad_field", "spec.requeue: expected federated, local or off", "spec"));
        policy = std::string(*p);
    }
    // When the sender saw the failure (its last heartbeat, its FAULT), for
    // this broker's measure of the recovery; a peer's clock, so only
    // believable times are kept (else the recovery is not timed).
    double fault_seen = 0, fault_at = 0;
    if (auto *fv = v.as_object().if_contains("fault"); fv && fv->is_object()) {
        const auto *ls = fv->as_object().if_contains("last_seen"), *at = fv->as_object().if_contains("at");
        const double now = wall_now();
        if (ls && at && ls->is_number() && at->is_number()) {
            const double a = ls->to_number<double>(), b = at->to_number<double>();
            // A detection takes the detector's deadline: an hour is past any.
            if (a > now - 86400 && a <= b && b - a <= 3600 && b <= now + 60) fault_seen = a, fault_at = b;
        }
    }
    // The sender's newest receipt of the run (optional: a broker without
    // receipts sends none): this broker's chain for the run goes on from it.
    receipts::ChainLink link;
    if (auto *rv = v.as_object().if_contains("receipt"); rv && !rv->is_null())
        if (std::string err = receipts::read_chain_link(*rv, link); !err.empty()) return reply(error_response(400, "bad_field", err, "receipt"));
    // The submitter's environment, from the peer's root-only copy: checked
    // whole (a malformed one refuses the decision, naming the entry), then
    // this site's policy drops what it drops, as for a job of its own.
    std::vector<std::string> environment;
    bool has_environment = false;
    if (auto *e = v.as_object().if_contains("environment"); e && !e->is_null()) {
        if (std::string why = read_environment(*e, environment); !why.empty()) return reply(error_response(400, "bad_field", why, "environment"));
        std::erase_if(environment, [&](const std::string &x) { return environment_dropped(x.substr(0, x.find('=')), cfg_.environment_drop); });
        has_environment = true;
    }
    Requirements want;
    if (auto *r = v.as_object().if_contains("requires"); r && r->is_object())
        if (auto err = requirements_from_json(r->as_object(), want); !err.empty())
            return reply(error_response(400, "bad_field", err, "requires"));
    post_answering(slurm_thread_, "receive decision", reply, [this, id, from, sender, run, to, script, resume, manifest, policy, fault_seen, fault_at,
                                                             spec = spec_v->as_object(), want, by = who.name, link,
                                                             peer_users = who.users, environment = std::move(environment),
                                                             has_environment](const Reply &reply) {
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
            return store_->insert_received(id, sender, run, to, now, json::serialize(json::object{{"nonce", nonce}}));
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
            if (!nonce.empty())
                if (const auto found = find_submitted(id + ":" + nonce, as.uid)) {
                    record_attempt(run, to, found->cluster, found->job, {}, cause_of(id, from, link, user, as.uid), link);
                    json::object res{{"accepted", true}, {"cluster", found->cluster}, {"job", found->job}, {"redelivered", true}};
                    store_wait([&] { store_->finish_received(id, "applied", json::serialize(res)); return 0; });
                    return reply(ok_json(200, res));
                }
        }
        auto nodes_v = spec.if_contains("nodes");
        Requirements req = want;
        if (nodes_v && nodes_v->is_int64() && nodes_v->as_int64() > 0) req.nodes = int(nodes_v->as_int64());
        const std::string ckpt = spec.if_contains("ckpt_dir") && spec.at("ckpt_dir").is_string()
                                     ? std::string(spec.at("ckpt_dir").as_string()) : "";
        // A peer's options speak the site's names: each cluster here takes
        // them in its own (clusters.NAME.names), or is no place for the job.
        json::object site_options;
        if (auto *o = spec.if_contains("options"); o && o->is_object()) site_options = o->as_object();
        std::map<std::string, FittedOptions> fitted;
        Placement p = place(req, local_offers(ckpt, &site_options, &fitted), "");
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
        std::vector<std::string> dropped;   // a peer's options that are not used (malformed): logged
        // Kept before the job is submitted (it is replayed from the file);
        // an environment this broker kept for the run before stands.
        if (has_environment) {
            std::string why;
            bool existed = false;
            const std::string dir = private_dir(cfg_.database, why);
            if (!dir.empty()) why = write_environment_file(dir, run, environment, existed);
            if (!why.empty()) {   // this broker's disk: the peer sends it again
                log_warn("a peer's decision waits: the run's environment not kept", run, why);
                return reply(error_response(503, "store_unavailable", "the run's environment could not be kept here; send it again"));
            }
        }
        json::object local_spec = spec;
        std::vector<std::string> mapped;
        if (auto f = fitted.find(p.cluster); f != fitted.end() && spec.contains("options")) {
            local_spec["options"] = f->second.options;
            mapped = f->second.mapped;
            // Another site's reservation is not one of ours.
            if (local_spec["options"].as_object().erase("reservation")) dropped.push_back("reservation (another site's)");
        }
        const long long job = submit_attempt(p.cluster, local_spec, script, run, to, resume, p.nodes, id + ":" + nonce, as, err, &dropped);
        for (const auto &d : dropped) log_warn("a peer's job option is not carried", run, d);
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
        if (!mapped.empty()) ev["mapped"] = json::value_from(mapped);
        if (!dropped.empty()) ev["uncarried"] = json::value_from(dropped);
        store_wait([&] {
            try {
                transact([&] {
                    if (known) {
                        store_state(run, RunState::recovering, to, now);
                        store_->update_manifest(run, manifest.empty() ? "{}" : manifest, user);
                        store_->set_requeue(run, policy);
                    } else {
                        store_->insert_run(RunRow{run, user, "RECOVERING", manifest.empty() ? "{}" : manifest, to, 0, now, now, as.uid,
                                                  0, 0, policy});
                    }
                    store_->set_run_owner(run, user, as.uid);
                    store_->upsert_attempt(Store::AttemptRow{run, to, p.cluster, job, 0});
                    note_attempt_start(run, to, p.cluster, job, p.nodes, cause_of(id, from, link, user, as.uid), link, now);
                    store_->set_recovering(run, to, (long long)p.nodes.size());
                    event(run, "RECEIVED", "decision " + id + " from broker " + from + " (peer " + by + ")", json::serialize(ev), now);
                    event(run, "PLACEMENT", p.cluster + " " + join(p.nodes) + ": job " + std::to_string(job) + ", attempt " +
                          std::to_string(to) + " (fabric " + p.fabric + ")" + (mapped.empty() ? "" : "; names: " + join(mapped, ", ")) +
                          (dropped.empty() ? "" : "; not carried: " + join(dropped, ", ")), json::serialize(ev), now);
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
            info.requeue = policy;
            info.clock = fault_at > 0 ? RunInfo::RecoveryClock{to, "peer", fault_seen, fault_at, wall_now()} : RunInfo::RecoveryClock{};
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
        slurm_->change(slurm_conf, {"scancel", std::to_string(job)}, ignored);
    });
}

}  // namespace shardnet::broker
