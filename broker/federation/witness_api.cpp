// The witness rounds and GET /v1/witness (federation/witnesses.hpp).
#include "broker/federation/witnesses.hpp"

#include <boost/json.hpp>

#include "broker/core/api_util.hpp"
#include "broker/federation/witness.hpp"
#include "broker/peers/peer_link.hpp"
#include "broker/store/store.hpp"
#include "broker/util/log.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

void Witnesses::start_round() {
    if (busy_.exchange(true)) return;
    post_guarded(query_pool_, "witness the peers' logs", [this] {
        struct Done { std::atomic<bool> &f; ~Done() { f = false; } } done{busy_};
        round(wall_now());
    });
}

void Witnesses::round(double now) {
    for (const auto &peer : cfg_.peers) {
        auto get = [&](const std::string &path) {
            HttpRequest r;
            r.method = "GET";
            r.url = peer.url + path;
            r.bearer = peer.token;
            r.ca_file = peer.ca_file;
            r.timeout_ms = 1500;
            return peers_->send(r);
        };
        const HttpResponse head = get("/v1/log/head");
        if (head.status == 501) continue;   // the peer signs no receipts: no log to witness
        const HttpResponse keys = get("/v1/keys");
        const auto kept = store_wait([&] { return store_->decisions().witnessed_head(peer.name); });
        std::optional<WitnessedHead> last;
        if (kept) last = WitnessedHead{kept->size, kept->root};
        const WitnessCheck c = check_peer_head(head, keys, last, [&](long long first, long long second, std::string &err) {
            const HttpResponse r = get("/v1/log/proof/consistency?first=" + std::to_string(first) + "&second=" + std::to_string(second));
            std::vector<std::string> path;
            json::error_code ec;
            json::value v = r.ok() ? json::parse(r.body, ec) : json::value();
            const json::value *p = r.ok() && !ec && v.is_object() ? v.as_object().if_contains("path") : nullptr;
            if (!p || !p->is_array()) {
                err = r.ok() ? "path: expected an array of hashes" : r.status ? "HTTP " + std::to_string(r.status) : r.error;
                return path;
            }
            for (const auto &x : p->as_array()) path.push_back(x.is_string() ? std::string(x.as_string()) : "");
            return path;
        });
        switch (c.kind) {
        case WitnessCheck::Kind::unreadable:
            log_json("warn", "a peer's log head not witnessed", {{"peer", peer.name}, {"why", c.why}});
            break;
        case WitnessCheck::Kind::ok:
            if (!kept || kept->size != c.size || kept->root != c.root_hex)
                store_wait([&] {
                    try {
                        store_->decisions().put_witnessed_head(Store::WitnessedRow{peer.name, c.size, c.root_hex, c.envelope, now, ""});
                    } catch (const std::exception &e) {
                        log_json("warn", "a peer's log head witnessed but not kept", {{"peer", peer.name}, {"why", e.what()}});
                    }
                    return 0;
                });
            break;
        case WitnessCheck::Kind::conflict: {
            count(c_witness_conflicts);
            log_json("error", "a peer's log conflicts with the head witnessed before", {{"peer", peer.name}, {"why", c.why}});
            const std::string evidence = json::serialize(json::object{{"why", c.why}, {"tree_size", c.size}, {"root_hash", c.root_hex},
                                                                      {"head", json::parse(c.envelope)}, {"seen_at", now}});
            store_wait([&] {
                try {
                    store_->decisions().witness_conflict(peer.name, evidence);
                } catch (const std::exception &e) {
                    log_json("warn", "a witnessed conflict not kept", {{"peer", peer.name}, {"why", e.what()}});
                }
                return 0;
            });
            break;
        }
        }
    }
}

void Witnesses::get(const Reply &reply) {
    on_store(reply, [this](const Reply &reply) {
        json::array heads;
        for (const auto &w : store_->decisions().witnessed_heads()) {
            json::error_code ec;
            json::value env = json::parse(w.envelope, ec), conflict = w.conflict.empty() ? json::value(nullptr) : json::parse(w.conflict, ec);
            heads.push_back(json::object{{"peer", w.peer}, {"tree_size", w.size}, {"root_hash", w.root}, {"head", std::move(env)},
                                         {"seen_at", w.seen}, {"conflict", std::move(conflict)}});
        }
        reply(ok_json(200, json::object{{"broker", cfg_.broker_name}, {"heads", std::move(heads)}}));
    });
}

}  // namespace shardnet::broker
