#include "common/signing_key.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "common/digest.hpp"
#include "common/safe_path.hpp"
#include "common/worker_token.hpp"

namespace shardnet {

namespace {

std::string openssl_error(const char *what) {
    const unsigned long e = ERR_get_error();
    ERR_clear_error();
    char buf[256];
    if (!e) return what;
    ERR_error_string_n(e, buf, sizeof buf);
    return std::string(what) + " (" + buf + ")";
}

struct MdCtx {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    ~MdCtx() { EVP_MD_CTX_free(ctx); }
};

struct Bio {
    BIO *b;
    explicit Bio(std::string_view s) : b(BIO_new_mem_buf(s.data(), int(s.size()))) {}
    ~Bio() { BIO_free(b); }
};

}  // namespace

std::string SigningKey::adopt(EVP_PKEY *pkey, bool is_private, SigningKey &out) {
    if (!pkey) return openssl_error("not a PEM key");
    std::shared_ptr<EVP_PKEY> p(pkey, EVP_PKEY_free);
    if (EVP_PKEY_get_id(pkey) != EVP_PKEY_ED25519)
        return std::string("a ") + EVP_PKEY_get0_type_name(pkey) + " key; receipts are signed with Ed25519 keys only "
               "(openssl genpkey -algorithm ed25519)";
    unsigned char *der = nullptr;
    const int n = i2d_PUBKEY(pkey, &der);
    if (n <= 0) return openssl_error("cannot encode the public key");
    out.keyid_ = sha256_hex(std::string_view(reinterpret_cast<char *>(der), std::size_t(n)));
    OPENSSL_free(der);
    out.pkey_ = std::move(p);
    out.private_ = is_private;
    return "";
}

std::string SigningKey::from_private_pem(std::string_view pem, SigningKey &out) {
    Bio bio(pem);
    return adopt(PEM_read_bio_PrivateKey(bio.b, nullptr, nullptr, nullptr), true, out);
}

std::string SigningKey::from_public_pem(std::string_view pem, SigningKey &out) {
    Bio bio(pem);
    return adopt(PEM_read_bio_PUBKEY(bio.b, nullptr, nullptr, nullptr), false, out);
}

std::string SigningKey::from_seed(std::string_view seed, SigningKey &out) {
    if (seed.size() != 32) return "an Ed25519 seed is 32 bytes";
    return adopt(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char *>(seed.data()), 32),
                 true, out);
}

std::string SigningKey::public_pem() const {
    if (!pkey_) return "";
    BIO *b = BIO_new(BIO_s_mem());
    std::string s;
    if (PEM_write_bio_PUBKEY(b, pkey_.get()) == 1) {
        char *p = nullptr;
        const long n = BIO_get_mem_data(b, &p);
        s.assign(p, std::size_t(n));
    }
    BIO_free(b);
    return s;
}

std::string SigningKey::sign(std::string_view msg, std::string &err) const {
    if (!pkey_ || !private_) { err = "no private key to sign with"; return ""; }
    MdCtx md;
    std::string sig(64, '\0');
    std::size_t len = sig.size();
    if (!md.ctx || EVP_DigestSignInit_ex(md.ctx, nullptr, nullptr, nullptr, nullptr, pkey_.get(), nullptr) != 1 ||
        EVP_DigestSign(md.ctx, reinterpret_cast<unsigned char *>(sig.data()), &len,
                       reinterpret_cast<const unsigned char *>(msg.data()), msg.size()) != 1) {
        err = openssl_error("Ed25519 signing failed");
        return "";
    }
    sig.resize(len);
    return sig;
}

bool SigningKey::verify(std::string_view msg, std::string_view sig) const {
    if (!pkey_) return false;
    MdCtx md;
    const bool good = md.ctx && EVP_DigestVerifyInit_ex(md.ctx, nullptr, nullptr, nullptr, nullptr, pkey_.get(), nullptr) == 1 &&
                      EVP_DigestVerify(md.ctx, reinterpret_cast<const unsigned char *>(sig.data()), sig.size(),
                                       reinterpret_cast<const unsigned char *>(msg.data()), msg.size()) == 1;
    ERR_clear_error();   // a bad signature is an answer, not an error to keep
    return good;
}

std::string load_private_key(const std::string &path, SigningKey &out) {
    std::string err;
    // 64 bytes: shorter than any PEM Ed25519 key, so "short" means "not a key".
    std::string pem = read_secret_file(path, 64, err);
    if (!err.empty()) return err;
    err = SigningKey::from_private_pem(pem, out);
    OPENSSL_cleanse(pem.data(), pem.size());
    return err.empty() ? "" : "private key '" + path + "': " + err;
}

std::string load_public_keys(const std::string &path, std::vector<SigningKey> &out) {
    std::string text;
    if (std::string why = read_small_file(path, 1 << 20, text); !why.empty()) return "public key file: " + why;
    const std::string begin = "-----BEGIN PUBLIC KEY-----", end = "-----END PUBLIC KEY-----";
    std::size_t at = 0, found = 0;
    while ((at = text.find(begin, at)) != std::string::npos) {
        const std::size_t stop = text.find(end, at);
        if (stop == std::string::npos) return "public key file '" + path + "': a PUBLIC KEY block has no END line";
        SigningKey k;
        if (std::string why = SigningKey::from_public_pem(std::string_view(text).substr(at, stop + end.size() - at), k); !why.empty())
            return "public key file '" + path + "', key " + std::to_string(found + 1) + ": " + why;
        out.push_back(std::move(k));
        ++found;
        at = stop;
    }
    if (!found) return "public key file '" + path + "' holds no PEM PUBLIC KEY (openssl pkey -in KEY -pubout)";
    return "";
}

}  // namespace shardnet
