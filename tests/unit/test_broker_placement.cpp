#include <boost/json.hpp>
#include <doctest/doctest.h>
#include <fstream>
#include <sstream>

#include "broker/inventory/placement.hpp"

using namespace shardnet::broker;
namespace json = boost::json;

namespace {

NodeOffer node(const std::string &name, const std::string &cls, int gpus, double mem_gb, unsigned fabric, double node_gb = 512) {
    NodeOffer n;
    n.name = name;
    n.described = true;
    n.accel_class = cls;
    n.gpus = gpus;
    n.gpu_memory_gb = mem_gb;
    n.fabric = fabric;
    n.memory_gb = node_gb;
    n.arch = "x86_64";
    n.cuda = 12.4;
    return n;
}

Requirements h100x8(int nodes) {
    Requirements r;
    r.nodes = nodes;
    r.accel_class = "H100-SXM";
    r.gpus_per_node = 8;
    r.fabric = "infiniband";
    return r;
}

}  // namespace

TEST_CASE("placement prefers the home cluster without the failed node") {
    ClusterOffer beta{"beta", "eu", true, true, {node("b1", "H100-SXM", 8, 80, f_infiniband), node("b3", "H100-SXM", 8, 80, f_infiniband)}, ""};
    ClusterOffer alpha{"alpha", "eu", true, true, {node("a1", "H100-SXM", 8, 80, f_infiniband | f_nvlink), node("a2", "H100-SXM", 8, 80, f_infiniband)}, ""};
    auto p = place(h100x8(1), {alpha, beta}, "beta", "eu", "b1");
    CHECK(p.cluster == "beta");
    REQUIRE(p.nodes.size() == 1);
    CHECK(p.nodes[0] == "b3");
    REQUIRE(p.rejected.size() == 1);
    CHECK(p.rejected[0].cluster == "alpha");
    CHECK(p.rejected[0].reason.find("same cluster") != std::string::npos);
    // Two nodes needed: beta has one besides the failed one.
    p = place(h100x8(2), {alpha, beta}, "beta", "eu", "b1");
    CHECK(p.cluster == "alpha");
    CHECK(p.nodes == std::vector<std::string>{"a1", "a2"});
    REQUIRE(p.rejected.size() == 1);
    CHECK(p.rejected[0].reason == "1 of 1 idle node(s) fit, 2 needed");
}

TEST_CASE("hard constraints reject with the reason per node kind; compatible classes stand in") {
    ClusterOffer c{"gamma", "us", true, true,
                   {node("g1", "A100", 8, 80, f_infiniband), node("g2", "H200-SXM", 8, 141, f_infiniband),
                    node("g3", "H100-SXM", 4, 80, f_infiniband), node("g4", "H100-SXM", 8, 80, f_ethernet)}, ""};
    NodeOffer undescribed;
    undescribed.name = "g5";
    c.idle.push_back(undescribed);
    auto p = place(h100x8(2), {c}, "beta");
    CHECK(p.cluster.empty());
    REQUIRE(p.rejected.size() == 1);
    const std::string &why = p.rejected[0].reason;
    CHECK(why.find("1 of 5 idle node(s) fit, 2 needed") == 0);   // g2: an H200-SXM stands in for H100-SXM
    CHECK(why.find("1: accelerator class is not H100-SXM") != std::string::npos);
    CHECK(why.find("1: fewer than 8 GPUs") != std::string::npos);
    CHECK(why.find("1: no infiniband fabric") != std::string::npos);
    CHECK(why.find("1: no probe descriptor") != std::string::npos);
    Requirements mem = h100x8(1);
    mem.gpu_memory_gb = 100;
    CHECK(node_misfit(mem, c.idle[1]).empty());
    CHECK(node_misfit(mem, node("x", "H100-SXM", 8, 80, f_infiniband)) == "GPU memory below 100 GB or unknown");
    Requirements none;  // no hardware asked: any idle node, described or not
    CHECK(node_misfit(none, undescribed).empty());
}

TEST_CASE("clusters: allowed lists, regions, unreachable, checkpoint storage; fabric quality then name") {
    auto ib = [](const std::string &n) { return node(n, "H100-SXM", 8, 80, f_infiniband); };
    auto nv = [](const std::string &n) { return node(n, "H100-SXM", 8, 80, f_infiniband | f_nvlink); };
    ClusterOffer a{"a", "eu", true, true, {ib("a1")}, ""}, b{"b", "eu", true, true, {nv("b1")}, ""}, c{"c", "us", true, true, {nv("c1")}, ""};
    ClusterOffer down{"d", "eu", false, true, {nv("d1")}, ""}, nockpt{"e", "eu", true, false, {nv("e1")}, ""};
    ClusterOffer unnamed{"f", "eu", true, true, {nv("f1")}, "no partition for gpu"};
    Requirements r = h100x8(1);
    auto p = place(r, {a, b, c, down, nockpt}, "home", "eu");
    CHECK(p.cluster == "b");  // nvlink beats infiniband; eu (home region) beats us
    CHECK(p.fabric == "nvlink");
    CHECK(p.rejected.size() == 4);
    r.regions = {"us"};
    p = place(r, {a, b, c}, "home", "eu");
    CHECK(p.cluster == "c");
    r.regions.clear();
    r.clusters = {"a"};
    p = place(r, {a, b, c}, "home", "eu");
    CHECK(p.cluster == "a");
    bool named = false;
    for (const auto &x : place(h100x8(1), {down, nockpt}, "home").rejected)
        named |= x.reason == "slurmctld did not answer" || x.reason == "cannot read the checkpoint's storage";
    CHECK(named);
    // A cluster that has no name for the job's options: no place, whatever its nodes, with the reason.
    p = place(h100x8(1), {unnamed}, "home");
    CHECK(p.cluster.empty());
    REQUIRE(p.rejected.size() == 1);
    CHECK(p.rejected[0].reason == "no partition for gpu");
    // A job in an OCI image: only where containers run.
    ClusterOffer bare{"g", "eu", true, true, {nv("g1")}, "", false};
    Requirements img = h100x8(1);
    img.containers = true;
    p = place(img, {bare}, "home");
    CHECK(p.cluster.empty());
    REQUIRE(p.rejected.size() == 1);
    CHECK(p.rejected[0].reason.find("runs no containers (clusters.g.containers is false)") == 0);
    CHECK(place(img, {bare, b}, "home").cluster == "b");
    CHECK(place(h100x8(1), {bare}, "home").cluster == "g");   // no image: any cluster
}

TEST_CASE("no idle room anywhere: the job waits in a queue where idle and busy nodes that fit are enough, the home cluster first") {
    auto h = [](const std::string &n) { return node(n, "H100-SXM", 8, 80, f_infiniband); };
    ClusterOffer home{"home", "eu", true, true, {h("h1")}, ""};
    home.busy = {h("h2"), node("h3", "A100", 8, 80, f_infiniband), h("h4")};
    home.held = {"h9"};
    ClusterOffer other{"other", "eu", true, true, {}, ""};
    other.busy = {h("o1"), h("o2"), h("o3")};
    // Idle room elsewhere still wins over a wait.
    ClusterOffer roomy{"roomy", "eu", true, true, {h("r1"), h("r2")}, ""};
    CHECK(place(h100x8(2), {home, roomy}, "home", "eu", "h4").cluster == "roomy");

    auto p = place(h100x8(2), {home, other}, "home", "eu", "h4");
    CHECK(p.cluster == "home");
    CHECK(p.queued == 2);
    CHECK(p.nodes.empty());
    // The failed node, the quarantined one and a busy node of another class: never.
    CHECK(p.exclude == std::vector<std::string>{"h3", "h4", "h9"});
    REQUIRE(p.rejected.size() == 1);
    CHECK(p.rejected[0].cluster == "other");
    // Three needed: home has two that fit (h1 idle, h2 busy); other has three.
    p = place(h100x8(3), {home, other}, "home", "eu", "h4");
    CHECK(p.cluster == "other");
    CHECK(p.queued == 3);
    CHECK(p.exclude.empty());
    REQUIRE(p.rejected.size() == 1);
    CHECK(p.rejected[0].reason == "1 of 1 idle node(s) fit, 3 needed; 2 counting those in use");
    // Not enough even with the busy ones: nowhere, said per cluster.
    p = place(h100x8(4), {home, other}, "home", "eu", "h4");
    CHECK(p.cluster.empty());
    CHECK(p.queued == 0);
    CHECK(p.rejected.size() == 2);
    // Offers without busy nodes (a peer's decision, shard run's search): idle room only.
    home.busy.clear();
    CHECK(place(h100x8(2), {home}, "home", "eu", "h4").cluster.empty());
}

TEST_CASE("offers come from real probe descriptors") {
    std::ifstream f(std::string(FIXTURES) + "/probe/nvidiaDGX2.json");
    std::stringstream ss;
    ss << f.rdbuf();
    auto d = json::parse(ss.str()).as_object();
    NodeOffer n = offer_from_descriptor("dgx", d);
    CHECK(n.gpus == 16);
    CHECK(n.accel_class == "V100");
    CHECK_FALSE(n.gpu_memory_gb);   // hwloc alone does not know it: unknown, not guessed
    CHECK((n.fabric & f_nvlink));
    CHECK(n.memory_gb.value() > 1600);
    Requirements r;
    r.accel_class = "V100";
    r.gpus_per_node = 16;
    r.fabric = "nvlink";
    CHECK(node_misfit(r, n).empty());
    r.fabric = "infiniband";
    CHECK(node_misfit(r, n) == "no infiniband fabric");
}

TEST_CASE("requirements JSON: checked whole, errors name the key") {
    Requirements r;
    CHECK(requirements_from_json(json::parse(R"({"nodes":2,"fabric":"InfiniBand","memory_gb":64})").as_object(), r).empty());
    CHECK(r.nodes == 2);
    CHECK(r.fabric == "infiniband");
    CHECK(requirements_from_json(json::parse(R"({"fabrik":"ib"})").as_object(), r) == "requires.fabrik: unknown key");
    CHECK(requirements_from_json(json::parse(R"({"fabric":"carrier-pigeon"})").as_object(), r).find("requires.fabric") == 0);
    CHECK(requirements_from_json(json::parse(R"({"nodes":0})").as_object(), r).find("requires.nodes") == 0);
    CHECK(requirements_from_json(json::parse(R"({"clusters":"alpha"})").as_object(), r).find("requires.clusters") == 0);
    CHECK(requirements_from_json(json::parse(R"({"containers":"yes"})").as_object(), r) == "requires.containers: expected true or false");
    Requirements img;
    CHECK(requirements_from_json(json::parse(R"({"containers":true})").as_object(), img).empty());
    CHECK(img.containers);
    CHECK(requirements_to_json(img).at("containers").as_bool());   // carried to a peer's placement
}

TEST_CASE("a job in an image goes only where its layout is read at its path (image_roots), each reason named") {
    auto n = [](const std::string &name) { return node(name, "", 0, 0, f_ethernet); };
    ClusterOffer site{"site", "eu", true, true, {n("s1"), n("s2")}, ""}, far{"far", "us", true, true, {n("f1"), n("f2")}, ""};
    site.image_roots = {"/shared/images", "/home"};
    far.image_roots = {"/far/images"};
    Requirements r;
    r.nodes = 2;
    r.containers = true;
    r.image_layout = "/shared/images/train";
    auto p = place(r, {far, site}, "elsewhere");
    CHECK(p.cluster == "site");
    REQUIRE(p.rejected.size() == 1);
    CHECK(p.rejected[0].cluster == "far");
    CHECK(p.rejected[0].reason == "cannot read the image's layout /shared/images/train (clusters.far.image_roots: /far/images)");
    // A root is a whole path component: /shared/images-old is not under /shared/images.
    r.image_layout = "/shared/images-old/train";
    p = place(r, {site}, "elsewhere");
    CHECK(p.cluster.empty());
    CHECK(p.rejected.at(0).reason == "cannot read the image's layout /shared/images-old/train (clusters.site.image_roots: /shared/images, /home)");
    // The root itself, and a user's image cache under /home.
    r.image_layout = "/shared/images";
    CHECK(place(r, {site}, "x").cluster == "site");
    r.image_layout = "/home/ana/.shardnet/images/reg_train";
    CHECK(place(r, {far, site}, "x").cluster == "site");
    // No roots configured: every path is taken as read there; no layout: not checked.
    far.image_roots.clear();
    CHECK(place(r, {far}, "x").cluster == "far");
    r.image_layout.clear();
    site.image_roots = {"/nowhere"};
    CHECK(place(r, {site}, "x").cluster == "site");
    CHECK(image_unreachable("c", "/a/b", {"/a"}).empty());
    CHECK(image_unreachable("c", "/a/b", {}).empty());
    CHECK(image_unreachable("c", "", {"/x"}).empty());
}

TEST_CASE("a job in an image: never a node whose probe found no container runtime; an unprobed node may") {
    auto with = [](const std::string &name, NodeOffer::Oci oci) {
        NodeOffer o = node(name, "H100-SXM", 8, 80, f_infiniband);
        o.containers = oci;
        return o;
    };
    ClusterOffer c{"c", "eu", true, true,
                   {with("c1", NodeOffer::Oci::missing), with("c2", NodeOffer::Oci::ready), with("c3", NodeOffer::Oci::unknown)}, ""};
    Requirements r;
    r.nodes = 2;
    r.containers = true;
    auto p = place(r, {c}, "x");
    CHECK(p.cluster == "c");
    CHECK(p.nodes == std::vector<std::string>{"c2", "c3"});
    r.nodes = 3;
    p = place(r, {c}, "x");
    CHECK(p.cluster.empty());
    REQUIRE(p.rejected.size() == 1);
    CHECK(p.rejected[0].reason == "2 of 3 idle node(s) fit, 3 needed; 1: no container runtime (the probe found no usable oci.conf)");
    // With hardware needs too: the runtime is named first for that node.
    Requirements hw = h100x8(3);
    hw.containers = true;
    CHECK(node_misfit(hw, c.idle[0]) == "no container runtime (the probe found no usable oci.conf)");
    CHECK(node_misfit(hw, c.idle[1]).empty());
    // No image: the runtime does not matter.
    r.containers = false;
    CHECK(place(r, {c}, "x").cluster == "c");
}

TEST_CASE("the probe descriptor's containers: read into the offer, its shape checked") {
    auto d = json::parse(R"({"containers": {"ready": false, "why": "no oci.conf beside /etc/slurm/slurm.conf"}})").as_object();
    NodeOffer n = offer_from_descriptor("n1", d);
    CHECK(n.containers == NodeOffer::Oci::missing);
    CHECK(offer_from_descriptor("n2", json::parse(R"({"containers": {"ready": true, "runtime": "/usr/bin/crun"}})").as_object()).containers ==
          NodeOffer::Oci::ready);
    CHECK(offer_from_descriptor("n3", json::parse(R"({"cpu": {"arch": "x86_64"}})").as_object()).containers == NodeOffer::Oci::unknown);
    std::string field;
    CHECK(descriptor_shape_error(d, field).empty());
    for (const char *bad : {R"({"containers": true})", R"({"containers": {}})", R"({"containers": {"ready": "yes"}})",
                            R"({"containers": {"ready": false, "why": 3}})"}) {
        CAPTURE(bad);
        CHECK(descriptor_shape_error(json::parse(bad).as_object(), field).find("containers") == 0);
        CHECK(field == "containers");
    }
}

TEST_CASE("a run in an image: containers and the manifest's image_layout, a plain absolute path; requires JSON unchanged for older peers") {
    Requirements r;
    CHECK(image_requirements(json::parse(R"({"image_digest":"sha256:x","image_layout":"/shared/images/train"})").as_object(), r).empty());
    CHECK(r.containers);
    CHECK(r.image_layout == "/shared/images/train");
    // The requires JSON a peer gets has no new key (an older peer refuses unknown ones).
    CHECK_FALSE(requirements_to_json(r).contains("image_layout"));
    Requirements pinned_before;   // a run pinned before the layout was recorded: containers only
    CHECK(image_requirements(json::parse(R"({"image_digest":"sha256:x"})").as_object(), pinned_before).empty());
    CHECK(pinned_before.containers);
    CHECK(pinned_before.image_layout.empty());
    Requirements none;            // no image: nothing
    CHECK(image_requirements(json::parse(R"({"image_layout":"/x"})").as_object(), none).empty());
    CHECK_FALSE(none.containers);
    CHECK(none.image_layout.empty());
    for (const char *bad : {R"({"image_digest":"d","image_layout":"relative/dir"})", R"({"image_digest":"d","image_layout":"/a/../etc"})",
                            R"({"image_digest":"d","image_layout":"/a/./b"})", R"({"image_digest":"d","image_layout":""})",
                            R"({"image_digest":"d","image_layout":7})", "{\"image_digest\":\"d\",\"image_layout\":\"/a\\nb\"}"}) {
        CAPTURE(bad);
        Requirements x;
        CHECK(image_requirements(json::parse(bad).as_object(), x).find("image_layout: ") == 0);
    }
    CHECK(requirements_from_json(json::parse(R"({"image_layout":"/x"})").as_object(), r) == "requires.image_layout: unknown key");
}

TEST_CASE("a job in an image that waits in a queue never gets a node without a container runtime, whatever its state now") {
    auto h = [](const std::string &n) { return node(n, "H100-SXM", 8, 80, f_infiniband); };
    ClusterOffer home{"home", "eu", true, true, {h("h1")}, ""};
    home.busy = {h("h2"), h("h4")};
    home.no_runtime = {"h7"};   // down now: it may come back while the job waits
    Requirements img = h100x8(2);
    img.containers = true;
    auto p = place(img, {home}, "home", "eu", "h4");
    CHECK(p.queued == 2);
    CHECK(p.exclude == std::vector<std::string>{"h4", "h7"});
    // Without an image it may have it.
    p = place(h100x8(2), {home}, "home", "eu", "h4");
    CHECK(p.exclude == std::vector<std::string>{"h4"});
}
