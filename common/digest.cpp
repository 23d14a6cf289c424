#include "common/digest.hpp"

#include <nettle/sha2.h>

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

}  // namespace shardnet
