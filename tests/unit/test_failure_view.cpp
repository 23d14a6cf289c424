#include <boost/json.hpp>
#include <doctest/doctest.h>

#include "sbatch-wrappers/failure_view.hpp"

using namespace shardnet::cli;

TEST_CASE("shard show of a FAILED run: the cause, and the stderr tail under it as text a terminal cannot take for commands") {
    const auto answer = boost::json::parse(R"({"events":[
        {"id":1,"time":1,"kind":"RUNNING","cause":"first heartbeat","evidence":{"attempt":1}},
        {"id":2,"time":2,"kind":"FAILED","cause":"rank 1 on beta2 exited 3 (the first rank to fail; every node alive); stderr: ValueError: x",
         "evidence":{"attempt":1,"stderr_tail":"Traceback (most recent call last):\n\tline 9\nValueError: x \u001b[2J\u009b2J <b>"}}]})");
    CHECK(render_failure(answer) ==
          "FAILED: rank 1 on beta2 exited 3 (the first rank to fail; every node alive); stderr: ValueError: x\n"
          "  last lines of the batch script's standard error:\n"
          "    | Traceback (most recent call last):\n"
          "    | \tline 9\n"
          "    | ValueError: x ?[2J?2J <b>\n");
    // A fatal exit ended the run first: the tail is the STDERR event's that followed it.
    const auto fatal = boost::json::parse(R"({"events":[
        {"id":1,"time":1,"kind":"FAILED","cause":"rank 1 on beta2 exited 3, which --shardnet-fatal-exit says is not to be retried","evidence":{"attempt":1}},
        {"id":2,"time":2,"kind":"STDERR","cause":"...","evidence":{"attempt":1,"stderr_tail":"KeyError: 'lr'"}}]})");
    CHECK(render_failure(fatal) == "FAILED: rank 1 on beta2 exited 3, which --shardnet-fatal-exit says is not to be retried\n"
                                   "  last lines of the batch script's standard error:\n"
                                   "    | KeyError: 'lr'\n");
    // No tail: the cause alone; no FAILED event (or no answer): nothing.
    CHECK(render_failure(boost::json::parse(R"J({"events":[{"kind":"FAILED","cause":"batch script exited 1 on a1 (every node alive)","evidence":"x"}]})J")) ==
          "FAILED: batch script exited 1 on a1 (every node alive)\n");
    CHECK(render_failure(boost::json::parse(R"({"events":[{"kind":"SUCCEEDED","cause":"ok","evidence":{}}]})")) == "");
    CHECK(render_failure(boost::json::parse(R"({"error":{}})")) == "");
    CHECK(render_failure(boost::json::parse(R"([1])")) == "");
}

TEST_CASE("shard show of a moved run: where it went and what became of it there, as the peer last told it") {
    const auto run = boost::json::parse(R"({"id":"r1","state":"MOVED","attempt":2,"onward":{"broker":"beta","attempt":2,"job":55,"status":"ok","as_of":1764748800,
        "run":{"id":"r1","state":"RECOVERED","attempt":2,"cluster":"b1","job":55,"attempts":[],"last_sealed":"ckpt-4","updated":5},
        "events":[{"id":1,"time":1,"kind":"RECEIVED","cause":"decision alpha:r1/attempt-2 from broker alpha","evidence":{}},
                  {"id":2,"time":2,"kind":"RECOVERED","cause":"every node \u001b[2J reports","evidence":{}}],"more":false}})");
    CHECK(render_onward(run) == "moved to broker beta: attempt 2 as job 55\n"
                                "  there: RECOVERED, attempt 2 on b1, job 55, last sealed ckpt-4 (as of 2025-12-03T08:00:00Z)\n"
                                "    RECEIVED: decision alpha:r1/attempt-2 from broker alpha\n"
                                "    RECOVERED: every node ?[2J reports\n");
    // The peer silent: the last story read stays, and the reason is said.
    const auto silent = boost::json::parse(R"({"state":"MOVED","onward":{"broker":"beta","attempt":2,"job":55,"status":"unreachable",
        "as_of":null,"error":"broker beta: Connection refused"}})");
    CHECK(render_onward(silent) == "moved to broker beta: attempt 2 as job 55\n"
                                   "  not read from broker beta now: broker beta: Connection refused\n");
    CHECK(render_onward(boost::json::parse(R"({"state":"RUNNING"})")) == "");
}
