// API: the runs resource (create, list, read, cancel, events).
#include "broker/api/runs_api.hpp"

#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <openssl/rand.h>

#include "broker/api/heartbeat_body.hpp"
#include "common/parse_util.hpp"
#include "broker/core/api_util.hpp"
#include "broker/federation/onward_module.hpp"
#include "broker/goodput/goodput_json.hpp"
#include "broker/inventory/placement.hpp"
#include "broker/receipts/receipts_module.hpp"
#include "broker/runs/run_image.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

void RunsApi::follow(const std::string &id, const std::string &query, const std::string &last_event_id, const TokenEntry &who,
                            const Reply &reply) {
    {
        auto runs = runs_.read();
        auto it = runs.find(id);
        if (it == runs.end() || !may_see(who, id, &it->second)) return reply(error_response(404, "no_run", "no run " + id));
    }
    // Where to start: after the Last-Event-ID an SSE client sends when it
    // reconnects (it wins over the URL's ?after=, which the client repeats).
    long long after = query_int(query, "after", 0);
    if (!last_event_id.empty()) {
        auto v = parse_int(last_event_id, 0, 1LL << 62);
        if (!v) return reply(error_response(400, "bad_header", "Last-Event-ID: expected an event id (a whole number)", "Last-Event-ID"));
        after = *v;
    }
    // The stream budget: per token (a user's tabs, a job's watcher) and in
    // all, always below max_connections, so that streams held open (read or
    // not) can never take the connections heartbeats need.
    const int max_streams = cfg_.sse_max_streams > 0 ? cfg_.sse_max_streams : cfg_.max_connections / 2;
    // A job's derived tokens count as their user's: one user's jobs share one budget.
    const std::string key = who.bound ? "uid:" + std::to_string(who.uid) : who.name;
    {
        std::lock_guard<std::mutex> lock(streams_->streams_mu);
        if (streams_->total >= max_streams) {
            ApiResponse r = error_response(503, "too_many_streams", "the broker holds " + std::to_string(streams_->total) +
                                           " event streams (limits.sse_max_streams); try again later");
            r.retry_after = 5;
            return reply(std::move(r));
        }
        int &mine = streams_->by_token[key];
        if (mine >= cfg_.sse_streams_per_token) {
            ApiResponse r = error_response(429, "too_many_streams", "this token holds " + std::to_string(mine) +
                                           " event streams (limits.sse_streams_per_token); close one");
            r.retry_after = 5;
            return reply(std::move(r));
        }
        ++mine;
        ++streams_->total;
    }
    // The place is given back with the sink, or with the answer if no
    // stream ever starts (the connection went first).
    std::shared_ptr<void> slot(static_cast<void *>(streams_.get()), [budget = streams_, key](void *) {
        std::lock_guard<std::mutex> lock(budget->streams_mu);
        --budget->total;
        if (auto it = budget->by_token.find(key); it != budget->by_token.end() && --it->second <= 0) budget->by_token.erase(it);
    });
    ApiResponse r;
    r.content_type = "text/event-stream";
    r.stream = [this, id, after, who, slot = std::move(slot)](std::shared_ptr<EventSink> sink) {
        sink->slot = slot;
        sink->who = who;
        on_store([this, id, after, sink] { backlog_page(id, after, sink); });
    };
    reply(std::move(r));
}

// Backlog pages and the registration for live events are store-thread jobs:
// events are only written there, so the stream has no gap and no repeat.
void RunsApi::backlog_page(const std::string &id, long long after, const std::shared_ptr<EventSink> &sink) {
    constexpr int kRows = 1000;
    for (;;) {
        if (!sink->open) return;   // the stream went
        const auto rows = store_->list_events(id, after, kRows);
        std::size_t bytes = 0, sent = 0;
        for (const auto &e : rows) {
            std::string m = sse_message(e);
            bytes += m.size();
            after = e.id;
            ++sent;
            sink->push(std::move(m));
            if (bytes >= sink->page_bytes) break;
        }
        if (sent == rows.size() && rows.size() < std::size_t(kRows)) {   // all of it: live from here
            core_.follow(id, sink);
            return;
        }
        if (sink->more)   // the next page once this one is written
            return sink->more([this, id, after, sink] { on_store([this, id, after, sink] { backlog_page(id, after, sink); }); });
    }
}

void RunsApi::create(const ApiRequest &req, const TokenEntry &who, const Reply &reply, double now) {
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
    Requirements image_req;
    if (manifest)
        if (auto err = image_requirements(manifest->as_object(), image_req); !err.empty())
            return reply(error_response(400, "bad_field", "manifest." + err, "manifest.image_layout"));
    std::string manifest_text = manifest ? json::serialize(*manifest) : "{}";
    // A run belongs to a Unix account: a user token's own; an admin names
    // one ("owner") or leaves the run to the first job that reports for it.
    std::string owner = who.user;
    if (who.scope == Scope::admin && !f.str("owner", owner, false)) return reply(bad_field(f));
    long long owner_uid = -1;
    if (!owner.empty() && (owner_uid = user_uid(owner)) < 0)
        return reply(error_response(400, "bad_field", "owner: no account '" + owner + "' on this broker's host", "owner"));
    if (std::string why = broker::reserved_run_id(id, cfg_); !why.empty()) return reply(error_response(400, "bad_field", why, "id"));
    {
        auto runs = runs_.write();
        if (runs.count(id)) return reply(error_response(409, "exists", "run " + id + " exists", "id"));
        // One user cannot grow the run table without bound: runs not ended
        // count against limits.runs_per_user (the registry keeps the count).
        if (!owner.empty())
            if (auto r = too_many_runs(owner, runs.open_of(owner), cfg_.runs_per_user)) return reply(std::move(*r));
        runs[id] = RunInfo{owner, RunState::pending, 1, world};
        runs[id].manifest = manifest_text;
        runs[id].owner_uid = owner_uid;
        runs.bump();
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
            runs_.undo(id, std::nullopt);   // the id is free again: nothing of it was kept
            log_warn("run not created: the store refused it", id, e.what());
            reply(store_error_response(e));
        }
    });
}

void RunsApi::list(const TokenEntry &who, const Reply &reply) {
    json::array out;
    auto runs = runs_.read();
    for (const auto &[id, info] : runs)
        if (may_see(who, id, &info)) out.push_back(run_json(id, info.owner, state_name(info.state), info.attempt, info.world_size));
    runs.unlock();
    reply(ok_json(200, json::object{{"runs", std::move(out)}}));
}

void RunsApi::get(const std::string &id, const TokenEntry &who, const Reply &reply) {
    RunInfo info;
    {
        auto runs = runs_.read();
        auto it = runs.find(id);
        if (it == runs.end() || !may_see(who, id, &it->second)) return reply(error_response(404, "no_run", "no run " + id));
        info = it->second;
    }
    json::object r = run_json(id, info.owner, state_name(info.state), info.attempt, info.world_size);
    json::array workers;
    // Worker groups: one per attempt and role ("batch": the batch script's
    // node; "step": the nodes of srun steps, which carry the ranks).
    std::map<std::pair<long long, std::string>, json::object> groups;
    const double now = wall_now();
    std::vector<goodput::Mark> marks;   // each step worker's first step: its attempt's first progress
    for (const auto &[node, w] : workers_.of_run(id)) {
        const std::string role = is_batch_worker(node) ? "batch" : "step";
        if (role == "step" && w.first_step_time > 0) marks.push_back(goodput::Mark{"PROGRESS", w.first_step_time, w.attempt, 0, {}, {}});
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
    add_run_image(r, info.manifest);   // the digest every attempt runs (doc/containers.md)
    // Goodput (doc/goodput.md): the run's events are the store's, read a
    // page at a time on its thread, only those after the last read.
    on_store(reply, [this, id, r = std::move(r), marks = std::move(marks), now](const Reply &reply) mutable {
        goodput::MarkLog &log = goodput_marks_.touch(id);
        for (;;) {
            const auto page = store_->list_events(id, log.last_id, 1000);
            for (const auto &e : page) {
                if (auto m = goodput::mark_of_event(e.kind, e.time, e.cause, e.evidence)) log.add(e.id, std::move(*m));
                else log.last_id = std::max(log.last_id, e.id);
            }
            if (page.size() < 1000) break;
        }
        marks.insert(marks.end(), log.marks.begin(), log.marks.end());
        r["goodput"] = goodput::to_json(goodput::compute(std::move(marks), now));
        onward_.reply_with(id, std::move(r), "", reply);
    });
}

void RunsApi::cancel(const std::string &id, const TokenEntry &who, const Reply &reply, double now) {
    {
        auto runs = runs_.read();
        auto it = runs.find(id);
        if (it == runs.end() || !may_see(who, id, &it->second) || who.scope == Scope::worker)
            return reply(error_response(404, "no_run", "no run " + id));
        if (!transition_allowed(it->second.state, RunState::cancelled))
            return reply(error_response(409, "final", "run " + id + " is " + state_name(it->second.state) + " already"));
    }
    // The database first; memory only once it holds the change.
    on_store(reply, [this, id, now, by = who.name](const Reply &reply) {
        long long attempt = 0;
        {
            auto runs = runs_.read();
            auto it = runs.find(id);
            if (it == runs.end()) return reply(error_response(404, "no_run", "no run " + id));
            if (!transition_allowed(it->second.state, RunState::cancelled))
                return reply(error_response(409, "final", "run " + id + " is " + state_name(it->second.state) + " already"));
            attempt = it->second.attempt;
        }
        try {
            transact([&] {
                if (store_->receipts().has_receipt(id, attempt, "attempt-started"))   // a run cancelled before it ran had no attempt
                    receipts_.write_receipt(receipt::Kind::attempt_ended, id, attempt, json::object{{"how", "cancelled"}, {"by", by}}, {}, now);
                hooks_.store_state(id, RunState::cancelled, attempt, now);
                event(id, "CANCELLED", "cancelled by " + by, "{}", now);
            });
        } catch (const std::exception &e) {
            log_warn("cancel not written: the store refused it", id, e.what());
            return reply(store_error_response(e));   // nothing changed, here or there
        }
        {
            auto runs = runs_.write();
            if (auto it = runs.find(id); it != runs.end()) runs.set_state(id, it->second, RunState::cancelled);
        }
        reply(ok_json(200, json::object{{"id", id}, {"state", "CANCELLED"}}));
    });
}

void RunsApi::events(const std::string &id, const std::string &query, const TokenEntry &who, const Reply &reply) {
    {
        auto runs = runs_.read();
        auto it = runs.find(id);
        if (it == runs.end() || !may_see(who, id, &it->second)) return reply(error_response(404, "no_run", "no run " + id));
    }
    long long after = query_int(query, "after", 0), limit = std::min<long long>(query_int(query, "limit", 1000), 10000);
    on_store(reply, [this, id, after, limit](const Reply &reply) {
        json::array out;
        for (const auto &e : store_->list_events(id, after, int(limit))) out.push_back(event_object(e));
        reply(ok_json(200, json::object{{"events", std::move(out)}}));
    });
}

}  // namespace shardnet::broker
