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

TEST_CASE("shard show: a run's goodput, where its time went and each fault with its node, cause and cost") {
    const auto run = boost::json::parse(R"({"id":"r","state":"RUNNING","goodput":{"definition":"doc/goodput.md","start":1000,"end":null,
        "as_of":1700,"wall":700,"productive":250,"unsealed":50,"ratio":0.35714,
        "lost":{"startup":30,"redone":130,"detection":20,"placement":30,"queue_wait":120,"restart":70,"not_kept":0,"unattributed":0,"total":400},
        "faults":[{"attempt":1,"node":"n1/0","cause":"worker n1/0 missed 3 heartbeats\u001b[2J","failed_at":1240,"fault_at":1250,"resumed_from":"ck-2",
                   "in_job":false,"next_attempt":2,"recovered_at":1320,
                   "lost":{"redone":40,"detection":10,"placement":10,"queue_wait":40,"restart":20,"total":120}},
                  {"attempt":2,"node":"n2","cause":"c","failed_at":1490,"fault_at":1500,"resumed_from":null,"in_job":true,"next_attempt":null,
                   "recovered_at":null,"lost":{"redone":90,"detection":10,"placement":0,"queue_wait":0,"restart":50,"total":150}}]}})");
    CHECK(render_goodput(run) ==
          "goodput: 35.7% (productive 250.0 s of 700.0 s wall, so far; doc/goodput.md)\n"
          "  unsealed 50.0 s (since the last seal: at risk), lost 400.0 s: startup 30.0 s, redone 130.0 s, detection 20.0 s, "
          "placement 30.0 s, queue wait 120.0 s, restart 70.0 s\n"
          "  fault 1: attempt 1, n1/0 failed at +240.0 s (worker n1/0 missed 3 heartbeats?[2J)\n"
          "    recovered by attempt 2, from ck-2; lost 120.0 s (redone 40.0 s, detection 10.0 s, placement 10.0 s, queue wait 40.0 s, restart 20.0 s)\n"
          "  fault 2: attempt 2, n2 failed at +490.0 s (c)\n"
          "    relaunched in the job, from the start; lost 150.0 s (redone 90.0 s, detection 10.0 s, placement 0.0 s, queue wait 0.0 s, restart 50.0 s)\n");
    CHECK(render_goodput(boost::json::parse(R"({"id":"r"})")) == "");
    CHECK(render_goodput(boost::json::parse(R"([1])")) == "");
}
