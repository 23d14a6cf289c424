// Serving the dashboard: GET / and GET /ui/{file} from the files built
// into the broker (assets.hpp). No token: the page holds no data; the API
// it calls asks for one.
#pragma once
#include <string_view>

#include "broker/http/api_message.hpp"

namespace shardnet::broker::web {

// The answer for file name of web/ ("index.html" for /): 200 with its
// ETag, gzip when the client takes it, 304 when If-None-Match names it
// already, 404 no_file when web/ has no such file.
ApiResponse serve(const ApiRequest &req, std::string_view name);

}  // namespace shardnet::broker::web
