#include "broker/runs/run_image.hpp"

namespace shardnet::broker {

namespace json = boost::json;

void add_run_image(json::object &run, const std::string &manifest) {
    boost::system::error_code ec;
    const json::value m = json::parse(manifest, ec);
    if (ec || !m.is_object()) return;
    const auto *digest = m.as_object().if_contains("image_digest");
    const auto *ref = m.as_object().if_contains("image");
    if (!digest || !digest->is_string() || digest->as_string().empty()) return;
    run["image"] = json::object{{"ref", ref && ref->is_string() ? ref->as_string() : json::string()}, {"digest", digest->as_string()}};
}

}  // namespace shardnet::broker
