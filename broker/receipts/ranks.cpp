// POST /v1/runs/RUN/ranks: an agent's word on which ranks of the attempt run
// on its node and what each runs with (the trainer library's report). Kept
// per rank (the first report of a rank stands) for the attempt's receipt,
// which is written once every rank of the attempt is in (receipts.cpp).
#include <boost/json.hpp>
#include <set>

#include "broker/api/api_util.hpp"
#include "broker/service.hpp"
#include "common/parse_util.hpp"
#include "common/rank_environment.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

void Service::report_ranks(const std::string &id, const ApiRequest &req, const TokenEntry &who, const Reply &reply, double now) {
    json::error_code ec;
    json::value v = json::parse(req.body, ec);
    if (ec || !v.is_object()) return reply(error_response(400, "bad_json", "body is not a JSON object"));
    const json::object &o = v.as_object();
    for (const auto &kv : o)
        if (kv.key() != "attempt" && kv.key() != "world_size" && kv.key() != "node" && kv.key() != "ranks")
            return reply(error_response(400, "bad_field", std::string(kv.key()) + ": unknown field", std::string(kv.key())));
    Fields f{o, {}, {}};
    long long attempt = 0, world = 0;
    std::string node;
    if (!f.integer("attempt", 1, 1000000, attempt) || !f.integer("world_size", 1, 1 << 24, world) || !f.str("node", node))
        return reply(bad_field(f));
    if (node.empty() || node.size() > 256 || has_control_chars(node) || node.find('/') != std::string::npos)
        return reply(error_response(400, "bad_field", "node: not a node name", "node"));
    const auto *list = o.if_contains("ranks");
    if (!list || !list->is_array() || list->as_array().empty() || list->as_array().size() > 4096)
        return reply(error_response(400, "bad_field", "ranks: expected 1-4096 of {rank, environment}", "ranks"));
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
        for (const auto &kv : *r)
            if (kv.key() != "rank" && kv.key() != "environment")
                return reply(error_response(400, "bad_field", at + "." + std::string(kv.key()) + ": unknown field", "ranks"));
        std::string env = "null";
        if (const auto *e = r->if_contains("environment"); e && !e->is_null()) {
            json::object clean;
            if (std::string why = environment::read(*e, at + ".environment", clean); !why.empty())
                return reply(error_response(400, "bad_field", why, "ranks"));
            env = json::serialize(clean);
        }
        rows.push_back(Store::RankRow{rank, node, env});
    }
    on_store(reply, [this, id, attempt, world, rows = std::move(rows), now](const Reply &reply) {
        try {
            long long in = 0;
            transact([&] {
                for (const auto &r : rows) in = store_->insert_rank(id, attempt, r);
                if (in >= world) attempt_started(id, attempt, now, true, world);   // the last rank: the attempt's receipt
            });
            reply(ok_json(200, json::object{{"ranks", in}, {"of", world}}));
        } catch (const std::exception &e) {
            log_warn("ranks of attempt " + std::to_string(attempt) + " not written: the store refused it", id, e.what());
            reply(store_error_response(e));
        }
    });
}

}  // namespace shardnet::broker
