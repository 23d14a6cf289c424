// GET /v1/runs/RUN/checkpoints/NAME/files: the files of a checkpoint the
// broker sealed, with their digests as committed. What a resume checks a
// shard against: the manifest beside the shard is written by whoever can
// write the checkpoint directory; these were fixed at the seal.
//   ?rank=R: that rank's files, each with its leaf index and inclusion
//            proof against the list's Merkle root as the seal recorded it
//            (and its receipt signed it): what load() checks;
//   else:    the whole list in list order, a page at a time (?from=I,
//            &limit=N): what shard verify recomputes the root from.
// A seal a peer's decision carried with the run is served the same way.
#include <boost/json.hpp>

#include "broker/api/api_util.hpp"
#include "broker/seals/sealed_list.hpp"
#include "broker/service.hpp"
#include "common/parse_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

namespace {

constexpr long long kPageDefault = 5000, kPageMax = 20000;

json::value list_json(const std::optional<Store::SealedListRow> &l) {
    if (!l) return nullptr;   // sealed before the broker kept roots: its receipt lists the files
    return json::object{{"merkle_root", l->root}, {"count", l->count}, {"bytes", l->bytes}};
}

json::value receipt_json(const std::optional<Store::SealedListRow> &l) {
    if (!l || l->receipt_seq <= 0) return nullptr;
    return json::object{{"seq", l->receipt_seq}, {"digest", l->receipt_digest}};
}

}  // namespace

void Service::sealed_files(const std::string &id, const std::string &name, const std::string &query, const TokenEntry &who,
                           const Reply &reply) {
    {
        auto runs = runs_.read();
        auto it = runs.find(id);
        if (it == runs.end() || !may_see(who, id, &it->second)) return reply(error_response(404, "no_run", "no run " + id));
    }
    if (!is_safe_name(name, 128)) return reply(error_response(400, "bad_field", "checkpoint name: 1-128 of [A-Za-z0-9._-]", "name"));
    std::optional<long long> rank;
    if (const std::string r = query_param(query, "rank"); !r.empty() || query.find("rank=") != std::string::npos) {
        rank = parse_int(r, 0, (1 << 24) - 1);
        if (!rank) return reply(error_response(400, "bad_field", "rank: expected ?rank=R, a rank of the checkpoint (0 or more)", "rank"));
    }
    const auto from = parse_int(query_param(query, "from").empty() ? "0" : query_param(query, "from"), 0, 1LL << 40);
    if (!from) return reply(error_response(400, "bad_field", "from: expected ?from=I, an index in the list (0 or more)", "from"));
    const auto limit = parse_int(query_param(query, "limit").empty() ? std::to_string(kPageDefault) : query_param(query, "limit"), 1, kPageMax);
    if (!limit) return reply(error_response(400, "bad_field", "limit: expected 1.." + std::to_string(kPageMax), "limit"));
    on_store(reply, [this, id, name, rank, from = *from, limit = *limit](const Reply &reply) {
        std::optional<CheckpointRow> sealed;
        for (auto &c : store_->list_checkpoints(id))
            if (c.name == name) sealed = std::move(c);
        json::object out{{"run", id}, {"checkpoint", name}};
        sealed_list::Committed c;
        std::optional<Store::SealedListRow> recorded;
        long long ranks = 0;
        if (sealed) {
            sealed_list::read_commits(*store_, id, sealed->attempt, name, c);
            recorded = store_->sealed_list(id, name);
            ranks = sealed->ranks;
            out["attempt"] = sealed->attempt, out["sealed_at"] = sealed->sealed_at, out["sealed_by"] = cfg_.broker_name;
        } else if (auto carried = store_->carried_seal(id, name)) {
            // Read back as it was checked on arrival (carried.cpp).
            json::value files = json::parse(carried->files);
            for (std::size_t i = 0; i < files.as_array().size(); ++i) {
                file_list::Entry e;
                if (std::string err = file_list::read_entry(files.as_array()[i], "files[" + std::to_string(i) + "]", e); !err.empty())
                    throw std::runtime_error("carried seal " + name + " of run " + id + ": " + err);
                c.entries.push_back(std::move(e));
            }
            recorded = carried->list;
            ranks = carried->ranks;
            out["attempt"] = carried->attempt, out["sealed_by"] = carried->sealed_by, out["carried"] = true;
        } else {
            // A run that moved between brokers had its earlier checkpoints
            // sealed at the other one: this broker cannot say either way.
            for (const auto &peer : cfg_.peers)
                if (store_->run_crossed(id, peer.name))
                    return reply(error_response(404, "sealed_elsewhere", "run " + id + " moved between this broker and broker " + peer.name +
                                                "; this broker holds no seal of " + name + " (it may be the other's)"));
            return reply(error_response(404, "no_checkpoint", "run " + id + " has no sealed checkpoint " + name));
        }
        file_list::sort(c.entries);
        if (recorded && merkle::hex(file_list::summarize(c.entries).root) != recorded->root)
            log_warn("the files of " + name + " are not the list its seal recorded (the commits changed since?)", id,
                     "recorded root " + recorded->root);
        out["list"] = list_json(recorded);
        out["receipt"] = receipt_json(recorded);
        if (rank) {
            json::array files = sealed_list::rank_files_json(c.entries, c.others, *rank);
            if (files.empty() && *rank >= ranks)
                return reply(error_response(404, "no_rank", "checkpoint " + name + " of run " + id + " was sealed with " + std::to_string(ranks) +
                                            " ranks; rank " + std::to_string(*rank) + " is not one of them", "rank"));
            // An old seal's list has no recorded root: no proofs to check.
            if (!recorded)
                for (auto &f : files) f.as_object().erase("index"), f.as_object().erase("inclusion");
            out["rank"] = *rank;
            out["files"] = std::move(files);
            return reply(ok_json(200, std::move(out)));
        }
        const std::size_t start = std::size_t(std::min<long long>(from, (long long)c.entries.size()));
        out["files"] = sealed_list::page_json(c.entries, start, std::size_t(limit));
        out["from"] = (long long)start;
        const std::size_t next = start + std::size_t(limit);
        out["next_from"] = next < c.entries.size() ? json::value((long long)next) : json::value(nullptr);
        reply(ok_json(200, std::move(out)));
    });
}

}  // namespace shardnet::broker
