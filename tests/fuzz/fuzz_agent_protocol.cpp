// Fuzz target: the plugin-to-agent line protocol (common/agent_protocol.cpp).
// The input is what the agent reads on its stdin: config lines up to "end",
// then event lines. A config the parser accepts and the encoder writes
// again must read back the same.
#include <cstdint>
#include <sstream>
#include <string>

#include "common/agent_protocol.hpp"
#include "tests/fuzz/fuzz_assert.hpp"

using namespace shardnet;

namespace {

bool same(const AgentConfig &a, const AgentConfig &b) {
    if (a.ranks.size() != b.ranks.size()) return false;
    for (std::size_t i = 0; i < a.ranks.size(); ++i)
        if (a.ranks[i].rank != b.ranks[i].rank || a.ranks[i].local_rank != b.ranks[i].local_rank) return false;
    return a.url == b.url && a.token == b.token && a.ca_file == b.ca_file && a.run == b.run && a.attempt == b.attempt &&
           a.cluster == b.cluster && a.node == b.node && a.nodelist == b.nodelist && a.nodeid == b.nodeid &&
           a.job == b.job && a.step == b.step && a.interval == b.interval && a.timeout_ms == b.timeout_ms &&
           a.prelimit_signal == b.prelimit_signal && a.prelimit_secs == b.prelimit_secs &&
           a.progress_dir == b.progress_dir && a.requeue == b.requeue && a.ckpt_dir == b.ckpt_dir && a.world == b.world;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    std::istringstream in(std::string(reinterpret_cast<const char *>(data), size));
    AgentConfigParser parser;
    bool refused = false;
    std::string line;
    while (!parser.done() && std::getline(in, line)) {
        const std::string err = parser.feed(line);
        if (!err.empty()) {
            FUZZ_CHECK(err.find('\n') == std::string::npos, "an agent config error is one line");
            refused = true;
            break;
        }
    }
    while (std::getline(in, line)) {
        if (auto ev = parse_agent_event(line))
            FUZZ_CHECK(ev->kind == AgentEvent::pid || ev->kind == AgentEvent::exit, "an event is pid or exit");
    }
    if (refused || !parser.done()) return 0;
    std::string encoded;
    if (!encode_agent_config(parser.config(), encoded).empty()) return 0;   // e.g. no step: the plugin always writes one
    std::istringstream again(encoded);
    AgentConfigParser back;
    while (!back.done() && std::getline(again, line))
        FUZZ_CHECK(back.feed(line).empty(), "the encoder writes only lines the parser accepts");
    FUZZ_CHECK(back.done(), "the encoded config ends with 'end'");
    FUZZ_CHECK(same(parser.config(), back.config()), "an encoded config reads back the same");
    return 0;
}
