// Fuzz target: the heartbeat body reader (broker/api/heartbeat_body.cpp),
// Boost.JSON's SAX parser with the broker's handler. Any bytes: a body or a
// bad_json / bad_field error that names what is wrong.
#include <cstdint>
#include <string_view>

#include "broker/api/heartbeat_body.hpp"
#include "tests/fuzz/fuzz_assert.hpp"

using namespace shardnet::broker;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    const std::string_view body(reinterpret_cast<const char *>(data), size);
    HeartbeatBody hb;
    BodyError err;
    if (read_heartbeat(body, hb, err)) {
        FUZZ_CHECK(err.code.empty(), "an accepted heartbeat carries no error");
        FUZZ_CHECK(hb.attempt >= 1 && hb.attempt <= 1000000, "an accepted attempt is within 1..1000000");
        FUZZ_CHECK(hb.interval >= 1 && hb.interval <= 86400, "an accepted interval is within 1..86400");
        FUZZ_CHECK(hb.job >= 0, "an accepted job id is not negative");
    } else {
        FUZZ_CHECK(err.code == "bad_json" || err.code == "bad_field", "a refused heartbeat is bad_json or bad_field");
        FUZZ_CHECK(!err.message.empty(), "a refused heartbeat says why");
        FUZZ_CHECK(err.code != "bad_field" || !err.field.empty(), "bad_field names the field");
    }
    return 0;
}
