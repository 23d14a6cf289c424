// Ed25519 keys for signed records (receipts, log heads), in OpenSSL 3's
// EVP. A key is known by its keyid: the lower-case hex SHA-256 of its
// public key's DER SubjectPublicKeyInfo, which `openssl pkey -pubin -outform
// DER | sha256sum` prints too.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

typedef struct evp_pkey_st EVP_PKEY;

namespace shardnet {

class SigningKey {
public:
    SigningKey() = default;
    bool empty() const { return !pkey_; }
    bool has_private() const { return private_; }
    const std::string &keyid() const { return keyid_; }
    // The public half as PEM (what a broker lists at GET /v1/keys).
    std::string public_pem() const;

    // The raw 64-byte Ed25519 signature of msg (EVP_DigestSign with no
    // digest: Ed25519 hashes inside); "" with err on failure.
    std::string sign(std::string_view msg, std::string &err) const;
    bool verify(std::string_view msg, std::string_view sig) const;

    // From PEM text: a private key (PKCS#8, as `openssl genpkey -algorithm
    // ed25519` writes) or a public key (SubjectPublicKeyInfo). Anything but
    // Ed25519 is refused. "" or what is wrong.
    static std::string from_private_pem(std::string_view pem, SigningKey &out);
    static std::string from_public_pem(std::string_view pem, SigningKey &out);
    // From the 32-byte seed of RFC 8032 (test vectors).
    static std::string from_seed(std::string_view seed, SigningKey &out);

private:
    static std::string adopt(EVP_PKEY *pkey, bool is_private, SigningKey &out);
    std::shared_ptr<EVP_PKEY> pkey_;
    std::string keyid_;
    bool private_ = false;
};

// A private key file: refused like every secret file of the project when
// anyone but its owner (root or this program's user) could read or replace
// it (common/worker_token.hpp, read_secret_file). err names the file.
std::string load_private_key(const std::string &path, SigningKey &out);
// Public keys from a PEM file: every "PUBLIC KEY" block in it (a broker's
// current and earlier keys may share one file). err names the file.
std::string load_public_keys(const std::string &path, std::vector<SigningKey> &out);

}  // namespace shardnet
