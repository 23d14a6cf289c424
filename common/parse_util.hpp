// Small, strict parsers for values that come from users and site files.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace shardnet {

// A whole decimal integer in [lo, hi]; no sign tricks, spaces or suffixes.
std::optional<long long> parse_int(std::string_view s, long long lo, long long hi);

// "USR1", "SIGUSR1" or a number 1..64; 0 if not a signal we allow.
int parse_signal(std::string_view s);
std::string signal_name(int sig);

// True if s has bytes that must never reach a log line, env var or argv:
// control characters (newline included) and DEL.
bool has_control_chars(std::string_view s);

// True if s is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF).
bool is_valid_utf8(std::string_view s);
// s made well-formed UTF-8: each byte that starts no character becomes
// U+FFFD (what Slurm, a job or a peer wrote as raw bytes, before it leaves
// the broker in an event, an answer or a log line). make_valid_utf8: in
// place, true when anything changed.
bool make_valid_utf8(std::string &s);
std::string valid_utf8(std::string_view s);

// Run ids and checkpoint names: [A-Za-z0-9][A-Za-z0-9._-]{0,max-1}.
bool is_safe_name(std::string_view s, std::size_t max = 64);

// A query value: every byte but [A-Za-z0-9._~/-] as %XX (RFC 3986).
std::string percent_encode(std::string_view s);
// Its inverse; nullopt for a '%' not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view s);

}  // namespace shardnet
