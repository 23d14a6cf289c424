#include "broker/util/token_gate.hpp"

namespace shardnet::broker {

std::shared_ptr<void> TokenGate::take(const std::string &token, int max) {
    std::lock_guard<std::mutex> lock(mu_);
    int &mine = by_token_[token];
    if (mine >= max) {
        if (mine == 0) by_token_.erase(token);
        return nullptr;
    }
    ++mine;
    std::weak_ptr<TokenGate> gate = weak_from_this();
    return std::shared_ptr<void>(static_cast<void *>(this), [gate, token](void *) {
        if (auto g = gate.lock()) {
            std::lock_guard<std::mutex> lock(g->mu_);
            if (auto it = g->by_token_.find(token); it != g->by_token_.end() && --it->second <= 0) g->by_token_.erase(it);
        }
    });
}

int TokenGate::held(const std::string &token) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_token_.find(token);
    return it == by_token_.end() ? 0 : it->second;
}

}  // namespace shardnet::broker
