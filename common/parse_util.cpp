#include "common/parse_util.hpp"

#include <charconv>
#include <csignal>
#include <cstring>

namespace shardnet {

std::optional<long long> parse_int(std::string_view s, long long lo, long long hi) {
    if (s.empty() || s.size() > 19) return std::nullopt;
    long long v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    if (s[0] == '+' || (s[0] == '-' && lo >= 0)) return std::nullopt;
    if (v < lo || v > hi) return std::nullopt;
    return v;
}

namespace {
struct SigName { const char *name; int sig; };
constexpr SigName kSignals[] = {
    {"HUP", SIGHUP}, {"INT", SIGINT}, {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
    {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"URG", SIGURG},
    {"WINCH", SIGWINCH}, {"ALRM", SIGALRM},
};
}  // namespace

int parse_signal(std::string_view s) {
    if (s.substr(0, 3) == "SIG") s.remove_prefix(3);
    for (const auto &e : kSignals)
        if (s == e.name) return e.sig;
    // Numbers are accepted, but never SIGKILL/SIGSTOP: the point is to let the
    // trainer write an emergency checkpoint, which it cannot do if killed.
    auto n = parse_int(s, 1, 64);
    if (!n || *n == SIGKILL || *n == SIGSTOP) return 0;
    return static_cast<int>(*n);
}

std::string signal_name(int sig) {
    for (const auto &e : kSignals)
        if (e.sig == sig) return std::string("SIG") + e.name;
    return std::to_string(sig);
}

bool has_control_chars(std::string_view s) {
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f) return true;
    return false;
}

namespace {
// The length of the well-formed UTF-8 sequence that starts at p (1 for
// ASCII), or 0 when none does: the lead byte gives the length and the range
// of the first continuation byte (narrower after E0, ED, F0 and F4).
int sequence_length(const unsigned char *p, const unsigned char *end) {
    if (*p < 0x80) return 1;
    int more;
    unsigned lo = 0x80, hi = 0xBF;
    if (*p >= 0xC2 && *p <= 0xDF) more = 1;
    else if (*p >= 0xE0 && *p <= 0xEF) { more = 2; lo = *p == 0xE0 ? 0xA0 : lo; hi = *p == 0xED ? 0x9F : hi; }
    else if (*p >= 0xF0 && *p <= 0xF4) { more = 3; lo = *p == 0xF0 ? 0x90 : lo; hi = *p == 0xF4 ? 0x8F : hi; }
    else return 0;
    if (end - p <= more || p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i <= more; ++i)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return more + 1;
}

bool all_ascii(std::string_view s) {
    unsigned char any = 0;   // ASCII, nearly always: one pass the compiler vectorises
    for (unsigned char c : s) any |= c;
    return any < 0x80;
}
}  // namespace

bool is_valid_utf8(std::string_view s) {
    if (all_ascii(s)) return true;
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    const auto *end = p + s.size();
    while (p < end) {
        const int n = sequence_length(p, end);
        if (n == 0) return false;
        p += n;
    }
    return true;
}

bool make_valid_utf8(std::string &s) {
    if (is_valid_utf8(s)) return false;
    std::string out;
    out.reserve(s.size() + 16);
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    const auto *end = p + s.size();
    while (p < end) {
        const int n = sequence_length(p, end);
        if (n == 0) { out += "\xEF\xBF\xBD"; ++p; continue; }   // U+FFFD for each byte that starts no character
        out.append(reinterpret_cast<const char *>(p), std::size_t(n));
        p += n;
    }
    s = std::move(out);
    return true;
}

std::string valid_utf8(std::string_view s) {
    std::string out(s);
    make_valid_utf8(out);
    return out;
}

bool is_safe_name(std::string_view s, std::size_t max) {
    if (s.empty() || s.size() > max) return false;
    auto ok = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == '-';
    };
    if (!ok(s[0]) || s[0] == '.' || s[0] == '-' || s[0] == '_') return false;
    for (char c : s)
        if (!ok(c)) return false;
    return true;
}

std::string percent_encode(std::string_view s) {
    static const char hex[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(s.size());
    for (unsigned char c : s) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '~' ||
            c == '/' || c == '-') {
            out += char(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

std::optional<std::string> percent_decode(std::string_view s) {
    auto digit = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '%') { out += s[i]; continue; }
        const int hi = i + 1 < s.size() ? digit(s[i + 1]) : -1, lo = i + 2 < s.size() ? digit(s[i + 2]) : -1;
        if (hi < 0 || lo < 0) return std::nullopt;
        out += char(hi * 16 + lo);
        i += 2;
    }
    return out;
}

}  // namespace shardnet
