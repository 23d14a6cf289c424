// shard verify's list pages from a broker (sbatch-wrappers/verify_files.cpp):
// a page is checked for the run, the checkpoint, where it starts and whose
// seal it is: a seal carried to the broker from a peer is not the seal of
// the broker whose receipt the list is checked against.
#include <doctest/doctest.h>
#include <boost/json.hpp>

#include "common/digest.hpp"
#include "sbatch-wrappers/verify_files.hpp"

using namespace shardnet;
namespace json = boost::json;

namespace {

std::string page(const json::object &extra) {
    json::object o{{"run", "r1"}, {"checkpoint", "checkpoint-10"}, {"from", 0}, {"next_from", nullptr},
                   {"files", json::array{json::object{{"path", "rank-0.pt"}, {"sha256", sha256_hex("x")}, {"bytes", 1}}}}};
    for (const auto &[k, v] : extra) o[k] = v;
    return json::serialize(o);
}

std::string read(const std::string &body, const std::string &sealer) {
    auto pages = cli::pages_from_broker([&](const std::string &, const std::string &, unsigned long long, std::string &out) {
        out = body;
        return std::string();
    }, "r1", "checkpoint-10", sealer);
    std::vector<file_list::Entry> got;
    bool last = false;
    return pages(0, got, last);
}

}  // namespace

TEST_CASE("shard verify takes the list from the seal of the broker whose receipt it checks, never a seal carried there") {
    CHECK(read(page({{"sealed_by", "alpha"}}), "alpha") == "");
    CHECK(read(page({}), "alpha") == "");   // a broker of the version before named no sealer
    const std::string carried = read(page({{"sealed_by", "beta"}, {"carried", true}}), "alpha");
    CHECK(carried.find("a seal of broker beta carried to the broker asked, not broker alpha's") != std::string::npos);
    CHECK(read(page({{"sealed_by", "alpha"}, {"carried", true}}), "alpha") != "");
    CHECK(read(page({{"sealed_by", "gamma"}}), "alpha").find("not broker alpha's") != std::string::npos);
}
