#include "common/tree_head.hpp"

#include <boost/json.hpp>

#include "common/json_fields.hpp"

namespace shardnet::receipt {

namespace json = boost::json;

std::string tree_head_json(const TreeHead &h) {
    return json::serialize(json::object{{"tree_size", h.tree_size}, {"root_hash", merkle::hex(h.root_hash)}, {"timestamp", h.timestamp}});
}

std::string parse_tree_head(std::string_view payload, TreeHead &out) {
    json::error_code ec;
    json::value v = json::parse(payload, ec);
    if (ec || !v.is_object()) return "tree head: not a JSON object";
    JsonFields f(v.as_object(), "tree head");
    long long size = 0;
    std::string root;
    TreeHead h;
    if (!f.only({"tree_size", "root_hash", "timestamp"}) || !f.integer("tree_size", 0, 1LL << 62, size) || !f.str("root_hash", root) ||
        !f.str("timestamp", h.timestamp))
        return f.error();
    auto r = merkle::from_hex(root);
    if (!r) return "tree head.root_hash: expected 64 lower-case hex digits";
    h.tree_size = (unsigned long long)size;
    h.root_hash = *r;
    out = std::move(h);
    return "";
}

std::string sign_tree_head(const SigningKey &key, const TreeHead &h, dsse::Envelope &out) {
    dsse::Envelope env{kTreeHeadType, tree_head_json(h), {}};
    if (auto err = dsse::sign(key, env); !err.empty()) return err;
    out = std::move(env);
    return "";
}

std::string verify_tree_head(const dsse::Envelope &env, const std::vector<SigningKey> &keys, TreeHead &out) {
    if (env.payload_type != kTreeHeadType) return "payloadType " + env.payload_type + " is not " + kTreeHeadType;
    const auto v = dsse::verify(env, keys);
    if (v.verdict != dsse::Verdict::good) return "tree head: " + v.detail;
    return parse_tree_head(env.payload, out);
}

}  // namespace shardnet::receipt
