// Fuzz target: the SPANK plugin's plugstack.conf arguments
// (common/plugstack_config.cpp). The input is one plugstack line after the
// plugin's path: words split on blanks, as Slurm splits them.
#include <cstdint>
#include <string>
#include <vector>

#include "common/plugstack_config.hpp"
#include "tests/fuzz/fuzz_assert.hpp"

using namespace shardnet;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    std::vector<std::string> words;
    std::string word;
    for (std::size_t i = 0; i <= size; ++i) {
        const char ch = i < size ? char(data[i]) : ' ';
        if (ch == ' ' || ch == '\t' || ch == '\n') {
            if (!word.empty()) words.push_back(std::move(word));
            word.clear();
        } else {
            word += ch;
        }
    }
    std::vector<const char *> argv;
    for (const auto &w : words) argv.push_back(w.c_str());
    argv.push_back(nullptr);
    PlugstackConfig cfg;
    const std::string err = parse_plugstack_args(int(words.size()), argv.data(), cfg);
    if (err.empty()) {
        FUZZ_CHECK(cfg.heartbeat_min <= cfg.heartbeat_default && cfg.heartbeat_default <= cfg.heartbeat_max,
                   "an accepted config has min <= default <= max heartbeat");
        const std::string &u = cfg.broker_url;
        const std::size_t host = u.rfind("https://", 0) == 0 ? 8 : 7;
        FUZZ_CHECK(u.empty() || ((u.rfind("http://", 0) == 0 || u.rfind("https://", 0) == 0) && u.size() > host),
                   "an accepted broker URL is http(s):// with a host");
    }
    return 0;
}
