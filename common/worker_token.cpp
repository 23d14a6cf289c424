#include "worker_token.hpp"

#include <cstring>
#include <nettle/hmac.h>
#include <nettle/memops.h>

#include "digest.hpp"
#include "parse_util.hpp"
#include "safe_path.hpp"

namespace shardnet {

namespace {

constexpr std::string_view kPrefix = "snw1.";

std::string mac_hex(std::string_view key, std::string_view run, unsigned long long attempt) {
    hmac_sha256_ctx ctx;
    hmac_sha256_set_key(&ctx, key.size(), reinterpret_cast<const uint8_t *>(key.data()));
    const std::string msg = std::string("shardnet-worker", 16) + std::string(run) + '\0' + std::to_string(attempt);
    hmac_sha256_update(&ctx, msg.size(), reinterpret_cast<const uint8_t *>(msg.data()));
    uint8_t md[SHA256_DIGEST_SIZE];
    hmac_sha256_digest(&ctx, sizeof md, md);
    return to_hex(md, sizeof md);
}

}  // namespace

std::string derive_worker_token(std::string_view key, std::string_view run, unsigned long long attempt) {
    return std::string(kPrefix) + std::to_string(attempt) + "." + mac_hex(key, run, attempt) + "." + std::string(run);
}

bool parse_worker_token(std::string_view token, WorkerTokenClaim &out) {
    if (token.substr(0, kPrefix.size()) != kPrefix) return false;
    token.remove_prefix(kPrefix.size());
    const auto d1 = token.find('.');
    if (d1 == std::string_view::npos || d1 == 0 || d1 > 9) return false;
    unsigned long long attempt = 0;
    for (char c : token.substr(0, d1)) {
        if (c < '0' || c > '9') return false;
        attempt = attempt * 10 + unsigned(c - '0');
    }
    token.remove_prefix(d1 + 1);
    if (token.size() < 66 || token[64] != '.') return false;
    std::string_view mac = token.substr(0, 64), run = token.substr(65);
    for (char c : mac)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    if (attempt == 0 || !is_safe_name(run)) return false;
    out.run = std::string(run);
    out.attempt = attempt;
    out.mac_hex = std::string(mac);
    return true;
}

bool verify_worker_token(std::string_view key, const WorkerTokenClaim &claim) {
    const std::string want = mac_hex(key, claim.run, claim.attempt);
    return claim.mac_hex.size() == want.size() &&
           memeql_sec(want.data(), claim.mac_hex.data(), want.size()) != 0;
}

std::string read_worker_key(const std::string &path, std::string &err) { return read_secret_file(path, kMinWorkerKeyBytes, err); }

std::string read_secret_file(const std::string &path, std::size_t min_bytes, std::string &err) {
    std::string k;
    if (std::string why = read_small_file(path, 4096, k); !why.empty()) { err = "secret file: " + why; return ""; }
    while (!k.empty() && (k.back() == '\n' || k.back() == '\r' || k.back() == ' ')) k.pop_back();
    if (k.size() < min_bytes) {
        err = "secret file '" + path + "' holds " + std::to_string(k.size()) + " bytes; at least " +
              std::to_string(min_bytes) + " are needed (e.g. openssl rand -hex 32)";
        return "";
    }
    return k;
}

}  // namespace shardnet
