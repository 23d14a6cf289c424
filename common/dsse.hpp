// DSSE, the Dead Simple Signing Envelope (secure-systems-lab/dsse,
// protocol.md and envelope.md), with Ed25519 signatures: the envelope that
// in-toto tools verify, so a ShardNet receipt can be checked by tools we
// did not write.
#pragma once
#include <boost/json/object.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/signing_key.hpp"

namespace shardnet::dsse {

inline constexpr const char *kInTotoPayloadType = "application/vnd.in-toto+json";

// PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, LEN
// the byte length in ASCII decimal: the bytes a signature covers.
std::string pae(std::string_view type, std::string_view body);

struct Signature {
    std::string keyid;   // a hint only: never trusted, it narrows the keys to try
    std::string sig;     // raw signature bytes
};

struct Envelope {
    std::string payload_type;
    std::string payload;   // raw bytes (base64 only in JSON)
    std::vector<Signature> signatures;
};

// The envelope's one JSON text: keys in sorted order, no white space,
// standard base64: {"payload":"..","payloadType":"..","signatures":[{"keyid":"..","sig":".."}]}.
// Receipts are chained and logged by the SHA-256 of these bytes, so they
// must not depend on who serialized it.
std::string to_json(const Envelope &env);
boost::json::object to_json_object(const Envelope &env);

// Strict reading: the three fields and nothing else, payload and sig in
// base64 (standard or URL-safe), at least one signature. "" or what is
// wrong, naming the field.
std::string from_json(std::string_view text, Envelope &out);
std::string from_json_value(const boost::json::value &v, Envelope &out);

// Appends key's signature over PAE(payload_type, payload). "" or why not.
std::string sign(const SigningKey &key, Envelope &env);

// Verifies env against trusted keys as protocol.md says (threshold 1): a
// signature counts when one of the keys its keyid names (every key for an
// empty keyid) verifies it over the PAE.
enum class Verdict { good, unknown_key, bad_signature, no_signature };
struct Verification {
    Verdict verdict = Verdict::no_signature;
    std::string keyid;    // the key that verified it (good), or the first keyid that failed
    std::string detail;   // for a failure: what, in words
};
Verification verify(const Envelope &env, const std::vector<SigningKey> &keys);

}  // namespace shardnet::dsse
