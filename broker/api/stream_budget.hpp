// Open event streams, per token and in all (api/runs.cpp): shared with
// each stream's slot, which may outlive the service by a moment.
#pragma once
#include <map>
#include <mutex>
#include <string>

namespace shardnet::broker {

struct StreamBudget {
    std::mutex streams_mu;   // over by_token and total
    std::map<std::string, int> by_token;
    int total = 0;
    // The streams open now.
    int open() {
        std::lock_guard<std::mutex> lock(streams_mu);
        return total;
    }
};

}  // namespace shardnet::broker
