#include "broker/util/log.hpp"

#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstdio>

namespace shardnet::broker {

void log_json(const char *level, const char *msg, boost::json::object fields) noexcept {
    // Building the line may itself throw (memory): then a fixed line.
    try {
        fields["t"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        fields["level"] = level;
        fields["msg"] = msg;
        const std::string line = boost::json::serialize(fields) + "\n";
        std::fwrite(line.data(), 1, line.size(), stderr);   // one write: lines from threads do not mix
    } catch (...) {
        std::fprintf(stderr, "{\"level\":\"%s\",\"msg\":\"(a log line could not be built)\"}\n", level);
    }
}

}  // namespace shardnet::broker
