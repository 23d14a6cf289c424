#include "auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

namespace shardnet::broker {

std::string sha256_hex(const std::string &data) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
    static const char *hex = "0123456789abcdef";
    std::string out(len * 2, '0');
    for (unsigned i = 0; i < len; ++i) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    return out;
}

Auth::Auth(const std::vector<TokenEntry> &tokens, double rate, double burst) : rate_(rate), burst_(burst) {
    for (const auto &t : tokens) {
        auto b = std::make_unique<Bucket>();
        b->entry = t;
        b->tokens = burst;
        b->last = 0;
        by_hash_[t.sha256] = std::move(b);
    }
}

Auth::Verdict Auth::check(const std::string &bearer, const TokenEntry *&entry, double now) {
    if (bearer.empty()) return Verdict::missing;
    const std::string h = sha256_hex(bearer);
    auto it = by_hash_.find(h);
    // The map finds by hash; the final comparison runs in constant time.
    if (it == by_hash_.end() || CRYPTO_memcmp(it->first.data(), h.data(), h.size()) != 0) return Verdict::invalid;
    Bucket &b = *it->second;
    {
        std::lock_guard<std::mutex> lock(b.mu);
        if (b.last == 0) b.last = now;
        b.tokens = std::min(burst_, b.tokens + (now - b.last) * rate_);
        b.last = now;
        if (b.tokens < 1) return Verdict::rate_limited;
        b.tokens -= 1;
    }
    entry = &b.entry;
    return Verdict::ok;
}

}  // namespace shardnet::broker
