#include "broker/util/log.hpp"

#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstdio>

#include "common/parse_util.hpp"

namespace shardnet::broker {

void log_json(const char *level, const char *msg, boost::json::object fields) noexcept {
    // Building the line may itself throw (memory): then a fixed line.
    try {
        fields["t"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        fields["level"] = level;
        fields["msg"] = msg;
        // Valid UTF-8 whatever a job, Slurm or a peer wrote into a field
        // (the JSON's own structure is ASCII: only strings change).
        std::string line = boost::json::serialize(fields) + "\n";
        make_valid_utf8(line);
        std::fwrite(line.data(), 1, line.size(), stderr);   // one write: lines from threads do not mix
    } catch (...) {
        std::fprintf(stderr, "{\"level\":\"%s\",\"msg\":\"(a log line could not be built)\"}\n", level);
    }
}

}  // namespace shardnet::broker
