// How many requests of a kind each token has in flight. take() gives a
// ticket that gives its place back when it goes (whenever the answer is
// done, or the request dropped), or none when the token holds max already:
// one token's flood waits its turn instead of holding every connection
// and the store thread (limits.requests_per_token, list_requests_per_token).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace shardnet::broker {

class TokenGate : public std::enable_shared_from_this<TokenGate> {
public:
    explicit TokenGate(int max) : max_(max) {}
    std::shared_ptr<void> take(const std::string &token) { return take(token, max_); }
    // A budget of this token's own (a job's: its size).
    std::shared_ptr<void> take(const std::string &token, int max);
    int held(const std::string &token) const;
    int max() const { return max_; }

private:
    mutable std::mutex mu_;
    const int max_;
    std::map<std::string, int> by_token_;
};

}  // namespace shardnet::broker
