// Checkpoints: a rank's commit (POST .../commit) and the seal, once every
// rank of the attempt's world has committed; the list of a run's checkpoints.
#include <boost/json.hpp>

#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include "common/file_list.hpp"
#include "common/json_fields.hpp"
#include "common/parse_util.hpp"
#include "broker/checkpoints/checkpoints_module.hpp"
#include "broker/core/api_util.hpp"
#include "broker/seals/held_seal.hpp"
#include "broker/seals/sealed_list.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

namespace {

// A commit's files: each {path, sha256, bytes}, its path in the one
// canonical form a leaf has (file_list::path_error), once; with receipts
// on, a real digest (a seal's receipt commits to the SHA-256s). A 400
// naming the entry.
std::optional<ApiResponse> files_error(const json::array &files, bool receipts) {
    std::set<std::string_view> paths;
    for (std::size_t i = 0; i < files.size(); ++i) {
        const std::string at = "files[" + std::to_string(i) + "]";
        if (!files[i].is_object()) return error_response(400, "bad_field", at + ": expected an object {path, sha256, bytes}", "files");
        Fields ff{files[i].as_object(), {}, {}};
        file_list::Entry e;
        long long bytes = 0;
        if (!ff.str("path", e.path) || !ff.str("sha256", e.sha256) || !ff.integer("bytes", 0, 1LL << 50, bytes))
            return error_response(400, "bad_field", at + "." + ff.err, "files");
        e.bytes = (unsigned long long)bytes;
        if (std::string err = receipts ? file_list::entry_error(e) : file_list::path_error(e.path); !err.empty())
            return error_response(400, "bad_field", at + "." + err, "files");
        if (!paths.insert(files[i].as_object().at("path").as_string()).second)
            return error_response(400, "bad_field", at + ".path: " + e.path.substr(0, 200) + " is listed twice in this commit", "files");
    }
    return std::nullopt;
}

}  // namespace

void Checkpoints::commit(const std::string &id, const std::string &name, const ApiRequest &req, const TokenEntry &who,
                     const Reply &reply, double now) {
    if (!is_safe_name(name, 128)) return reply(error_response(400, "bad_field", "checkpoint name: 1-128 of [A-Za-z0-9._-]", "name"));
    json::error_code ec;
    json::value v = json::parse(req.body, ec);
    if (ec || !v.is_object()) return reply(error_response(400, "bad_json", "body is not a JSON object"));
    Fields f{v.as_object(), {}, {}};
    long long attempt = 0, rank = 0, world = 0;
    if (!f.integer("attempt", 1, 1000000, attempt) || !f.integer("rank", 0, 1 << 24, rank) ||
        !f.integer("world_size", 1, 1 << 24, world))
        return reply(bad_field(f));
    if (rank >= world) return reply(error_response(400, "bad_field", "rank: must be below world_size", "rank"));
    // How long the rank took to write it ("checkpointing" to "committed",
    // as its agent saw): the checkpoint policy's write time. Optional.
    double write_seconds = -1;
    if (auto *ws = v.as_object().if_contains("write_seconds")) {
        if (!ws->is_number() || !(ws->to_number<double>() >= 0 && ws->to_number<double>() <= 7 * 86400.0))
            return reply(error_response(400, "bad_field", "write_seconds: expected seconds, 0..604800", "write_seconds"));
        write_seconds = ws->to_number<double>();
    }
    auto *files = v.as_object().if_contains("files");
    if (!files || !files->is_array() || files->as_array().empty())
        return reply(error_response(400, "bad_field", "files: expected a non-empty array of {path, sha256, bytes}", "files"));
    if (auto bad = files_error(files->as_array(), cfg_.receipts.on())) return reply(*bad);
    if (auto refused = refuse_attempt_writer(id, who, attempt, world, "commits")) return reply(*refused);
    if (rank >= world) return reply(error_response(400, "bad_field", "rank: this attempt has " + std::to_string(world) + " ranks", "rank"));
    std::string files_text = json::serialize(*files);
    on_store(reply, [this, id, name, attempt, rank, world, files_text, now, write_seconds](const Reply &reply) {
        try {
            bool sealed = false;
            long long count = 0;
            std::optional<sealed_list::HeldSeal> held;
            transact([&] {
                // A name sealed already (here, or carried here with the run):
                // the same files are answered with that seal, other files refused.
                if (store_->seals().checkpoint_sealed(id, name) || store_->seals().carried_seal(id, name)) {
                    held = sealed_list::held_seal(*store_, id, name, rank, cfg_.broker_name);
                    if (held) {
                        if (std::string diff = sealed_list::difference(held->rank_files, json::parse(files_text).as_array()); !diff.empty())
                            throw sealed_list::SealedOtherwise("checkpoint " + name + " is sealed already (attempt " + std::to_string(held->attempt) +
                                                               ", by broker " + held->sealed_by + ") with other files of rank " +
                                                               std::to_string(rank) + ": " + diff);
                        sealed = true, count = held->ranks;
                        return;
                    }
                }
                count = store_->seals().insert_commit(id, attempt, name, rank, files_text, now, write_seconds);
                if (count >= world) {
                    const std::string parent = store_->seals().last_checkpoint(id);
                    // Sealed now, on the store's thread, in the order seals are
                    // written (not when its last commit was sent: commits of
                    // several checkpoints race), and never before its parent
                    // (a clock stepped back): each parent is sealed before
                    // its child, by time as by order.
                    double sealed_at = wall_now();
                    if (!parent.empty())
                        if (auto p = store_->seals().checkpoint(id, parent)) sealed_at = std::max(sealed_at, p->sealed_at);
                    // The checkpoint took as long as its slowest rank.
                    store_->seals().seal_checkpoint(CheckpointRow{id, name, attempt, world, parent, sealed_at,
                                                          store_->seals().commit_write_seconds(id, attempt, name)});
                    receipts_.receipt_sealed(id, attempt, name, parent, sealed_at);   // the seal's receipt, in its transaction
                    event(id, "SEALED", name + " committed by all " + std::to_string(world) + " ranks",
                          json::serialize(json::object{{"checkpoint", name}, {"attempt", attempt}, {"ranks", world},
                                                       {"parent", parent.empty() ? json::value(nullptr) : json::value(parent)}}),
                          now);
                    sealed = true;
                    this->count(c_seals);
                }
            });
            json::object out{{"checkpoint", name}, {"committed", count}, {"of", held ? held->ranks : world}, {"sealed", sealed}};
            if (held) out["already_sealed"] = true, out["sealed_by"] = held->sealed_by, out["carried"] = held->carried;
            reply(ok_json(200, std::move(out)));
        } catch (const sealed_list::SealedOtherwise &e) {
            reply(error_response(409, "sealed_otherwise", std::string(e.what()) + "; a sealed checkpoint never changes: save under a new name", "name"));
        } catch (const sealed_list::Conflict &e) {
            // Nothing of this commit is written (the transaction rolled back).
            reply(error_response(409, "file_conflict", "checkpoint " + name + " cannot be sealed: " + e.what() +
                                 " (one path is one file; ranks that write the same path must write the same bytes)", "files"));
        } catch (const std::exception &e) {
            log_warn("commit of " + name + " not written: the store refused it", id, e.what());
            reply(store_error_response(e));
        }
    });
}

void Checkpoints::list_checkpoints(const std::string &id, const std::string &query, const TokenEntry &who, const Reply &reply) {
    {
        auto runs = runs_.read();
        auto it = runs.find(id);
        if (it == runs.end() || !may_see(who, id, &it->second)) return reply(error_response(404, "no_run", "no run " + id));
    }
    // A run that checkpoints every few minutes for months has thousands
    // of seals: they come a page at a time (an agent asks for the newest).
    constexpr long long kPage = 1000;
    long long after = 0, limit = kPage, newest = 0;
    for (auto [key, lo, hi, out] : {std::tuple{"after", 0LL, 1LL << 62, &after}, std::tuple{"limit", 1LL, kPage, &limit},
                                    std::tuple{"newest", 1LL, kPage, &newest}}) {
        const std::string v = query_param(query, key);
        if (v.empty()) continue;
        auto n = parse_int(v, lo, hi);
        if (!n) return reply(error_response(400, "bad_query", std::string(key) + ": expected an integer from " + std::to_string(lo) +
                                            " to " + std::to_string(hi), key));
        *out = *n;
    }
    if (newest && !query_param(query, "after").empty())
        return reply(error_response(400, "bad_query", "newest: not with after (the newest page has no next)", "newest"));
    on_store(reply, [this, id, after, limit, newest](const Reply &reply) {
        const auto rows = newest ? store_->seals().newest_checkpoints(id, int(newest)) : store_->seals().checkpoints_page(id, after, int(limit));
        json::array out;
        for (const auto &c : rows)
            out.push_back(json::object{{"name", c.name}, {"attempt", c.attempt}, {"ranks", c.ranks},
                                       {"parent", c.parent.empty() ? json::value(nullptr) : json::value(c.parent)},
                                       {"sealed_at", c.sealed_at}, {"seq", c.seq}});
        // A full page may have more after it.
        json::value next = !newest && (long long)rows.size() == limit ? json::value(rows.back().seq) : json::value(nullptr);
        reply(ok_json(200, json::object{{"checkpoints", std::move(out)}, {"next", std::move(next)}}));
    });
}

}  // namespace shardnet::broker
