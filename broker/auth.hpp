// Bearer tokens: looked up by their SHA-256 (tokens themselves are never
// stored), compared in constant time, each with its own rate bucket.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "config.hpp"

namespace shardnet::broker {

std::string sha256_hex(const std::string &data);

class Auth {
public:
    Auth(const std::vector<TokenEntry> &tokens, double rate, double burst);

    enum class Verdict { ok, missing, invalid, rate_limited };
    // entry is set when the verdict is ok.
    Verdict check(const std::string &bearer, const TokenEntry *&entry, double now);

private:
    struct Bucket {
        TokenEntry entry;
        std::mutex mu;
        double tokens, last;
    };
    std::unordered_map<std::string, std::unique_ptr<Bucket>> by_hash_;
    double rate_, burst_;
};

}  // namespace shardnet::broker
