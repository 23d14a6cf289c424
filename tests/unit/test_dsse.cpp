#include <cstdio>
#include <doctest/doctest.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base64.hpp"
#include "common/dsse.hpp"

using namespace shardnet;

namespace {

std::string unhex(const std::string &h) {
    std::string out;
    for (std::size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(char(std::stoi(h.substr(i, 2), nullptr, 16)));
    return out;
}

// Key A of DSSE's testvectors/vectors.json: RFC 8032's first Ed25519 test key.
SigningKey key_a() {
    SigningKey k;
    REQUIRE(SigningKey::from_seed(unhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"), k) == "");
    return k;
}

SigningKey fresh_key() {
    std::string seed(32, '\0');
    for (int i = 0; i < 32; ++i) seed[i] = char(i * 7 + 3);
    SigningKey k;
    REQUIRE(SigningKey::from_seed(seed, k) == "");
    return k;
}

}  // namespace

TEST_CASE("PAE is DSSE's own test vector") {
    // secure-systems-lab/dsse protocol.md, "Test Vectors".
    CHECK(dsse::pae("http://example.com/HelloWorld", "hello world") == "DSSEv1 29 http://example.com/HelloWorld 11 hello world");
    // An empty body still ends with its space; LEN counts bytes, not characters.
    CHECK(dsse::pae("application/vnd.in-toto+json", "") == "DSSEv1 28 application/vnd.in-toto+json 0 ");
    CHECK(dsse::pae("t", "\xc3\xa9") == "DSSEv1 1 t 2 \xc3\xa9");
}

TEST_CASE("Ed25519 over the PAE reproduces DSSE's single-signature vector") {
    // testvectors/vectors.json, "single-signature": payload, PAE bytes and
    // the signature of key A (Ed25519 signatures are deterministic).
    const SigningKey a = key_a();
    const std::string payload = R"({"_type":"https://in-toto.io/Statement/v1"})";
    const std::string p = dsse::pae(dsse::kInTotoPayloadType, payload);
    CHECK(p == unhex("445353457631203238206170706c69636174696f6e2f766e642e696e2d746f746f2b6a736f6e203433207b225f74797065223a2268747470733a2f2f696e2d746f746f2e696f2f53746174656d656e742f7631227d"));
    dsse::Envelope env{dsse::kInTotoPayloadType, payload, {}};
    REQUIRE(dsse::sign(a, env) == "");
    CHECK(base64_encode(env.signatures[0].sig) == "2WAfaHm5jluo0w+0rk8uVkluELJYWjSmU9x7EUzx+AyteDGJ4/nqyJXfmAUVFIAoQafWm7AxBZNw5M9ixNHiCA==");
    // keyid: SHA-256 of the DER SubjectPublicKeyInfo (302a300506032b6570032100 || public key).
    CHECK(a.keyid() == "06e3fd8fda29bb60ab59557de61edb0aecdb231134be30e75b455f8e1b792fa9");
    // The vector's envelope (keyid "A": a hint we do not know) verifies
    // when the hint is dropped, and a swapped payloadType does not.
    dsse::Envelope vec;
    REQUIRE(dsse::from_json(R"({"payload":"eyJfdHlwZSI6Imh0dHBzOi8vaW4tdG90by5pby9TdGF0ZW1lbnQvdjEifQ==","payloadType":"application/vnd.in-toto+json","signatures":[{"sig":"2WAfaHm5jluo0w+0rk8uVkluELJYWjSmU9x7EUzx+AyteDGJ4/nqyJXfmAUVFIAoQafWm7AxBZNw5M9ixNHiCA=="}]})", vec) == "");
    SigningKey pub;
    REQUIRE(SigningKey::from_public_pem(a.public_pem(), pub) == "");
    CHECK(!pub.has_private());
    CHECK(dsse::verify(vec, {pub}).verdict == dsse::Verdict::good);
    vec.payload_type = "application/vnd.example.other+json";
    CHECK(dsse::verify(vec, {pub}).verdict == dsse::Verdict::bad_signature);
}

TEST_CASE("an envelope round-trips through its JSON and verifies; a changed byte or an unknown key does not") {
    const SigningKey k = fresh_key();
    dsse::Envelope env{dsse::kInTotoPayloadType, R"({"x":1})", {}};
    REQUIRE(dsse::sign(k, env) == "");
    const std::string text = dsse::to_json(env);
    CHECK(text.rfind(R"({"payload":"eyJ4IjoxfQ==","payloadType":"application/vnd.in-toto+json","signatures":[{"keyid":")", 0) == 0);
    dsse::Envelope back;
    REQUIRE(dsse::from_json(text, back) == "");
    CHECK(back.payload == env.payload);
    CHECK(dsse::to_json(back) == text);
    auto v = dsse::verify(back, {key_a(), k});
    CHECK(v.verdict == dsse::Verdict::good);
    CHECK(v.keyid == k.keyid());

    dsse::Envelope changed = back;
    changed.payload[5] = '2';
    v = dsse::verify(changed, {k});
    CHECK(v.verdict == dsse::Verdict::bad_signature);
    CHECK(v.detail.find("bad signature by key " + k.keyid()) != std::string::npos);

    v = dsse::verify(back, {key_a()});
    CHECK(v.verdict == dsse::Verdict::unknown_key);
    CHECK(v.detail.find("unknown key " + k.keyid()) != std::string::npos);
    // A keyid is a hint: naming a trusted key does not make another key's signature good.
    dsse::Envelope lying = back;
    lying.signatures[0].keyid = key_a().keyid();
    CHECK(dsse::verify(lying, {key_a(), k}).verdict == dsse::Verdict::bad_signature);
}

TEST_CASE("envelope JSON is read strictly, naming what is wrong") {
    dsse::Envelope e;
    CHECK(dsse::from_json("[]", e) == "an envelope is a JSON object");
    CHECK(dsse::from_json("{", e).rfind("not JSON", 0) == 0);
    CHECK(dsse::from_json(R"({"payloadType":"t","signatures":[{"sig":"AA=="}]})", e) == "payload: missing");
    CHECK(dsse::from_json(R"({"payload":"!!","payloadType":"t","signatures":[{"sig":"AA=="}]})", e) == "payload: not base64");
    CHECK(dsse::from_json(R"({"payload":"","payloadType":"t","signatures":[]})", e).rfind("signatures: none", 0) == 0);
    CHECK(dsse::from_json(R"({"payload":"","payloadType":"t","signatures":[{"sig":"AA==","x":1}]})", e) == "signatures[0].x: unknown field");
    CHECK(dsse::from_json(R"({"payload":"","payloadType":"t","signatures":[{"sig":"AA="}]})", e) == "signatures[0].sig: not base64");
    CHECK(dsse::from_json(R"({"payload":"","payloadType":7,"signatures":[{"sig":"AA=="}]})", e) == "payloadType: expected a string");
    CHECK(dsse::from_json(R"({"payload":"","payloadType":"t","signatures":[{"sig":"AA=="}],"extra":0})", e) == "extra: unknown field");
}

TEST_CASE("base64: standard out; standard or URL-safe in, one encoding per byte string") {
    CHECK(base64_encode("") == "");
    CHECK(base64_encode("f") == "Zg==");
    CHECK(base64_encode("fo") == "Zm8=");
    CHECK(base64_encode("foobar") == "Zm9vYmFy");
    CHECK(base64_encode("\xfb\xff\xbf>?") == "+/+/Pj8=");
    CHECK(base64_decode("-_-_Pj8=").value() == "\xfb\xff\xbf>?");   // DSSE's url-safe vector
    CHECK(base64_decode("+/+/Pj8=").value() == "\xfb\xff\xbf>?");
    CHECK(base64_decode("Zm8").value() == "fo");
    CHECK(!base64_decode("+_+_Pj8="));   // mixed alphabets
    CHECK(!base64_decode("Zm9="));       // bits after the last byte
    CHECK(!base64_decode("Zg="));
    CHECK(!base64_decode("Z"));
    CHECK(!base64_decode("Zm 8"));
    CHECK(!base64_decode("Zg==Zg=="));
}

TEST_CASE("key files: a private key open to others is refused; public keys are read from PEM") {
    char dir[] = "/tmp/test-dsse-XXXXXX";
    REQUIRE(mkdtemp(dir));
    const std::string d = dir, priv = d + "/k.pem", pub = d + "/pub.pem";
    REQUIRE(std::system(("openssl genpkey -algorithm ed25519 -out " + priv + " 2>/dev/null && openssl pkey -in " + priv +
                         " -pubout -out " + pub + " && chmod 600 " + priv).c_str()) == 0);
    SigningKey k;
    REQUIRE(load_private_key(priv, k) == "");
    CHECK(k.has_private());
    std::vector<SigningKey> pubs;
    REQUIRE(load_public_keys(pub, pubs) == "");
    REQUIRE(pubs.size() == 1);
    CHECK(pubs[0].keyid() == k.keyid());
    chmod(priv.c_str(), 0644);
    const std::string err = load_private_key(priv, k);
    CHECK(err.find(priv) != std::string::npos);
    CHECK(err.find("mode 0644") != std::string::npos);
    CHECK(load_public_keys(priv, pubs).find("holds no PEM PUBLIC KEY") != std::string::npos);
    REQUIRE(std::system(("openssl genpkey -algorithm ec -pkeyopt ec_paramgen_curve:P-256 2>/dev/null | openssl pkey -pubout -out " + pub).c_str()) == 0);
    CHECK(load_public_keys(pub, pubs).find("Ed25519 keys only") != std::string::npos);
    CHECK(std::system(("rm -rf " + d).c_str()) == 0);
}
