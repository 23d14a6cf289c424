// API: read-only joins for the dashboard (web/). GET /v1/runs gives what a
// run is; a table of runs also needs where each runs, how many of its
// workers answer, its step, its last seal and its age, and a run's
// timeline needs the cluster of every attempt. Asking /v1/runs/{id} and
// /checkpoints for each of a thousand runs would cost the broker more than
// this one pass over memory and one over the store.
#include <boost/json.hpp>

#include "broker/api/runs_api.hpp"
#include "broker/core/api_util.hpp"
#include "broker/federation/onward_module.hpp"
#include "broker/receipts/receipts_module.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

namespace {

// What a view row takes from memory (copied under the runs lock).
struct ViewRow {
    std::string id;
    RunInfo info;
};

}  // namespace

void RunsApi::view(const std::string &id, const TokenEntry &who, const Reply &reply) {
    std::vector<ViewRow> rows;
    {
        auto runs = runs_.read();
        if (!id.empty()) {
            auto it = runs.find(id);
            if (it == runs.end() || !may_see(who, id, &it->second)) return reply(error_response(404, "no_run", "no run " + id));
            rows.push_back(ViewRow{id, it->second});
        } else {
            for (const auto &[rid, info] : runs)
                if (may_see(who, rid, &info)) rows.push_back(ViewRow{rid, info});
        }
    }
    const double now = wall_now();
    json::array out;
    for (auto &[rid, info] : rows) {
        json::object r = run_json(rid, info.owner, state_name(info.state), info.attempt, info.world_size);
        auto job = info.jobs.find(info.attempt);
        r["cluster"] = job != info.jobs.end() ? json::value(job->second.cluster) : json::value(nullptr);
        r["job"] = job != info.jobs.end() ? json::value(job->second.job) : json::value(nullptr);
        // The current attempt's step workers (the batch node carries no rank).
        long long workers = 0, healthy = 0, ranks = 0, step = -1;
        double last_seen = 0;
        for (const auto &[node, w] : workers_.of_run(rid)) {
            if (w.attempt != info.attempt || is_batch_worker(node)) continue;
            ++workers;
            ranks += w.ranks;
            if (!w.faulted && !w.ended && !w.suspected && now - w.last_seen <= 2.0 * w.interval) ++healthy;
            step = std::max(step, w.step);
            last_seen = std::max(last_seen, w.last_seen);
        }
        r["workers"] = workers;
        r["workers_healthy"] = healthy;
        r["ranks"] = ranks;
        r["step"] = step >= 0 ? json::value(step) : json::value(nullptr);
        r["last_heartbeat"] = last_seen > 0 ? json::value(last_seen) : json::value(nullptr);
        if (!id.empty()) {
            json::array attempts;
            for (const auto &[n, j] : info.jobs)
                attempts.push_back(json::object{{"attempt", n}, {"cluster", j.cluster}, {"job", j.job}, {"world", j.world}});
            r["attempts"] = std::move(attempts);
        }
        out.push_back(std::move(r));
    }
    // Age and last seal are the store's: two reads by key for each run the
    // caller may see (never a scan of every run), on the store's thread.
    on_store(reply, [this, id, out = std::move(out), now, broker = cfg_.broker_name, receipts = cfg_.receipts.on()](const Reply &reply) mutable {
        for (auto &v : out) {
            auto &r = v.as_object();
            const std::string rid(r.at("id").as_string());
            const std::string sealed = store_->seals().last_checkpoint(rid);
            r["last_sealed"] = sealed.empty() ? json::value(nullptr) : json::value(sealed);
            const auto t = store_->run_times(rid);
            r["created"] = t ? json::value(t->first) : json::value(nullptr);
            r["updated"] = t ? json::value(t->second) : json::value(nullptr);
        }
        // "receipts": whether this broker signs them (the run page asks
        // for them only then: a 404 is a console error in a browser).
        if (!id.empty())
            return onward_.reply_with(id, json::object{{"broker", broker}, {"at", now}, {"receipts", receipts}, {"run", std::move(out.at(0))}},
                                     "run", reply, true);
        reply(ok_json(200, json::object{{"broker", broker}, {"at", now}, {"runs", std::move(out)}}));
    });
}

}  // namespace shardnet::broker
