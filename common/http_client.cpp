#include "common/http_client.hpp"

#include <chrono>
#include <string>
#include <curl/curl.h>
#include <poll.h>

#include "common/dl_library.hpp"

namespace shardnet {

namespace {

// libcurl and the ~35 libraries it pulls in cost a program ~5 ms to load
// here, paid by every probe and every step's agent even when they never
// send a request; so it is loaded on first use.
struct CurlApi {
    CURLcode (*global_init)(long);
    CURL *(*easy_init)();
    CURLM *(*multi_init)();
    void (*easy_cleanup)(CURL *);
    CURLMcode (*multi_cleanup)(CURLM *);
    curl_slist *(*slist_append)(curl_slist *, const char *);
    void (*slist_free_all)(curl_slist *);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    const char *(*easy_strerror)(CURLcode);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_perform)(CURLM *, int *);
    CURLMcode (*multi_poll)(CURLM *, curl_waitfd *, unsigned, int, int *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
};

const CurlApi *load_curl() {
    static const CurlApi *api = []() -> const CurlApi * {
        static DlLibrary lib("libcurl.so.4");  // kept for the process's life
        static CurlApi a;
        lib.sym(a.global_init, "curl_global_init").sym(a.easy_init, "curl_easy_init")
            .sym(a.multi_init, "curl_multi_init").sym(a.easy_cleanup, "curl_easy_cleanup")
            .sym(a.multi_cleanup, "curl_multi_cleanup").sym(a.slist_append, "curl_slist_append")
            .sym(a.slist_free_all, "curl_slist_free_all").sym(a.easy_setopt, "curl_easy_setopt")
            .sym(a.easy_getinfo, "curl_easy_getinfo").sym(a.easy_strerror, "curl_easy_strerror")
            .sym(a.multi_add_handle, "curl_multi_add_handle").sym(a.multi_remove_handle, "curl_multi_remove_handle")
            .sym(a.multi_perform, "curl_multi_perform").sym(a.multi_poll, "curl_multi_poll")
            .sym(a.multi_info_read, "curl_multi_info_read");
        if (!lib.complete() || a.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return nullptr;
        return &a;
    }();
    return api;
}

struct Sink {
    std::string *body;
    std::size_t max;
    bool over = false;
};

size_t collect(char *data, size_t size, size_t n, void *user) {
    auto *sink = static_cast<Sink *>(user);
    // The broker's answers are small; never let a hostile server grow us.
    if (sink->body->size() + size * n > sink->max) {
        sink->over = true;
        return 0;   // libcurl ends the transfer
    }
    sink->body->append(data, size * n);
    return size * n;
}
}  // namespace

HttpClient::HttpClient() : easy_(nullptr), multi_(nullptr) {}

HttpClient::~HttpClient() {
    if (const CurlApi *c = load_curl(); c && easy_) c->easy_cleanup(static_cast<CURL *>(easy_));
    if (const CurlApi *c = load_curl(); c && multi_) c->multi_cleanup(static_cast<CURLM *>(multi_));
}

HttpResponse HttpClient::send(const HttpRequest &req, int watch_fd, const std::function<bool()> &on_ready) {
    HttpResponse res;
    const CurlApi *c = load_curl();
    if (!c) { res.error = "libcurl (libcurl.so.4) could not be loaded"; return res; }
    if (!easy_) easy_ = c->easy_init();
    if (!multi_) multi_ = c->multi_init();
    auto *easy = static_cast<CURL *>(easy_);
    auto *multi = static_cast<CURLM *>(multi_);
    if (!easy || !multi) { res.error = "libcurl could not be initialised"; return res; }

    curl_slist *headers = nullptr;
    std::string auth;
    if (!req.body.empty()) headers = c->slist_append(headers, "Content-Type: application/json");
    if (!req.bearer.empty()) {
        auth = "Authorization: Bearer " + req.bearer;
        headers = c->slist_append(headers, auth.c_str());
    }
    headers = c->slist_append(headers, "Expect:");

    c->easy_setopt(easy, CURLOPT_URL, req.url.c_str());
    c->easy_setopt(easy, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    if (req.method == "GET") c->easy_setopt(easy, CURLOPT_HTTPGET, 1L);
    else {
        c->easy_setopt(easy, CURLOPT_POSTFIELDS, req.body.c_str());
        c->easy_setopt(easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(req.body.size()));
    }
    c->easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    c->easy_setopt(easy, CURLOPT_TIMEOUT_MS, req.timeout_ms);
    c->easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, req.timeout_ms);
    c->easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    c->easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    c->easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    c->easy_setopt(easy, CURLOPT_WRITEFUNCTION, collect);
    Sink sink{&res.body, req.max_body};
    c->easy_setopt(easy, CURLOPT_WRITEDATA, &sink);
    c->easy_setopt(easy, CURLOPT_USERAGENT, "shardnet/" PACKAGE_VERSION);
    if (!req.ca_file.empty()) c->easy_setopt(easy, CURLOPT_CAINFO, req.ca_file.c_str());

    c->multi_add_handle(multi, easy);
    int running = 1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(req.timeout_ms + 100);
    while (running) {
        if (c->multi_perform(multi, &running) != CURLM_OK) break;
        if (!running) break;
        if (std::chrono::steady_clock::now() > deadline) { res.error = "deadline passed"; break; }
        curl_waitfd extra{};
        unsigned nextra = 0;
        if (watch_fd >= 0) { extra.fd = watch_fd; extra.events = CURL_WAIT_POLLIN; nextra = 1; }
        int numfds = 0;
        c->multi_poll(multi, nextra ? &extra : nullptr, nextra, 100, &numfds);
        if (nextra && (extra.revents & (CURL_WAIT_POLLIN | POLLHUP)) && on_ready && !on_ready()) {
            res.cancelled = true;
            res.error = "cancelled";
            break;
        }
    }
    int left = 0;
    while (CURLMsg *m = c->multi_info_read(multi, &left)) {
        if (m->msg == CURLMSG_DONE) {
            if (m->data.result == CURLE_OK) c->easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &res.status);
            else res.error = c->easy_strerror(m->data.result);
        }
    }
    c->multi_remove_handle(multi, easy);
    c->slist_free_all(headers);
    if (sink.over) {
        res.status = 0;
        res.too_large = true;
        res.body.clear();
        res.error = "answer larger than " + std::to_string(req.max_body) + " bytes (" +
                    (req.max_body % (1 << 20) == 0 ? std::to_string(req.max_body >> 20) + " MiB" : std::to_string(req.max_body) + " B") +
                    "): not read";
    }
    if (res.status == 0 && res.error.empty()) res.error = "no answer";
    return res;
}

}  // namespace shardnet
