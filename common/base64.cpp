#include "common/base64.hpp"

#include <cstdint>

namespace shardnet {

namespace {
constexpr char kStd[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// 0..63 for a digit of the alphabet in use, -1 otherwise. The first '+'/'/'
// or '-'/'_' seen fixes the alphabet: a text that mixes them is refused.
int digit(char c, int &alphabet) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    const int want = (c == '+' || c == '/') ? 1 : (c == '-' || c == '_') ? 2 : 0;
    if (!want || (alphabet && alphabet != want)) return -1;
    alphabet = want;
    return (c == '+' || c == '-') ? 62 : 63;
}
}  // namespace

std::string base64_encode(std::string_view in) {
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 3 <= in.size(); i += 3) {
        const uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
        out += {kStd[v >> 18], kStd[(v >> 12) & 63], kStd[(v >> 6) & 63], kStd[v & 63]};
    }
    if (const std::size_t rest = in.size() - i; rest) {
        uint32_t v = uint32_t(uint8_t(in[i])) << 16;
        if (rest == 2) v |= uint32_t(uint8_t(in[i + 1])) << 8;
        out += {kStd[v >> 18], kStd[(v >> 12) & 63], rest == 2 ? kStd[(v >> 6) & 63] : '=', '='};
    }
    return out;
}

std::optional<std::string> base64_decode(std::string_view in) {
    std::size_t pad = 0;
    while (pad < 2 && pad < in.size() && in[in.size() - 1 - pad] == '=') ++pad;
    if (pad && in.size() % 4) return std::nullopt;   // padded, then padded whole
    const std::string_view body = in.substr(0, in.size() - pad);
    if (body.size() % 4 == 1) return std::nullopt;
    std::string out;
    out.reserve(body.size() * 3 / 4);
    int alphabet = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : body) {
        const int d = digit(c, alphabet);
        if (d < 0) return std::nullopt;
        acc = (acc << 6) | uint32_t(d);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(char((acc >> bits) & 0xff));
        }
    }
    // The bits left over are the last digit's padding: they must be zero,
    // so that each byte string has one encoding only.
    if (bits && (acc & ((1u << bits) - 1))) return std::nullopt;
    return out;
}

}  // namespace shardnet
