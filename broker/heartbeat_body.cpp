#include "heartbeat_body.hpp"

#include <boost/json/basic_parser_impl.hpp>
#include <cstring>
#include <vector>

namespace shardnet::broker {

namespace {

namespace json = boost::json;
using ec_t = boost::system::error_code;

struct Reader {
    static constexpr std::size_t max_object_size = std::size_t(-1);
    static constexpr std::size_t max_array_size = std::size_t(-1);
    static constexpr std::size_t max_key_size = std::size_t(-1);
    static constexpr std::size_t max_string_size = std::size_t(-1);

    enum Frame { top, ranks_array, rank_object, exit_object, other };
    HeartbeatBody &hb;
    BodyError &err;
    std::vector<Frame> frames;
    std::string key, text;   // the current key and string, which may come in parts
    bool seen_run = false, seen_attempt = false, seen_node = false, seen_ranks = false, not_object = false;

    Reader(HeartbeatBody &h, BodyError &e) : hb(h), err(e) { frames.reserve(8); }

    void fail(const std::string &field, const std::string &why) {
        if (err.code.empty()) err = BodyError{"bad_field", field, field + ": " + why};
    }
    Frame parent() const { return frames.empty() ? other : frames.back(); }
    static bool is_one_of(const std::string &k, std::initializer_list<const char *> names) {
        for (const char *n : names)
            if (k == n) return true;
        return false;
    }
    // A value other than the expected kind at a known place.
    void wrong_kind(const char *what_it_is) {
        if (frames.empty()) { not_object = true; return; }
        switch (parent()) {
        case top:
            if (is_one_of(key, {"run", "node", "state", "step", "cluster", "requeue"})) fail(key, "expected a string");
            else if (is_one_of(key, {"attempt", "interval", "job"})) fail(key, "expected an integer");
            else if (key == "ranks") fail("ranks", "expected an array");
            break;
        case ranks_array: fail("ranks", "expected objects"); break;
        default: break;
        }
        (void)what_it_is;
    }
    void integer(long long v) {
        switch (parent()) {
        case top: {
            struct R { const char *k; long long lo, hi; long long *dst; bool *seen; };
            bool dummy = false;
            for (const R &r : {R{"attempt", 1, 1000000, &hb.attempt, &seen_attempt}, R{"interval", 1, 86400, &hb.interval, &dummy},
                               R{"job", 0, 1LL << 40, &hb.job, &dummy}})
                if (key == r.k) {
                    if (v < r.lo || v > r.hi) return fail(key, "expected " + std::to_string(r.lo) + ".." + std::to_string(r.hi));
                    *r.dst = v;
                    *r.seen = true;
                    return;
                }
            return wrong_kind("an integer");
        }
        case rank_object:
            if (key == "step" && (!hb.top_step || v > *hb.top_step)) hb.top_step = v;
            return;
        case exit_object:
            if (key == "code") hb.exit_code = v;
            else if (key == "signal") hb.exit_signal = v;
            return;
        case ranks_array: return fail("ranks", "expected objects");
        default: return;
        }
    }
    void string_value(std::string &&s) {
        if (parent() != top) return wrong_kind("a string");
        struct S { const char *k; std::string *dst; bool *seen; };
        bool dummy = false;
        for (const S &f : {S{"run", &hb.run, &seen_run}, S{"node", &hb.node, &seen_node}, S{"state", &hb.state, &dummy},
                           S{"step", &hb.step, &dummy}, S{"cluster", &hb.cluster, &dummy}, S{"requeue", &hb.requeue, &dummy}})
            if (key == f.k) { *f.dst = std::move(s); *f.seen = true; return; }
        wrong_kind("a string");
    }

    bool on_document_begin(ec_t &) { return true; }
    bool on_document_end(ec_t &) { return true; }
    bool on_object_begin(ec_t &) {
        Frame f = other;
        if (frames.empty()) f = top;
        else if (parent() == top && key == "ranks") fail("ranks", "expected an array");
        else if (parent() == top) wrong_kind("an object");
        else if (parent() == ranks_array) { f = rank_object; ++hb.ranks; }
        else if (parent() == rank_object && key == "exit" && hb.ranks == 1) f = exit_object;
        frames.push_back(f);
        return true;
    }
    bool on_object_end(std::size_t, ec_t &) { frames.pop_back(); return true; }
    bool on_array_begin(ec_t &) {
        Frame f = other;
        if (frames.empty()) not_object = true;
        else if (parent() == top && key == "ranks") { f = ranks_array; seen_ranks = true; }
        else wrong_kind("an array");
        frames.push_back(f);
        return true;
    }
    bool on_array_end(std::size_t, ec_t &) { frames.pop_back(); return true; }
    // A key may come in parts; the first part of a new key starts it over.
    bool key_done = true;
    void key_part(json::string_view s) {
        if (key_done) { key.clear(); key_done = false; }
        key.append(s.data(), s.size());
    }
    bool on_key_part(json::string_view s, std::size_t, ec_t &) { key_part(s); return true; }
    bool on_key(json::string_view s, std::size_t, ec_t &) { key_part(s); key_done = true; return true; }
    bool on_string_part(json::string_view s, std::size_t, ec_t &) { text.append(s.data(), s.size()); return true; }
    bool on_string(json::string_view s, std::size_t, ec_t &) {
        text.append(s.data(), s.size());
        string_value(std::move(text));
        text.clear();
        return true;
    }
    bool on_number_part(json::string_view, ec_t &) { return true; }
    bool on_int64(std::int64_t v, json::string_view, ec_t &) { integer(v); return true; }
    bool on_uint64(std::uint64_t v, json::string_view, ec_t &) {
        if (v > std::uint64_t(1) << 62) wrong_kind("an integer");
        else integer((long long)v);
        return true;
    }
    bool on_double(double, json::string_view, ec_t &) { wrong_kind("a number"); return true; }
    bool on_bool(bool b, ec_t &) {
        if (parent() == rank_object && key == "checkpointing") hb.checkpointing = hb.checkpointing || b;
        else wrong_kind("a boolean");
        return true;
    }
    bool on_null(ec_t &) { wrong_kind("null"); return true; }
    bool on_comment_part(json::string_view, ec_t &) { return true; }
    bool on_comment(json::string_view, ec_t &) { return true; }
};

}  // namespace

bool read_heartbeat(std::string_view body, HeartbeatBody &out, BodyError &err) {
    json::basic_parser<Reader> p(json::parse_options{}, out, err);
    ec_t ec;
    const std::size_t used = p.write_some(false, body.data(), body.size(), ec);
    const bool trailing = body.substr(used).find_first_not_of(" \t\r\n") != std::string_view::npos;
    if (ec || trailing || p.handler().not_object) {
        err = BodyError{"bad_json", "", "body is not a JSON object"};
        return false;
    }
    if (!err.code.empty()) return false;
    const Reader &r = p.handler();
    for (auto [seen, name] : {std::pair{r.seen_run, "run"}, {r.seen_attempt, "attempt"}, {r.seen_node, "node"}})
        if (!seen) { err = BodyError{"bad_field", name, std::string(name) + ": missing"}; return false; }
    if (!r.seen_ranks) { err = BodyError{"bad_field", "ranks", "ranks: expected an array"}; return false; }
    return true;
}

}  // namespace shardnet::broker
