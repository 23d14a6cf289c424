// Requeue-on-failure, tiered: a confirmed FAULT becomes a decision, written
// durably before anything is done and keyed by the run's next attempt, so it
// is applied at most once. The placement (placement.hpp) looks at the same
// cluster without the failed node, then the broker's other clusters; with
// --shardnet-requeue=federated and no local room, the decision is handed to
// a peer broker (federation/forwarder.cpp). The old attempt is cancelled in
// Slurm and fenced by its number; the new one resumes from the run's last
// sealed checkpoint.
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <cstdio>
#include <sstream>

#include "broker/seals/carried.hpp"
#include "broker/inventory/inventory_module.hpp"
#include "broker/receipts/receipts_module.hpp"
#include "broker/recovery/attempts.hpp"
#include "broker/recovery/requeues.hpp"
#include "broker/slurm/slurm_job.hpp"
#include "broker/core/api_util.hpp"
#include "broker/slurm/slurm_view.hpp"
#include "broker/slurm/name_map.hpp"

namespace shardnet::broker {

namespace json = boost::json;

using detail::join;
using detail::log_warn;

// One requeue carried out on the Slurm thread, a step per member: the
// durable decision, the failed attempt's spec, the budget, a job submitted
// before a stop, the requirements, the placement, then a peer or a job.
struct Requeues::Requeue {
    Requeues &s;
    const Fault fault;
    const std::string policy, manifest, owner, ckpt_every;
    const long long owner_uid;
    const int tries;
    const bool local_only;
    // The node to leave out: none when Slurm ended a healthy job itself.
    const std::string bad = fault.kind == FaultKind::ended_by_slurm ? "" : fault.node.substr(0, fault.node.find('/'));
    const long long to = fault.attempt + 1;
    const std::string id;
    const double now = wall_now();
    std::string nonce = detail::random_id().substr(4);
    bool resumed = false;
    bool unplaced_again = false;   // an unplaced decision, tried again
    json::object ev;
    long long recover_nodes = 0;   // RECOVERING: the new attempt's nodes, kept across a restart
    std::optional<Store::JobSpecRow> spec_row;
    json::object spec;
    std::string comment, resume, ckpt, spec_cluster, others;
    long long spec_uid = -1, spec_nodes = 1;
    Requirements req;
    json::object site_options;
    std::map<std::string, Inventory::FittedOptions> fitted;

    Requeue(Requeues &svc, const Fault &f, std::string pol, std::string man, std::string own, std::string every, long long uid, int t,
            bool local)
        : s(svc), fault(f), policy(std::move(pol)), manifest(std::move(man)), owner(std::move(own)), ckpt_every(std::move(every)),
          owner_uid(uid), tries(t), local_only(local), id(svc.cfg_.broker_name + ":" + f.run + "/attempt-" + std::to_string(f.attempt + 1)) {}

    void run() {
        if (!decide()) return;
        ev = json::object{{"decision", id}, {"from_cluster", fault.state.cluster}, {"excluded", bad}, {"old_job", fault.state.job}};
        if (!load_spec() || budget_spent() || taken_up_already()) return;
        requirements();
        Placement p = place_here();
        if (p.cluster.empty()) return nowhere_here();
        // No idle room here: a peer's idle nodes before a wait in this queue.
        if (p.queued && to_peers()) {
            others = "; " + p.cluster + " rejected: " + p.waits_because + others;
            return to_peer();
        }
        submit(p);
    }

    // The decision and an event in one transaction (and the run's state).
    bool record(const std::string &state, long long new_job, const std::string &kind, const std::string &cause,
                std::optional<RunState> run_state = std::nullopt) {
        return s.store_wait([&] {
            try {
                s.transact([&] {
                    s.store_->decisions().apply_decision(id, state, new_job);
                    s.event(fault.run, kind, cause, json::serialize(ev), wall_now());
                    if (run_state) s.hooks_.store_state(fault.run, *run_state, fault.attempt, wall_now());
                    if (run_state == RunState::recovering) s.store_->set_recovering(fault.run, to, recover_nodes);
                });
            } catch (const std::exception &e) {
                log_warn("requeue decision " + id + " (" + state + ") not written", fault.run, e.what());
                return false;
            }
            return true;
        });
    }

    void cancel_old() {
        std::string ignored;
        s.slurm_->change(s.cfg_.clusters.at(fault.state.cluster), {"scancel", std::to_string(fault.state.job)}, ignored);
    }

    // 1. The decision, durable, before any action, with the nonce its job's
    // comment will carry. False: nothing (more) to do here.
    bool decide() {
        std::string store_error;
        const bool fresh = s.store_wait([&] {
            bool inserted = false;
            try {
                s.store_->transaction([&] {
                    inserted = s.store_->decisions().insert_decision(id, fault.run, fault.attempt, to, fault.state.cluster, bad, fault.state.job, now, nonce);
                });
            } catch (const std::exception &e) {
                store_error = e.what();
            }
            return inserted;
        });
        if (!store_error.empty()) {
            // Not "decided already": the decision could not be written. It is
            // tried again; the event follows once the store takes writes.
            log_warn("requeue decision not written; tried again in 1 s", fault.run, store_error);
            // The run's history says so too, once (the store may take an
            // event while it refuses the decision; if not, the log has it).
            if (tries == 0)
                s.store_wait([&] {
                    try {
                        s.transact([&] {
                            s.event(fault.run, "PLACEMENT", "requeue decision for attempt " + std::to_string(to) + " not written (" +
                                    store_error + "); tried again every second", json::serialize(json::object{{"decision", id},
                                    {"error", store_error}}), now);
                        });
                    } catch (const std::exception &) {}
                    return 0;
                });
            if (tries < 600) s.retry_later(1.0, "requeue retry", [svc = &s, f = fault, t = tries] { svc->requeue(f, t + 1); });
            return false;
        }
        // Decided already (another worker of this attempt, before): done,
        // unless the broker stopped between writing it and acting on it. It
        // is then taken up again; a job with its nonce is the one it made.
        if (!fresh) {
            auto d = s.store_wait([&] { return s.store_->decisions().get_decision(id); });
            // Nowhere to go when last tried: this is its retry (tries > 0),
            // or every peer refused it (local_only, told once more).
            if (d && (d->first == "unplaced" || d->first == "unplaced_here") && (tries > 0 || local_only)) {
                nonce = d->second;
                unplaced_again = tries > 0;
                return true;
            }
            if (!d || d->first != "written") return false;
            nonce = d->second;
            resumed = true;
            log_warn("requeue decision " + id + " taken up again (the broker stopped before it was applied)", fault.run, "");
        }
        return true;
    }

    // 2. What the failed attempt's job was: kept when it started, so that a
    // cluster whose slurmctld is gone can still be left.
    bool load_spec() {
        spec_row = s.store_wait([&] { return s.store_->attempts().get_job_spec(fault.run, fault.attempt); });
        if (!spec_row) spec_row = s.attempts_.capture_spec_now(fault.run, fault.attempt, fault.state.cluster, fault.state.job, "");
        if (!spec_row) {
            record("failed", 0, "PLACEMENT", "cannot requeue attempt " + std::to_string(fault.attempt) + ": the job's spec was not "
                   "recorded and cluster " + fault.state.cluster + " cannot give it");
            return false;
        }
        json::error_code ec;
        json::value sv = json::parse(spec_row->spec, ec);
        spec = !ec && sv.is_object() ? sv.as_object() : json::object{};
        comment = nonce.empty() ? id : id + ":" + nonce;
        spec_uid = spec.if_contains("uid") && spec.at("uid").is_int64() ? spec.at("uid").as_int64() : -1;
        spec_nodes = spec.if_contains("nodes") && spec.at("nodes").is_int64() ? spec.at("nodes").as_int64() : 1;
        return true;
    }

    // The run's attempt budget (--shardnet-max-attempts): with every
    // attempt used, this failure is the run's end.
    bool budget_spent() {
        auto *m = spec.if_contains("max_attempts");
        if (!m || !m->is_int64() || m->as_int64() < 1 || to <= m->as_int64()) return false;
        ev["max_attempts"] = m->as_int64();
        cancel_old();   // the old attempt's job ends, as on a requeue
        const std::string n = std::to_string(m->as_int64());
        if (record("refused", 0, "FAILED", "attempt budget spent: " + n + " of " + n + " attempts used (--shardnet-max-attempts); "
                   "not requeued after attempt " + std::to_string(fault.attempt) + "'s fault", RunState::failed)) {
            auto runs = s.runs_.write();
            if (auto it = runs.find(fault.run); it != runs.end() && it->second.attempt == fault.attempt)
                runs.set_state(fault.run, it->second, RunState::failed);
        }
        return true;
    }

    // A decision taken up again: its job may run already (sbatch, then the
    // stop). Slurm knows: a job of the owner with the nonce.
    bool taken_up_already() {
        if (!resumed || nonce.empty()) return false;
        const auto found = s.attempts_.find_submitted(comment, spec_uid);
        if (found.unknown()) {
            wait_for_slurm(found.unread);
            return true;
        }
        if (!found.found()) return false;
        const std::string &name = found.cluster;
        const long long job = found.job;
        cancel_old();   // the old attempt ends, as when it was submitted
        ev["target"] = name;
        ev["new_job"] = job;
        ev["resumed"] = true;
        recover_nodes = spec_nodes;
        s.attempts_.record_attempt(fault.run, to, name, job, {}, json::object{{"decision", id}});
        const bool written = record("applied", job, "RECOVERING", "attempt " + std::to_string(to) + " runs as job " +
                                    std::to_string(job) + " on " + name + ", submitted before the broker stopped", RunState::recovering);
        auto runs = s.runs_.write();
        if (auto it = runs.find(fault.run); it != runs.end() && written && runs.set_state(fault.run, it->second, RunState::recovering)) {
            it->second.expected_nodes = recover_nodes;
            it->second.recover_to = to;
        }
        return true;
    }

    // Whether the decision's job was submitted before the stop cannot be
    // told (a cluster's answer could not be had or read): it is not submitted
    // again, which could run the attempt twice. Asked again every 5 s (for an
    // hour; a restart takes the decision up again), the history told once.
    void wait_for_slurm(const std::string &unread) {
        if (tries >= 720) return log_warn("requeue decision " + id + " left to the next start: Slurm unread for an hour", fault.run, unread);
        // Other workers' faults of this attempt come here too: one wait.
        if (!s.retry_once("requeue " + id, 5.0, "requeue: was it submitted", [svc = &s, f = fault, t = tries] { svc->requeue(f, t + 1); }))
            return;
        log_warn("requeue decision " + id + " waits for Slurm", fault.run, unread);
        if (tries > 0) return;
        s.write_event(fault.run, "PLACEMENT", "requeue decision for attempt " + std::to_string(to) + " waits: whether its job "
                      "was submitted before the broker stopped cannot be told (" + unread + "); not submitted again until "
                      "Slurm answers", json::serialize(json::object{{"decision", id}, {"unread", unread}}), now);
    }

    // 3. Requirements: the run's manifest, nodes as the failed job had; and
    // what the next attempt keeps of this one's --shardnet options.
    void requirements() {
        // The next attempt heartbeats as this one did and keeps the run's
        // requeue policy (its job's --shardnet options are not in the spec Slurm gives).
        if (fault.state.interval > 0) spec["heartbeat"] = fault.state.interval;
        spec["requeue"] = policy == "local" || policy == "off" ? policy : "federated";   // only what a peer takes
        if (!ckpt_every.empty()) spec["ckpt_every"] = ckpt_every;   // a fixed interval stays fixed
        json::error_code ec;
        json::value mv = json::parse(manifest.empty() ? "{}" : manifest, ec);
        if (!ec && mv.is_object()) {
            // Checked when the run was made: an error here is a manifest
            // from elsewhere (an older store), said, and read no further
            // than its first bad key.
            if (auto *r = mv.as_object().if_contains("requires"); r && r->is_object())
                if (auto err = requirements_from_json(r->as_object(), req); !err.empty())
                    log_warn("the run's manifest.requires is read in part", fault.run, err);
            // Every attempt runs the image pinned at submit: only where
            // containers run and its layout is read.
            if (auto err = image_requirements(mv.as_object(), req); !err.empty())
                log_warn("the run's manifest has a bad image_layout: not checked", fault.run, err);
        }
        const json::object *mreq = nullptr;
        if (const json::object *mo = mv.if_object())
            if (auto *r = mo->if_contains("requires")) mreq = r->if_object();
        if (auto *n = spec.if_contains("nodes"); n && n->is_int64() && n->as_int64() > 0 && !(mreq && mreq->contains("nodes")))
            req.nodes = int(n->as_int64());
        ckpt = spec.contains("ckpt_dir") && spec.at("ckpt_dir").is_string() ? std::string(spec.at("ckpt_dir").as_string()) : "";
        const std::string last = s.store_wait([&] { return s.store_->seals().last_checkpoint(fault.run); });
        resume = last.empty() ? "latest" : last;
        ev["requires"] = requirements_to_json(req);
        ev["resume"] = resume;
    }

    // 4. Where: this broker's clusters first, each taking the job's
    // partition, account, QOS and GPU types in its own names (or no place).
    Placement place_here() {
        std::string region;
        if (auto it = s.cfg_.cluster_info.find(fault.state.cluster); it != s.cfg_.cluster_info.end()) region = it->second.region;
        spec_cluster = spec.if_contains("cluster") && spec.at("cluster").is_string() ? std::string(spec.at("cluster").as_string())
                                                                                       : fault.state.cluster;
        if (auto *o = spec.if_contains("options"); o && o->is_object()) site_options = o->as_object();
        if (auto it = s.cfg_.cluster_info.find(spec_cluster); it != s.cfg_.cluster_info.end()) site_names(it->second.names, site_options);
        Placement p = place(req, s.inventory_.local_offers(ckpt, &site_options, &fitted, true, &fault.run), fault.state.cluster, region, bad);
        json::array rejected;
        for (const auto &r : p.rejected) {
            rejected.push_back(json::object{{"cluster", r.cluster}, {"reason", r.reason}});
            others += "; " + r.cluster + " rejected: " + r.reason;
        }
        ev["rejected"] = rejected;
        return p;
    }

    // 5. No local place: a peer broker (federated), else the run waits.
    // The old attempt ends once a peer accepts it.
    // Unplaced, the run waits: tried again every 30 s for an hour (nodes
    // come back, a partition is resumed), the history told once.
    bool to_peers() const { return policy == "federated" && !s.cfg_.peers.empty() && !local_only; }

    void nowhere_here() {
        if (to_peers()) return to_peer();
        if (!unplaced_again &&
            !record(local_only ? "unplaced_here" : "unplaced", 0, "PLACEMENT", "no placement for attempt " + std::to_string(to) + others +
                    (policy == "local" ? " (requeue=local: no peer brokers)" : s.cfg_.peers.empty() ? " (no peer brokers)"
                     : local_only ? " (every peer broker refused)" : "") +
                    "; tried again every 30 s for an hour"))
            return;
        if (tries < kUnplacedFor / kUnplacedEvery) s.retry_once("unplaced " + id, double(kUnplacedEvery), "requeue: unplaced, tried again", [svc = &s, f = fault, t = tries, l = local_only] { svc->requeue(f, t + 1, l); });
    }

    void to_peer() {
        // A peer knows the site's names, not this cluster's.
        json::object site_spec = spec;
        site_spec["options"] = site_options;
        json::object payload{{"id", id}, {"from_broker", s.cfg_.broker_name}, {"run", fault.run}, {"from_attempt", fault.attempt},
                             {"to_attempt", to}, {"spec", site_spec}, {"script", spec_row->script}, {"owner", owner},
                             {"resume", resume}, {"manifest", manifest}, {"requires", requirements_to_json(req)},
                             {"local_rejected", others}, {"excluded", bad}};
        {
            // When the failure was seen, for the peer's measure of the recovery (its R).
            auto runs = s.runs_.read();
            if (auto it = runs.find(fault.run); it != runs.end() && it->second.clock.to == to && it->second.clock.fault_at > 0)
                payload["fault"] = json::object{{"last_seen", it->second.clock.last_seen}, {"at", it->second.clock.fault_at}};
        }
        const std::string peer = s.cfg_.peers.front().name;
        ev["peer"] = peer;
        const bool written = s.store_wait([&] {
            try {
                s.transact([&] {
                    // The attempt leaves with the decision: its receipt's digest
                    // travels in it, so that the peer's chain goes on from it.
                    const std::string digest = s.receipts_.write_receipt(receipt::Kind::attempt_ended, fault.run, fault.attempt,
                                                               json::object{{"how", "moved"}, {"moved_to", peer}, {"decision", id}}, {},
                                                               wall_now());
                    if (!digest.empty()) payload["receipt"] = json::object{{"seq", s.receipts_.last_receipt_link(fault.run).seq}, {"digest", digest}};
                    // The run's newest seals go with it: the peer serves their
                    // digests to the resumed attempt (seals/carried.hpp).
                    std::vector<std::string> left_out;
                    payload["sealed"] = carried::outgoing(*s.store_, fault.run, s.cfg_.broker_name, left_out);
                    for (const auto &why : left_out) log_warn("a sealed checkpoint does not go with the decision", fault.run, why);
                    s.store_->decisions().forward_decision(id, peer, json::serialize(payload));
                    s.hooks_.store_state(fault.run, RunState::recovering, fault.attempt, wall_now());
                    s.event(fault.run, "PLACEMENT", "no local capacity for attempt " + std::to_string(to) + others + "; decision " + id +
                            " goes to broker " + peer, json::serialize(ev), wall_now());
                });
            } catch (const std::exception &e) {
                log_warn("decision " + id + " for broker " + peer + " not written; the run stays DEGRADED", fault.run, e.what());
                return false;
            }
            return true;
        });
        if (!written) return;
        {
            auto runs = s.runs_.write();
            auto it = runs.find(fault.run);
            if (it != runs.end() && runs.set_state(fault.run, it->second, RunState::recovering)) it->second.recover_to = to;
        }
        s.hooks_.forward_now();
    }

    void not_carried(std::string &words, const std::string &what) {
        words += (words.empty() ? "" : ", ") + what;
        if (!ev.contains("uncarried")) ev["uncarried"] = json::array{};
        ev["uncarried"].as_array().push_back(json::value(what));
    }

    // 6. The new attempt, on the chosen nodes, as the failed job's owner as
    // Slurm numbered it when the attempt started (and the run's).
    void submit(const Placement &p) {
        Attempts::SubmitAs as;
        if (auto *u = spec.if_contains("uid"); u && u->is_int64()) as.uid = u->as_int64();
        if (auto *g = spec.if_contains("gid"); g && g->is_int64()) as.gid = g->as_int64();
        if (owner_uid >= 0 && as.uid != owner_uid) {
            record("refused", 0, "PLACEMENT", "not requeued: attempt " + std::to_string(fault.attempt) + "'s job ran as uid " +
                   std::to_string(as.uid) + ", the run belongs to uid " + std::to_string(owner_uid));
            return;
        }
        // What a new job cannot be (a dependency, an array task): said in
        // the PLACEMENT event, never dropped in silence.
        std::string uncarried;
        if (auto *u = spec.if_contains("uncarried"); u && u->is_array()) {
            for (const auto &x : u->as_array())
                if (x.is_string()) uncarried += (uncarried.empty() ? "" : ", ") + std::string(x.as_string());
            ev["uncarried"] = *u;
        }
        // The options in the chosen cluster's names. A reservation is its
        // cluster's own: it does not go to another.
        std::string mapped_words;
        if (auto f = fitted.find(p.cluster); f != fitted.end() && spec.contains("options")) {
            spec["options"] = f->second.options;
            if (!f->second.mapped.empty()) ev["mapped"] = json::value_from(f->second.mapped), mapped_words = "; names: " + join(f->second.mapped, ", ");
        }
        if (auto *o = spec.if_contains("options"); o && o->is_object() && p.cluster != spec_cluster)
            if (auto *r = o->as_object().if_contains("reservation"); r && r->is_string()) {
                not_carried(uncarried, "reservation " + std::string(r->as_string()) + " (" + spec_cluster + "'s)");
                o->as_object().erase("reservation");
            }
        cancel_old();
        std::string err;
        std::vector<std::string> dropped;   // options of the spec that are not used (malformed)
        const long long new_job = s.attempts_.submit_attempt(p.cluster, spec, spec_row->script, fault.run, to, resume, p, comment, as, err, &dropped);
        for (const auto &d : dropped) not_carried(uncarried, d);
        ev["target"] = p.cluster;
        ev["nodes"] = json::value_from(p.nodes);
        if (p.queued) ev["queued"] = p.queued, ev["exclude"] = json::value_from(p.exclude);
        ev["fabric"] = p.fabric;
        if (!new_job) {
            record("failed", 0, "PLACEMENT", "attempt " + std::to_string(to) + " on " + p.cluster + ": " + err);
            return;
        }
        ev["new_job"] = new_job;
        recover_nodes = p.queued ? p.queued : (long long)p.nodes.size();
        s.attempts_.record_attempt(fault.run, to, p.cluster, new_job, p.nodes, json::object{{"decision", id}});
        const std::string matched = req.needs_hardware() ? " (" + std::string(req.accel_class.empty() ? "" : "class, ") +
                                    (req.fabric.empty() ? "" : "fabric, ") + (req.memory_gb > 0 ? "memory, " : "") + "shape matched)" : "";
        const std::string where = p.queued ? p.cluster + ", queued for " + std::to_string(p.queued) + " node(s): no idle room, the nodes that fit are in use" +
                                             (p.exclude.empty() ? "" : " (never " + join(p.exclude) + ")")
                                           : p.cluster + " " + join(p.nodes) + (p.cluster == fault.state.cluster && !bad.empty() ? " without " + bad : "");
        record("applied", new_job, "PLACEMENT", where +
               ": job " + std::to_string(new_job) + ", attempt " + std::to_string(to) + matched + others + mapped_words +
               (uncarried.empty() ? "" : "; not carried: " + uncarried));
        const bool written = record("applied", new_job, "RECOVERING",
                                    "attempt " + std::to_string(to) + " submitted with --shardnet-resume=" + resume, RunState::recovering);
        auto runs = s.runs_.write();
        auto it = runs.find(fault.run);
        // Memory follows the database; the new attempt is recorded either way
        // (its job runs), so its heartbeats move the run on.
        if (it != runs.end() && written && runs.set_state(fault.run, it->second, RunState::recovering)) {
            it->second.expected_nodes = recover_nodes;
            it->second.recover_to = to;
            auto &clock = it->second.clock;
            if (clock.to == to) clock.placed_at = wall_now(), clock.tier = p.cluster == fault.state.cluster ? "same_cluster" : "other_cluster";
        }
    }
};

void Requeues::requeue(const Fault &fault, int tries, bool local_only) {
    std::string policy, manifest, owner, ckpt_every;
    long long owner_uid = -1;
    {
        auto runs = runs_.read();
        auto it = runs.find(fault.run);
        if (it == runs.end() || it->second.attempt != fault.attempt || is_final(it->second.state)) return;
        policy = it->second.requeue;
        manifest = it->second.manifest;
        owner = it->second.owner;
        owner_uid = it->second.owner_uid;
        ckpt_every = it->second.ckpt_every;
    }
    if (policy == "off" || !cfg_.clusters.count(fault.state.cluster) || fault.state.job <= 0) return;
    detail::post_guarded(slurm_thread_, "requeue", [this, fault, policy, manifest, owner, owner_uid, ckpt_every, tries, local_only] {
        Requeue(*this, fault, policy, manifest, owner, ckpt_every, owner_uid, tries, local_only).run();
    });
}

void Requeues::check_recovered(const std::string &run, long long attempt, double now) {
    long long need = 0;
    {
        auto runs = runs_.read();
        auto it = runs.find(run);
        // Only the new attempt's heartbeats count; the old one's may still arrive.
        if (it == runs.end() || it->second.state != RunState::recovering || it->second.recover_to != attempt) return;
        need = it->second.expected_nodes;
    }
    long long up = 0;
    for (const auto &[worker, w] : workers_.of_run(run))
        if (w.attempt == attempt && !is_batch_worker(worker) && !w.ended && !w.faulted) ++up;
    if (up < need) return;
    {
        // Claimed here, once: later heartbeats do not write a second RECOVERED.
        auto runs = runs_.write();
        auto it = runs.find(run);
        if (it == runs.end() || it->second.state != RunState::recovering || it->second.recover_to != attempt) return;
        it->second.recover_to = 0;
    }
    on_store([this, run, attempt, up, now] {
        try {
            transact([&] {
                hooks_.store_state(run, RunState::running, attempt, now);
                store_->set_recovering(run, 0, 0);
                event(run, "RECOVERED", "attempt " + std::to_string(attempt) + " heartbeats from all " + std::to_string(up) + " node(s)",
                      json::serialize(json::object{{"attempt", attempt}, {"nodes", up}}), now);
            });
        } catch (const std::exception &e) {
            log_warn("RECOVERED not written; the next heartbeat tries again", run, e.what());
            auto runs = runs_.write();
            if (auto it = runs.find(run); it != runs.end() && it->second.state == RunState::recovering) it->second.recover_to = attempt;
            return;
        }
        auto runs = runs_.write();
        if (auto it = runs.find(run); it != runs.end() && runs.set_state(run, it->second, RunState::running) && it->second.clock.to == attempt)
            it->second.clock.recovered_at = now;
    });
}

}  // namespace shardnet::broker
