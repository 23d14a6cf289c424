// The broker's receipts key: the one that signs now, the configured retired
// ones (listed at /v1/keys), and the pin of the last log head signed, kept
// beside the key's file (head_pin.hpp). The store thread's only: a receipt
// or a head is signed wholly by the old key or by the new one.
#pragma once
#include <string>
#include <vector>

#include "broker/config/config.hpp"
#include "broker/store/store.hpp"
#include "common/signing_key.hpp"

namespace shardnet::broker::receipts {

class Signer {
public:
    // keys off: it signs nothing. On: the key's public half is recorded from
    // its first day (a rotation away from it keeps it listed), and a
    // database shorter than, or different from, the last head signed beside
    // its file is refused (throws): the log only moves forward.
    Signer(Store &store, const ReceiptKeys &keys);
    const SigningKey &key() const { return key_; }
    const std::vector<SigningKey> &retired() const { return retired_; }
    // SIGHUP: a new key_file signs from now on, the old key stays listed as
    // retired, and the pin moves beside the new key.
    void rotate(const ReceiptKeys &fresh);
    // A signed head of the log as it is now: the stored one when the log has
    // not grown since (and the key in force signed it), else signed now.
    Store::TreeHeadRow current_head(double now);

private:
    // Pins the head (size, root) beside the key before it is shown; throws
    // when it cannot (the head is then not served).
    void pin(long long size, const std::string &root_hex);
    Store &store_;
    SigningKey key_;
    std::string head_pin_;   // KEY_FILE.head; "" when receipts are off
    long long pinned_ = -1;  // the largest log size known pinned there (-1: none yet this run)
    std::vector<SigningKey> retired_;
};

}  // namespace shardnet::broker::receipts
