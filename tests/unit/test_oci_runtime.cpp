#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "common/oci_runtime.hpp"

using namespace shardnet;

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

const std::string kRest = "RunTimeQuery=\"crun state %n\"\nRunTimeKill=\"crun kill -a %n SIGTERM\"\nRunTimeDelete=\"crun delete --force %n\"\n";

}  // namespace

TEST_CASE("oci.conf as Slurm's parser reads it: pairs, quotes, comments, continuations") {
    std::map<std::string, std::string> kv;
    CHECK(parse_oci_conf("RunTimeRun=\"/usr/bin/crun run --bundle %b %n.%u.%j.%s.%t\"\n"
                         "  runtimequery = \"x\"  # a comment\n"
                         "RunTimeKill=\"crun kill\" RunTimeDelete=crun\n"
                         "ContainerPath=\"/run/a\\#b\"\n"
                         "RunTimeStart=\"one \\\n two\"\n", kv) == "");
    CHECK(kv.at("runtimerun") == "/usr/bin/crun run --bundle %b %n.%u.%j.%s.%t");
    CHECK(kv.at("runtimequery") == "x");   // blanks around '=' as Slurm's pattern allows
    CHECK(kv.at("runtimekill") == "crun kill");
    CHECK(kv.at("runtimedelete") == "crun");
    CHECK(kv.at("containerpath") == "/run/a#b");        // \# is a '#'
    CHECK(kv.at("runtimestart") == "one  two");          // joined lines
    kv.clear();
    // '#' starts a comment even inside quotes: the quote then never ends.
    CHECK(parse_oci_conf("RunTimeRun=\"/opt/x --tag #1\"\n", kv) == "line 1: runtimerun: a quote that does not end");
    kv.clear();
    // An unquoted value ends at the first blank: what follows is no pair.
    CHECK(parse_oci_conf("RunTimeCreate=crun create --bundle %b\n", kv) == "line 1: 'create' is no KEY=VALUE");
}

TEST_CASE("the program a RunTime* command starts under /bin/sh -c") {
    CHECK(command_program("/usr/bin/crun run --bundle %b") == "/usr/bin/crun");
    CHECK(command_program("  crun run") == "crun");
    CHECK(command_program("FOO=1 BAR=x crun run") == "crun");
    CHECK(command_program("exec crun run") == "crun");
    CHECK(command_program("env -i PATH=/bin FOO=1 /opt/rt/crun run") == "/opt/rt/crun");
    CHECK(command_program("'/opt/my rt/crun' run") == "/opt/my rt/crun");
    CHECK(command_program("\"/opt/my rt/crun\" run") == "/opt/my rt/crun");
    CHECK(command_program("$HOME/crun run").empty());        // the shell decides: not judged
    CHECK(command_program("crun run; echo x").empty());
    CHECK(command_program("`which crun` run").empty());
    CHECK(command_program("").empty());
}

TEST_CASE("discover_oci: oci.conf beside slurm.conf, Slurm's two forms, and the program it starts") {
    TempDir d;
    const std::string slurm_conf = d.path + "/slurm.conf";
    OciSupport o = discover_oci(slurm_conf);
    CHECK(o.known);
    CHECK_FALSE(o.ready);
    CHECK(o.why == "no oci.conf beside " + slurm_conf);

    d.write("runtime", "#!/bin/sh\n", 0755);
    d.write("oci.conf", "RunTimeRun=\"" + d.path + "/runtime --rootless=true run --bundle %b %n.%u.%j.%s.%t\"\n" + kRest);
    o = discover_oci(slurm_conf);
    CHECK(o.ready);
    CHECK(o.oci_conf == d.path + "/oci.conf");
    CHECK(o.runtime == d.path + "/runtime");

    // The runtime it names is gone, or not executable: not ready, said so.
    ::chmod((d.path + "/runtime").c_str(), 0644);
    o = discover_oci(slurm_conf);
    CHECK_FALSE(o.ready);
    CHECK(o.why == d.path + "/oci.conf's RunTimeRun starts " + d.path + "/runtime, which is not an executable file");
    ::chmod((d.path + "/runtime").c_str(), 0755);

    // The create form, a program found on PATH.
    d.write("oci.conf", "RunTimeCreate=\"runtime create --bundle %b\"\nRunTimeStart=\"runtime start %n\"\n" + kRest);
    o = discover_oci(slurm_conf, "/nonexistent:" + d.path);
    CHECK(o.ready);
    CHECK(o.runtime == d.path + "/runtime");
    o = discover_oci(slurm_conf, "/nonexistent");
    CHECK_FALSE(o.ready);
    CHECK(o.why.find("RunTimeCreate starts runtime, which is not an executable file") != std::string::npos);

    // Forms Slurm refuses: neither, both, create without start, Query/Kill/Delete missing.
    for (const std::string &bad : {std::string("RunTimeQuery=\"crun state %n\"\n"),
                                   "RunTimeRun=\"runtime run\"\nRunTimeCreate=\"runtime create\"\nRunTimeStart=\"runtime start\"\n" + kRest,
                                   "RunTimeCreate=\"runtime create\"\n" + kRest, std::string("RunTimeRun=\"runtime run\"\n")}) {
        CAPTURE(bad);
        d.write("oci.conf", bad);
        o = discover_oci(slurm_conf, d.path);
        CHECK_FALSE(o.ready);
        CHECK(o.why.find("needs RunTimeRun, or RunTimeCreate and RunTimeStart") != std::string::npos);
    }
    d.write("oci.conf", "RunTimeRun=\"runtime run\"\n");
    CHECK(discover_oci(slurm_conf, d.path).why.find("(missing: runtimequery, runtimekill, runtimedelete)") != std::string::npos);
    // A file Slurm cannot parse.
    d.write("oci.conf", "RunTimeRun=runtime run --bundle %b\n" + kRest);
    o = discover_oci(slurm_conf, d.path);
    CHECK_FALSE(o.ready);
    CHECK(o.why == d.path + "/oci.conf: line 1: 'run' is no KEY=VALUE (Slurm refuses the file)");
    // A program the shell decides: ready, not judged.
    d.write("oci.conf", "RunTimeRun=\"$RT run\"\n" + kRest);
    o = discover_oci(slurm_conf, d.path);
    CHECK(o.ready);
    CHECK(o.runtime.empty());
    // Unreadable to the probe (not root): not known, never "missing".
    if (::geteuid() != 0) {
        d.write("oci.conf", "RunTimeRun=\"runtime run\"\n" + kRest, 0);
        o = discover_oci(slurm_conf, d.path);
        CHECK_FALSE(o.known);
    }
}
