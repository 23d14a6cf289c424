#include "common/dsse.hpp"

#include <boost/json.hpp>

#include "common/base64.hpp"
#include "common/json_fields.hpp"

namespace shardnet::dsse {

namespace json = boost::json;

std::string pae(std::string_view type, std::string_view body) {
    std::string out = "DSSEv1 " + std::to_string(type.size()) + " ";
    out.reserve(out.size() + type.size() + body.size() + 24);
    out += type;
    out += " " + std::to_string(body.size()) + " ";
    out += body;
    return out;
}

json::object to_json_object(const Envelope &env) {
    json::array sigs;
    for (const auto &s : env.signatures) sigs.push_back(json::object{{"keyid", s.keyid}, {"sig", base64_encode(s.sig)}});
    return json::object{{"payload", base64_encode(env.payload)}, {"payloadType", env.payload_type}, {"signatures", std::move(sigs)}};
}

std::string to_json(const Envelope &env) {
    // Boost.JSON keeps insertion order: the order above is the sorted one.
    return json::serialize(to_json_object(env));
}

std::string from_json(std::string_view text, Envelope &out) {
    json::error_code ec;
    json::value v = json::parse(text, ec);
    if (ec) return "not JSON: " + ec.message();
    return from_json_value(v, out);
}

std::string from_json_value(const json::value &v, Envelope &out) {
    if (!v.is_object()) return "an envelope is a JSON object";
    JsonFields f(v.as_object(), "");
    Envelope env;
    std::string payload;
    if (!f.only({"payload", "payloadType", "signatures"}) || !f.str("payloadType", env.payload_type) || !f.str("payload", payload))
        return f.error();
    auto bytes = base64_decode(payload);
    if (!bytes) return "payload: not base64";
    env.payload = std::move(*bytes);
    const json::array *sigs = f.array("signatures");
    if (!sigs) return f.error();
    if (sigs->empty()) return "signatures: none (an unsigned envelope proves nothing)";
    for (std::size_t i = 0; i < sigs->size(); ++i) {
        const std::string at = "signatures[" + std::to_string(i) + "]";
        if (!(*sigs)[i].is_object()) return at + ": expected an object";
        JsonFields s((*sigs)[i].as_object(), at);
        Signature sig;
        std::string text;
        if (!s.only({"keyid", "sig"}) || !s.str("keyid", sig.keyid, false) || !s.str("sig", text)) return s.error();
        auto raw = base64_decode(text);
        if (!raw) return at + ".sig: not base64";
        sig.sig = std::move(*raw);
        env.signatures.push_back(std::move(sig));
    }
    out = std::move(env);
    return "";
}

std::string sign(const SigningKey &key, Envelope &env) {
    std::string err;
    std::string sig = key.sign(pae(env.payload_type, env.payload), err);
    if (!err.empty()) return err;
    env.signatures.push_back(Signature{key.keyid(), std::move(sig)});
    return "";
}

Verification verify(const Envelope &env, const std::vector<SigningKey> &keys) {
    Verification v;
    if (env.signatures.empty()) { v.detail = "no signature"; return v; }
    const std::string msg = pae(env.payload_type, env.payload);
    for (const auto &s : env.signatures) {
        bool named = false;
        for (const auto &k : keys) {
            if (!s.keyid.empty() && s.keyid != k.keyid()) continue;
            named = true;
            if (k.verify(msg, s.sig)) return Verification{Verdict::good, k.keyid(), ""};
        }
        // The first failure is the one reported: a bad signature by a key
        // we trust says more than a key we do not know.
        if (named && v.verdict != Verdict::bad_signature) {
            v = Verification{Verdict::bad_signature, s.keyid, "bad signature" + (s.keyid.empty() ? std::string() : " by key " + s.keyid)};
        } else if (!named && v.verdict == Verdict::no_signature) {
            v = Verification{Verdict::unknown_key, s.keyid, "signed by unknown key " + s.keyid + " (not among the --key public keys)"};
        }
    }
    return v;
}

}  // namespace shardnet::dsse
