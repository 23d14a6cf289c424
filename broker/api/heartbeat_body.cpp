#include "broker/api/heartbeat_body.hpp"

#include <boost/json/basic_parser_impl.hpp>
#include <cstring>

#include "common/parse_util.hpp"

namespace shardnet::broker {

namespace {

namespace json = boost::json;
using ec_t = boost::system::error_code;

// The keys the broker reads; each key is looked up once, when it ends.
enum Key { k_other, k_run, k_node, k_state, k_step, k_cluster, k_requeue, k_attempt, k_interval, k_job, k_ranks,
           k_checkpointing, k_exit, k_code, k_signal, k_ckpt_dir };
constexpr std::string_view kKeyNames[] = {"", "run", "node", "state", "step", "cluster", "requeue", "attempt", "interval",
                                          "job", "ranks", "checkpointing", "exit", "code", "signal", "ckpt_dir"};

Key key_of(std::string_view k) {
    auto is = [k](Key c) { return k == kKeyNames[c]; };
    switch (k.size()) {  // by length first: most keys are then one comparison away
    case 3: return is(k_run) ? k_run : is(k_job) ? k_job : k_other;
    case 4: return is(k_node) ? k_node : is(k_step) ? k_step : is(k_exit) ? k_exit : is(k_code) ? k_code : k_other;
    case 5: return is(k_state) ? k_state : is(k_ranks) ? k_ranks : k_other;
    case 6: return is(k_signal) ? k_signal : k_other;
    case 7: return is(k_attempt) ? k_attempt : is(k_cluster) ? k_cluster : is(k_requeue) ? k_requeue : k_other;
    case 8: return is(k_interval) ? k_interval : is(k_ckpt_dir) ? k_ckpt_dir : k_other;
    case 13: return is(k_checkpointing) ? k_checkpointing : k_other;
    default: return k_other;
    }
}

struct Reader {
    static constexpr std::size_t max_object_size = std::size_t(-1);
    static constexpr std::size_t max_array_size = std::size_t(-1);
    static constexpr std::size_t max_key_size = 256;
    static constexpr std::size_t max_string_size = std::size_t(-1);

    enum Frame { top, ranks_array, rank_object, exit_object, other };
    HeartbeatBody &hb;
    BodyError &err;
    // The open objects and arrays, innermost last. The fields read sit at
    // depth 4 at most; a deeper level is counted, not kept (always other).
    static constexpr int kKept = 8;
    Frame frames[kKept];
    int depth = 0;
    std::string key_buf, text;   // a key or string that came in parts
    Key key = k_other;
    bool seen_run = false, seen_attempt = false, seen_node = false, seen_ranks = false, not_object = false;

    Reader(HeartbeatBody &h, BodyError &e) : hb(h), err(e) {}

    void fail(std::string_view field, const std::string &why) {
        if (err.code.empty()) err = BodyError{"bad_field", std::string(field), std::string(field) + ": " + why};
    }
    Frame parent() const { return depth == 0 || depth > kKept ? other : frames[depth - 1]; }
    void open(Frame f) {
        if (depth < kKept) frames[depth] = f;
        ++depth;
    }
    // A value of another kind than expected at a known place.
    void wrong_kind() {
        if (depth == 0) { not_object = true; return; }
        if (parent() == ranks_array) return fail("ranks", "expected objects");
        if (parent() != top) return;
        switch (key) {
        case k_run: case k_node: case k_state: case k_step: case k_cluster: case k_requeue: case k_ckpt_dir:
            return fail(kKeyNames[key], "expected a string");
        case k_attempt: case k_interval: case k_job: return fail(kKeyNames[key], "expected an integer");
        case k_ranks: return fail("ranks", "expected an array");
        default: return;
        }
    }
    void bounded(long long v, long long lo, long long hi, long long &dst) {
        if (v < lo || v > hi) return fail(kKeyNames[key], "expected " + std::to_string(lo) + ".." + std::to_string(hi));
        dst = v;
    }
    void integer(long long v) {
        switch (parent()) {
        case top:
            if (key == k_attempt) { seen_attempt = true; return bounded(v, 1, 1000000, hb.attempt); }
            if (key == k_interval) return bounded(v, 1, 86400, hb.interval);
            if (key == k_job) return bounded(v, 0, 1LL << 40, hb.job);
            return wrong_kind();
        case rank_object:
            if (key == k_step && (!hb.top_step || v > *hb.top_step)) hb.top_step = v;
            return;
        case exit_object:
            if (key == k_code) hb.exit_code = v;
            else if (key == k_signal) hb.exit_signal = v;
            return;
        case ranks_array: return fail("ranks", "expected objects");
        default: return;
        }
    }
    void string_value(std::string_view s) {
        if (parent() != top) return wrong_kind();
        std::string *dst;
        switch (key) {
        case k_run: seen_run = true; dst = &hb.run; break;
        case k_node: seen_node = true; dst = &hb.node; break;
        case k_state: dst = &hb.state; break;
        case k_step: dst = &hb.step; break;
        case k_cluster: dst = &hb.cluster; break;
        case k_requeue: dst = &hb.requeue; break;
        case k_ckpt_dir: dst = &hb.ckpt_dir; break;
        default: return wrong_kind();
        }
        // Every string kept is stored, logged or passed on: no control
        // characters (C0, escaped newline or NUL included, and DEL, as
        // has_control_chars), and valid UTF-8, which the parser leaves to us.
        // One pass for both: the strings are nearly always printable ASCII.
        unsigned char any = 0;
        bool control = false;
        for (unsigned char c : s) {
            any |= c;
            control |= (c < 0x20) | (c == 0x7f);
        }
        if (control) return fail(kKeyNames[key], "control characters are not allowed");
        if (any >= 0x80 && !is_valid_utf8(s)) return fail(kKeyNames[key], "not valid UTF-8");
        dst->assign(s);
    }

    bool on_document_begin(ec_t &) { return true; }
    bool on_document_end(ec_t &) { return true; }
    bool on_object_begin(ec_t &) {
        Frame f = other;
        if (depth == 0) f = top;
        else if (parent() == top) wrong_kind();
        else if (parent() == ranks_array) { f = rank_object; ++hb.ranks; }
        else if (parent() == rank_object && key == k_exit && hb.ranks == 1) f = exit_object;
        open(f);
        return true;
    }
    bool on_object_end(std::size_t, ec_t &) { --depth; return true; }
    bool on_array_begin(ec_t &) {
        Frame f = other;
        if (depth == 0) not_object = true;
        else if (parent() == top && key == k_ranks) { f = ranks_array; seen_ranks = true; }
        else wrong_kind();
        open(f);
        return true;
    }
    bool on_array_end(std::size_t, ec_t &) { --depth; return true; }
    bool on_key_part(json::string_view s, std::size_t, ec_t &) { key_buf.append(s.data(), s.size()); return true; }
    bool on_key(json::string_view s, std::size_t, ec_t &) {
        if (key_buf.empty()) {
            key = key_of(std::string_view(s.data(), s.size()));
        } else {
            key_buf.append(s.data(), s.size());
            key = key_of(key_buf);
            key_buf.clear();
        }
        return true;
    }
    bool on_string_part(json::string_view s, std::size_t, ec_t &) { text.append(s.data(), s.size()); return true; }
    bool on_string(json::string_view s, std::size_t, ec_t &) {
        if (text.empty()) return string_value(std::string_view(s.data(), s.size())), true;
        text.append(s.data(), s.size());
        string_value(text);
        text.clear();
        return true;
    }
    bool on_number_part(json::string_view, ec_t &) { return true; }
    bool on_int64(std::int64_t v, json::string_view, ec_t &) { integer(v); return true; }
    bool on_uint64(std::uint64_t v, json::string_view, ec_t &) {
        if (v > std::uint64_t(1) << 62) wrong_kind();
        else integer((long long)v);
        return true;
    }
    bool on_double(double, json::string_view, ec_t &) { wrong_kind(); return true; }
    bool on_bool(bool b, ec_t &) {
        if (parent() == rank_object && key == k_checkpointing) hb.checkpointing = hb.checkpointing || b;
        else wrong_kind();
        return true;
    }
    bool on_null(ec_t &) { wrong_kind(); return true; }
    bool on_comment_part(json::string_view, ec_t &) { return true; }
    bool on_comment(json::string_view, ec_t &) { return true; }
};

}  // namespace

bool read_heartbeat(std::string_view body, HeartbeatBody &out, BodyError &err) {
    // Strings the broker does not keep (most of a heartbeat) are not
    // checked for UTF-8; string_value checks the ones it keeps.
    json::parse_options opt;
    opt.allow_invalid_utf8 = true;
    json::basic_parser<Reader> p(opt, out, err);
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
