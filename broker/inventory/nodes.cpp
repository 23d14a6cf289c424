// Inventory: node descriptors (POST /v1/nodes from shardnet-probe, GET /v1/nodes).
#include <boost/json.hpp>

#include "common/parse_util.hpp"
#include "broker/inventory/inventory_module.hpp"
#include "broker/core/api_util.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

void Inventory::put_node(const ApiRequest &req, const Reply &reply, double now) {
    json::error_code ec;
    json::value v = json::parse(req.body, ec);
    if (ec || !v.is_object()) return reply(error_response(400, "bad_json", "body is not a JSON object"));
    Fields f{v.as_object(), {}, {}};
    std::string schema, host, hash;
    if (!f.str("schema", schema) || !f.str("host", host) || !f.str("hash", hash)) return reply(bad_field(f));
    if (schema != "shardnet.node/1") return reply(error_response(400, "bad_field", "schema: expected shardnet.node/1", "schema"));
    if (host.empty() || host.size() > 256 || has_control_chars(host)) return reply(error_response(400, "bad_field", "host: not a host name", "host"));
    std::string field;
    if (auto why = descriptor_shape_error(v.as_object(), field); !why.empty())
        return reply(error_response(400, "bad_field", why, field));
    on_store(reply, [this, host, hash, body = req.body, now, offer = offer_from_descriptor(host, v.as_object())](const Reply &reply) {
        store_->nodes().upsert_node(host, hash, body, now);
        if (offers_loaded_) {
            offers_[host] = offer;
            offers_snapshot_.reset();
        }
        reply(ok_json(200, json::object{{"host", host}, {"hash", hash}}));
    });
}

void Inventory::get_nodes(const std::string &host, const Reply &reply) {
    on_store(reply, [this, host](const Reply &reply) {
        json::array out;
        for (auto &n : store_->nodes().list_nodes(host)) {
            json::error_code ec;
            json::value d = json::parse(n.descriptor, ec);
            if (ec) continue;
            if (!host.empty()) return reply(ok_json(200, d));  // the whole descriptor
            if (!d.is_object()) continue;
            json::object o{{"host", n.host}, {"hash", n.hash}, {"updated", n.updated}};
            // Descriptors are checked on the way in; stored ones are still read
            // without trusting their shape.
            if (auto *f = d.as_object().if_contains("fabric"); f && f->is_object())
                if (auto *s = f->as_object().if_contains("summary")) o["fabric"] = *s;
            json::array classes;
            if (auto *a = d.as_object().if_contains("accelerators"); a && a->is_array())
                for (const auto &acc : a->as_array())
                    if (auto *c = acc.is_object() ? acc.as_object().if_contains("class") : nullptr) classes.push_back(*c);
            o["accelerators"] = std::move(classes);
            out.push_back(std::move(o));
        }
        if (!host.empty()) return reply(error_response(404, "no_node", "no descriptor for node " + host));
        reply(ok_json(200, json::object{{"nodes", std::move(out)}}));
    });
}

}  // namespace shardnet::broker
