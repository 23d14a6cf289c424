#include "broker/peers/peer_answer.hpp"

#include <boost/json.hpp>

#include "broker/peers/peer_reader.hpp"
#include "common/parse_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace peer_read;

namespace {

// One row of a peer's capacity, as this broker writes its own (Inventory::capacity).
bool capacity_row(Reader &rd, const json::value &v, const std::string &path, json::object &out) {
    const json::object *o = v.if_object();
    if (!o) return rd.fail(path, "expected an object");
    std::string broker, cluster, region, status;
    if (!rd.name(*o, "broker", path, broker) || !rd.name(*o, "cluster", path, cluster) || !rd.name(*o, "region", path, region, false) ||
        !rd.name(*o, "status", path, status))
        return false;
    // unknown: not asked or not answered; refused: the job cannot go there
    // (containers=1 at a cluster that runs none).
    if (status == "unknown" || status == "refused") {
        std::string reason;
        if (!rd.text(*o, "reason", path, reason, false)) return false;
        out = json::object{{"broker", broker}, {"cluster", cluster}, {"region", region}, {"status", status}, {"reason", reason}};
        return true;
    }
    if (status != "ok") return rd.fail(path + ".status", "expected ok, unknown or refused");
    std::string cls, fabric;
    long long gpn = 0, idle = 0, total = 0;
    if (!rd.name(*o, "accelerator_class", path, cls) || !rd.integer(*o, "gpus_per_node", path, 0, 1024, gpn) ||
        !rd.name(*o, "fabric", path, fabric) || !rd.integer(*o, "idle_nodes", path, 0, 10000000, idle) ||
        !rd.integer(*o, "total_nodes", path, 0, 10000000, total))
        return false;
    if (idle > total) return rd.fail(path + ".idle_nodes", "more than total_nodes");
    json::value mem = nullptr;
    if (const json::value *m = rd.get(*o, "gpu_memory_gb", path, true)) {
        if (!m->is_null() && !m->is_number()) return rd.fail(path + ".gpu_memory_gb", "expected a number or null");
        if (m->is_number()) {
            const double gb = m->to_number<double>();
            if (!(gb >= 0 && gb <= 1e6)) return rd.fail(path + ".gpu_memory_gb", "expected 0..1000000");
            mem = *m;
        }
    } else {
        return false;
    }
    out = json::object{{"broker", broker}, {"cluster", cluster}, {"region", region}, {"status", "ok"},
                       {"accelerator_class", cls}, {"gpus_per_node", gpn}, {"gpu_memory_gb", mem},
                       {"fabric", fabric}, {"idle_nodes", idle}, {"total_nodes", total}};
    return true;
}

// A 200: the peer placed the decision's attempt.
bool accepted(Reader &rd, const json::object &o, PeerDecision &d) {
    bool yes = false, redelivered = false;
    std::string broker, fabric;
    if (!rd.boolean(o, "accepted", "", yes)) return false;
    if (!yes) return rd.fail("accepted", "expected true in a 200 answer");
    if (!rd.name(o, "cluster", "", d.cluster) || !rd.integer(o, "job", "", 1, 1LL << 53, d.job) ||
        !rd.name(o, "broker", "", broker, false) || !rd.name(o, "fabric", "", fabric, false) ||
        !rd.boolean(o, "redelivered", "", redelivered, false))
        return false;
    json::array nodes;
    if (const json::array *a = rd.array(o, "nodes", "", kPeerListMax, false)) {
        for (std::size_t i = 0; i < a->size(); ++i) {
            const json::string *n = (*a)[i].if_string();
            if (!n || n->size() > kPeerNameMax || has_control_chars(*n)) return rd.fail(item("nodes", i), "expected a node name");
            nodes.push_back(*n);
        }
    } else if (!rd.err.empty()) {
        return false;
    }
    d.evidence = json::object{{"accepted", true}, {"cluster", d.cluster}, {"job", d.job}, {"nodes", std::move(nodes)}};
    if (!broker.empty()) d.evidence["broker"] = broker;
    if (!fabric.empty()) d.evidence["fabric"] = fabric;
    if (redelivered) d.evidence["redelivered"] = true;
    return true;
}

// A 409: the peer has no place for it, and says why.
bool refused(Reader &rd, const json::object &o, PeerDecision &d) {
    const json::value *e = rd.get(o, "error", "", true);
    if (!e) return false;
    if (!e->is_object()) return rd.fail("error", "expected an object");
    std::string code, message;
    if (!rd.name(e->get_object(), "code", "error", code, false) || !rd.text(e->get_object(), "message", "error", message)) return false;
    json::array rejected;
    d.why = message;
    if (const json::array *a = rd.array(o, "rejected", "", kPeerListMax, false)) {
        for (std::size_t i = 0; i < a->size(); ++i) {
            const json::object *r = (*a)[i].if_object();
            if (!r) return rd.fail(item("rejected", i), "expected an object");
            std::string cluster, reason;
            if (!rd.name(*r, "cluster", item("rejected", i), cluster) || !rd.text(*r, "reason", item("rejected", i), reason)) return false;
            // The cause of an event stays a line, however many clusters the peer has.
            if (d.why.size() < kPeerTextMax) d.why += "; " + cluster + " rejected: " + reason;
            rejected.push_back(json::object{{"cluster", cluster}, {"reason", reason}});
        }
    } else if (!rd.err.empty()) {
        return false;
    }
    if (d.why.size() > kPeerTextMax) d.why = d.why.substr(0, kPeerTextMax) + "...";
    d.evidence = json::object{{"error", json::object{{"code", code}, {"message", message}}}, {"rejected", std::move(rejected)}};
    return true;
}

}  // namespace

PeerCapacity parse_peer_capacity(const HttpResponse &r) {
    PeerCapacity c;
    if (!r.ok()) {
        c.error = r.status ? "HTTP " + std::to_string(r.status) : r.error;
        return c;
    }
    Reader rd;
    json::value v;
    const json::object *o = body_object(r.body, v, rd);
    const json::array *rows = o ? rd.array(*o, "clusters", "", kPeerRowsMax, true) : nullptr;
    for (std::size_t i = 0; rows && i < rows->size(); ++i) {
        json::object row;
        if (!capacity_row(rd, (*rows)[i], item("clusters", i), row)) break;
        c.rows.push_back(std::move(row));
    }
    if (!rd.err.empty()) {
        c.error = "bad answer: " + rd.err;
        c.rows.clear();
    }
    return c;
}

PeerDecision parse_peer_decision(const HttpResponse &r) {
    PeerDecision d;
    Reader rd;
    if (r.too_large) {
        rd.fail("body", r.error);
    } else if (r.status != 200 && r.status != 409) {
        rd.fail("status", "expected 200 or 409, got " + std::to_string(r.status));
    } else {
        json::value v;
        if (const json::object *o = body_object(r.body, v, rd)) {
            if (r.status == 200 && accepted(rd, *o, d)) d.kind = PeerDecision::Kind::accepted;
            if (r.status == 409 && refused(rd, *o, d)) d.kind = PeerDecision::Kind::refused;
        }
    }
    if (!rd.err.empty()) {
        d.kind = PeerDecision::Kind::bad;
        d.error = rd.err;
        d.field = rd.field;
        d.evidence = json::object{};
    }
    return d;
}

}  // namespace shardnet::broker
