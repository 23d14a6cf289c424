#include "spank/stderr_tail.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "common/parse_util.hpp"

namespace shardnet {

namespace {

// The length of the UTF-8 sequence at s[i], or 0 when it is not one.
std::size_t utf8_at(std::string_view s, std::size_t i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
    return n && i + n <= s.size() && is_valid_utf8(s.substr(i, n)) ? n : 0;
}

// One line as a person would have seen it on a terminal, made plain.
std::string clean_line(std::string_view line) {
    while (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    // A progress bar rewrites its line after each carriage return: its last version is what was seen.
    if (const auto cr = line.rfind('\r'); cr != std::string_view::npos) line.remove_prefix(cr + 1);
    std::string out;
    for (std::size_t i = 0; i < line.size();) {
        const unsigned char c = static_cast<unsigned char>(line[i]);
        if (c == 0x1b) {
            // A terminal escape: CSI (colours, cursor moves) up to its final
            // byte, OSC (titles, links) up to BEL or ST, else ESC and one byte.
            ++i;
            if (i < line.size() && line[i] == '[') {
                for (++i; i < line.size() && !(line[i] >= 0x40 && line[i] <= 0x7e);) ++i;
                ++i;
            } else if (i < line.size() && line[i] == ']') {
                for (++i; i < line.size() && line[i] != '\a' && !(line[i] == 0x1b && i + 1 < line.size() && line[i + 1] == '\\');) ++i;
                i += i < line.size() && line[i] == 0x1b ? 2 : 1;
            } else {
                ++i;
            }
            continue;
        }
        if (c == '\t' || (c >= 0x20 && c < 0x7f)) { out += char(c); ++i; continue; }
        if (c < 0x80) { ++i; continue; }   // C0 and DEL
        const std::size_t n = utf8_at(line, i);
        if (!n) { out += "\xef\xbf\xbd"; ++i; continue; }
        // C1 controls (U+0080..U+009F; U+009B is a CSI to some terminals).
        if (!(n == 2 && c == 0xc2 && static_cast<unsigned char>(line[i + 1]) < 0xa0)) out.append(line.substr(i, n));
        i += n;
    }
    return out;
}

}  // namespace

std::string clean_stderr_tail(std::string_view bytes, bool at_start) {
    if (!at_start) {
        // The read began inside a line: that line is not whole, unless it is the only one.
        if (const auto nl = bytes.find('\n'); nl != std::string_view::npos) bytes.remove_prefix(nl + 1);
        else
            for (int k = 0; k < 3 && !bytes.empty() && (static_cast<unsigned char>(bytes.front()) & 0xc0) == 0x80; ++k) bytes.remove_prefix(1);
    }
    std::vector<std::string> lines;
    for (std::size_t pos = 0; pos <= bytes.size();) {
        const auto nl = bytes.find('\n', pos);
        lines.push_back(clean_line(bytes.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos)));
        if (nl == std::string_view::npos) break;
        pos = nl + 1;
    }
    auto blank = [](const std::string &l) { return l.find_first_not_of(" \t") == std::string::npos; };
    while (!lines.empty() && blank(lines.back())) lines.pop_back();
    std::size_t first = lines.size() > kStderrTailLines ? lines.size() - kStderrTailLines : 0;
    std::string out;
    for (;; ++first) {
        out.clear();
        for (std::size_t i = first; i < lines.size(); ++i) out += (i == first ? "" : "\n") + lines[i];
        if (out.size() <= kStderrTailBytes || first + 1 >= lines.size()) break;
    }
    // One line longer than the bound (U+FFFD makes a byte three): its end,
    // from a character's start.
    if (out.size() > kStderrTailBytes) {
        std::size_t cut = out.size() - kStderrTailBytes;
        while (cut < out.size() && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) ++cut;
        out.erase(0, cut);
    }
    return out;
}

std::string read_stderr_tail(const std::string &path, std::string &err) {
    err.clear();
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) { err = path + ": " + std::strerror(errno); return ""; }
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        err = path + ": not a regular file";
        return "";
    }
    const off_t from = st.st_size > off_t(kStderrTailBytes) ? st.st_size - off_t(kStderrTailBytes) : 0;
    char buf[kStderrTailBytes];
    std::size_t got = 0;
    while (got < sizeof buf) {
        const ssize_t n = ::pread(fd, buf + got, sizeof buf - got, from + off_t(got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += std::size_t(n);
    }
    ::close(fd);
    return clean_stderr_tail(std::string_view(buf, got), from == 0);
}

}  // namespace shardnet
