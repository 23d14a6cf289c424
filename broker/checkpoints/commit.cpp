// Checkpoints: a rank's commit (POST .../commit) and the seal, once every
// rank of the attempt's world has committed; the list of a run's checkpoints.
#include <boost/json.hpp>

#include "common/json_fields.hpp"
#include "common/parse_util.hpp"
#include "broker/service.hpp"
#include "broker/api/api_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

void Service::commit(const std::string &id, const std::string &name, const ApiRequest &req, const TokenEntry &who,
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
    for (const auto &fv : files->as_array()) {
        if (!fv.is_object()) return reply(error_response(400, "bad_field", "files: expected objects", "files"));
        Fields ff{fv.as_object(), {}, {}};
        std::string p, h;
        long long bytes = 0;
        if (!ff.str("path", p) || !ff.str("sha256", h) || !ff.integer("bytes", 0, 1LL << 50, bytes))
            return reply(error_response(400, "bad_field", "files[]." + ff.err, "files"));
        // A seal's receipt names each file by its SHA-256 (in-toto's digest):
        // with receipts on, a commit must give real ones.
        if (cfg_.receipts.on() && (!is_lower_hex(h, 64) || p.empty() || p.size() > 4096 || has_control_chars(p)))
            return reply(error_response(400, "bad_field", is_lower_hex(h, 64) ? "files[].path: 1-4096 bytes without control characters"
                                        : "files[].sha256: expected 64 lower-case hex digits (receipts sign it)", "files"));
    }
    if (auto refused = refuse_attempt_writer(id, who, attempt, world, "commits")) return reply(*refused);
    if (rank >= world) return reply(error_response(400, "bad_field", "rank: this attempt has " + std::to_string(world) + " ranks", "rank"));
    std::string files_text = json::serialize(*files);
    on_store(reply, [this, id, name, attempt, rank, world, files_text, now, write_seconds](const Reply &reply) {
        try {
            bool sealed = false;
            long long count = 0;
            transact([&] {
                if (store_->checkpoint_sealed(id, name)) { sealed = true; count = world; return; }
                count = store_->insert_commit(id, attempt, name, rank, files_text, now, write_seconds);
                if (count >= world) {
                    const std::string parent = store_->last_checkpoint(id);
                    // The checkpoint took as long as its slowest rank.
                    store_->seal_checkpoint(CheckpointRow{id, name, attempt, world, parent, now,
                                                          store_->commit_write_seconds(id, attempt, name)});
                    receipt_sealed(id, attempt, name, parent, now);   // the seal's receipt, in its transaction
                    event(id, "SEALED", name + " committed by all " + std::to_string(world) + " ranks",
                          json::serialize(json::object{{"checkpoint", name}, {"attempt", attempt}, {"ranks", world},
                                                       {"parent", parent.empty() ? json::value(nullptr) : json::value(parent)}}),
                          now);
                    sealed = true;
                    this->count(c_seals);
                }
            });
            reply(ok_json(200, json::object{{"checkpoint", name}, {"committed", count}, {"of", world}, {"sealed", sealed}}));
        } catch (const std::exception &e) {
            log_warn("commit of " + name + " not written: the store refused it", id, e.what());
            reply(store_error_response(e));
        }
    });
}

void Service::list_checkpoints(const std::string &id, const TokenEntry &who, const Reply &reply) {
    {
        auto runs = runs_.read();
        auto it = runs.find(id);
        if (it == runs.end() || !may_see(who, id, &it->second)) return reply(error_response(404, "no_run", "no run " + id));
    }
    on_store(reply, [this, id](const Reply &reply) {
        json::array out;
        for (const auto &c : store_->list_checkpoints(id))
            out.push_back(json::object{{"name", c.name}, {"attempt", c.attempt}, {"ranks", c.ranks},
                                       {"parent", c.parent.empty() ? json::value(nullptr) : json::value(c.parent)},
                                       {"sealed_at", c.sealed_at}});
        reply(ok_json(200, json::object{{"checkpoints", std::move(out)}}));
    });
}

}  // namespace shardnet::broker
