#include "broker/api/heartbeat_body.hpp"

#include <boost/json/basic_parser_impl.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/job_options.hpp"
#include "common/parse_util.hpp"

namespace shardnet::broker {

namespace {

namespace json = boost::json;
using ec_t = boost::system::error_code;

// The keys the broker reads; each key is looked up once, when it ends.
enum Key { k_other, k_run, k_node, k_state, k_step, k_cluster, k_requeue, k_attempt, k_interval, k_job, k_ranks,
           k_checkpointing, k_exit, k_code, k_signal, k_ckpt_dir, k_policy, k_ckpt_every, k_rank, k_time, k_max_attempts,
           k_fatal_exit, k_stderr_tail, k_on_timeout, k_prelimit, k_spares, k_straggler };
constexpr std::string_view kKeyNames[] = {"", "run", "node", "state", "step", "cluster", "requeue", "attempt", "interval",
                                          "job", "ranks", "checkpointing", "exit", "code", "signal", "ckpt_dir", "policy", "ckpt_every",
                                          "rank", "time", "max_attempts", "fatal_exit", "stderr_tail", "on_timeout",
                                          "prelimit_signalled", "spares", "straggler"};

// k's size is N - 1 already: a comparison of known length, inlined.
template <std::size_t N>
bool same(std::string_view k, const char (&name)[N]) { return std::memcmp(k.data(), name, N - 1) == 0; }

Key key_of(std::string_view k) {
    switch (k.size()) {  // by length first: most keys are then one comparison away
    case 3: return same(k, "run") ? k_run : same(k, "job") ? k_job : k_other;
    case 4: return same(k, "node") ? k_node : same(k, "step") ? k_step : same(k, "exit") ? k_exit : same(k, "code") ? k_code
                 : same(k, "rank") ? k_rank : same(k, "time") ? k_time : k_other;
    case 5: return same(k, "state") ? k_state : same(k, "ranks") ? k_ranks : k_other;
    case 6: return same(k, "signal") ? k_signal : same(k, "policy") ? k_policy : same(k, "spares") ? k_spares : k_other;
    case 7: return same(k, "attempt") ? k_attempt : same(k, "cluster") ? k_cluster : same(k, "requeue") ? k_requeue : k_other;
    case 8: return same(k, "interval") ? k_interval : same(k, "ckpt_dir") ? k_ckpt_dir : k_other;
    case 9: return same(k, "straggler") ? k_straggler : k_other;
    case 10: return same(k, "ckpt_every") ? k_ckpt_every : same(k, "fatal_exit") ? k_fatal_exit : same(k, "on_timeout") ? k_on_timeout : k_other;
    case 11: return same(k, "stderr_tail") ? k_stderr_tail : k_other;
    case 12: return same(k, "max_attempts") ? k_max_attempts : k_other;
    case 13: return same(k, "checkpointing") ? k_checkpointing : k_other;
    case 18: return same(k, "prelimit_signalled") ? k_prelimit : k_other;
    default: return k_other;
    }
}

// Whether e failed before than (none: e is the first), by the time each
// one's agent heard of it; ranks in order where that does not tell.
bool earlier(const HeartbeatBody::RankExit &e, const std::optional<HeartbeatBody::RankExit> &than) {
    return !than || (e.time > 0 && (than->time == 0 || e.time < than->time)) || (e.time == than->time && e.rank < than->rank);
}

template <class T> T load(const char *p) { T x; std::memcpy(&x, p, sizeof x); return x; }
// The top bit of each byte of the result: that byte of x is < 0x20
// (hasless), >= 0x80, or 0x7f (it carries into the top bit).
std::uint64_t word_bad(std::uint64_t x) {
    constexpr std::uint64_t ones = 0x0101010101010101ull;
    return ((x - ones * 0x20) & ~x) | x | (x + ones);
}

// True when every byte is printable ASCII (0x20..0x7e), which nearly
// every kept string is: eight bytes at a time, by the word tricks of
// "Bit Twiddling Hacks" (hasless for < 0x20; bytes >= 0x7f carry or
// have their top bit set).
// Short strings are read as two overlapping words.
bool plain_ascii(std::string_view s) {
    const char *p = s.data();
    const std::size_t n = s.size();
    if (n >= 8) {
        std::uint64_t bad = 0;
        for (std::size_t i = 0; i + 8 <= n; i += 8) bad |= word_bad(load<std::uint64_t>(p + i));
        return !((bad | word_bad(load<std::uint64_t>(p + n - 8))) & 0x8080808080808080ull);
    }
    if (n >= 4) {
        const std::uint64_t x = load<std::uint32_t>(p) | std::uint64_t(load<std::uint32_t>(p + n - 4)) << 32;
        return !(word_bad(x) & 0x8080808080808080ull);
    }
    for (std::size_t i = 0; i < n; ++i)
        if (static_cast<unsigned char>(p[i]) < 0x20 || static_cast<unsigned char>(p[i]) >= 0x7f) return false;
    return true;
}

struct BodySax {
    static constexpr std::size_t max_object_size = std::size_t(-1);
    static constexpr std::size_t max_array_size = std::size_t(-1);
    static constexpr std::size_t max_key_size = 256;
    static constexpr std::size_t max_string_size = std::size_t(-1);

    enum Frame { top, ranks_array, rank_object, exit_object, fatal_array, other };
    HeartbeatBody &hb;
    BodyError &err;
    std::string_view body;   // a string inside it is kept as a view
    // The open objects and arrays, innermost last. The fields read sit at
    // depth 4 at most; a deeper level is counted, not kept (always other).
    static constexpr int kKept = 8;
    Frame frames[kKept];
    int depth = 0;
    std::string key_buf, text;   // a key or string that came in parts
    Key key = k_other;
    bool seen_run = false, seen_attempt = false, seen_node = false, seen_ranks = false, not_object = false;
    HeartbeatBody::RankExit rank_exit;   // of the rank object being read
    std::vector<HeartbeatBody::RankExit> failed;   // this report's failed ranks (fatal_exit may come after them)
    std::size_t fatal_codes = 0;                   // entries of fatal_exit

    BodySax(HeartbeatBody &h, BodyError &e, std::string_view b) : hb(h), err(e), body(b) {}

    [[gnu::cold, gnu::noinline]] void fail(std::string_view field, const std::string &why) {
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
        if (parent() == fatal_array) return bad_fatal_exit();
        if (parent() != top) return;
        switch (key) {
        case k_run: case k_node: case k_state: case k_step: case k_cluster: case k_requeue: case k_ckpt_dir: case k_ckpt_every:
        case k_stderr_tail: case k_on_timeout: case k_straggler:
            return fail(kKeyNames[key], "expected a string");
        case k_prelimit: return fail(kKeyNames[key], "expected true or false");
        case k_fatal_exit: return bad_fatal_exit();
        case k_attempt: case k_interval: case k_job: case k_policy: case k_max_attempts: case k_spares:
            return fail(kKeyNames[key], "expected an integer");
        case k_ranks: return fail("ranks", "expected an array");
        default: return;
        }
    }
    void bounded(long long v, long long lo, long long hi, long long &dst) {
        if (v < lo || v > hi) return out_of_range(lo, hi);
        dst = v;
    }
    [[gnu::cold, gnu::noinline]] void bad_fatal_exit() {
        fail("fatal_exit", "expected an array of at most " + std::to_string(kMaxFatalExit) + " exit codes from 1 to 255");
    }
    [[gnu::cold, gnu::noinline]] void out_of_range(long long lo, long long hi) {
        fail(kKeyNames[key], "expected " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    void integer(long long v) {
        switch (parent()) {
        case top:
            if (key == k_attempt) { seen_attempt = true; return bounded(v, 1, 1000000, hb.attempt); }
            if (key == k_interval) return bounded(v, 1, 86400, hb.interval);
            if (key == k_job) return bounded(v, 0, 1LL << 40, hb.job);
            if (key == k_policy) { long long p = 0; bounded(v, 0, 1LL << 40, p); hb.policy = p; return; }
            if (key == k_max_attempts) return bounded(v, 1, 1000, hb.max_attempts);
            if (key == k_spares) return bounded(v, 0, kMaxSpares, hb.spares);
            if (key == k_other) return;   // a field the broker does not read
            return wrong_kind();
        case rank_object:
            if (key == k_step && (!hb.top_step || v > *hb.top_step)) hb.top_step = v;
            else if (key == k_rank && v >= 0 && v < (1LL << 24)) rank_exit.rank = v;
            return;
        case exit_object:
            if (key == k_code) rank_exit.code = v;
            else if (key == k_signal) rank_exit.signal = v;
            else if (key == k_time && v > 0 && v < 100000000000LL) rank_exit.time = double(v);
            if (hb.ranks != 1) return;
            if (key == k_code) hb.exit_code = v;
            else if (key == k_signal) hb.exit_signal = v;
            return;
        case ranks_array: return fail("ranks", "expected objects");
        case fatal_array:
            if (v < 1 || v > 255 || ++fatal_codes > kMaxFatalExit) return bad_fatal_exit();
            hb.fatal_exit.set(std::size_t(v));
            return;
        default: return;
        }
    }
    void string_value(std::string_view s) {
        if (parent() != top) return wrong_kind();
        std::string_view *dst;
        int slot;
        switch (key) {
        case k_run: seen_run = true; dst = &hb.run; slot = 0; break;
        case k_node: seen_node = true; dst = &hb.node; slot = 1; break;
        case k_state: dst = &hb.state; slot = 2; break;
        case k_step: dst = &hb.step; slot = 3; break;
        case k_cluster: dst = &hb.cluster; slot = 4; break;
        case k_requeue: dst = &hb.requeue; slot = 5; break;
        case k_ckpt_dir: dst = &hb.ckpt_dir; slot = 6; break;
        case k_ckpt_every: dst = &hb.ckpt_every; slot = 7; break;
        case k_on_timeout:
            if (s == "requeue") hb.requeue_timeout = true;
            else if (s != "fail") fail("on_timeout", "expected fail or requeue");
            return;
        case k_straggler:
            if (s == "replace") hb.replace_stragglers = true;
            else if (s != "report") fail("straggler", "expected report or replace");
            return;
        case k_stderr_tail:
            // The job's own text, with its line breaks: checked on its own terms.
            if (!plain_text(s)) return;
            hb.decoded[8].assign(s);
            hb.stderr_tail = hb.decoded[8];
            return;
        default: return wrong_kind();
        }
        // Every string kept is stored, logged or passed on: no control
        // characters (C0, escaped newline or NUL included, and DEL, as
        // has_control_chars), and valid UTF-8, which the parser leaves to us.
        if (!plain_ascii(s) && !printable_utf8(s)) return;
        // A string as written in the body is kept as a view of it; one the
        // parser decoded (escapes) lives in its own buffer, so it is copied.
        const auto at = reinterpret_cast<std::uintptr_t>(s.data()), lo = reinterpret_cast<std::uintptr_t>(body.data());
        if (at >= lo && at - lo <= body.size() && s.size() <= body.size() - (at - lo)) {
            *dst = s;
        } else {
            hb.decoded[slot].assign(s);
            *dst = hb.decoded[slot];
        }
    }
    // The slow path: false, with the error, when s has a control character
    // or is not UTF-8.
    [[gnu::cold, gnu::noinline]] bool printable_utf8(std::string_view s) {
        for (unsigned char c : s)
            if (c < 0x20 || c == 0x7f) return fail(kKeyNames[key], "control characters are not allowed"), false;
        if (!is_valid_utf8(s)) return fail(kKeyNames[key], "not valid UTF-8"), false;
        return true;
    }

    // A stderr tail: bounded in bytes and lines, UTF-8, and no control
    // characters but newline and tab: not C0, DEL, nor C1 (U+009B is a CSI
    // to some terminals), so that neither a log, `shard show` on a terminal
    // nor the dashboard can be steered by it.
    [[gnu::cold, gnu::noinline]] bool plain_text(std::string_view s) {
        using B = HeartbeatBody;
        if (s.size() > B::kMaxStderrTail) return fail("stderr_tail", "longer than " + std::to_string(B::kMaxStderrTail) + " bytes"), false;
        std::size_t lines = 1;
        for (std::size_t i = 0; i < s.size(); ++i) {
            const unsigned char c = static_cast<unsigned char>(s[i]);
            lines += c == '\n';
            if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ||
                (c == 0xc2 && i + 1 < s.size() && (static_cast<unsigned char>(s[i + 1]) & 0xe0) == 0x80))
                return fail("stderr_tail", "control characters other than newline and tab are not allowed"), false;
        }
        if (lines > B::kMaxStderrLines) return fail("stderr_tail", "more than " + std::to_string(B::kMaxStderrLines) + " lines"), false;
        if (!is_valid_utf8(s)) return fail("stderr_tail", "not valid UTF-8"), false;
        return true;
    }

    bool on_document_begin(ec_t &) { return true; }
    bool on_document_end(ec_t &) { return true; }
    bool on_object_begin(ec_t &) {
        Frame f = other;
        if (depth == 0) f = top;
        else if (parent() == top || parent() == fatal_array) wrong_kind();
        else if (parent() == ranks_array) { f = rank_object; ++hb.ranks; rank_exit = {}; }
        else if (parent() == rank_object && key == k_exit) f = exit_object;
        open(f);
        return true;
    }
    bool on_object_end(std::size_t, ec_t &) {
        if (depth <= kKept && depth > 0 && frames[depth - 1] == rank_object && rank_exit.failed() && rank_exit.rank >= 0) {
            if (earlier(rank_exit, hb.first_failure)) hb.first_failure = rank_exit;
            if (failed.size() < 4096) failed.push_back(rank_exit);
        }
        --depth;
        return true;
    }
    bool on_array_begin(ec_t &) {
        Frame f = other;
        if (depth == 0) not_object = true;
        else if (parent() == top && key == k_ranks) { f = ranks_array; seen_ranks = true; }
        else if (parent() == top && key == k_fatal_exit) f = fatal_array;
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
    bool on_double(double v, json::string_view, ec_t &) {
        if (parent() == exit_object && key == k_time) { if (v > 0 && v < 1e11) rank_exit.time = v; return true; }
        wrong_kind();
        return true;
    }
    bool on_bool(bool b, ec_t &) {
        if (parent() == rank_object && key == k_checkpointing) hb.checkpointing = hb.checkpointing || b;
        else if (parent() == top && key == k_prelimit) hb.prelimit_signalled = b;
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
    json::basic_parser<BodySax> p(opt, out, err, body);
    ec_t ec;
    const std::size_t used = p.write_some(false, body.data(), body.size(), ec);
    const bool trailing = body.substr(used).find_first_not_of(" \t\r\n") != std::string_view::npos;
    if (ec || trailing || p.handler().not_object) {
        err = BodyError{"bad_json", "", "body is not a JSON object"};
        return false;
    }
    if (!err.code.empty()) return false;
    const BodySax &r = p.handler();
    for (auto [seen, name] : {std::pair{r.seen_run, "run"}, {r.seen_attempt, "attempt"}, {r.seen_node, "node"}})
        if (!seen) { err = BodyError{"bad_field", name, std::string(name) + ": missing"}; return false; }
    if (!r.seen_ranks) { err = BodyError{"bad_field", "ranks", "ranks: expected an array"}; return false; }
    // Known once the whole body is read: the codes may come after the ranks.
    if (out.fatal_exit.any())
        for (const auto &e : r.failed)
            if (e.code && *e.code >= 1 && *e.code <= 255 && out.fatal_exit.test(std::size_t(*e.code)) && earlier(e, out.fatal_failure))
                out.fatal_failure = e;
    return true;
}

}  // namespace shardnet::broker
