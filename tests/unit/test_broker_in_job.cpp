// A restart report (POST /v1/runs/RUN/restarts) is the job's word: read
// strictly (broker/recovery/in_job_restarts.hpp).
#include <doctest/doctest.h>

#include "broker/recovery/in_job_restarts.hpp"

using namespace shardnet::broker;

TEST_CASE("a restart report is read strictly, each refusal naming its field") {
    RestartReport r;
    CHECK(read_restart_report(R"({"kind":"restarted","attempt":1,"restart":1,"dead":["a2"],"took":["a1"],"nodes":["a1","a3"],"spares":0,"relaunch_seconds":0.4})", r) == "");
    CHECK(r.dead == std::vector<std::string>{"a2"});
    CHECK(r.relaunch_seconds == doctest::Approx(0.4));
    RestartReport x;
    CHECK(read_restart_report("[]", x) == "body is not a JSON object");
    CHECK(read_restart_report(R"({"kind":"reboot","attempt":1})", x) == "kind: expected supervising, restarted, swapped or gave_up");
    CHECK(read_restart_report(R"({"kind":"supervising","attempt":1,"ended_step":"0;x"})", x) == "ended_step: a Slurm step id (1-10 digits)");
    CHECK(read_restart_report(R"({"kind":"swapped","attempt":1,"restart":1,"slow":["a2","a3"],"took":["a4"],"nodes":["a1"]})", x).find("a swap names its one slow node") == 0);
    CHECK(read_restart_report(R"({"kind":"supervising","attempt":0})", x).find("attempt") == 0);
    CHECK(read_restart_report(R"({"kind":"supervising","attempt":1,"extra":1})", x).find("extra") != std::string::npos);
    CHECK(read_restart_report(R"({"kind":"supervising","attempt":1,"nodes":["a1;reboot"]})", x) == "nodes: a node name is 1-128 of [A-Za-z0-9._-]");
    CHECK(read_restart_report(R"({"kind":"supervising","attempt":1,"nodes":"a1"})", x).find("nodes: expected a list") == 0);
    CHECK(read_restart_report(R"({"kind":"supervising","attempt":1,"nodes":["a1","a2","a1"]})", x) == "nodes: node a1 named twice");
    CHECK(read_restart_report(R"({"kind":"supervising","attempt":1,"spares":65})", x).find("spares") == 0);
    CHECK(read_restart_report(R"({"kind":"gave_up","attempt":1,"reason":"a\u001b[31m"})", x).find("reason") == 0);
    CHECK(read_restart_report(R"({"kind":"restarted","attempt":1,"restart":1,"dead":["a2"]})", x).find("a restart names its dead and new nodes") == 0);
    CHECK(read_restart_report(R"({"kind":"restarted","attempt":1,"restart":1,"dead":["a2"],"took":["a1"],"nodes":["a1"],"relaunch_seconds":-1})", x)
              .find("relaunch_seconds") == 0);
    // A job of 4096 nodes reports them all; one more is refused.
    std::string many = R"({"kind":"supervising","attempt":1,"nodes":[)";
    for (int i = 0; i < 4096; ++i) many += std::string(i ? "," : "") + "\"node-" + std::to_string(i) + "\"";
    CHECK(read_restart_report(many + "]}", x) == "");
    CHECK(x.nodes.size() == 4096);
    CHECK(read_restart_report(many + ",\"node-4096\"]}", x).find("at most 4096") != std::string::npos);
}

TEST_CASE("supervisions of runs that ended or moved on are forgotten; a held FAULT's is kept") {
    InJobRestarts j;
    j.by_run["ended"].attempt = 1;
    j.by_run["moved-on"].attempt = 1;
    j.by_run["live"].attempt = 2;
    j.by_run["held"].attempt = 1;
    j.by_run["held"].held = Fault{"held", "n1/0", 1, "missed heartbeats", WorkerState{}, FaultKind::silent};
    auto live = [](const std::string &run, long long attempt) { return run == "live" && attempt == 2; };
    j.prune(1000, live);
    CHECK(j.by_run.size() == 2);
    CHECK(j.by_run.count("live") == 1);
    CHECK(j.by_run.count("held") == 1);   // its hold still answers, or requeues
    j.by_run["later"].attempt = 1;
    j.prune(1030, live);                   // a minute apart at most
    CHECK(j.by_run.count("later") == 1);
    j.prune(1061, live);
    CHECK(j.by_run.count("later") == 0);
}
