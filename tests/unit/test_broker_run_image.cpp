#include <doctest/doctest.h>
#include <boost/json.hpp>

#include "broker/runs/run_image.hpp"

using namespace shardnet::broker;
namespace json = boost::json;

TEST_CASE("GET /v1/runs/ID shows the image its manifest pins, and nothing for a run without one") {
    json::object r;
    add_run_image(r, R"({"name":"x","image":"oci:/images/t:v1","image_digest":"sha256:abc"})");
    CHECK(json::serialize(r["image"]) == R"({"ref":"oci:/images/t:v1","digest":"sha256:abc"})");
    json::object none;
    add_run_image(none, R"({"name":"x","image":"oci:/images/t:v1"})");   // recorded before digests were pinned
    add_run_image(none, "{}");
    add_run_image(none, "not json");
    CHECK(none.empty());
}
