// Slurm's JSON per data_parser version (broker/slurm/slurm_json.hpp): the
// shapes as captured from real daemons (tests/fixtures/slurm/, capture.sh)
// read to the same jobs, and an answer the broker cannot read is an error,
// never a job that is gone.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "broker/slurm/job_options.hpp"
#include "broker/slurm/slurm_job.hpp"
#include "broker/slurm/slurm_json.hpp"
#include "broker/slurm/slurm_view.hpp"
#include "tests/unit/fakes/service_fixture.hpp"

using namespace shardnet::broker;
namespace json = boost::json;

namespace {

std::string slurp(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

// Every captured answer, by data_parser version.
std::map<std::string, std::string> captured() {
    std::map<std::string, std::string> out;
    for (const auto &e : std::filesystem::directory_iterator(std::string(FIXTURES) + "/slurm")) {
        const std::string name = e.path().filename().string();
        if (name.starts_with("squeue-") && name.ends_with(".json")) out[name.substr(7, name.size() - 12)] = slurp(e.path().string());
    }
    return out;
}

// The id of the job of that name in an answer; 0 when none.
long long id_of(const std::string &text, const std::string &name) {
    const json::value doc = json::parse(text);
    for (const auto &j : doc.at("jobs").as_array())
        if (j.at("name") == json::value(name)) return j.at("job_id").to_number<long long>();
    return 0;
}

struct Seen {
    SlurmJob job;
    json::object options;
    std::vector<std::string> uncarried;
};

Seen read(const std::string &text, const std::string &name) {
    Seen s;
    const long long id = id_of(text, name);
    REQUIRE_MESSAGE(id > 0, "no job " << name << " in the fixture");
    json::object record;
    const JobRead r = find_slurm_job(text, id, s.job, &record);
    REQUIRE_MESSAGE(r.found(), name << ": " << r.why);
    read_job_options(record, s.options, s.uncarried);
    return s;
}

std::string opt(const Seen &s, const char *k) {
    auto *v = s.options.if_contains(k);
    return !v ? "(unset)" : v->is_string() ? std::string(v->as_string()) : json::serialize(*v);
}

// The answer with its data_parser version renamed.
std::string with_parser(std::string text, const std::string &from, const std::string &to) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("both Slurm releases' squeue --json are captured") {
    const auto answers = captured();
    CHECK(answers.count("v0.0.38"));   // Slurm 22.05 (Debian 12)
    CHECK(answers.count("v0.0.42"));   // Slurm 24.11 (Debian 13)
}

TEST_CASE("each captured data_parser version reads to the same jobs") {
    for (const auto &[parser, text] : captured()) {
        CAPTURE(parser);
        const Seen running = read(text, "fx-running");
        CHECK(running.job.state == "RUNNING");
        CHECK(running.job.user == "shardtest");
        CHECK(running.job.uid > 0);
        CHECK(running.job.node_count == 2);
        CHECK(running.job.tasks == 2);
        CHECK(running.job.submit_time > 1.6e9);
        CHECK(running.job.nodes == "alpha[1-2]");
        CHECK(running.job.batch_host == "alpha1");
        CHECK(running.job.comment == "keep this shardnet-decision:d1");
        // 22.05 gives the patterns (out-%j-%x.log), 24.11 the paths Slurm
        // filled in: the next attempt writes where the first did either way.
        const std::string id = std::to_string(running.job.id);
        CHECK(output_for_next_attempt(running.job).ends_with("/out-" + id + "-fx-running.log"));
        CHECK(error_for_next_attempt(running.job).ends_with("/err-" + id + ".log"));
        CHECK(opt(running, "partition") == "main");
        CHECK(opt(running, "time") == "10");
        CHECK(opt(running, "time_min") == "5");
        CHECK(opt(running, "mem") == "100");
        CHECK(opt(running, "gres") == "gpu:tesla:1");
        CHECK(opt(running, "nice") == "5");
        CHECK(opt(running, "comment") == "keep this");
        CHECK(opt(running, "job_name") == "fx-running");

        const Seen held = read(text, "fx-held");
        CHECK(held.job.state == "PENDING");
        CHECK(held.job.nodes == "");
        CHECK(opt(held, "partition") == "second");
        CHECK(opt(held, "exclusive") == "");
        CHECK(opt(held, "time") == "(unset)");   // UNLIMITED: the partition's, not a number to carry

        CHECK(read(text, "fx-completed").job.state == "COMPLETED");
        CHECK(read(text, "fx-failed").job.state == "FAILED");
        CHECK(read(text, "fx-cancelled").job.state == "CANCELLED");
        SlurmJob none;
        CHECK(find_slurm_job(text, 999999, none).lookup == JobLookup::absent);
        CHECK(submitted_for(text, "shardnet-decision:d1", running.job.uid) == id_of(text, "fx-running"));
    }
}

TEST_CASE("the options a requeue carries are the same read from either release") {
    const auto answers = captured();
    REQUIRE(answers.count("v0.0.38"));
    REQUIRE(answers.count("v0.0.42"));
    for (const char *name : {"fx-running", "fx-held", "fx-completed", "fx-failed", "fx-cancelled"}) {
        CAPTURE(name);
        Seen old_ = read(answers.at("v0.0.38"), name), new_ = read(answers.at("v0.0.42"), name);
        // 22.05 prints no cpus_per_task (the broker asks squeue -O for it).
        new_.options.erase("cpus_per_task");
        auto sorted = [](const json::object &o) {
            std::map<std::string, std::string> m;
            for (const auto &kv : o) m[std::string(kv.key())] = json::serialize(kv.value());
            std::string out;
            for (const auto &[k, v] : m) out += k + "=" + v + " ";
            return out;
        };
        CHECK(sorted(old_.options) == sorted(new_.options));
        auto joined = [](const std::vector<std::string> &v) {
            std::string out;
            for (const auto &x : v) out += x + "; ";
            return out;
        };
        CHECK(joined(old_.uncarried) == joined(new_.uncarried));
        CHECK(old_.job.state == new_.job.state);
        CHECK(old_.job.node_count == new_.job.node_count);
    }
}

TEST_CASE("an answer of a data_parser version the broker does not read is an error, not a job gone") {
    for (const auto &[parser, text] : captured()) {
        CAPTURE(parser);
        const std::string other = with_parser(text, parser, "v0.0.99");
        SlurmJob j;
        const JobRead r = find_slurm_job(other, id_of(text, "fx-running"), j);
        CHECK(r.lookup == JobLookup::unreadable);
        CHECK(r.why.find("data_parser v0.0.99 is not a version this broker reads") != std::string::npos);
        std::string why;
        CHECK(submitted_for(other, "shardnet-decision:d1", j.uid, &why) == -1);
        CHECK(why == r.why);
    }
    SlurmJob j;
    CHECK(find_slurm_job(R"({"jobs":[]})", 7, j).lookup == JobLookup::unreadable);   // names no version
    CHECK(find_slurm_job("not json", 7, j).lookup == JobLookup::unreadable);
}

TEST_CASE("24.11's job_state list reads as the word Slurm prints for it") {
    auto word = [](const char *list) { return job_state_word(json::parse(list).as_array()); };
    CHECK(word(R"(["RUNNING"])") == "RUNNING");
    CHECK(word(R"(["RUNNING","COMPLETING"])") == "COMPLETING");
    CHECK(word(R"(["PENDING","REQUEUED"])") == "REQUEUED");
    CHECK(word(R"(["COMPLETED","COMPLETING"])") == "COMPLETING");
    CHECK(word(R"(["PENDING","CONFIGURING"])") == "CONFIGURING");
    CHECK(word(R"(["OUT_OF_MEMORY"])") == "OUT_OF_MEMORY");
    CHECK(word(R"(["SOMETHING_NEW"])") == "");
    CHECK(word(R"([])") == "");
}

TEST_CASE("a 24.11 record whose state the broker does not know is unreadable") {
    const std::string text =
        R"({"meta":{"plugin":{"type":"","data_parser":"data_parser/v0.0.42"}},"jobs":[{"job_id":7,"user_id":1001,"group_id":1001,)"
        R"("job_state":["SOMETHING_NEW"],"node_count":{"set":true,"infinite":false,"number":1}}]})";
    SlurmJob j;
    const JobRead r = find_slurm_job(text, 7, j);
    CHECK(r.lookup == JobLookup::unreadable);
    CHECK(r.why.find("job_state") != std::string::npos);
    // A number of another shape is named too.
    const std::string odd =
        R"({"meta":{"plugin":{"type":"","data_parser":"data_parser/v0.0.42"}},"jobs":[{"job_id":7,"user_id":1001,"group_id":1001,)"
        R"("job_state":["RUNNING"],"node_count":{"value":1}}]})";
    const JobRead r2 = find_slurm_job(odd, 7, j);
    CHECK(r2.lookup == JobLookup::unreadable);
    CHECK(r2.why.find("node_count") != std::string::npos);
}

TEST_CASE("an unreadable answer leaves the job's state unknown, and /v1/health says so until one is read") {
    using shardnet::broker::testing::ServiceFixture;
    ServiceFixture f(std::map<std::string, std::string>{{"alpha", "/etc/fake/alpha.conf"}});
    f.start([](shardnet::broker::testing::FakeSlurm &s) {
        s.jobs["/etc/fake/alpha.conf"][7] = {};
        s.nodes["/etc/fake/alpha.conf"]["alpha1"] = "ALLOCATED";
        s.squeue_parser = "openapi/v0.0.99";
    });
    SlurmView v = ask_slurm(*f.slurm, "/etc/fake/alpha.conf", 7, "alpha1");
    CHECK(v.unreadable);
    CHECK(!v.controller_ok);
    CHECK(v.job_state == "");   // never "GONE"
    CHECK(v.error.find("v0.0.99") != std::string::npos);
    auto health = json::parse(f.call("GET", "/v1/health", "", "").body).as_object();
    CHECK(health.at("ok") == false);
    CHECK(json::value_to<std::string>(health.at("slurm_unreadable").at("alpha").at("error")).find("v0.0.99") != std::string::npos);
    auto clusters = json::parse(f.call("GET", "/v1/clusters").body).as_object();
    CHECK(clusters.at("clusters").at(0).as_object().contains("slurm_unreadable"));

    f.slurm->squeue_parser = "openapi/v0.0.38";
    v = ask_slurm(*f.slurm, "/etc/fake/alpha.conf", 7, "alpha1");
    CHECK(!v.unreadable);
    CHECK(v.controller_ok);
    health = json::parse(f.call("GET", "/v1/health", "", "").body).as_object();
    CHECK(health.at("ok") == true);
    CHECK(!health.contains("slurm_unreadable"));
}
