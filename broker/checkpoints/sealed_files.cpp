// GET /v1/runs/RUN/checkpoints/NAME/files: the files of a checkpoint the
// broker sealed, with their digests as committed. What a resume checks a
// shard against: the manifest beside the shard is written by whoever can
// write the checkpoint directory; these were fixed at the seal.
//   ?rank=R: that rank's files, each with its leaf index and inclusion
//            proof against the list's Merkle root as the seal recorded it
//            (and its receipt signed it): what load() checks;
//   else:    the whole list in list order: what shard verify recomputes
//            the root from.
// Both a page at a time (?from=I, &limit=N; next_from: the next page's
// from, null after the last). The list is built once per seal and kept
// (seals/list_cache.hpp); each token may have a few of these requests in
// flight (limits.list_requests_per_token), more are answered 429.
// A seal a peer's decision carried with the run is served the same way,
// labelled as the sender's (carried, sealed_by, and its receipt as
// sender_receipt: the sender's claim, not one of this broker's receipts).
#include <boost/json.hpp>

#include "broker/core/api_util.hpp"
#include "broker/seals/sealed_list.hpp"
#include "broker/checkpoints/checkpoints_module.hpp"
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

struct Page { long long rank = -1, from = 0, limit = kPageDefault; bool by_rank = false; };

}  // namespace

// Which seal (run, name) is, its answer's head and how to build its list:
// false when there is none (reply answered).
bool Checkpoints::find_sealed_list(const std::string &id, const std::string &name, SealedListSource &src, const Reply &reply) {
    std::optional<CheckpointRow> sealed = store_->seals().checkpoint(id, name);
    src.head = json::object{{"run", id}, {"checkpoint", name}};
    if (sealed) {
        src.recorded = store_->seals().sealed_list(id, name);
        src.ranks = sealed->ranks;
        src.head["attempt"] = sealed->attempt, src.head["sealed_at"] = sealed->sealed_at, src.head["sealed_by"] = cfg_.broker_name;
        src.head["list"] = list_json(src.recorded);
        src.head["receipt"] = receipt_json(src.recorded);
        src.key = "sealed\x1f" + id + "\x1f" + name + "\x1f" + std::to_string(sealed->attempt) + "\x1f" + (src.recorded ? src.recorded->root : "");
        src.build = [this, id, name, attempt = sealed->attempt] {
            sealed_list::Committed c;
            sealed_list::read_commits(*store_, id, attempt, name, c);
            return sealed_list::build(std::move(c.entries), std::move(c.others));
        };
        return true;
    }
    if (auto carried = store_->seals().carried_seal(id, name)) {
        src.recorded = carried->list;
        src.ranks = carried->ranks;
        src.head["attempt"] = carried->attempt, src.head["sealed_by"] = carried->sealed_by, src.head["carried"] = true;
        src.head["list"] = list_json(src.recorded);
        // The sender's receipt is in the sender's log, not this broker's: it
        // is named as the sender's claim, never as this broker's receipt.
        src.head["receipt"] = nullptr;
        if (json::value r = receipt_json(src.recorded); !r.is_null()) {
            r.as_object()["broker"] = carried->sealed_by;
            r.as_object()["checked"] = false;
            src.head["sender_receipt"] = std::move(r);
        }
        src.key = "carried\x1f" + id + "\x1f" + name + "\x1f" + carried->list.root + "\x1f" + std::to_string(carried->received);
        src.build = [id, name, files = std::move(carried->files)] {
            // Read back as it was checked on arrival (carried.cpp).
            json::value v = json::parse(files);
            std::vector<file_list::Entry> entries;
            for (std::size_t i = 0; i < v.as_array().size(); ++i) {
                file_list::Entry e;
                if (std::string err = file_list::read_entry(v.as_array()[i], "files[" + std::to_string(i) + "]", e); !err.empty())
                    throw std::runtime_error("carried seal " + name + " of run " + id + ": " + err);
                entries.push_back(std::move(e));
            }
            return sealed_list::build(std::move(entries), {});
        };
        return true;
    }
    // A run that moved between brokers had its earlier checkpoints sealed
    // at the other one: this broker cannot say either way.
    for (const auto &peer : cfg_.peers)
        if (store_->decisions().run_crossed(id, peer.name)) {
            reply(error_response(404, "sealed_elsewhere", "run " + id + " moved between this broker and broker " + peer.name +
                                 "; this broker holds no seal of " + name + " (it may be the other's)"));
            return false;
        }
    reply(error_response(404, "no_checkpoint", "run " + id + " has no sealed checkpoint " + name));
    return false;
}

std::shared_ptr<const sealed_list::Built> Checkpoints::sealed_list_of(const std::string &id, const std::string &name, const SealedListSource &src) {
    if (auto kept = lists_->find(src.key)) return kept;
    auto built = src.build();
    if (src.recorded && merkle::hex(built->summary.root) != src.recorded->root)
        log_warn("the files of " + name + " are not the list its seal recorded (the commits changed since?)", id,
                 "recorded root " + src.recorded->root);
    lists_->put(src.key, built);
    return built;
}

void Checkpoints::sealed_files(const std::string &id, const std::string &name, const std::string &query, const TokenEntry &who,
                           const Reply &reply) {
    {
        auto runs = runs_.read();
        auto it = runs.find(id);
        if (it == runs.end() || !may_see(who, id, &it->second)) return reply(error_response(404, "no_run", "no run " + id));
    }
    if (!is_safe_name(name, 128)) return reply(error_response(400, "bad_field", "checkpoint name: 1-128 of [A-Za-z0-9._-]", "name"));
    Page pg;
    if (const std::string r = query_param(query, "rank"); !r.empty() || query.find("rank=") != std::string::npos) {
        const auto rank = parse_int(r, 0, (1 << 24) - 1);
        if (!rank) return reply(error_response(400, "bad_field", "rank: expected ?rank=R, a rank of the checkpoint (0 or more)", "rank"));
        pg.rank = *rank, pg.by_rank = true;
    }
    const auto from = parse_int(query_param(query, "from").empty() ? "0" : query_param(query, "from"), 0, 1LL << 40);
    if (!from) return reply(error_response(400, "bad_field", "from: expected ?from=I, an index in the list (0 or more)", "from"));
    const auto limit = parse_int(query_param(query, "limit").empty() ? std::to_string(kPageDefault) : query_param(query, "limit"), 1, kPageMax);
    if (!limit) return reply(error_response(400, "bad_field", "limit: expected 1.." + std::to_string(kPageMax), "limit"));
    pg.from = *from, pg.limit = *limit;
    // A job's derived tokens share one budget per job (its ranks resume
    // together, each asking for its own files, and wait out a 429).
    const std::string key = who.bound ? "job:" + std::to_string(who.uid) + ":" + std::to_string(who.job) : who.name;
    auto ticket = list_gate_->take(key);
    if (!ticket) {
        ApiResponse r = error_response(429, "too_many_list_requests", "this token has " + std::to_string(list_gate_->held(key)) +
                                       " file list requests in flight (limits.list_requests_per_token); wait for one");
        r.retry_after = 1;
        return reply(r);
    }
    on_store(reply, [this, id, name, pg, ticket](const Reply &reply) {
        SealedListSource src;
        if (!find_sealed_list(id, name, src, reply)) return;
        const auto list = sealed_list_of(id, name, src);
        json::object out = std::move(src.head);
        std::size_t total = 0;
        json::array files;
        if (pg.by_rank) {
            files = sealed_list::rank_files_json(*list, pg.rank, std::size_t(pg.from), std::size_t(pg.limit), total);
            if (total == 0 && pg.rank >= src.ranks)
                return reply(error_response(404, "no_rank", "checkpoint " + name + " of run " + id + " was sealed with " + std::to_string(src.ranks) +
                                            " ranks; rank " + std::to_string(pg.rank) + " is not one of them", "rank"));
            // An old seal's list has no recorded root: no proofs to check.
            if (!src.recorded)
                for (auto &f : files) f.as_object().erase("index"), f.as_object().erase("inclusion");
            out["rank"] = pg.rank;
        } else {
            total = list->sorted.size();
            files = sealed_list::page_json(list->sorted, std::size_t(std::min<long long>(pg.from, (long long)total)), std::size_t(pg.limit));
        }
        const std::size_t start = std::size_t(std::min<long long>(pg.from, (long long)total));
        out["files"] = std::move(files);
        out["from"] = (long long)start;
        const std::size_t next = start + std::size_t(pg.limit);
        out["next_from"] = next < total ? json::value((long long)next) : json::value(nullptr);
        reply(ok_json(200, std::move(out)));
    });
}

}  // namespace shardnet::broker
