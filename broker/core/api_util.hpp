// Small helpers the service's handlers share (internal to broker/).
#pragma once
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <cstdio>
#include <memory>
#include <openssl/rand.h>
#include <string>
#include <vector>

#include "broker/core/store_answer.hpp"
#include "broker/store/store_error.hpp"
#include "broker/util/log.hpp"
#include "broker/util/thread_guard.hpp"
#include "common/parse_util.hpp"
#include "broker/http/api_message.hpp"
#include "broker/store/store.hpp"
#include "broker/trust/refusals.hpp"

namespace shardnet::broker::detail {

namespace json = boost::json;

// An event as the API writes it: {id, time, kind, cause, evidence}.
json::object event_object(const EventRow &e);
// One Server-Sent Events message: id, event kind, and the event as JSON.
std::string sse_message(const EventRow &e);

inline ApiResponse ok_json(unsigned status, const json::value &v) { return ApiResponse{status, json::serialize(v), "application/json"}; }
inline ApiResponse no_content() {
    ApiResponse r;   // an empty body: nothing to copy
    r.status = 204;
    return r;
}

// Typed field access that names what was wrong.
struct Fields {
    const json::object &o;
    std::string err, field;
    bool fail(const std::string &f, const std::string &why) {
        if (err.empty()) { field = f; err = f + ": " + why; }
        return false;
    }
    bool str(const char *k, std::string &out, bool required = true) {
        auto *v = o.if_contains(k);
        if (!v) return !required || fail(k, "missing");
        if (!v->is_string()) return fail(k, "expected a string");
        out = std::string(v->as_string());
        return true;
    }
    bool integer(const char *k, long long lo, long long hi, long long &out, bool required = true) {
        auto *v = o.if_contains(k);
        if (!v) return !required || fail(k, "missing");
        if (!v->is_int64() && !v->is_uint64()) return fail(k, "expected an integer");
        long long n = v->is_int64() ? v->as_int64() : (long long)v->as_uint64();
        if (n < lo || n > hi) return fail(k, "expected " + std::to_string(lo) + ".." + std::to_string(hi));
        out = n;
        return true;
    }
};

// A Reply that answers at most once: the guard's 500 for a job that threw
// after it had answered is dropped.
inline Reply reply_once(Reply r) {
    auto done = std::make_shared<std::atomic<bool>>(false);
    return [r = std::move(r), done](ApiResponse a) {
        if (!done->exchange(true)) r(std::move(a));
    };
}

// Jobs posted to the broker's thread pools and not yet ended, in this
// process: zero means nothing the broker was asked to do is still under way
// (Core::settle, for tests that judge by what happened, not by how long
// they waited). Counted from the posting, so a job that posts another
// before it ends never leaves a gap.
inline std::atomic<long> jobs_in_flight{0};
struct InFlight {
    InFlight() { jobs_in_flight.fetch_add(1, std::memory_order_acq_rel); }
    InFlight(const InFlight &) : InFlight() {}
    InFlight(InFlight &&) noexcept : InFlight() {}
    ~InFlight() { jobs_in_flight.fetch_sub(1, std::memory_order_acq_rel); }
};

// Every job posted to one of the broker's thread pools goes through one of
// these two: under the guard (guard.hpp), so that no exception ends a thread.
template <class Executor, class F>
void post_guarded(Executor &ex, const char *where, F fn) {
    boost::asio::post(ex, [where, fn = std::move(fn), counted = std::make_shared<InFlight>()]() mutable { guarded(where, fn); });
}

// A job that owes a request its answer gets it as its argument; when the
// job throws before answering, the request is answered 500 (instead of
// waiting for its connection's deadline).
template <class Executor, class F>
void post_answering(Executor &ex, const char *where, const Reply &reply, F fn) {
    boost::asio::post(ex, [where, reply = reply_once(reply), fn = std::move(fn), counted = std::make_shared<InFlight>()]() mutable {
        // A full, failing or locked database is the client's to wait out:
        // 503 with Retry-After and the cause (store_answer.hpp), logged and
        // counted as any failed job.
        auto answer_store_faults = [&] {
            try {
                fn(reply);
            } catch (const StoreError &e) {
                if (e.fault() == StoreFault::other) throw;
                log_failed_job(where, e.what());
                reply(store_error_response(e));
            }
        };
        if (!guarded(where, answer_store_faults))
            guarded(where, [&] {
                // A store job's other failures are the store's too (a
                // constraint, a damaged file): its stable code says so.
                const bool store = std::string_view(where) == "store";
                reply(error_response(500, store ? "store" : "internal", std::string(where) + " failed; the broker's log says why"));
            });
    });
}

inline ApiResponse bad_field(const Fields &f) { return error_response(400, "bad_field", f.err, f.field); }

inline std::string random_id() {
    unsigned char b[8];
    RAND_bytes(b, sizeof b);
    char out[24];
    std::snprintf(out, sizeof out, "run-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
    return out;
}

inline std::vector<std::string> split_path(const std::string &path) {
    std::vector<std::string> parts;
    std::size_t i = 0;
    while (i < path.size()) {
        while (i < path.size() && path[i] == '/') ++i;
        auto j = path.find('/', i);
        if (j == std::string::npos) j = path.size();
        if (j > i) parts.push_back(path.substr(i, j - i));
        i = j;
    }
    return parts;
}

// A query parameter's value ("" when absent).
inline std::string query_param(const std::string &q, const std::string &key) {
    std::size_t pos = 0;
    while (pos < q.size()) {
        auto amp = q.find('&', pos);
        if (amp == std::string::npos) amp = q.size();
        if (q.compare(pos, key.size() + 1, key + "=") == 0) return q.substr(pos + key.size() + 1, amp - pos - key.size() - 1);
        pos = amp + 1;
    }
    return "";
}

inline long long query_int(const std::string &q, const std::string &key, long long dflt) {
    auto n = parse_int(query_param(q, key), 0, 1LL << 62);
    return n ? *n : dflt;
}

// 429 too_many_runs when owner's runs not ended (open) reach
// limits.runs_per_user (cap), whoever makes the next one (POST /v1/runs,
// a job's first heartbeat); else nullopt.
inline std::optional<ApiResponse> too_many_runs(const std::string &owner, long long open, int cap) {
    if (open < cap) return std::nullopt;
    ApiResponse r = error_response(429, "too_many_runs", "user " + owner + " has " + std::to_string(open) +
                                   " runs not ended (limits.runs_per_user); cancel one or let one end", "id");
    r.retry_after = 60;
    return r;
}

// One warning line on the broker's log (JSON, as every line there).
inline void log_warn(const std::string &msg, const std::string &run, const std::string &why) {
    log_json("warn", msg.c_str(), json::object{{"run", run}, {"why", why}});
}

// user_name, user_uid: trust/refusals.hpp.

inline std::string join(const std::vector<std::string> &v, const char *sep = ",") {
    std::string out;
    for (const auto &s : v) out += (out.empty() ? "" : sep) + s;
    return out;
}

inline json::object run_json(const std::string &id, const std::string &owner, const std::string &state, long long attempt,
                      long long world) {
    return json::object{{"id", id}, {"owner", owner}, {"state", state}, {"attempt", attempt}, {"world_size", world}};
}


}  // namespace shardnet::broker::detail
