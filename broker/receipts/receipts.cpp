// Receipts at the broker: each one signed and logged inside the store
// transaction of the record it attests (a seal, a FAULT, an attempt's first
// job, a run's end), so that a crash leaves both or neither. A run's chain
// is seq 1, 2, ... here, or continues a peer's (the link its decision
// carried). Nothing here runs per heartbeat: only at durable changes.
#include <boost/json.hpp>
#include <stdexcept>

#include "broker/api/api_util.hpp"
#include "broker/receipts/receipts.hpp"
#include "broker/service.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using receipt::Kind;

std::string Service::write_receipt(Kind kind, const std::string &run, long long attempt, json::object body,
                                   std::vector<receipt::Subject> subjects, double now, const receipts::ChainLink &from) {
    if (!cfg_.receipts.on()) return "";
    receipts::ChainLink prev = last_receipt_link(run);
    // A run back from a peer: its chain went on there (the newer link wins).
    if (!from.empty() && from.seq > prev.seq) prev = from;
    receipt::Receipt r{kind, run, attempt, cfg_.broker_name, receipt::utc_time(now), prev.seq + 1, prev.digest, std::move(body),
                       std::move(subjects)};
    dsse::Envelope env;
    std::string err;
    try {
        err = receipt::sign_receipt(cfg_.receipts.key, r, env);
    } catch (const std::invalid_argument &e) {   // make_statement: what in r is not a receipt
        err = e.what();
    }
    // Thrown inside the transaction: the record it attests is not kept either.
    if (!err.empty()) throw std::runtime_error(std::string(receipt::kind_name(kind)) + " receipt of run " + run + " not signed: " + err);
    const std::string bytes = dsse::to_json(env);
    const std::string digest = receipt::envelope_digest(env);
    const long long index = receipts::log_append(*store_, merkle::leaf_hash(bytes));
    store_->insert_receipt(Store::ReceiptRow{run, r.seq, attempt, receipt::kind_name(kind), now, bytes, digest, index,
                                             cfg_.receipts.key.keyid()});
    return digest;
}

receipts::ChainLink Service::last_receipt_link(const std::string &run) {
    if (!cfg_.receipts.on()) return {};
    auto last = store_->last_receipt(run);
    return last ? receipts::ChainLink{last->seq, last->digest} : receipts::ChainLink{};
}

void Service::receipt_attempt_started(const std::string &run, long long attempt, const std::string &cluster, long long job,
                                      const std::vector<std::string> &nodes, json::object cause, double now,
                                      const receipts::ChainLink &from) {
    // Once per attempt: its first recorded job (a larger step of the same
    // job, or the job's own heartbeats after the broker submitted it, are
    // the same attempt).
    if (!cfg_.receipts.on() || job <= 0 || cluster.empty() || store_->has_receipt(run, attempt, "attempt-started")) return;
    std::string user;
    long long uid = -1;
    {
        std::shared_lock lock(runs_mu_);
        if (auto it = runs_.find(run); it != runs_.end()) user = it->second.owner, uid = it->second.owner_uid;
    }
    if (auto *u = cause.if_contains("user"); u && u->is_string()) user = std::string(u->as_string()), cause.erase("user");
    if (auto *u = cause.if_contains("uid"); u && u->is_int64()) uid = u->as_int64(), cause.erase("uid");
    // Each node with the probe's descriptor hash, when the inventory has one.
    json::array ns;
    for (const auto &n : nodes) {
        const auto rows = store_->list_nodes(n);
        ns.push_back(json::object{{"name", n}, {"descriptor_sha256", rows.empty() ? json::value(nullptr) : json::value(rows[0].hash)}});
    }
    json::object body{{"cluster", cluster}, {"job", job},
                      {"owner", json::object{{"user", user.empty() ? json::value(nullptr) : json::value(user)},
                                             {"uid", uid >= 0 ? json::value(uid) : json::value(nullptr)}}},
                      {"nodes", std::move(ns)}};
    if (!cause.empty()) body["cause"] = std::move(cause);
    write_receipt(Kind::attempt_started, run, attempt, std::move(body), {}, now, from);
}

void Service::receipt_sealed(const std::string &run, long long attempt, const std::string &name, const std::string &parent, double now) {
    if (!cfg_.receipts.on()) return;
    std::vector<receipt::ShardFile> files;
    // The commits were read as {path, sha256, bytes} objects when they came
    // in (checkpoints/commit.cpp); anything else here is a damaged row.
    const auto commits = store_->commit_files(run, attempt, name);
    for (const auto &[rank, text] : commits) {
        json::error_code ec;
        json::value v = json::parse(text, ec);
        if (ec || !v.is_array()) throw std::runtime_error("commit of rank " + std::to_string(rank) + " to " + name + " is not a file list");
        for (const auto &f : v.as_array()) {
            const auto *o = f.if_object();
            const auto *p = o ? o->if_contains("path") : nullptr, *h = o ? o->if_contains("sha256") : nullptr,
                       *b = o ? o->if_contains("bytes") : nullptr;
            if (!p || !p->is_string() || !h || !h->is_string() || !b || !(b->is_int64() || b->is_uint64()))
                throw std::runtime_error("commit of rank " + std::to_string(rank) + " to " + name + " has a malformed file entry");
            files.push_back(receipt::ShardFile{std::string(p->as_string()), std::string(h->as_string()),
                                               b->is_int64() ? (unsigned long long)b->as_int64() : b->as_uint64(), rank, ""});
        }
    }
    json::object body{{"checkpoint", name}, {"parent", parent.empty() ? json::value(nullptr) : json::value(parent)},
                      {"ranks", (long long)commits.size()}};
    write_receipt(Kind::checkpoint_sealed, run, attempt, std::move(body), receipt::shard_subjects(files), now);
}

}  // namespace shardnet::broker
