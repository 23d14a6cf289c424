// GET /v1/runs/RUN/checkpoints/NAME/files?rank=R: the files a rank committed
// to a checkpoint the broker sealed, with their digests as committed. What a
// resume checks a shard against: the manifest beside the shard is written by
// whoever can write the checkpoint directory; these were fixed at the seal.
#include <boost/json.hpp>

#include "broker/api/api_util.hpp"
#include "broker/service.hpp"
#include "common/parse_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

void Service::sealed_files(const std::string &id, const std::string &name, const std::string &query, const TokenEntry &who,
                           const Reply &reply) {
    {
        std::shared_lock lock(runs_mu_);
        auto it = runs_.find(id);
        if (it == runs_.end() || !may_see(who, id, &it->second)) return reply(error_response(404, "no_run", "no run " + id));
    }
    if (!is_safe_name(name, 128)) return reply(error_response(400, "bad_field", "checkpoint name: 1-128 of [A-Za-z0-9._-]", "name"));
    const auto rank = parse_int(query_param(query, "rank"), 0, (1 << 24) - 1);
    if (!rank) return reply(error_response(400, "bad_field", "rank: expected ?rank=R, a rank of the checkpoint (0 or more)", "rank"));
    on_store(reply, [this, id, name, r = *rank](const Reply &reply) {
        std::optional<CheckpointRow> sealed;
        for (auto &c : store_->list_checkpoints(id))
            if (c.name == name) sealed = std::move(c);
        if (!sealed) {
            // A run that moved between brokers had its earlier checkpoints
            // sealed at the other one: this broker cannot say either way.
            for (const auto &peer : cfg_.peers)
                if (store_->run_crossed(id, peer.name))
                    return reply(error_response(404, "sealed_elsewhere", "run " + id + " moved between this broker and broker " + peer.name +
                                                "; this broker holds no seal of " + name + " (it may be the other's)"));
            return reply(error_response(404, "no_checkpoint", "run " + id + " has no sealed checkpoint " + name));
        }
        for (const auto &[rank, text] : store_->commit_files(id, sealed->attempt, name)) {
            if (rank != r) continue;
            json::error_code ec;
            json::value files = json::parse(text, ec);
            if (ec || !files.is_array()) throw std::runtime_error("commit of rank " + std::to_string(rank) + " to " + name + " is not a file list");
            return reply(ok_json(200, json::object{{"run", id}, {"checkpoint", name}, {"attempt", sealed->attempt}, {"rank", r},
                                                   {"sealed_at", sealed->sealed_at}, {"files", std::move(files)}}));
        }
        reply(error_response(404, "no_rank", "checkpoint " + name + " of run " + id + " was sealed with " + std::to_string(sealed->ranks) +
                             " ranks; rank " + std::to_string(r) + " is not one of them", "rank"));
    });
}

}  // namespace shardnet::broker
