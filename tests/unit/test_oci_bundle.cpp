#include <doctest/doctest.h>
#include <boost/json.hpp>
#include <string>
#include <vector>

#include "spank/oci_bundle.hpp"

using namespace shardnet::oci;
namespace json = boost::json;

TEST_CASE("shardnet-oci-run finds and replaces the runtime's bundle argument") {
    size_t at = 0;
    std::vector<std::string> a{"crun", "--rootless=true", "run", "--bundle", "/spool/oci-job1-0/", "n1.u.1.0.0"};
    CHECK(bundle_arg(a, at) == "/spool/oci-job1-0/");
    set_bundle_arg(a, at, "/run/shardnet/x/oci-task-0");
    CHECK(a[4] == "/run/shardnet/x/oci-task-0");
    std::vector<std::string> b{"runc", "run", "--bundle=/b", "id"};
    CHECK(bundle_arg(b, at) == "/b");
    set_bundle_arg(b, at, "/c");
    CHECK(b[2] == "--bundle=/c");
    std::vector<std::string> c{"crun", "run", "-b", "/d", "id"};
    CHECK(bundle_arg(c, at) == "/d");
    std::vector<std::string> none{"crun", "run", "id"};
    CHECK(bundle_arg(none, at) == "");
}

TEST_CASE("the task's bundle config: its environment, its cwd, its dirs bind-mounted at the same paths") {
    const std::string env_text = std::string("PATH=/bin\0SLURM_PROCID=1\0SHARDNET_RANK=1\0PWD=/home/u/work/\0", 62) +
                                 std::string("SHARDNET_CKPT_DIR=/ckpt/u/run\0SHARDNET_PROGRESS=/run/shardnet/a.1.0.n1.x/rank-1\0", 80) +
                                 std::string("SHARDNET_OCI_ENV=/run/shardnet/a.1.0.n1.x/oci-task-0.env\0noequals\0", 67);
    const auto env = split_env(env_text);
    REQUIRE(env.size() == 7);
    const std::string config = R"({"ociVersion":"1.0.0","process":{"env":["SLURM_PROCID=0"],"cwd":"/","args":["sh"]},"root":{"path":"rootfs"},)"
                               R"("mounts":[{"destination":"/proc","type":"proc","source":"proc"},{"destination":"/ckpt/u/run","type":"bind","source":"/elsewhere"}]})";
    std::string err;
    const std::string out = task_config(config, "/spool/oci-job1-0", env, err);
    REQUIRE(err == "");
    const json::object c = json::parse(out).as_object();
    const auto &p = c.at("process").as_object();
    const auto &e = p.at("env").as_array();
    CHECK(e.size() == 6);   // SHARDNET_OCI_ENV is the runtime's, not the task's
    CHECK(std::find(e.begin(), e.end(), json::value("SLURM_PROCID=1")) != e.end());
    CHECK(std::find(e.begin(), e.end(), json::value("SLURM_PROCID=0")) == e.end());
    CHECK(p.at("cwd").as_string() == "/home/u/work");
    CHECK(c.at("root").at("path").as_string() == "/spool/oci-job1-0/rootfs");
    const auto &m = c.at("mounts").as_array();
    REQUIRE(m.size() == 6);   // the checkpoint dir is mounted by the bundle already: left as it is
    CHECK(m[0].at("destination").as_string() == "/tmp");   // the tmpfs mounts first
    CHECK(m[1].at("destination").as_string() == "/var/tmp");
    CHECK(m[3].at("source").as_string() == "/elsewhere");
    CHECK(m[4].at("destination").as_string() == "/home/u/work");   // the shorter path first
    CHECK(m[5].at("destination").as_string() == "/run/shardnet/a.1.0.n1.x");
    CHECK(m[5].at("source").as_string() == "/run/shardnet/a.1.0.n1.x");
    CHECK(m[5].at("type").as_string() == "bind");
    CHECK(task_config("not json", "/b", env, err) == "");
    CHECK(err != "");
    CHECK(task_config(R"({"root":{}})", "/b", env, err) == "");
}

TEST_CASE("the task's bundle config keeps the image's environment, the task's values winning by name") {
    const std::string config = R"({"process":{"env":["PATH=/opt/conda/bin:/usr/bin","CUDA_HOME=/usr/local/cuda","PYTHONPATH=/app",)"
                               R"("SLURM_PROCID=0","LD_LIBRARY_PATH=/usr/local/cuda/lib64"]},"root":{"path":"rootfs"}})";
    const std::vector<std::string> env{"SLURM_PROCID=3", "SHARDNET_RANK=3", "PYTHONPATH=/mine", "SHARDNET_OCI_ENV=/x/oci-task-0.env"};
    std::string err;
    const json::object c = json::parse(task_config(config, "/b", env, err)).as_object();
    REQUIRE(err == "");
    std::vector<std::string> got;
    for (const auto &x : c.at("process").at("env").as_array()) got.emplace_back(x.as_string());
    CHECK(got == std::vector<std::string>{"PATH=/opt/conda/bin:/usr/bin", "CUDA_HOME=/usr/local/cuda", "PYTHONPATH=/mine", "SLURM_PROCID=3",
                                          "LD_LIBRARY_PATH=/usr/local/cuda/lib64", "SHARDNET_RANK=3"});
    // The image's own (the user's bundle's config.json), under what Slurm generated and the task's.
    const auto image = config_env(R"({"process":{"env":["HF_HOME=/cache","PATH=/image/bin","=bad","noequals"]}})");
    CHECK(image == std::vector<std::string>{"HF_HOME=/cache", "PATH=/image/bin"});
    got.clear();
    const json::value merged = json::parse(task_config(R"({"process":{"env":["PATH=/bin"]},"root":{"path":"r"}})", "/b", {"A=1"}, err, image));
    for (const auto &x : merged.at("process").at("env").as_array()) got.emplace_back(x.as_string());
    CHECK(got == std::vector<std::string>{"HF_HOME=/cache", "PATH=/bin", "A=1"});
    CHECK(config_env("nope").empty());
}

TEST_CASE("the task's bundle config: the shared rootfs read-only, /tmp and /var/tmp the task's own tmpfs") {
    std::string err;
    const std::vector<std::string> env{"PWD=/tmp/work"};
    const json::object c = json::parse(task_config(
        R"({"process":{},"root":{"path":"/b/rootfs","readonly":false},"mounts":[{"destination":"/proc","type":"proc"},)"
        R"({"destination":"/tmp/slurm/startup","type":"none","source":"/spool/script"}]})", "/b", env, err)).as_object();
    REQUIRE(err == "");
    CHECK(c.at("root").at("readonly").as_bool());
    const auto &m = c.at("mounts").as_array();
    REQUIRE(m.size() == 5);
    CHECK(m[0].at("destination").as_string() == "/tmp");   // before Slurm's /tmp/slurm and the working dir under /tmp
    CHECK(m[0].at("type").as_string() == "tmpfs");
    CHECK(m[1].at("destination").as_string() == "/var/tmp");
    CHECK(m[3].at("destination").as_string() == "/tmp/slurm/startup");
    CHECK(m[4].at("destination").as_string() == "/tmp/work");
    // The bundle's own /tmp mount stands.
    const json::object own = json::parse(task_config(R"({"process":{},"root":{"path":"r"},"mounts":[{"destination":"/tmp/","type":"bind","source":"/scratch"}]})",
                                                     "/b", {}, err)).as_object();
    REQUIRE(own.at("mounts").as_array().size() == 2);
    CHECK(own.at("mounts").as_array()[0].at("destination").as_string() == "/var/tmp");
    CHECK(own.at("mounts").as_array()[1].at("source").as_string() == "/scratch");
    CHECK(task_config(R"({"process":{}})", "/b", {}, err) == "");   // no root: no bundle config
}

TEST_CASE("a user's own umoci bundle: its manifest digest for SHARDNET_IMAGE_DIGEST, unless the task has one") {
    const std::string hex(64, 'c');
    const std::string umoci = R"({"umoci_version":"2","from_descriptor_path":{"descriptor_walk":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:)" +
                              hex + R"(","size":349}]}})";
    CHECK(umoci_digest(umoci) == "sha256:" + hex);
    CHECK(umoci_digest(R"({"from_descriptor_path":{"descriptor_walk":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:12"}]}})") == "");
    CHECK(umoci_digest("{}") == "");
    CHECK(umoci_digest("nope") == "");
    static std::string seen, text;
    text = umoci;
    auto read = [](const std::string &path) { seen = path; return text; };
    std::vector<std::string> env{"SLURM_CONTAINER=/home/u/bundles/b/", "PATH=/bin"};
    add_bundle_digest(env, read);
    CHECK(seen == "/home/u/bundles/b/umoci.json");
    CHECK(env.back() == "SHARDNET_IMAGE_DIGEST=sha256:" + hex);
    std::vector<std::string> pinned{"SLURM_CONTAINER=/b", "SHARDNET_IMAGE_DIGEST=sha256:" + std::string(64, 'd')};
    add_bundle_digest(pinned, read);   // shard run's: the digest pinned at submit stands
    CHECK(pinned.size() == 2);
    std::vector<std::string> none{"PATH=/bin"};
    add_bundle_digest(none, read);
    CHECK(none.size() == 1);
}
