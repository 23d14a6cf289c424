#include "common/digest.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <unistd.h>
#include <vector>

namespace shardnet {

std::string to_hex(const uint8_t *bytes, std::size_t n) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out(2 * n, '0');
    for (std::size_t i = 0; i < n; ++i) {
        out[2 * i] = kHex[bytes[i] >> 4];
        out[2 * i + 1] = kHex[bytes[i] & 15];
    }
    return out;
}

std::string sha256_hex(std::string_view data) {
    sha256_ctx ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, data.size(), reinterpret_cast<const uint8_t *>(data.data()));
    uint8_t md[SHA256_DIGEST_SIZE];
    sha256_digest(&ctx, sizeof md, md);
    return to_hex(md, sizeof md);
}

std::string sha256_file_hex(const std::string &path, unsigned long long &bytes, std::string &err) {
    bytes = 0;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) { err = "cannot open '" + path + "': " + std::strerror(errno); return ""; }
    sha256_ctx ctx;
    sha256_init(&ctx);
    std::vector<uint8_t> buf(1 << 20);
    for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) { err = "cannot read '" + path + "': " + std::strerror(errno); ::close(fd); return ""; }
        if (n == 0) break;
        sha256_update(&ctx, std::size_t(n), buf.data());
        bytes += std::size_t(n);
    }
    ::close(fd);
    uint8_t md[SHA256_DIGEST_SIZE];
    sha256_digest(&ctx, sizeof md, md);
    return to_hex(md, sizeof md);
}

}  // namespace shardnet
