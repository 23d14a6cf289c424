// The dashboard's files (web/), built into the broker by embed.sh: each
// as written and gzip-compressed, with its ETag.
#pragma once
#include <cstddef>
#include <string_view>

namespace shardnet::broker::web {

struct Asset {
    std::string_view name;   // the file's name in web/ ("index.html")
    const char *type;        // its Content-Type
    const char *etag;        // "\"hex\"": from its content, so a rebuilt UI is fetched again
    std::string_view body, gzip;
};

// The table embed.sh generates (web/assets.cpp in the build tree).
extern const Asset kAssets[];
extern const std::size_t kAssetCount;

}  // namespace shardnet::broker::web
