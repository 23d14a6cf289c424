#include <doctest/doctest.h>
#include <cstdio>
#include <string>

#include "broker/api/heartbeat_body.hpp"

using namespace shardnet::broker;

namespace {
BodyError fails(const std::string &body) {
    HeartbeatBody hb;
    BodyError err;
    CHECK_FALSE(read_heartbeat(body, hb, err));
    return err;
}
}  // namespace

TEST_CASE("a heartbeat body is read in one pass: fields, ranks, highest step, exit of rank 0") {
    HeartbeatBody hb;
    BodyError err;
    const std::string body =
        R"({"run":"beta.7","attempt":2,"cluster":"beta","node":"beta1","job":41,"step":"batch","seq":9,"time":1.5,)"
        R"("interval":3,"state":"ended","requeue":"local","prelimit_signalled":false,"extra":{"step":99,"ranks":[1]},)"
        R"("ranks":[{"rank":0,"local_rank":0,"pid":7,"checkpointing":false,"step":12,"progress_age":0.5,"exit":{"code":3}},)"
        R"({"rank":1,"step":15,"checkpointing":true,"exit":{"signal":9}},{"rank":2,"step":null,"exit":null}]})";
    REQUIRE(read_heartbeat(body, hb, err));
    CHECK(hb.run == "beta.7");
    CHECK(hb.attempt == 2);
    CHECK(hb.cluster == "beta");
    CHECK(hb.node == "beta1");
    CHECK(hb.job == 41);
    CHECK(hb.step == "batch");
    CHECK(hb.interval == 3);
    CHECK(hb.state == "ended");
    CHECK(hb.requeue == "local");
    CHECK(hb.ranks == 3);
    REQUIRE(hb.top_step);
    CHECK(*hb.top_step == 15);   // not the 99 of an unknown object
    CHECK(hb.checkpointing);
    REQUIRE(hb.exit_code);
    CHECK(*hb.exit_code == 3);
    CHECK_FALSE(hb.exit_signal);  // rank 1's exit is not the batch script's
    CHECK_FALSE(hb.prelimit_signalled);
    CHECK_FALSE(hb.requeue_timeout);
}

TEST_CASE("the pre-limit signal and --shardnet-on-timeout as an agent says them") {
    HeartbeatBody hb;
    BodyError err;
    REQUIRE(read_heartbeat(R"({"run":"r","attempt":1,"node":"n","prelimit_signalled":true,"on_timeout":"requeue","ranks":[]})", hb, err));
    CHECK(hb.prelimit_signalled);
    CHECK(hb.requeue_timeout);
    HeartbeatBody fail;
    REQUIRE(read_heartbeat(R"({"run":"r","attempt":1,"node":"n","on_timeout":"fail","ranks":[]})", fail, err));
    CHECK_FALSE(fail.requeue_timeout);
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n","on_timeout":"always","ranks":[]})").message == "on_timeout: expected fail or requeue");
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n","on_timeout":1,"ranks":[]})").message == "on_timeout: expected a string");
    HeartbeatBody sp;
    REQUIRE(read_heartbeat(R"({"run":"r","attempt":1,"node":"n","spares":2,"straggler":"replace","ranks":[]})", sp, err));
    CHECK(sp.spares == 2);
    CHECK(sp.replace_stragglers);
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n","spares":65,"ranks":[]})").message == "spares: expected 0..64");
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n","spares":"1","ranks":[]})").message == "spares: expected an integer");
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n","straggler":"swap","ranks":[]})").message == "straggler: expected report or replace");
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n","prelimit_signalled":"yes","ranks":[]})").message ==
          "prelimit_signalled: expected true or false");
}

TEST_CASE("defaults, and an empty ranks array") {
    HeartbeatBody hb;
    BodyError err;
    REQUIRE(read_heartbeat(R"({"run":"r","attempt":1,"node":"n","ranks":[]})", hb, err));
    CHECK(hb.state == "running");
    CHECK(hb.interval == 10);
    CHECK(hb.requeue == "federated");
    CHECK(hb.ranks == 0);
    CHECK_FALSE(hb.top_step);
    CHECK_FALSE(hb.checkpointing);
}

TEST_CASE("nesting deeper than the reader keeps is skipped, and the fields after it are read") {
    HeartbeatBody hb;
    BodyError err;
    REQUIRE(read_heartbeat(R"({"run":"r","extra":[[[[[[[[[[{"node":"x","ranks":[{"step":99}]}]]]]]]]]]],)"
                           R"("attempt":2,"node":"n","ranks":[{"step":3}]})", hb, err));
    CHECK(hb.node == "n");
    CHECK(hb.attempt == 2);
    CHECK(hb.ranks == 1);
    REQUIRE(hb.top_step);
    CHECK(*hb.top_step == 3);
}

TEST_CASE("bad heartbeat bodies name what is wrong") {
    CHECK(fails("{not json").code == "bad_json");
    CHECK(fails("[1,2]").code == "bad_json");
    CHECK(fails("\"text\"").code == "bad_json");
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n","ranks":[]} trailing)").code == "bad_json");
    auto e = fails(R"({"run":"r","attempt":"one","node":"n","ranks":[]})");
    CHECK(e.code == "bad_field");
    CHECK(e.field == "attempt");
    CHECK(e.message == "attempt: expected an integer");
    CHECK(fails(R"({"run":"r","attempt":0,"node":"n","ranks":[]})").message == "attempt: expected 1..1000000");
    CHECK(fails(R"({"run":"r","attempt":1.5,"node":"n","ranks":[]})").field == "attempt");
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n","interval":0,"ranks":[]})").field == "interval");
    CHECK(fails(R"({"run":5,"attempt":1,"node":"n","ranks":[]})").message == "run: expected a string");
    CHECK(fails(R"({"run":{"a":1},"attempt":1,"node":"n","ranks":[]})").field == "run");
    CHECK(fails(R"({"attempt":1,"node":"n","ranks":[]})").message == "run: missing");
    CHECK(fails(R"({"run":"r","node":"n","ranks":[]})").message == "attempt: missing");
    CHECK(fails(R"({"run":"r","attempt":1,"ranks":[]})").message == "node: missing");
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n"})").message == "ranks: expected an array");
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n","ranks":{}})").message == "ranks: expected an array");
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n","ranks":[1]})").message == "ranks: expected objects");
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n","ranks":[[]]})").message == "ranks: expected objects");
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n","state":null,"ranks":[]})").field == "state");
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n","job":-1,"ranks":[]})").field == "job");
    CHECK(fails(R"({"run":"r","attempt":18446744073709551615,"node":"n","ranks":[]})").field == "attempt");
    // UTF-8: the kept strings are checked; the rest of the body is not kept.
    CHECK(fails("{\"run\":\"r\",\"attempt\":1,\"node\":\"n\xff\",\"ranks\":[]}").message == "node: not valid UTF-8");
    CHECK(fails("{\"run\":\"r\",\"attempt\":1,\"node\":\"n\",\"cluster\":\"\xc0\xaf\",\"ranks\":[]}").field == "cluster");
    HeartbeatBody hb;
    BodyError err;
    CHECK(read_heartbeat("{\"run\":\"r\",\"attempt\":1,\"node\":\"n\xc3\xb6\",\"note\":\"\xff\",\"ranks\":[]}", hb, err));
    CHECK(hb.node == "n\xc3\xb6");
}

TEST_CASE("a kept string with a control character is refused, naming the field") {
    // Escaped (\n, \u0000, ESC, other C0) or raw DEL: each would reach the
    // log, the database or a submitted job's environment.
    const char *fields[] = {"run", "node", "state", "step", "cluster", "requeue", "ckpt_dir"};
    const char *bad[] = {R"(a\nb)", R"(a\u0000b)", R"(\u001b[31mred)", R"(a\tb)", R"(a\rb)", R"(a\u001fb)", "a\x7f" "b", R"(a\u007fb)"};
    for (const char *f : fields)
        for (const char *v : bad) {
            const std::string body = std::string(R"({"run":"r","attempt":1,"node":"n","ranks":[],")") + f + R"(":")" + v + R"("})";
            CAPTURE(body);
            BodyError err = fails(body);
            CHECK(err.code == "bad_field");
            CHECK(err.field == f);
            CHECK(err.message == std::string(f) + ": control characters are not allowed");
        }
    // Printable text, UTF-8 included, is taken; strings not kept are not checked.
    HeartbeatBody hb;
    BodyError err;
    REQUIRE(read_heartbeat(R"({"run":"r","attempt":1,"node":"n","cluster":"alpha-ü","ckpt_dir":"/scratch/a b","note":"x\ny","ranks":[]})", hb, err));
    CHECK(hb.cluster == "alpha-ü");
    CHECK(hb.ckpt_dir == "/scratch/a b");
    // Invalid UTF-8 is still its own error.
    err = fails("{\"run\":\"r\",\"attempt\":1,\"node\":\"n\",\"cluster\":\"a\xc3\",\"ranks\":[]}");
    CHECK(err.field == "cluster");
    CHECK(err.message == "cluster: not valid UTF-8");
}

TEST_CASE("the printable-ASCII fast path agrees with a byte-by-byte check at every length and position") {
    // The fast path reads words (and, for short strings, overlapping
    // halves): one odd byte anywhere, at any length, must still be found.
    const unsigned char odd[] = {0x00, 0x01, 0x1f, 0x7f, 0x80, 0xc3, 0xff};
    for (std::size_t len = 1; len <= 20; ++len)
        for (std::size_t at = 0; at < len; ++at)
            for (unsigned char c : odd) {
                std::string v(len, 'a');
                v[at] = char(c);
                // Control bytes go through JSON's escape, the others raw.
                std::string json_v;
                for (unsigned char b : v) {
                    char esc[8];
                    if (b < 0x20) std::snprintf(esc, sizeof esc, "\\u%04x", b), json_v += esc;
                    else json_v += char(b);
                }
                const std::string body = R"({"run":"r","attempt":1,"node":")" + json_v + R"(","ranks":[]})";
                CAPTURE(len);
                CAPTURE(at);
                CAPTURE(int(c));
                HeartbeatBody hb;
                BodyError err;
                const bool ok = read_heartbeat(body, hb, err);
                // 0xc3 alone is a truncated UTF-8 sequence unless a
                // continuation byte follows, which 'a' is not.
                CHECK_FALSE(ok);
                CHECK(err.field == "node");
            }
    // The edges of printable ASCII are taken at every length.
    for (std::size_t len = 1; len <= 20; ++len)
        for (char c : {' ', '~', '!'}) {
            const std::string v(len, c);
            HeartbeatBody hb;
            BodyError err;
            CAPTURE(len);
            REQUIRE(read_heartbeat(R"({"run":"r","attempt":1,"node":")" + v + R"(","ranks":[]})", hb, err));
            CHECK(hb.node == v);
        }
}

TEST_CASE("a string as written is a view into the body; a decoded one is the body's own copy") {
    const std::string body = R"({"run":"r1","attempt":1,"node":"n\u0041\/x","cluster":"alpha","ranks":[]})";
    HeartbeatBody hb;
    BodyError err;
    REQUIRE(read_heartbeat(body, hb, err));
    CHECK(hb.run == "r1");
    CHECK(hb.cluster == "alpha");
    CHECK(hb.node == "nA/x");   // escapes decoded
    auto inside = [&](std::string_view v) { return v.data() >= body.data() && v.data() + v.size() <= body.data() + body.size(); };
    CHECK(inside(hb.run));
    CHECK(inside(hb.cluster));
    CHECK_FALSE(inside(hb.node));
    // A long escaped string (decoded in parts by the parser) is whole.
    std::string long_node;
    for (int i = 0; i < 3000; ++i) long_node += "\\u0041";
    HeartbeatBody hb2;
    REQUIRE(read_heartbeat(R"({"run":"r","attempt":1,"node":")" + long_node + R"(","ranks":[]})", hb2, err));
    CHECK(hb2.node == std::string(3000, 'A'));
}

TEST_CASE("fatal exit codes: a set of 1..255, at most 16; the earliest failed rank with one of them") {
    HeartbeatBody hb;
    BodyError err;
    // The codes after the ranks (an agent writes them before; neither order is assumed).
    REQUIRE(read_heartbeat(R"({"run":"r","attempt":1,"node":"n","step":"0","ranks":[)"
                           R"({"rank":4,"exit":{"code":1,"time":100.5}},{"rank":5,"exit":{"code":3,"time":101}},)"
                           R"({"rank":6,"exit":{"code":3,"time":100.9}},{"rank":7,"exit":{"signal":9,"time":99}}],"fatal_exit":[3,255,3]})",
                           hb, err));
    CHECK(hb.fatal_exit.count() == 2);
    CHECK(hb.fatal_exit.test(3));
    CHECK(hb.fatal_exit.test(255));
    REQUIRE(hb.first_failure);
    CHECK(hb.first_failure->rank == 7);   // the first to fail, by a signal
    REQUIRE(hb.fatal_failure);
    CHECK(hb.fatal_failure->rank == 6);   // the first whose code says "do not retry"
    CHECK(*hb.fatal_failure->code == 3);
    CHECK(hb.fatal_failure->time == doctest::Approx(100.9));
    // No code of the set: nothing fatal; no set: nothing fatal.
    HeartbeatBody none;
    REQUIRE(read_heartbeat(R"({"run":"r","attempt":1,"node":"n","fatal_exit":[2],"ranks":[{"rank":0,"exit":{"code":3}}]})", none, err));
    CHECK_FALSE(none.fatal_failure);
    HeartbeatBody unset;
    REQUIRE(read_heartbeat(R"({"run":"r","attempt":1,"node":"n","ranks":[{"rank":0,"exit":{"code":3}}]})", unset, err));
    CHECK(unset.fatal_exit.none());
    CHECK_FALSE(unset.fatal_failure);
    REQUIRE(read_heartbeat(R"({"run":"r","attempt":1,"node":"n","fatal_exit":[],"ranks":[]})", unset, err));
    CHECK(unset.fatal_exit.none());

    const std::string why = "fatal_exit: expected an array of at most 16 exit codes from 1 to 255";
    for (const char *bad : {"0", "256", "-1", "3.5", "\"3\"", "null", "true", "[3]", "{}"}) {
        const std::string body = std::string(R"({"run":"r","attempt":1,"node":"n","ranks":[],"fatal_exit":[1,)") + bad + "]}";
        CAPTURE(body);
        BodyError e = fails(body);
        CHECK(e.field == "fatal_exit");
        CHECK(e.message == why);
    }
    for (const char *bad : {"3", "\"3,7\"", "{\"a\":3}", "null"}) {
        const std::string body = std::string(R"({"run":"r","attempt":1,"node":"n","ranks":[],"fatal_exit":)") + bad + "}";
        CAPTURE(body);
        CHECK(fails(body).message == why);
    }
    std::string seventeen = "1";
    for (int c = 2; c <= 17; ++c) seventeen += "," + std::to_string(c);
    CHECK(fails(R"({"run":"r","attempt":1,"node":"n","ranks":[],"fatal_exit":[)" + seventeen + "]}").message == why);
    HeartbeatBody sixteen;
    REQUIRE(read_heartbeat(R"({"run":"r","attempt":1,"node":"n","ranks":[],"fatal_exit":[)" + seventeen.substr(0, seventeen.rfind(',')) + "]}",
                           sixteen, err));
    CHECK(sixteen.fatal_exit.count() == 16);
}

TEST_CASE("a stderr tail: the job's text with its line breaks, bounded, plain") {
    HeartbeatBody hb;
    BodyError err;
    REQUIRE(read_heartbeat(R"({"run":"r","attempt":1,"node":"n","step":"batch","state":"ended","ranks":[],)"
                           R"("stderr_tail":"Traceback (most recent call last):\n\tx = y\nValueError: \"b\u00e4d\" <img src=x onerror=alert(1)>"})",
                           hb, err));
    CHECK(hb.stderr_tail == "Traceback (most recent call last):\n\tx = y\nValueError: \"b\xc3\xa4" "d\" <img src=x onerror=alert(1)>");
    auto field = [](const std::string &json_string) {
        return std::string(R"({"run":"r","attempt":1,"node":"n","ranks":[],"stderr_tail":)") + json_string + "}";
    };
    // Any control character but newline and tab, C1 included.
    for (const char *bad : {R"("a\rb")", R"("\u001b[31mred")", R"("a\u0000b")", R"("a\u007fb")", R"("a\u009b2J")", R"("a\u0085b")"}) {
        CAPTURE(bad);
        BodyError e = fails(field(bad));
        CHECK(e.field == "stderr_tail");
        CHECK(e.message == "stderr_tail: control characters other than newline and tab are not allowed");
    }
    CHECK(fails(field("\"a\xff\"")).message == "stderr_tail: not valid UTF-8");
    CHECK(fails(field("\"a\xc2\"")).message == "stderr_tail: not valid UTF-8");
    CHECK(fails(field("3")).message == "stderr_tail: expected a string");
    CHECK(fails(field("[\"a\"]")).message == "stderr_tail: expected a string");
    // Bounds: 4096 bytes, 10 lines.
    HeartbeatBody big;
    REQUIRE(read_heartbeat(field("\"" + std::string(4096, 'x') + "\""), big, err));
    CHECK(big.stderr_tail.size() == 4096);
    CHECK(fails(field("\"" + std::string(4097, 'x') + "\"")).message == "stderr_tail: longer than 4096 bytes");
    HeartbeatBody ten;
    REQUIRE(read_heartbeat(field(R"("1\n2\n3\n4\n5\n6\n7\n8\n9\n10")"), ten, err));
    CHECK(fails(field(R"("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n")")).message == "stderr_tail: more than 10 lines");
}
