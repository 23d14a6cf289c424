#include "http_client.hpp"

#include <chrono>
#include <curl/curl.h>
#include <poll.h>

namespace shardnet {

namespace {
size_t collect(char *data, size_t size, size_t n, void *user) {
    auto *out = static_cast<std::string *>(user);
    // The broker's answers are small; never let a hostile server grow us.
    if (out->size() + size * n > (1u << 20)) return 0;
    out->append(data, size * n);
    return size * n;
}
}  // namespace

void http_global_init() { curl_global_init(CURL_GLOBAL_DEFAULT); }

HttpClient::HttpClient() : easy_(curl_easy_init()), multi_(curl_multi_init()) {}

HttpClient::~HttpClient() {
    if (easy_) curl_easy_cleanup(static_cast<CURL *>(easy_));
    if (multi_) curl_multi_cleanup(static_cast<CURLM *>(multi_));
}

HttpResponse HttpClient::send(const HttpRequest &req, int watch_fd, const std::function<bool()> &on_ready) {
    HttpResponse res;
    auto *easy = static_cast<CURL *>(easy_);
    auto *multi = static_cast<CURLM *>(multi_);
    if (!easy || !multi) { res.error = "libcurl could not be initialised"; return res; }

    curl_slist *headers = nullptr;
    std::string auth;
    if (!req.body.empty()) headers = curl_slist_append(headers, "Content-Type: application/json");
    if (!req.bearer.empty()) {
        auth = "Authorization: Bearer " + req.bearer;
        headers = curl_slist_append(headers, auth.c_str());
    }
    headers = curl_slist_append(headers, "Expect:");

    curl_easy_setopt(easy, CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    if (req.method == "GET") curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
    else {
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, req.body.c_str());
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(req.body.size()));
    }
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, req.timeout_ms);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, req.timeout_ms);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &res.body);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "shardnet/" PACKAGE_VERSION);
    if (!req.ca_file.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, req.ca_file.c_str());

    curl_multi_add_handle(multi, easy);
    int running = 1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(req.timeout_ms + 100);
    while (running) {
        if (curl_multi_perform(multi, &running) != CURLM_OK) break;
        if (!running) break;
        if (std::chrono::steady_clock::now() > deadline) { res.error = "deadline passed"; break; }
        curl_waitfd extra{};
        unsigned nextra = 0;
        if (watch_fd >= 0) { extra.fd = watch_fd; extra.events = CURL_WAIT_POLLIN; nextra = 1; }
        int numfds = 0;
        curl_multi_poll(multi, nextra ? &extra : nullptr, nextra, 100, &numfds);
        if (nextra && (extra.revents & (CURL_WAIT_POLLIN | POLLHUP)) && on_ready && !on_ready()) {
            res.cancelled = true;
            res.error = "cancelled";
            break;
        }
    }
    int left = 0;
    while (CURLMsg *m = curl_multi_info_read(multi, &left)) {
        if (m->msg == CURLMSG_DONE) {
            if (m->data.result == CURLE_OK) curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &res.status);
            else res.error = curl_easy_strerror(m->data.result);
        }
    }
    curl_multi_remove_handle(multi, easy);
    curl_slist_free_all(headers);
    if (res.status == 0 && res.error.empty()) res.error = "no answer";
    return res;
}

}  // namespace shardnet
