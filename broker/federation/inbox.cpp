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
#include "broker/federation/inbox.hpp"
#include "broker/seals/carried.hpp"
#include "broker/recovery/job_environment.hpp"
#include "broker/core/api_util.hpp"
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

// A peer's decision as its body says it, checked whole before anything is
// done (a field that is wrong is a 400 naming it).
struct Inbox::IncomingDecision {
    std::string id, from, sender, run, script, owner, resume, manifest, policy = "federated", by;
    long long to = 0;
    double fault_seen = 0, fault_at = 0;   // when the sender saw the failure (0: not timed)
    json::object spec;
    Requirements want;
    receipts::ChainLink link;
    std::vector<std::string> peer_users, environment;
    bool has_environment = false;
    std::vector<carried::Seal> sealed;   // the run's newest seals at the sender

    // nullopt when good, else the answer that says what is wrong.
    std::optional<ApiResponse> read(const ApiRequest &req, const TokenEntry &who, const std::vector<std::string> &environment_drop) {
        json::error_code ec;
        json::value v = json::parse(req.body, ec);
        if (ec || !v.is_object()) return error_response(400, "bad_json", "body is not a JSON object");
        const json::object &o = v.as_object();
        Fields f{o, {}, {}};
        if (!f.str("id", id) || !f.str("from_broker", from) || !f.str("run", run) || !f.integer("to_attempt", 2, 1000000, to) ||
            !f.str("script", script) || !f.str("owner", owner, false) || !f.str("resume", resume) || !f.str("manifest", manifest, false))
            return bad_field(f);
        if (!is_safe_name(run)) return error_response(400, "bad_field", "run: not a valid run id", "run");
        // Who sent it, as recorded (it grants access to the run's receipts):
        // the peer's token, never the name its body claims.
        sender = who.scope == Scope::peer ? who.name : from;
        by = who.name;
        peer_users = who.users;
        if (id.size() > 200 || has_control_chars(id)) return error_response(400, "bad_field", "id: not a decision id", "id");
        auto *spec_v = o.if_contains("spec");
        if (!spec_v || !spec_v->is_object()) return error_response(400, "bad_field", "spec: expected an object", "spec");
        spec = spec_v->as_object();
        if (auto bad = read_manifest()) return bad;
        // The run's requeue policy travels with it: a run that may only be
        // requeued locally stays so at the broker that takes it.
        if (auto *rq = spec.if_contains("requeue")) {
            const json::string *p = rq->if_string();
            if (!p || (*p != "federated" && *p != "local" && *p != "off"))
                return error_response(400, "bad_field", "spec.requeue: expected federated, local or off", "spec");
            policy = std::string(*p);
        }
        read_fault_times(o);
        // The sender's newest receipt of the run (optional: a broker without
        // receipts sends none): this broker's chain for the run goes on from it.
        if (auto *rv = o.if_contains("receipt"); rv && !rv->is_null())
            if (std::string err = receipts::read_chain_link(*rv, link); !err.empty()) return error_response(400, "bad_field", err, "receipt");
        // The submitter's environment, from the peer's root-only copy: checked
        // whole (a malformed one refuses the decision, naming the entry),
        // then this site's policy drops what it drops, as for a job of its own.
        if (auto *e = o.if_contains("environment"); e && !e->is_null()) {
            if (std::string why = read_environment(*e, environment); !why.empty()) return error_response(400, "bad_field", why, "environment");
            std::erase_if(environment, [&](const std::string &x) { return environment_dropped(x.substr(0, x.find('=')), environment_drop); });
            has_environment = true;
        }
        // The sender's seals of the run: checked whole, list against root
        // (a malformed one refuses the decision, naming the field).
        if (auto *sv = o.if_contains("sealed"); sv && !sv->is_null())
            if (std::string err = carried::read(*sv, sealed); !err.empty()) return error_response(400, "bad_field", err, "sealed");
        // Who vouches for a carried seal here is the broker that sent it
        // (authenticated), whatever its body says sealed it.
        for (auto &seal : sealed) seal.sealed_by = sender;
        if (auto *r = o.if_contains("requires"); r && r->is_object())
            if (auto err = requirements_from_json(r->as_object(), want); !err.empty()) return error_response(400, "bad_field", err, "requires");
        return std::nullopt;
    }

    // The manifest is kept for later requeues: checked like a created run's.
    // A run in an image goes only where its layout is read (image_layout).
    std::optional<ApiResponse> read_manifest() {
        if (manifest.empty()) return std::nullopt;
        json::error_code mec;
        json::value mv = json::parse(manifest, mec);
        if (mec || !mv.is_object()) return error_response(400, "bad_field", "manifest: expected a JSON object", "manifest");
        if (auto err = image_requirements(mv.as_object(), want); !err.empty())
            return error_response(400, "bad_field", "manifest." + err, "manifest");
        if (auto *mr = mv.as_object().if_contains("requires")) {
            Requirements r;
            if (!mr->is_object()) return error_response(400, "bad_field", "manifest.requires: expected an object", "manifest");
            if (auto err = requirements_from_json(mr->as_object(), r); !err.empty())
                return error_response(400, "bad_field", "manifest." + err, "manifest");
        }
        return std::nullopt;
    }

    // When the sender saw the failure (its last heartbeat, its FAULT), for
    // this broker's measure of the recovery; a peer's clock, so only
    // believable times are kept (else the recovery is not timed).
    void read_fault_times(const json::object &o) {
        auto *fv = o.if_contains("fault");
        if (!fv || !fv->is_object()) return;
        const auto *ls = fv->as_object().if_contains("last_seen"), *at = fv->as_object().if_contains("at");
        const double now = wall_now();
        if (!ls || !at || !ls->is_number() || !at->is_number()) return;
        const double a = ls->to_number<double>(), b = at->to_number<double>();
        // A detection takes the detector's deadline: an hour is past any.
        if (a > now - 86400 && a <= b && b - a <= 3600 && b <= now + 60) fault_seen = a, fault_at = b;
    }
};

// A peer's decision applied on the Slurm thread, a step per member: the
// local account, at most once per id, the placement, the checks, the kept
// environment, the job, then the store and memory.
struct Inbox::Arrival {
    Inbox &s;
    const IncomingDecision d;
    const Reply &reply;
    const double now = wall_now();
    std::string user, nonce = detail::random_id().substr(4);
    Attempts::SubmitAs as;
    Placement p;
    json::array rejected;
    std::map<std::string, Inventory::FittedOptions> fitted;

    Arrival(Inbox &in, const IncomingDecision &dec, const Reply &r) : s(in), d(dec), reply(r) {}

    void run() {
        // The user is resolved here, by name, on this host: another site's
        // uid and gid numbers mean nothing here and are never used.
        user = d.spec.if_contains("user") && d.spec.at("user").is_string() ? std::string(d.spec.at("user").as_string()) : "";
        if (!user.empty() && user.size() <= 64 && !has_control_chars(user)) as.uid = user_uid(user, &as.gid);
        if (answered_before()) return;
        place_here();
        if (as.uid < 0) return refuse("user '" + user + "' of the decision is not known on this broker's host");
        if (!d.peer_users.empty() && std::find(d.peer_users.begin(), d.peer_users.end(), user) == d.peer_users.end())
            return refuse("peer " + d.by + " may not submit for user '" + user + "' here (tokens[].users)");
        const auto moved = s.store_wait([&] { return s.store_->decisions().moved_to(d.run); });
        if (std::string why = s.peer_may_take(d.run, d.to, as.uid, d.sender, moved); !why.empty())
            return refuse(why, why.find("was moved to broker") != std::string::npos ? "not_moved_to_sender" : "no_capacity");
        if (p.cluster.empty()) return refuse("no compatible capacity at broker " + s.cfg_.broker_name);
        // Runs peers' decisions made here count apart from the user's own
        // (a peer cannot spend a local user's limit), under the same limit.
        long long open = 0;
        {
            auto runs = s.runs_.write();
            if (!runs.count(d.run)) open = runs.open_of(RunRegistry::peer_made(user));
        }
        if (open >= s.cfg_.runs_per_user)
            return refuse("user '" + user + "' has " + std::to_string(open) + " runs made by peers' decisions here, not ended "
                          "(limits.runs_per_user)", "too_many_runs");
        submit();
    }

    // The job this decision makes carries a nonce in its comment, kept here
    // before sbatch: after a crash between the two, only a job with it
    // counts as submitted (a comment is the user's to set, the nonce is
    // not theirs to know). True: answered (again) from what was done.
    bool answered_before() {
        const bool fresh = s.store_wait([&] {
            return s.store_->decisions().insert_received(d.id, d.sender, d.run, d.to, now, json::serialize(json::object{{"nonce", nonce}}));
        });
        if (fresh) return false;
        auto prev = s.store_wait([&] { return s.store_->decisions().get_received(d.id); });
        // The id is the sender's: a decision resent by another broker, or
        // for another run or attempt, is not the one received.
        if (prev && (prev->from != d.sender || prev->run != d.run || prev->to != d.to)) {
            reply(error_response(409, "decision_conflict", "decision " + d.id + " was received before from another broker or for another run or attempt", "id"));
            return true;
        }
        if (prev) {
            json::error_code pec;
            json::value pv = json::parse(prev->result, pec);
            const json::value *n = !pec && pv.is_object() ? pv.as_object().if_contains("nonce") : nullptr;
            nonce = n && n->is_string() ? std::string(n->as_string()) : "";
        }
        if (prev && prev->state != "received") {   // answered before: the same answer again, nothing redone
            reply(ApiResponse{prev->state == "applied" ? 200u : 409u, prev->result, "application/json"});
            return true;
        }
        // Received, but this broker stopped before answering: Slurm knows
        // whether the job was submitted. A comment is the user's to set, so
        // only a job of the decision's own user counts.
        if (nonce.empty()) return false;
        const auto found = s.attempts_.find_submitted(d.id + ":" + nonce, as.uid);
        if (found.unknown()) {
            // Placing it again could run it twice: the sender tries again.
            ApiResponse r = error_response(503, "slurm_unavailable", "decision " + d.id + " was received before this broker stopped, "
                                           "and whether its job was submitted cannot be told (" + found.unread + "); send it again");
            r.retry_after = 5;
            reply(std::move(r));
            return true;
        }
        if (!found.found()) return false;
        s.attempts_.record_attempt(d.run, d.to, found.cluster, found.job, {}, cause_of(d.id, d.from, d.link, user, as.uid), d.link);
        json::object res{{"accepted", true}, {"cluster", found.cluster}, {"job", found.job}, {"redelivered", true}};
        s.store_wait([&] {
            s.transact([&] {
                for (const auto &seal : d.sealed) s.store_->seals().put_carried_seal(carried::row_of(seal, d.run, now));
                s.store_->seals().keep_newest_carried(d.run, int(carried::kMaxSent));
                s.store_->decisions().finish_received(d.id, "applied", json::serialize(res));
            });
            return 0;
        });
        keep_environment(found.cluster, found.job);
        reply(ok_json(200, res));
        return true;
    }

    // A peer's options speak the site's names: each cluster here takes them
    // in its own (clusters.NAME.names), or is no place for the job.
    void place_here() {
        Requirements req = d.want;
        if (auto *n = d.spec.if_contains("nodes"); n && n->is_int64() && n->as_int64() > 0) req.nodes = int(n->as_int64());
        const std::string ckpt = d.spec.if_contains("ckpt_dir") && d.spec.at("ckpt_dir").is_string()
                                     ? std::string(d.spec.at("ckpt_dir").as_string()) : "";
        json::object site_options;
        if (auto *o = d.spec.if_contains("options"); o && o->is_object()) site_options = o->as_object();
        p = place(req, s.inventory_.local_offers(ckpt, &site_options, &fitted), "");
        for (const auto &r : p.rejected) rejected.push_back(json::object{{"cluster", r.cluster}, {"reason", r.reason}});
    }

    void refuse(const std::string &why, const char *code = "no_capacity") {
        json::object res{{"error", json::object{{"code", code}, {"message", why}}}, {"rejected", rejected}};
        s.store_wait([&] { s.store_->decisions().finish_received(d.id, "refused", json::serialize(res)); return 0; });
        reply(ApiResponse{409, json::serialize(res), "application/json"});
    }

    // Kept once the job runs and the run is written here with its owner:
    // a refused decision leaves nothing behind (its environment is only in
    // this call), and the file names the owner and the job it was kept for
    // (job_environment.hpp). A disk that fails here costs later attempts
    // the environment, never this one its job.
    void keep_environment(const std::string &cluster, long long job) {
        if (!d.has_environment) return;
        std::string why;
        bool existed = false;
        const std::string dir = private_dir(s.cfg_.database, why);
        if (!dir.empty()) why = write_environment_file(dir, d.run, EnvironmentOrigin{as.uid, cluster, job}, d.environment, existed);
        if (!why.empty()) log_warn("a peer's decision applied, but the run's environment not kept for later attempts", d.run, why);
    }

    void submit() {
        std::string err;
        std::vector<std::string> dropped;   // a peer's options that are not used (malformed): logged
        json::object local_spec = d.spec;
        std::vector<std::string> mapped;
        if (auto f = fitted.find(p.cluster); f != fitted.end() && d.spec.contains("options")) {
            local_spec["options"] = f->second.options;
            mapped = f->second.mapped;
            // Another site's reservation is not one of ours.
            if (local_spec["options"].as_object().erase("reservation")) dropped.push_back("reservation (another site's)");
        }
        if (d.has_environment) as.environment = &d.environment;
        const long long job = s.attempts_.submit_attempt(p.cluster, local_spec, d.script, d.run, d.to, d.resume, p, d.id + ":" + nonce, as, err, &dropped);
        for (const auto &x : dropped) log_warn("a peer's job option is not carried", d.run, x);
        if (!job) return refuse(err);
        bool known = false;
        {
            auto runs = s.runs_.read();
            known = runs.count(d.run) > 0;
        }
        json::object res{{"accepted", true}, {"broker", s.cfg_.broker_name}, {"cluster", p.cluster}, {"job", job},
                         {"nodes", json::value_from(p.nodes)}, {"fabric", p.fabric}};
        json::object ev = res;
        ev["decision"] = d.id;
        ev["from_broker"] = d.from;
        ev["rejected"] = rejected;
        ev["resume"] = d.resume;
        if (!mapped.empty()) ev["mapped"] = json::value_from(mapped);
        if (!dropped.empty()) ev["uncarried"] = json::value_from(dropped);
        write(known, job, res, ev, mapped, dropped);
        remember(known, job);
        keep_environment(p.cluster, job);
        reply(ok_json(200, res));
    }

    void write(bool known, long long job, const json::object &res, const json::object &ev, const std::vector<std::string> &mapped,
               const std::vector<std::string> &dropped) {
        const std::string manifest = d.manifest.empty() ? "{}" : d.manifest;
        s.store_wait([&] {
            try {
                s.transact([&] {
                    if (known) {
                        s.hooks_.store_state(d.run, RunState::recovering, d.to, now);
                        s.store_->update_manifest(d.run, manifest, user);
                        s.store_->set_requeue(d.run, d.policy);
                    } else {
                        s.store_->insert_run(RunRow{d.run, user, "RECOVERING", manifest, d.to, 0, now, now, as.uid, 0, 0, d.policy});
                    }
                    s.store_->set_run_owner(d.run, user, as.uid);
                    s.store_->attempts().upsert_attempt(Store::AttemptRow{d.run, d.to, p.cluster, job, 0});
                    s.receipts_.note_attempt_start(d.run, d.to, p.cluster, job, p.nodes, cause_of(d.id, d.from, d.link, user, as.uid), d.link, now);
                    s.store_->set_recovering(d.run, d.to, (long long)p.nodes.size());
                    for (const auto &seal : d.sealed) s.store_->seals().put_carried_seal(carried::row_of(seal, d.run, now));
                    s.store_->seals().keep_newest_carried(d.run, int(carried::kMaxSent));
                    const std::string evidence = json::serialize(ev);
                    s.event(d.run, "RECEIVED", "decision " + d.id + " from broker " + d.from + " (peer " + d.by + ")", evidence, now);
                    s.event(d.run, "PLACEMENT", p.cluster + " " + join(p.nodes) + ": job " + std::to_string(job) + ", attempt " +
                            std::to_string(d.to) + " (fabric " + p.fabric + ")" + (mapped.empty() ? "" : "; names: " + join(mapped, ", ")) +
                            (dropped.empty() ? "" : "; not carried: " + join(dropped, ", ")), evidence, now);
                    s.event(d.run, "RECOVERING", "attempt " + std::to_string(d.to) + " submitted with --shardnet-resume=" + d.resume, evidence, now);
                    s.store_->decisions().finish_received(d.id, "applied", json::serialize(res));
                });
            } catch (const std::exception &e) {
                // The job runs; the peer's resend finds it by its nonce.
                log_warn("decision " + d.id + " applied (job " + std::to_string(job) + ") but not written", d.run, e.what());
                throw;
            }
            return 0;
        });
    }

    // Memory after the database holds it.
    void remember(bool known, long long job) {
        auto runs = s.runs_.write();
        RunInfo &info = runs[d.run];
        if (!known) info.state = RunState::recovering;   // a new run: (new) -> RECOVERING
        else runs.set_state(d.run, info, RunState::recovering);
        info.owner = user;
        info.owner_uid = as.uid;
        info.jobs[d.to] = AttemptJob{p.cluster, job, 0};
        info.attempt = d.to;
        info.expected_nodes = (long long)p.nodes.size();
        info.recover_to = d.to;
        info.manifest = d.manifest.empty() ? "{}" : d.manifest;
        info.requeue = d.policy;
        info.clock = d.fault_at > 0 ? RunInfo::RecoveryClock{d.to, "peer", d.fault_seen, d.fault_at, wall_now()} : RunInfo::RecoveryClock{};
        runs.bump();
    }
};

void Inbox::receive_decision(const ApiRequest &req, const TokenEntry &who, const Reply &reply) {
    IncomingDecision d;
    if (auto bad = d.read(req, who, cfg_.environment_drop)) return reply(*bad);
    post_answering(slurm_thread_, "receive decision", reply, [this, d = std::move(d)](const Reply &reply) {
        Arrival(*this, d, reply).run();
    });
}

std::string Inbox::peer_may_take(const std::string &run, long long to, long long uid, const std::string &sender,
                                 const std::optional<Store::MovedRow> &moved) const {
    // A peer may start a run id this broker does not know (but not a local
    // job's default id), or hand back one this broker handed away (MOVED)
    // at a later attempt, only the peer it was handed to (the decision
    // this broker recorded); never a run that lives here.
    auto runs = runs_.read();
    auto it = runs.find(run);
    if (it == runs.end()) {
        const std::string why = reserved_run_id(run, cfg_);
        return why.empty() ? "" : "run " + why.substr(4);
    }
    if (it->second.state != RunState::moved)
        return "run " + run + " is " + state_name(it->second.state) + " at broker " + cfg_.broker_name +
               ": a peer may only hand back a run that this broker moved to it";
    if (!moved || moved->peer != sender)
        return "run " + run + " was moved to broker " + (moved ? moved->peer : std::string("(none recorded)")) + ", not to broker " + sender +
               ": only the broker a run was moved to may hand it back";
    if (it->second.owner_uid >= 0 && it->second.owner_uid != uid)
        return "run " + run + " exists at broker " + cfg_.broker_name + " and belongs to another user";
    if (to <= it->second.attempt)
        return "run " + run + " is at attempt " + std::to_string(it->second.attempt) + " here; attempt " + std::to_string(to) +
               " is not later";
    return "";
}

}  // namespace shardnet::broker
