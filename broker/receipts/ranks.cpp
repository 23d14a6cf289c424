// POST /v1/runs/RUN/ranks: an agent's word on which ranks of the attempt run
// on its node and what each runs with (the trainer library's report). Kept
// per rank (the first report of a rank stands) for the attempt's receipt,
// which is written once every rank of the attempt is in (receipts.cpp).
#include <boost/json.hpp>
#include <set>

#include "broker/core/api_util.hpp"
#include "broker/receipts/receipts_module.hpp"
#include "broker/slurm/slurm_job.hpp"
#include "broker/slurm/slurm_view.hpp"
#include "common/json_fields.hpp"
#include "common/parse_util.hpp"
#include "common/rank_environment.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

namespace {
// One agent's node: its tasks of one step (a site's largest nodes have a few hundred cores).
constexpr std::size_t kMaxRanksPerReport = 1024;
}  // namespace

void Receipts::report_ranks(const std::string &id, const ApiRequest &req, const TokenEntry &who, const Reply &reply, double now) {
    json::error_code ec;
    json::value v = json::parse(req.body, ec);
    if (ec || !v.is_object()) return reply(error_response(400, "bad_json", "body is not a JSON object"));
    const json::object &o = v.as_object();
    if (JsonFields top(o, ""); !top.only({"attempt", "world_size", "node", "ranks"})) return reply(error_response(400, "bad_field", top.error()));
    Fields f{o, {}, {}};
    long long attempt = 0, world = 0;
    std::string node;
    if (!f.integer("attempt", 1, 1000000, attempt) || !f.integer("world_size", 1, 1 << 24, world) || !f.str("node", node))
        return reply(bad_field(f));
    // A host name as Slurm's node names are (the receipt signs it).
    if (!is_safe_name(node, 128)) return reply(error_response(400, "bad_field", "node: 1-128 of [A-Za-z0-9._-] (a node's name)", "node"));
    const auto *list = o.if_contains("ranks");
    if (!list || !list->is_array() || list->as_array().empty() || list->as_array().size() > kMaxRanksPerReport)
        return reply(error_response(400, "bad_field", "ranks: expected 1-" + std::to_string(kMaxRanksPerReport) + " of {rank, environment}", "ranks"));
    if (auto refused = refuse_attempt_writer(id, who, attempt, world, "rank reports")) return reply(*refused);
    std::vector<Store::RankRow> rows;
    std::set<long long> seen;
    for (std::size_t i = 0; i < list->as_array().size(); ++i) {
        const std::string at = "ranks[" + std::to_string(i) + "]";
        const auto *r = list->as_array()[i].if_object();
        if (!r) return reply(error_response(400, "bad_field", at + ": expected {rank, environment}", "ranks"));
        Fields rf{*r, {}, {}};
        long long rank = 0;
        if (!rf.integer("rank", 0, (1 << 24) - 1, rank)) return reply(error_response(400, "bad_field", at + "." + rf.err, "ranks"));
        if (rank >= world)
            return reply(error_response(400, "bad_field", at + ".rank: this attempt has " + std::to_string(world) + " ranks", "ranks"));
        if (!seen.insert(rank).second) return reply(error_response(400, "bad_field", at + ".rank: rank " + std::to_string(rank) + " twice", "ranks"));
        if (JsonFields known(*r, at); !known.only({"rank", "environment"})) return reply(error_response(400, "bad_field", known.error(), "ranks"));
        std::string env = "null";
        if (const auto *e = r->if_contains("environment"); e && !e->is_null()) {
            json::object clean;
            if (std::string why = environment::read(*e, at + ".environment", clean); !why.empty())
                return reply(error_response(400, "bad_field", why, "ranks"));
            env = json::serialize(clean);
        }
        rows.push_back(Store::RankRow{rank, node, env});
    }
    // Kept for the attempt's receipt only: a broker that signs none keeps nothing.
    if (!cfg_.receipts.on()) return reply(no_content());
    auto keep = [this, id, attempt, world, rows = std::move(rows), now](const Reply &reply) {
        try {
            long long in = 0;
            transact([&] {
                // Once the attempt's start is signed its ranks are settled; and
                // an attempt no longer current (a report that waited in line
                // behind the next attempt's job) changes nothing.
                if (store_->receipts().has_receipt(id, attempt, "attempt-started") || !attempt_current(id, attempt)) return;
                in = store_->attempts().insert_ranks(id, attempt, rows);
                if (in >= world) attempt_started(id, attempt, now, true, world);   // the last rank: the attempt's receipt
            });
            reply(ok_json(200, json::object{{"ranks", in}, {"of", world}}));
        } catch (const std::exception &e) {
            log_warn("ranks of attempt " + std::to_string(attempt) + " not written: the store refused it", id, e.what());
            reply(store_error_response(e));
        }
    };
    // A job's word on its node is checked against Slurm's list of the job's
    // nodes (a job cannot sign itself onto a node it does not hold); an
    // admin's is taken, and so is a job of a cluster this broker does not run.
    if (!who.bound || !cfg_.clusters.count(who.cluster)) return on_store(reply, std::move(keep));
    post_answering(slurm_thread_, "slurm", reply, [this, id, node = node, cluster = who.cluster, job = (long long)who.job,
                                                   keep = std::move(keep)](const Reply &reply) mutable {
        std::string why;
        const auto nodes = job_nodes(cluster, job, why);
        if (!nodes) return reply(error_response(503, "slurm_unavailable", "the job's nodes could not be read from Slurm (" + why + "); report again"));
        if (!nodes->count(node))
            return reply(error_response(403, "not_this_job", "node " + node + " is not one of job " + cluster + "/" + std::to_string(job) +
                                        "'s nodes", "node"));
        on_store(reply, std::move(keep));
    });
}

bool Receipts::attempt_current(const std::string &run, long long attempt) {
    auto runs = runs_.read();
    auto it = runs.find(run);
    return it != runs.end() && it->second.attempt == attempt;
}

}  // namespace shardnet::broker
