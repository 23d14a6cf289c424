// Fuzz target: node descriptors from shardnet-probe as the broker reads them
// (broker/inventory/placement.cpp): the shape check POST /v1/nodes applies,
// the NodeOffer placement uses (also made from stored descriptors, which
// are read without trusting their shape), and the fit of that offer.
#include <boost/json.hpp>
#include <cmath>
#include <cstdint>
#include <string>

#include "broker/inventory/placement.hpp"
#include "tests/fuzz/fuzz_assert.hpp"

using namespace shardnet::broker;
namespace json = boost::json;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    json::error_code ec;
    json::value v = json::parse(json::string_view(reinterpret_cast<const char *>(data), size), ec);
    if (ec || !v.is_object()) return 0;
    const json::object &d = v.as_object();
    std::string field;
    const std::string why = descriptor_shape_error(d, field);
    FUZZ_CHECK(why.empty() == field.empty(), "a shape error names its field, and only an error does");
    const NodeOffer n = offer_from_descriptor("node-1", d);
    FUZZ_CHECK(n.described && n.name == "node-1", "an offer from a descriptor is described and named");
    FUZZ_CHECK(n.gpus >= 0, "an offer has no negative GPU count");
    Requirements any, gpus, strict;
    gpus.accel_class = "H100-SXM";
    gpus.gpus_per_node = 8;
    gpus.gpu_memory_gb = 80;
    gpus.fabric = "nvlink";
    strict = gpus;
    strict.memory_gb = 512;
    strict.arch = "x86_64";
    strict.min_cuda = "12.2";
    for (const Requirements *r : {&any, &gpus, &strict}) (void)node_misfit(*r, n);
    if (why.empty()) {
        ClusterOffer c{"c1", "eu", true, true, {n}, ""};
        const Placement p = place(gpus, {c}, "c1");
        FUZZ_CHECK(p.cluster.empty() || p.nodes.size() == 1, "a placement on one node names it");
        (void)json::serialize(requirements_to_json(strict));
    }
    return 0;
}
