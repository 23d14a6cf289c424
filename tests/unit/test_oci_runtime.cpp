#include <doctest/doctest.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "hwloc-probe/oci_runtime.hpp"

using namespace shardnet::probe;

namespace {

struct TempDir {
    std::string path;
    TempDir() {
        char t[] = "/tmp/oci-runtime-XXXXXX";
        path = ::mkdtemp(t);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    void write(const std::string &name, const std::string &text, mode_t mode = 0644) const {
        std::ofstream(path + "/" + name) << text;
        ::chmod((path + "/" + name).c_str(), mode);
    }
};

}  // namespace

TEST_CASE("oci.conf lines as Slurm reads them: any case, quotes, comments") {
    std::string k, v;
    CHECK(oci_conf_line(R"(RunTimeRun="/usr/bin/crun run --bundle %b %n.%u.%j.%s.%t")", k, v));
    CHECK(k == "RunTimeRun");
    CHECK(v == "/usr/bin/crun run --bundle %b %n.%u.%j.%s.%t");
    CHECK(oci_conf_line("  runtimecreate = crun create --bundle %b  # the create form", k, v));
    CHECK(k == "runtimecreate");
    CHECK(v == "crun create --bundle %b");
    CHECK(oci_conf_line(R"(RunTimeRun="/opt/x --tag '#1'" # after)", k, v));
    CHECK(v == "/opt/x --tag '#1'");
    CHECK_FALSE(oci_conf_line("# RunTimeRun=/usr/bin/crun", k, v));
    CHECK_FALSE(oci_conf_line("   ", k, v));
    CHECK_FALSE(oci_conf_line("IgnoreFileConfigJson", k, v));
}

TEST_CASE("discover_oci: oci.conf beside slurm.conf and the program it starts") {
    TempDir d;
    const std::string slurm_conf = d.path + "/slurm.conf";
    OciSupport o = discover_oci(slurm_conf);
    CHECK_FALSE(o.ready);
    CHECK(o.why == "no oci.conf beside " + slurm_conf);

    d.write("runtime", "#!/bin/sh\n", 0755);
    d.write("oci.conf", "OCIPattern=\"^/srv/bundles/\"\nRunTimeRun=\"" + d.path + "/runtime --rootless=true run --bundle %b %n.%u.%j.%s.%t\"\n");
    o = discover_oci(slurm_conf);
    CHECK(o.ready);
    CHECK(o.oci_conf == d.path + "/oci.conf");
    CHECK(o.runtime == d.path + "/runtime");

    // The runtime it names is gone, or not executable: not ready, said so.
    ::chmod((d.path + "/runtime").c_str(), 0644);
    o = discover_oci(slurm_conf);
    CHECK_FALSE(o.ready);
    CHECK(o.why == d.path + "/oci.conf's RunTimeRun starts " + d.path + "/runtime, which is not an executable file");

    // The create form, a program found on PATH.
    d.write("oci.conf", "RunTimeCreate=runtime create --bundle %b %n.%u.%j.%s.%t\nRunTimeStart=runtime start %n.%u.%j.%s.%t\n");
    ::chmod((d.path + "/runtime").c_str(), 0755);
    o = discover_oci(slurm_conf, "/nonexistent:" + d.path);
    CHECK(o.ready);
    CHECK(o.runtime == d.path + "/runtime");
    o = discover_oci(slurm_conf, "/nonexistent");
    CHECK_FALSE(o.ready);
    CHECK(o.why.find("RunTimeCreate starts runtime, which is not an executable file") != std::string::npos);

    // Neither command.
    d.write("oci.conf", "# nothing here\nRunTimeQuery=crun state %n.%u.%j.%s.%t\n");
    o = discover_oci(slurm_conf);
    CHECK_FALSE(o.ready);
    CHECK(o.why == d.path + "/oci.conf has neither RunTimeRun nor RunTimeCreate");
}
