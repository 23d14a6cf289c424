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
        // The job's own text and codes, as the broker keeps and shows them.
        FUZZ_CHECK(hb.stderr_tail.size() <= HeartbeatBody::kMaxStderrTail, "an accepted stderr tail is at most 4096 bytes");
        std::size_t lines = 1;
        for (unsigned char c : hb.stderr_tail) {
            lines += c == '\n';
            FUZZ_CHECK(c >= 0x20 || c == '\n' || c == '\t', "an accepted stderr tail has no control characters but newline and tab");
            FUZZ_CHECK(c != 0x7f, "an accepted stderr tail has no DEL");
        }
        FUZZ_CHECK(lines <= HeartbeatBody::kMaxStderrLines, "an accepted stderr tail has at most 10 lines");
        for (std::size_t i = 0; i + 1 < hb.stderr_tail.size(); ++i)
            FUZZ_CHECK(!(static_cast<unsigned char>(hb.stderr_tail[i]) == 0xc2 && (static_cast<unsigned char>(hb.stderr_tail[i + 1]) & 0xe0) == 0x80),
                       "an accepted stderr tail has no C1 control characters");
        FUZZ_CHECK(hb.fatal_exit.count() <= 16 && !hb.fatal_exit.test(0), "accepted fatal exit codes are at most 16 of 1..255");
        FUZZ_CHECK(!hb.fatal_failure || (hb.fatal_failure->code && hb.fatal_exit.test(std::size_t(*hb.fatal_failure->code))),
                   "a fatal failure's code is one of the fatal exit codes");
    } else {
        FUZZ_CHECK(err.code == "bad_json" || err.code == "bad_field", "a refused heartbeat is bad_json or bad_field");
        FUZZ_CHECK(!err.message.empty(), "a refused heartbeat says why");
        FUZZ_CHECK(err.code != "bad_field" || !err.field.empty(), "bad_field names the field");
    }
    return 0;
}
