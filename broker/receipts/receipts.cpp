// Receipts at the broker: each one signed and logged inside the store
// transaction of the record it attests (a seal, a FAULT, an attempt's first
// job's ranks, a run's end), so that a crash leaves both or neither. An
// attempt's start waits for its ranks' reports (where each runs, with
// what) and is written at the first of: the last rank's report, anything
// else attested of the attempt (a seal, its end). A run's chain
// is seq 1, 2, ... here, or continues a peer's (the link its decision
// carried). Nothing here runs per heartbeat: only at durable changes.
#include <boost/json.hpp>
#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "broker/core/api_util.hpp"
#include "common/digest.hpp"
#include "common/json_fields.hpp"
#include "common/parse_util.hpp"
#include "broker/receipts/receipts.hpp"
#include "broker/receipts/receipts_module.hpp"
#include "broker/receipts/head_pin.hpp"
#include "broker/seals/sealed_list.hpp"
#include "common/file_list.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using receipt::Kind;

std::string Receipts::write_receipt(Kind kind, const std::string &run, long long attempt, json::object body,
                                   std::vector<receipt::Subject> subjects, double now, const receipts::ChainLink &from_in) {
    if (!cfg_.receipts.on()) return "";
    // Whatever attests an attempt comes after the attempt's own start: a
    // start still waiting for its ranks is written now, with what is known.
    if (kind != Kind::attempt_started) attempt_started(run, attempt, now, false);
    receipts::ChainLink from = from_in;
    if (from.empty())
        if (auto st = store_->attempts().attempt_start(run, attempt)) from = receipts::ChainLink{st->from_seq, st->from_digest};
    receipts::ChainLink prev = last_receipt_link(run);
    // A run back from a peer: its chain went on there (the newer link wins).
    if (!from.empty() && from.seq > prev.seq) prev = from;
    // What a job or Slurm wrote as raw bytes (a cause, a job's name) is
    // signed as valid UTF-8: a receipt that could not be signed would keep
    // the record it attests from being written.
    json::value text_body(std::move(body));
    make_strings_valid_utf8(text_body);
    receipt::Receipt r{kind, run, attempt, cfg_.broker_name, receipt::utc_time(now), prev.seq + 1, prev.digest, std::move(text_body.as_object()),
                       std::move(subjects)};
    dsse::Envelope env;
    std::string err;
    try {
        err = receipt::sign_receipt(signer_.key(), r, env);
    } catch (const std::invalid_argument &e) {   // make_statement: what in r is not a receipt
        err = e.what();
    }
    // Thrown inside the transaction: the record it attests is not kept either.
    if (!err.empty()) throw std::runtime_error(std::string(receipt::kind_name(kind)) + " receipt of run " + run + " not signed: " + err);
    const std::string bytes = dsse::to_json(env);
    const std::string digest = receipt::envelope_digest(env);
    const long long index = receipts::log_append(*store_, merkle::leaf_hash(bytes));
    store_->receipts().insert_receipt(Store::ReceiptRow{run, r.seq, attempt, receipt::kind_name(kind), now, bytes, digest, index,
                                             signer_.key().keyid()});
    return digest;
}

receipts::ChainLink Receipts::last_receipt_link(const std::string &run) {
    if (!cfg_.receipts.on()) return {};
    auto last = store_->receipts().last_receipt(run);
    return last ? receipts::ChainLink{last->seq, last->digest} : receipts::ChainLink{};
}

void Receipts::note_attempt_start(const std::string &run, long long attempt, const std::string &cluster, long long job,
                                 const std::vector<std::string> &nodes, const json::object &cause, const receipts::ChainLink &from,
                                 double now, bool replace) {
    if (!cfg_.receipts.on()) return;
    json::array ns;
    for (const auto &n : nodes) ns.push_back(json::value(n));
    store_->attempts().put_attempt_start(run, attempt, Store::AttemptStartRow{cluster, job, json::serialize(ns), json::serialize(cause), from.seq, from.digest},
                              replace);
    attempt_started(run, attempt, now, true);
}

namespace {

// Distinct environments an attempt's receipt lists (a job's ranks usually
// share one); the ranks of any more are counted, not listed.
constexpr std::size_t kMaxEnvironments = 16;

json::object parse_object(const std::string &text) {
    json::error_code ec;
    json::value v = json::parse(text, ec);
    return !ec && v.is_object() ? std::move(v.as_object()) : json::object{};
}

}  // namespace

void Receipts::attempt_started(const std::string &run, long long attempt, double now, bool when_complete, long long world_hint) {
    if (!cfg_.receipts.on() || store_->receipts().has_receipt(run, attempt, "attempt-started")) return;
    // Never after a later attempt's receipts: the chain goes forward in attempts.
    if (auto last = store_->receipts().last_receipt(run); last && last->attempt > attempt) return;
    const auto start = store_->attempts().attempt_start(run, attempt);
    // The job: as recorded for the attempt, else as the broker noted it (an admin's word).
    auto job = store_->attempts().attempt_job(run, attempt);
    if ((!job || job->job <= 0) && start && start->job > 0) job = Store::AttemptRow{run, attempt, start->cluster, start->job, 0};
    if (!job || job->job <= 0 || job->cluster.empty()) return;   // no job yet: nothing to attest
    const auto ranks = store_->attempts().attempt_ranks(run, attempt);
    long long world = std::max(job->world, world_hint);
    std::string user;
    long long uid = -1;
    {
        auto runs = runs_.read();
        if (auto it = runs.find(run); it != runs.end()) {
            user = it->second.owner, uid = it->second.owner_uid;
            if (auto j = it->second.jobs.find(attempt); j != it->second.jobs.end()) world = std::max(world, j->second.world);
        }
    }
    if (when_complete && (world <= 0 || (long long)ranks.size() < world)) return;
    json::object cause = start ? parse_object(start->cause) : json::object{};
    // A peer's run: the owner as resolved when its decision was applied.
    if (auto *u = cause.if_contains("user"); u && u->is_string()) user = std::string(u->as_string()), cause.erase("user");
    if (auto *u = cause.if_contains("uid"); u && u->is_int64()) uid = u->as_int64(), cause.erase("uid");
    // Where the ranks ran (their agents' word), else where the broker placed the job.
    std::vector<std::string> nodes;
    std::set<std::string> seen;
    json::object rank_map;
    std::map<std::string, json::array> by_environment;   // the ranks of each distinct report
    std::vector<std::string> order;
    long long unlisted = 0;   // ranks whose environment is past the distinct ones kept
    for (const auto &r : ranks) {
        if (seen.insert(r.node).second) nodes.push_back(r.node);
        rank_map[std::to_string(r.rank)] = r.node;
        if (r.environment == "null" || r.environment.empty()) continue;
        auto it = by_environment.find(r.environment);
        if (it == by_environment.end()) {
            if (order.size() >= kMaxEnvironments) { ++unlisted; continue; }
            it = by_environment.emplace(r.environment, json::array{}).first;
            order.push_back(r.environment);
        }
        it->second.push_back(r.rank);
    }
    if (nodes.empty() && start) {
        json::error_code ec;
        json::value planned = json::parse(start->nodes, ec);
        if (!ec && planned.is_array())
            for (const auto &n : planned.as_array())
                if (n.is_string()) nodes.emplace_back(n.as_string());
    }
    // Each node with the probe's descriptor hash, when the inventory has one.
    json::array ns;
    for (const auto &n : nodes) {
        const auto rows = store_->nodes().list_nodes(n);
        ns.push_back(json::object{{"name", n}, {"descriptor_sha256", rows.empty() ? json::value(nullptr) : json::value(rows[0].hash)}});
    }
    json::array envs;
    for (const auto &text : order) {
        json::object e = parse_object(text);
        e["ranks"] = std::move(by_environment[text]);
        envs.push_back(std::move(e));
    }
    json::object body{{"cluster", job->cluster}, {"job", job->job},
                      {"owner", json::object{{"user", user.empty() ? json::value(nullptr) : json::value(user)},
                                             {"uid", uid >= 0 ? json::value(uid) : json::value(nullptr)}}},
                      {"nodes", std::move(ns)}, {"world_size", world > 0 ? json::value(world) : json::value(nullptr)},
                      {"ranks", std::move(rank_map)}, {"environment", std::move(envs)}};
    if (unlisted) body["environment_unlisted_ranks"] = unlisted;
    if (!cause.empty()) body["cause"] = std::move(cause);
    write_receipt(Kind::attempt_started, run, attempt, std::move(body), {}, now,
                  start ? receipts::ChainLink{start->from_seq, start->from_digest} : receipts::ChainLink{});
}

void Receipts::receipt_sealed(const std::string &run, long long attempt, const std::string &name, const std::string &parent, double now) {
    // The file list is committed as its Merkle root (common/file_list.hpp):
    // the receipt stays the same size however many files the checkpoint
    // has; the list itself is GET .../files, checked against the root.
    json::array unattested;
    sealed_list::Committed c;
    c.unattested = &unattested;
    sealed_list::read_commits(*store_, run, attempt, name, c);
    // One path is one file: two ranks that committed it alike share its
    // leaf; as two different files, the checkpoint is not sealed.
    sealed_list::sort_checked(c.entries);
    const file_list::Summary sum = file_list::summarize(c.entries);
    Store::SealedListRow row{merkle::hex(sum.root), (long long)sum.count, (long long)sum.bytes, 0, ""};
    if (cfg_.receipts.on()) {
        json::object body{{"checkpoint", name}, {"parent", parent.empty() ? json::value(nullptr) : json::value(parent)},
                          {"ranks", c.ranks}, {"files", file_list::summary_json(sum)}};
        if (c.unattested_count) body["unattested_files"] = json::object{{"count", c.unattested_count}, {"files", std::move(unattested)}};
        // The step, when the name is the library's checkpoint-STEP.
        if (name.rfind("checkpoint-", 0) == 0)
            if (auto step = parse_int(std::string_view(name).substr(11), 0, 1LL << 53)) body["step"] = *step;
        // One subject, the checkpoint by name, whose digest is the body's
        // (as other kinds have): the files are in body.files' root.
        std::vector<receipt::Subject> subjects{
            receipt::Subject{"shardnet:" + run + "/checkpoint/" + name, sha256_hex(json::serialize(body)), {}}};
        row.receipt_digest = write_receipt(Kind::checkpoint_sealed, run, attempt, std::move(body), std::move(subjects), now);
        row.receipt_seq = last_receipt_link(run).seq;
    }
    store_->seals().put_sealed_list(run, name, row);
}

}  // namespace shardnet::broker
