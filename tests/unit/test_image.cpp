#include <doctest/doctest.h>
#include <algorithm>
#include <cstdlib>
#include <iterator>
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
    // A digest after @ is checked here (it used to abort shard later).
    CHECK(image::parse("docker://foo@bar", r).find("64 hex digits") != std::string::npos);
    CHECK(image::parse("docker://reg/foo@", r).find("64 hex digits") != std::string::npos);
    CHECK(image::parse("docker://reg/foo@sha256:" + kHexA, r) == "");
    CHECK(image::parse("docker://@sha256:" + kHexA, r) != "");
    CHECK(image::parse("docker://reg/foo:b@d!", r) != "");
}

namespace {

// A PATH of stubs: TOOL scripts in a dir of their own, with chmod and rm
// (what shard itself runs beside them) and nothing else.
struct Stubs {
    std::string dir, old_path, old_bundles, old_images;
    Stubs() {
        char t[] = "/tmp/test-image-stubs-XXXXXX";
        dir = mkdtemp(t);
        for (const char *tool : {"chmod", "rm", "mkdir", "cp", "sh", "dirname"})
            for (const char *where : {"/usr/bin/", "/bin/"})
                if (::access((std::string(where) + tool).c_str(), X_OK) == 0) {
                    (void)!::symlink((std::string(where) + tool).c_str(), (dir + "/" + tool).c_str());
                    break;
                }
        old_path = std::getenv("PATH");
        const char *b = std::getenv("SHARDNET_BUNDLE_CACHE"), *i = std::getenv("SHARDNET_IMAGE_CACHE");
        old_bundles = b ? b : "";
        old_images = i ? i : "";
        ::setenv("PATH", dir.c_str(), 1);
        ::mkdir((dir + "/bundles").c_str(), 0700);
        ::mkdir((dir + "/images").c_str(), 0700);
        ::setenv("SHARDNET_BUNDLE_CACHE", (dir + "/bundles").c_str(), 1);
        ::setenv("SHARDNET_IMAGE_CACHE", (dir + "/images").c_str(), 1);
    }
    void tool(const std::string &name, const std::string &body) {
        write(dir + "/" + name, "#!/bin/sh\n" + body);
        ::chmod((dir + "/" + name).c_str(), 0755);
    }
    std::string read(const std::string &name) const {
        std::ifstream f(dir + "/" + name);
        return std::string(std::istreambuf_iterator<char>(f), {});
    }
    ~Stubs() {
        ::setenv("PATH", old_path.c_str(), 1);
        if (old_bundles.empty()) ::unsetenv("SHARDNET_BUNDLE_CACHE"); else ::setenv("SHARDNET_BUNDLE_CACHE", old_bundles.c_str(), 1);
        if (old_images.empty()) ::unsetenv("SHARDNET_IMAGE_CACHE"); else ::setenv("SHARDNET_IMAGE_CACHE", old_images.c_str(), 1);
        (void)!std::system(("chmod -R u+rwX " + dir + "; rm -rf " + dir).c_str());
    }
};

// umoci unpack --rootless --image LAYOUT:TAG DIR, as far as shard uses it:
// a bundle in DIR whose dirs are 0555, as rootless umoci leaves them.
const char *kUmoci = "echo \"$@\" >> \"$(dirname \"$0\")/umoci.calls\"\n"
                     "for a; do out=$a; done\n"
                     "mkdir -p \"$out/rootfs/etc\" && echo '{}' > \"$out/config.json\" && chmod 0555 \"$out/rootfs/etc\" \"$out/rootfs\"\n";

}  // namespace

TEST_CASE("shard bundle: unpacked once per digest, then used as it is; what a dead unpack left goes") {
    Layout l;
    Stubs s;
    s.tool("umoci", kUmoci);
    const std::string hex = l.da.substr(7), cache = s.dir + "/bundles";
    // A killed unpack's leftovers, 0555 inside as umoci leaves them.
    const std::string stale = cache + "/." + hex + ".unpack.99999", stale_layout = cache + "/." + hex + ".layout.99999";
    ::mkdir(stale.c_str(), 0700);
    ::mkdir((stale + "/rootfs").c_str(), 0555);
    ::mkdir(stale_layout.c_str(), 0700);
    ::chmod(stale.c_str(), 0555);
    std::string dir;
    REQUIRE(image::bundle("oci:" + l.dir + "@" + l.da, dir) == "");
    CHECK(dir == cache + "/" + hex);
    struct stat st;
    CHECK(::stat((dir + "/config.json").c_str(), &st) == 0);
    CHECK(::lstat(stale.c_str(), &st) != 0);
    CHECK(::lstat(stale_layout.c_str(), &st) != 0);
    CHECK(::lstat((cache + "/." + hex + ".unpack." + std::to_string(::getpid())).c_str(), &st) != 0);
    CHECK(::lstat((cache + "/." + hex + ".layout." + std::to_string(::getpid())).c_str(), &st) != 0);
    // Its layout named the pinned manifest only.
    CHECK(s.read("umoci.calls").find("unpack --rootless --image " + cache + "/." + hex + ".layout.") == 0);
    std::string again;
    REQUIRE(image::bundle("oci:" + l.dir + "@" + l.da, again) == "");
    CHECK(again == dir);
    const std::string calls = s.read("umoci.calls");
    CHECK(std::count(calls.begin(), calls.end(), '\n') == 1);   // the second found it unpacked
    CHECK(image::bundle("oci:" + l.dir + ":v1", dir).find("expected a pinned reference") != std::string::npos);
}

TEST_CASE("shard bundle: a failed unpack leaves nothing behind, says why; no umoci says so") {
    Layout l;
    Stubs s;
    s.tool("umoci", std::string(kUmoci) + "echo 'umoci: layer 3: no space left on device' >&2; exit 1\n");
    const std::string hex = l.da.substr(7), cache = s.dir + "/bundles";
    std::string dir;
    const std::string err = image::bundle("oci:" + l.dir + "@" + l.da, dir);
    CHECK(err.find("umoci unpack: umoci failed (exit 1): umoci: layer 3: no space left on device") != std::string::npos);
    struct stat st;
    CHECK(::lstat((cache + "/." + hex + ".unpack." + std::to_string(::getpid())).c_str(), &st) != 0);   // its 0555 dirs too
    CHECK(::lstat((cache + "/" + hex).c_str(), &st) != 0);
    ::unlink((s.dir + "/umoci").c_str());
    CHECK(image::bundle("oci:" + l.dir + "@" + l.da, dir).find("cannot run umoci: not found (install it: apt-get install umoci)") != std::string::npos);
}

TEST_CASE("shard bundle: a cache others can write to, or an entry that is not the caller's, is refused") {
    Layout l;
    Stubs s;
    s.tool("umoci", kUmoci);
    const std::string hex = l.da.substr(7), cache = s.dir + "/bundles";
    std::string dir;
    ::chmod(cache.c_str(), 01777);
    CHECK(image::bundle("oci:" + l.dir + "@" + l.da, dir).find("refusing the bundle cache: " + cache + " is writable by group or others (mode 1777)") == 0);
    ::chmod(cache.c_str(), 0700);
    // A bundle someone else put there (another user's rootfs, planted).
    ::mkdir((cache + "/" + hex).c_str(), 0755);
    ::mkdir((cache + "/" + hex + "/rootfs").c_str(), 0755);
    write(cache + "/" + hex + "/config.json", "{}");
    ::chmod((cache + "/" + hex + "/rootfs").c_str(), 0777);
    CHECK(image::bundle("oci:" + l.dir + "@" + l.da, dir).find("refusing the bundle " + cache + "/" + hex + ": " + cache + "/" + hex + "/rootfs is writable by group or others") == 0);
    ::chmod((cache + "/" + hex + "/rootfs").c_str(), 0755);
    if (::getuid() == 0 && ::chown((cache + "/" + hex).c_str(), 12345, 12345) == 0)
        CHECK(image::bundle("oci:" + l.dir + "@" + l.da, dir).find("belongs to uid 12345, not to you") != std::string::npos);
    (void)!::chown((cache + "/" + hex).c_str(), ::getuid(), ::getgid());
    CHECK(image::bundle("oci:" + l.dir + "@" + l.da, dir) == "");   // the caller's own: used as it is
    CHECK(s.read("umoci.calls").empty());
}

TEST_CASE("docker:// references: copied by skopeo into a cache layout per repository, a digest kept as it is") {
    Layout l;
    Stubs s;
    // skopeo copy [--preserve-digests] docker://REF oci:DIR:TAG -> the test layout at DIR, TAG naming image a.
    s.tool("skopeo", "echo \"$@\" >> \"$(dirname \"$0\")/skopeo.calls\"\n"
                     "for a; do dst=$a; done\ndst=${dst#oci:}; tag=${dst##*:}; dst=${dst%:*}\n"
                     "mkdir -p \"$dst\" && cp -r " + l.dir + "/blobs " + l.dir + "/oci-layout \"$dst\"/ &&\n"
                     "echo '{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"" + l.da +
                     "\",\"size\":10,\"annotations\":{\"org.opencontainers.image.ref.name\":\"'$tag'\"}}]}' > \"$dst/index.json\"\n");
    std::string pinned, digest;
    REQUIRE(image::resolve("docker://reg.example/a_b:v1", pinned, digest) == "");
    CHECK(digest == l.da);
    REQUIRE(image::resolve("docker://reg.example/a/b@sha256:" + kHexA, pinned, digest) == "");
    const std::string calls = s.read("skopeo.calls"), images = s.dir + "/images/";
    CHECK(calls.find("copy --quiet docker://reg.example/a_b:v1 oci:" + images + "reg.example_2fa_5fb:v1\n") != std::string::npos);
    CHECK(calls.find("copy --quiet --preserve-digests docker://reg.example/a/b@sha256:" + kHexA + " oci:" + images + "reg.example_2fa_2fb:sha256-" + kHexA + "\n") !=
          std::string::npos);
    CHECK(pinned == "oci:" + images + "reg.example_2fa_2fb@" + l.da);
    s.tool("skopeo", "echo 'manifest unknown' >&2; exit 1\n");
    CHECK(image::resolve("docker://reg.example/c:v1", pinned, digest) == "docker://reg.example/c:v1: skopeo copy: skopeo failed (exit 1): manifest unknown");
    ::unlink((s.dir + "/skopeo").c_str());
    CHECK(image::resolve("docker://reg.example/c:v1", pinned, digest).find("cannot run skopeo: not found") != std::string::npos);
    ::chmod((s.dir + "/images").c_str(), 0777);
    CHECK(image::resolve("docker://reg.example/c:v1", pinned, digest).find("refusing the image cache") != std::string::npos);
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
    // Placement reads these: only where containers run and the pinned layout is read.
    CHECK(m.at("requires").at("containers").as_bool());
    CHECK(m.at("image_layout").as_string() == "/i");   // beside image_digest: brokers of every version keep it
    CHECK(image::layout_of(u.image_pinned) == "/i");
    CHECK(image::layout_of("").empty());
    CHECK(image::layout_of("docker://reg/x:1").empty());
    // The nodes whose probe found no container runtime: never the job's.
    const auto argv = sbatch_argv(u, "r", "alpha", "", "/tmp/x.sh", {"b2", "b3"});
    CHECK(std::find(argv.begin(), argv.end(), "--exclude=b2,b3") != argv.end());
    const auto none = sbatch_argv(u, "r", "alpha", "", "/tmp/x.sh");
    CHECK(std::none_of(none.begin(), none.end(), [](const std::string &a) { return a.rfind("--exclude", 0) == 0; }));
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
    CHECK(!manifest_of(plain).contains("image_layout"));
    CHECK(!manifest_of(plain).at("requires").as_object().contains("containers"));
}
