#include <algorithm>
#include <boost/json.hpp>
#include <doctest/doctest.h>
#include <string>
#include <vector>

#include "broker/slurm/slurm_job.hpp"

using namespace shardnet::broker;

namespace {
// The shape of Slurm 22.05's `squeue --json` (fields this broker reads).
std::string squeue(const std::string &jobs) {
    return R"({"meta":{"plugin":{"type":"openapi\/v0.0.38"}},"errors":[],"jobs":[)" + jobs + "]}";
}
std::string job(long long id, long long uid, const std::string &name, const std::string &more = "") {
    return R"({"job_id":)" + std::to_string(id) + R"(,"user_id":)" + std::to_string(uid) + R"(,"group_id":)" + std::to_string(uid) +
           R"(,"user_name":"u)" + std::to_string(uid) + R"(","name":)" + name +
           R"(,"job_state":"RUNNING","cluster":"alpha","current_working_directory":"\/home\/u","standard_output":"",)"
           R"("nodes":"alpha[1-2]","batch_host":"alpha1","comment":"","node_count":2,"tasks":4,"submit_time":1796112351)" + more + "}";
}
}  // namespace

TEST_CASE("a job's owner comes from Slurm's numbers, whatever its name says") {
    // The name that posed as root in scontrol's text (UserId=(00) before the real one).
    const std::string text = squeue(job(7, 1001, R"("x UserId=(00) GroupId=(00) JobState=COMPLETED x")") + "," + job(8, 0, R"("y")"));
    SlurmJob j;
    REQUIRE(find_slurm_job(text, 7, j).found());
    CHECK(j.uid == 1001);
    CHECK(j.gid == 1001);
    CHECK(j.user == "u1001");
    CHECK(j.state == "RUNNING");
    CHECK(j.name == "x UserId=(00) GroupId=(00) JobState=COMPLETED x");
    CHECK(j.nodes == "alpha[1-2]");
    CHECK(j.node_count == 2);
    CHECK(j.tasks == 4);
    CHECK(find_slurm_job(text, 9, j).lookup == JobLookup::absent);
    CHECK(find_slurm_job(text, 9, j).why.find("not known") != std::string::npos);
    CHECK(find_slurm_job("not json", 7, j).lookup == JobLookup::unreadable);
    CHECK(find_slurm_job(R"({"jobs":5})", 7, j).lookup == JobLookup::unreadable);
    // A wrong type is named, never taken as a default.
    CHECK(find_slurm_job(squeue(R"({"job_id":7,"user_id":"0","group_id":0})"), 7, j).why.find("user_id") != std::string::npos);
    CHECK(find_slurm_job(squeue(R"({"job_id":7,"group_id":0})"), 7, j).why.find("user_id: missing") != std::string::npos);
    // A record the broker cannot read is unreadable, never absent.
    CHECK(find_slurm_job(squeue(R"({"job_id":7,"group_id":0})"), 7, j).lookup == JobLookup::unreadable);
    CHECK(find_slurm_job(squeue(R"({"job_id":7,"user_id":-1,"group_id":0})"), 7, j).lookup == JobLookup::unreadable);
    CHECK(!find_slurm_job(squeue(R"({"job_id":7.5,"user_id":1,"group_id":1})"), 7, j).found());
}

TEST_CASE("the next attempt writes where the first did") {
    SlurmJob j;
    j.id = 41;
    j.user = "alice";
    j.name = "train";
    j.workdir = "/home/alice/w";
    j.stdout_pattern = "/scratch/out-%j-%u-%x-%N.%%log";
    CHECK(output_for_next_attempt(j) == "/scratch/out-41-alice-train-%N.%log");
    j.stdout_pattern = "rel/%A.out";
    CHECK(output_for_next_attempt(j) == "/home/alice/w/rel/41.out");
    j.stdout_pattern = "";
    CHECK(output_for_next_attempt(j) == "/home/alice/w/slurm-41.out");
}

TEST_CASE("the broker submits only as an ordinary user") {
    CHECK(submit_identity_error(1001, 1001, 1000, 64030) == "");
    CHECK(submit_identity_error(0, 1001, 1000, 64030).find("root") != std::string::npos);
    CHECK(submit_identity_error(1001, 0, 1000, 64030).find("root") != std::string::npos);
    CHECK(submit_identity_error(64030, 64030, 1000, 64030).find("SlurmUser") != std::string::npos);
    CHECK(submit_identity_error(999, 999, 1000, -1).find("min_uid 1000") != std::string::npos);
    CHECK(submit_identity_error(-1, 5, 1000, -1) != "");
    CHECK(slurm_user_uid("Configuration data\nSlurmUser               = slurm(64030)\nSlurmdUser = root(0)\n") == 64030);
    CHECK(slurm_user_uid("Configuration data\nSlurmdUser = root(0)\n") == -1);
    CHECK(sbatch_path_error("workdir", "/home/a") == "");
    CHECK(sbatch_path_error("workdir", "rel").find("absolute") != std::string::npos);
    CHECK(sbatch_path_error("stdout", "/a\n--uid=0").find("control") != std::string::npos);
}

TEST_CASE("a redelivered decision's job counts only when its owner is the decision's user") {
    const std::string text = squeue(job(5, 1002, R"("x")", R"(,"comment":"shardnet-decision:d1")") + "," +
                                    job(6, 1001, R"("y")", R"(,"comment":"shardnet-decision:d1")"));
    // (job() writes comment "" first; the later key wins in Boost.JSON's object)
    CHECK(submitted_for(text, "shardnet-decision:d1", 1001) == 6);
    CHECK(submitted_for(text, "shardnet-decision:d1", 1003) == 0);
    CHECK(submitted_for(text, "shardnet-decision:d2", 1001) == 0);
}

TEST_CASE("another user's job in raw bytes never blinds the broker to the cluster: read as bytes, each record made valid UTF-8") {
    // Slurm 22.05 writes a job's name, comment and paths as the bytes it was
    // given: `sbatch --hold -J $'x\xffy'` made the whole answer invalid UTF-8,
    // and every job of the cluster unreadable (issue 43).
    const std::string raw_name = "\"x\xffy\"";
    const std::string text = squeue(job(5, 1002, raw_name, ",\"comment\":\"c\xfe\"") + "," + job(7, 1001, R"("train")"));
    SlurmJob j;
    const JobRead other = find_slurm_job(text, 7, j);
    REQUIRE(other.found());
    CHECK(j.uid == 1001);
    CHECK(j.name == "train");
    CHECK(other.not_utf8.empty());
    // The job itself is read too; what was not UTF-8 is named and replaced.
    boost::json::object record;
    const JobRead raw = find_slurm_job(text, 5, j, &record);
    REQUIRE(raw.found());
    CHECK(j.uid == 1002);
    CHECK(j.name == "x\xEF\xBF\xBDy");
    CHECK(j.comment == "c\xEF\xBF\xBD");
    std::vector<std::string> named = raw.not_utf8;
    std::sort(named.begin(), named.end());
    CHECK(named == std::vector<std::string>{"comment", "name"});
    CHECK(record.at("name").as_string() == "x\xEF\xBF\xBDy");
    // Bytes that end a string in the middle of a character, or a path.
    const std::string cut = squeue(job(8, 1003, "\"ab\xe2\x82\"", ",\"current_working_directory\":\"/home/\xc3\""));
    const JobRead c = find_slurm_job(cut, 8, j);
    REQUIRE(c.found());
    CHECK(j.name == "ab\xEF\xBF\xBD\xEF\xBF\xBD");
    CHECK(j.workdir == "/home/\xEF\xBF\xBD");
    CHECK(std::find(c.not_utf8.begin(), c.not_utf8.end(), "current_working_directory") != c.not_utf8.end());
    // A comment marker is still found among raw bytes.
    CHECK(submitted_for(squeue(job(9, 1004, raw_name, ",\"comment\":\"\xff shardnet-decision:d1:n1\"")), "shardnet-decision:d1:n1", 1004) == 9);
}
