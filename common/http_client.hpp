// A small HTTP(S) client on libcurl for talking to the broker with hard
// deadlines. One client keeps one connection alive between requests.
// libcurl is loaded on the first request (and globally initialised then):
// make the first request before starting threads.
#pragma once
#include <cstddef>
#include <functional>
#include <string>

namespace shardnet {

struct HttpRequest {
    std::string method = "POST";
    std::string url;
    std::string body;          // sent as application/json when non-empty
    std::string bearer;        // Authorization: Bearer ...
    std::string ca_file;       // extra CA bundle for https
    long timeout_ms = 2000;    // whole request, connect included
    // The most of an answer's body that is read: a larger one ends the
    // request (too_large), so that no server can make the caller grow.
    std::size_t max_body = std::size_t(1) << 20;
};

struct HttpResponse {
    long status = 0;           // 0 when no HTTP answer came
    std::string body;
    std::string error;         // libcurl's reason when status == 0
    bool cancelled = false;
    bool too_large = false;    // the body passed max_body: status stays 0
    bool ok() const { return status >= 200 && status < 300; }
};

class HttpClient {
public:
    HttpClient();
    ~HttpClient();
    HttpClient(const HttpClient &) = delete;
    HttpClient &operator=(const HttpClient &) = delete;

    // While the request runs, when watch_fd becomes readable on_ready() is
    // called; if it returns false the request is abandoned (cancelled=true).
    HttpResponse send(const HttpRequest &req, int watch_fd = -1, const std::function<bool()> &on_ready = {});

private:
    void *easy_;
    void *multi_;
};


}  // namespace shardnet
