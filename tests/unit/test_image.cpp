#include <doctest/doctest.h>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "common/digest.hpp"
#include "sbatch-wrappers/image.hpp"
#include "sbatch-wrappers/spec.hpp"
#include "sbatch-wrappers/submit.hpp"

using namespace shardnet::cli;

namespace {

const std::string kHexA(64, 'a');

void write(const std::string &path, const std::string &text) { std::ofstream(path) << text; }

// A layout with two images (tags v1 and v2) whose manifests are MA and MB.
struct Layout {
    std::string dir, da, db;
    Layout() {
        char t[] = "/tmp/test-image-XXXXXX";
        dir = mkdtemp(t);
        ::mkdir((dir + "/blobs").c_str(), 0755);
        ::mkdir((dir + "/blobs/sha256").c_str(), 0755);
        const std::string ma = R"({"schemaVersion":2,"config":{},"layers":[],"x":"a"})", mb = R"({"schemaVersion":2,"config":{},"layers":[],"x":"b"})";
        da = "sha256:" + shardnet::sha256_hex(ma);
        db = "sha256:" + shardnet::sha256_hex(mb);
        write(dir + "/blobs/sha256/" + da.substr(7), ma);
        write(dir + "/blobs/sha256/" + db.substr(7), mb);
        write(dir + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
        index({{"v1", da}, {"v2", db}});
    }
    void index(std::initializer_list<std::pair<std::string, std::string>> tags) {
        std::string ms;
        for (const auto &[tag, d] : tags)
            ms += std::string(ms.empty() ? "" : ",") + R"({"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":")" + d +
                  R"(","size":10,"annotations":{"org.opencontainers.image.ref.name":")" + tag + R"("}})";
        write(dir + "/index.json", R"({"schemaVersion":2,"manifests":[)" + ms + "]}");
    }
    ~Layout() { (void)!std::system(("rm -rf " + dir).c_str()); }
};

}  // namespace

TEST_CASE("image references: oci:DIR[:TAG], oci:DIR@sha256:HEX, docker://REF; anything else refused, naming it") {
    image::Ref r;
    CHECK(image::parse("oci:/images/base:v1", r) == "");
    CHECK((r.transport == "oci" && r.dir == "/images/base" && r.tag == "v1" && r.digest.empty()));
    CHECK(image::parse("oci:/images/base", r) == "");
    CHECK((r.dir == "/images/base" && r.tag.empty()));
    CHECK(image::parse("oci:/images/base@sha256:" + kHexA, r) == "");
    CHECK((r.dir == "/images/base" && r.digest == "sha256:" + kHexA));
    CHECK(image::parse("oci:/a:b/base", r) == "");   // a colon in the path, no tag
    CHECK((r.dir == "/a:b/base" && r.tag.empty()));
    CHECK(image::parse("docker://registry.example/team/train:2.4", r) == "");
    CHECK((r.transport == "docker" && r.remote == "registry.example/team/train:2.4"));
    CHECK(image::parse("ubuntu:22.04", r).find("'ubuntu:22.04': expected oci:DIR") == 0);
    CHECK(image::parse("oci:/images/base@sha256:12", r).find("64 hex digits") != std::string::npos);
    CHECK(image::parse("oci:/images/base:v 1", r).find("no blanks") != std::string::npos);
    CHECK(image::parse("oci:/images/../base:v1", r) != "");
    CHECK(image::parse("oci:", r) != "");
    CHECK(image::parse("docker://", r) != "");
}

TEST_CASE("an oci: reference resolves to its manifest digest in the layout; a moved tag resolves anew, the pinned digest does not move") {
    Layout l;
    std::string pinned, digest;
    CHECK(image::resolve("oci:" + l.dir + ":v1", pinned, digest) == "");
    CHECK(digest == l.da);
    CHECK(pinned == "oci:" + l.dir + "@" + l.da);
    CHECK(image::resolve("oci:" + l.dir + ":v2", pinned, digest) == "");
    CHECK(digest == l.db);
    // The tag moves to the other image: the tag follows, the pin does not.
    l.index({{"v1", l.db}, {"old", l.da}});
    CHECK(image::resolve("oci:" + l.dir + ":v1", pinned, digest) == "");
    CHECK(digest == l.db);
    CHECK(image::resolve("oci:" + l.dir + "@" + l.da, pinned, digest) == "");
    CHECK(digest == l.da);
    // Two images and no tag: which one is the user's to say.
    CHECK(image::resolve("oci:" + l.dir, pinned, digest).find("holds 2 images; name one by tag (v1, old)") != std::string::npos);
    l.index({{"only", l.da}});
    CHECK(image::resolve("oci:" + l.dir, pinned, digest) == "");
    CHECK(digest == l.da);
}

TEST_CASE("a bad image reference says which, and why") {
    Layout l;
    std::string pinned, digest;
    CHECK(image::resolve("oci:" + l.dir + ":v3", pinned, digest) == "oci:" + l.dir + ":v3: no such image in the layout (its tags: v1, v2)");
    CHECK(image::resolve("oci:" + l.dir + "@sha256:" + kHexA, pinned, digest).find("@sha256:" + kHexA + ": no such image") != std::string::npos);
    CHECK(image::resolve("oci:/nonexistent/layout:v1", pinned, digest).find("oci:/nonexistent/layout:v1: no OCI image layout at /nonexistent/layout") == 0);
    ::unlink((l.dir + "/blobs/sha256/" + l.db.substr(7)).c_str());
    CHECK(image::resolve("oci:" + l.dir + ":v2", pinned, digest).find("the manifest blob of " + l.db + " is missing") != std::string::npos);
    write(l.dir + "/index.json", "{}");
    CHECK(image::resolve("oci:" + l.dir + ":v1", pinned, digest).find("is not an OCI image index") != std::string::npos);
    CHECK(pinned.empty());
}

TEST_CASE("a spec's image: checked when parsed; one task per node with it; pinned into the manifest and the batch script") {
    JobSpec s;
    CHECK(parse_spec("command: train\nimage: ubuntu\n", "s.yaml", s).find("s.yaml:2:8: image: 'ubuntu': expected oci:DIR") == 0);
    JobSpec t;
    CHECK(parse_spec("command: train\nimage: oci:/i:v1\ntasks_per_node: 4\n", "s.yaml", t).find("s.yaml:3:17: tasks_per_node: 4 with an image") == 0);
    JobSpec u;
    REQUIRE(parse_spec("name: c\ncommand: python3 train.py\nimage: oci:/i:v1\n", "s.yaml", u) == "");
    u.image_digest = "sha256:" + kHexA;
    u.image_pinned = "oci:/i@sha256:" + kHexA;
    auto m = manifest_of(u);
    CHECK(m.at("image").as_string() == "oci:/i:v1");
    CHECK(m.at("image_digest").as_string() == "sha256:" + kHexA);
    const std::string script = batch_script(u, "/usr/bin/shard");
    CHECK(script.find("export SHARDNET_IMAGE='oci:/i:v1' SHARDNET_IMAGE_DIGEST=sha256:" + kHexA + "\n") != std::string::npos);
    CHECK(script.find("bundle=$('/usr/bin/shard' bundle 'oci:/i@sha256:" + kHexA + "')") != std::string::npos);
    CHECK(script.find("exec srun --container=\"$bundle\" python3 train.py\n") != std::string::npos);
    u.spares = 1;   // shard launch's srun takes the bundle from SLURM_CONTAINER
    CHECK(batch_script(u, "/usr/bin/shard").find("export SLURM_CONTAINER=\"$bundle\"\nexec '/usr/bin/shard' launch -- python3 train.py") != std::string::npos);
    JobSpec plain;
    REQUIRE(parse_spec("command: train\n", "s.yaml", plain) == "");
    CHECK(batch_script(plain, "shard").find("bundle") == std::string::npos);
    CHECK(!manifest_of(plain).contains("image_digest"));
}
