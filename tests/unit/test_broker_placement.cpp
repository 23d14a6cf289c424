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
