#include "spank/torch_env.hpp"

#include <cctype>

namespace shardnet {

std::vector<std::pair<const char *, std::string>> torch_env(const StepLayout &l) {
    const std::string rank = std::to_string(l.rank), world = std::to_string(l.world);
    // Attempts are numbered up to 1,000,000 (SHARDNET_ATTEMPT): the restarts
    // still to come while requeue is on, within the run's budget if it has one.
    const unsigned max_restarts = !l.requeue ? 0 : l.max_attempts ? (l.max_attempts > l.attempt ? l.max_attempts - l.attempt : 0) : 999999;
    return {
        {"RANK", rank},
        {"LOCAL_RANK", std::to_string(l.local_rank)},
        {"WORLD_SIZE", world},
        {"LOCAL_WORLD_SIZE", std::to_string(l.local_world)},
        {"GROUP_RANK", std::to_string(l.node_index)},
        {"GROUP_WORLD_SIZE", std::to_string(l.nodes)},
        {"ROLE_NAME", "default"},
        {"ROLE_RANK", rank},
        {"ROLE_WORLD_SIZE", world},
        {"MASTER_ADDR", l.master_addr},
        {"MASTER_PORT", std::to_string(l.master_port)},
        {"TORCHELASTIC_RUN_ID", l.run},
        // Every restart so far: the attempts before this one and the in-job
        // restarts within it (`shard launch`).
        {"TORCHELASTIC_RESTART_COUNT", std::to_string((l.attempt > 0 ? l.attempt - 1 : 0) + l.restart)},
        {"TORCHELASTIC_MAX_RESTARTS", std::to_string(max_restarts)},
    };
}

unsigned first_reserved_port(std::string_view resv) {
    unsigned port = 0;
    std::size_t i = 0;
    for (; i < resv.size() && std::isdigit(static_cast<unsigned char>(resv[i])); ++i) {
        port = port * 10 + unsigned(resv[i] - '0');
        if (port > 65535) return 0;
    }
    if (i == 0 || port == 0) return 0;
    if (i < resv.size() && resv[i] != '-' && resv[i] != ',') return 0;
    return port;
}

unsigned derived_port(std::string_view cluster, std::uint32_t job, std::uint32_t step) {
    // FNV-1a over cluster, job and step: clusters whose nodes share a host
    // number their jobs alike, so the cluster is part of it.
    std::uint64_t h = 1469598103934665603ULL;
    auto mix = [&h](unsigned char c) { h = (h ^ c) * 1099511628211ULL; };
    for (char c : cluster) mix(static_cast<unsigned char>(c));
    mix(0);
    for (int s = 0; s < 32; s += 8) mix(static_cast<unsigned char>(job >> s));
    for (int s = 0; s < 32; s += 8) mix(static_cast<unsigned char>(step >> s));
    return kDerivedPortLow + unsigned(h % kDerivedPorts);
}

bool is_host_address(std::string_view s) {
    if (s.empty() || s.size() > 255) return false;
    for (char c : s)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != ':' && c != '_') return false;
    return true;
}

}  // namespace shardnet
