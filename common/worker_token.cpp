#include "common/worker_token.hpp"

#include <cstdio>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>

#include "common/digest.hpp"
#include "common/parse_util.hpp"
#include "common/safe_path.hpp"

namespace shardnet {

namespace {

constexpr std::string_view kPrefix = "snw2.", kReaderPrefix = "snr2.";
constexpr unsigned long long kMaxNumber = 4294967295ULL;   // every number in a claim is a Slurm uint32

std::string mac_hex(std::string_view key, const WorkerClaim &c, bool reader = false) {
    hmac_sha256_ctx ctx;
    hmac_sha256_set_key(&ctx, key.size(), reinterpret_cast<const uint8_t *>(key.data()));
    std::string msg = reader ? std::string("shardnet-reader-v2", 19) : std::string("shardnet-worker-v2", 19);
    msg += c.run;
    for (unsigned long long n : {c.attempt, c.world, c.uid, c.job}) {
        msg += '\0';
        msg += std::to_string(n);
    }
    msg += '\0';
    msg += c.cluster;
    hmac_sha256_update(&ctx, msg.size(), reinterpret_cast<const uint8_t *>(msg.data()));
    uint8_t md[SHA256_DIGEST_SIZE];
    hmac_sha256_digest(&ctx, sizeof md, md);
    explicit_bzero(&ctx, sizeof ctx);
    explicit_bzero(msg.data(), msg.size());
    std::string hex = to_hex(md, sizeof md);
    explicit_bzero(md, sizeof md);
    return hex;
}

// One dot-terminated decimal field in canonical form ("0", or no leading zero).
bool take_number(std::string_view &s, unsigned long long &out) {
    const auto dot = s.find('.');
    if (dot == std::string_view::npos || dot == 0 || dot > 10 || (dot > 1 && s[0] == '0')) return false;
    unsigned long long n = 0;
    for (char c : s.substr(0, dot)) {
        if (c < '0' || c > '9') return false;
        n = n * 10 + unsigned(c - '0');
    }
    if (n > kMaxNumber) return false;
    out = n;
    s.remove_prefix(dot + 1);
    return true;
}

}  // namespace

bool is_cluster_name(std::string_view s) {
    if (s.empty() || s.size() > 64) return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
    return true;
}

std::string worker_claim_error(const WorkerClaim &c) {
    if (!is_safe_name(c.run)) return "run id '" + c.run + "' is not 1-64 of [A-Za-z0-9._-]";
    if (c.attempt < 1 || c.attempt > kMaxNumber) return "attempt out of range";
    if (c.world < 1 || c.world > kMaxNumber) return "world size out of range";
    if (c.uid > kMaxNumber) return "uid out of range";
    if (c.job < 1 || c.job > kMaxNumber) return "job id out of range";
    if (!is_cluster_name(c.cluster)) return "cluster name is not 1-64 of [A-Za-z0-9_-]";
    return "";
}

std::string derive_worker_token(std::string_view key, const WorkerClaim &c) {
    return std::string(kPrefix) + std::to_string(c.attempt) + "." + std::to_string(c.world) + "." + std::to_string(c.uid) + "." +
           std::to_string(c.job) + "." + c.cluster + "." + mac_hex(key, c) + "." + c.run;
}

std::string derive_reader_token(std::string_view key, const WorkerClaim &c) {
    return std::string(kReaderPrefix) + std::to_string(c.attempt) + "." + std::to_string(c.world) + "." + std::to_string(c.uid) + "." +
           std::to_string(c.job) + "." + c.cluster + "." + mac_hex(key, c, true) + "." + c.run;
}

bool parse_worker_token(std::string_view token, WorkerTokenClaim &out) {
    const bool reader = token.substr(0, kReaderPrefix.size()) == kReaderPrefix;
    if (!reader && token.substr(0, kPrefix.size()) != kPrefix) return false;
    token.remove_prefix(kPrefix.size());
    WorkerTokenClaim c;
    c.reader = reader;
    if (!take_number(token, c.attempt) || !take_number(token, c.world) || !take_number(token, c.uid) ||
        !take_number(token, c.job))
        return false;
    const auto dot = token.find('.');
    if (dot == std::string_view::npos) return false;
    c.cluster = std::string(token.substr(0, dot));
    token.remove_prefix(dot + 1);
    if (token.size() < 66 || token[64] != '.') return false;
    const std::string_view mac = token.substr(0, 64);
    for (char ch : mac)
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
    c.run = std::string(token.substr(65));
    c.mac_hex = std::string(mac);
    if (!worker_claim_error(c).empty()) return false;
    out = std::move(c);
    return true;
}

bool verify_worker_token(std::string_view key, const WorkerTokenClaim &claim) {
    const std::string want = mac_hex(key, claim, claim.reader);
    return claim.mac_hex.size() == want.size() &&
           memeql_sec(want.data(), claim.mac_hex.data(), want.size()) != 0;
}

std::string read_worker_key(const std::string &path, std::string &err) { return read_secret_file(path, kMinWorkerKeyBytes, err); }

std::string read_secret_file(const std::string &path, std::size_t min_bytes, std::string &err) {
    std::string k;
    struct stat st {};
    if (std::string why = read_small_file(path, 4096, k, &st); !why.empty()) { err = "secret file: " + why; return ""; }
    // Whoever else can read or replace the file can be any job's agent.
    if ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & 077) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
        err = "secret file '" + path + "' is owned by uid " + std::to_string(st.st_uid) + " with mode " + mode +
              "; it must be owned by root (or this program's user) and not readable by group or others (chmod 600)";
        explicit_bzero(k.data(), k.size());
        return "";
    }
    while (!k.empty() && (k.back() == '\n' || k.back() == '\r' || k.back() == ' ')) k.pop_back();
    if (k.size() < min_bytes) {
        explicit_bzero(k.data(), k.size());
        err = "secret file '" + path + "' holds " + std::to_string(k.size()) + " bytes; at least " +
              std::to_string(min_bytes) + " are needed (e.g. openssl rand -hex 32)";
        return "";
    }
    return k;
}

}  // namespace shardnet
