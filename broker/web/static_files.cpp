#include "broker/web/static_files.hpp"

#include <string>
#include <vector>

#include "broker/web/assets.hpp"

namespace shardnet::broker::web {

namespace {

// Every answer of the UI says what the page may load: its own origin only
// (no inline script or style, no third party), and it may not be framed.
constexpr const char *kPolicy =
    "Content-Security-Policy: default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'\r\n"
    "X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n"
    // The browser asks again each time (If-None-Match) and gets a 304 while
    // the broker's build is the same: a new build's UI is never stale.
    "Cache-Control: no-cache\r\nVary: Accept-Encoding\r\n";

struct Served {
    const Asset *asset;
    std::string etag_gz;             // the gzip representation's own ETag
    std::string headers, headers_gz; // built once: answers point at them
};

const std::vector<Served> &served() {
    static const std::vector<Served> all = [] {
        std::vector<Served> v;
        for (std::size_t i = 0; i < kAssetCount; ++i) {
            const Asset &a = kAssets[i];
            std::string gz_tag = std::string(a.etag, std::string_view(a.etag).size() - 1) + "-gz\"";
            v.push_back(Served{&a, gz_tag, std::string(kPolicy) + "ETag: " + a.etag + "\r\n",
                               std::string(kPolicy) + "ETag: " + gz_tag + "\r\nContent-Encoding: gzip\r\n"});
        }
        return v;
    }();
    return all;
}

// If-None-Match lists ETags ("a", "b") or is "*".
bool names(std::string_view if_none_match, std::string_view etag) {
    return if_none_match == "*" || if_none_match.find(etag) != std::string_view::npos;
}

}  // namespace

ApiResponse serve(const ApiRequest &req, std::string_view name) {
    for (const Served &s : served()) {
        if (s.asset->name != name) continue;
        const bool gz = req.accepts_gzip && !s.asset->gzip.empty();
        ApiResponse r;
        r.content_type = s.asset->type;
        r.headers = gz ? s.headers_gz.c_str() : s.headers.c_str();
        if (!req.if_none_match.empty() && names(req.if_none_match, gz ? std::string_view(s.etag_gz) : s.asset->etag)) {
            r.status = 304;
            return r;
        }
        const std::string_view body = gz ? s.asset->gzip : s.asset->body;
        r.body.assign(body.data(), body.size());
        return r;
    }
    return error_response(404, "no_file", "the dashboard has no file " + std::string(name) + " (web/ is built into the broker)");
}

}  // namespace shardnet::broker::web
