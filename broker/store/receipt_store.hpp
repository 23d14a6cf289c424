// Signed receipts and their log (store/receipt_store.cpp; doc/receipts.md):
// Store::receipts(). Each call belongs inside the transaction of the record
// it attests.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "broker/store/store_part.hpp"

namespace shardnet::broker {

class ReceiptStore : StorePart {
public:
    explicit ReceiptStore(Store &store) : StorePart(store) {}

    struct ReceiptRow {
        std::string run;
        long long seq = 0, attempt = 0;
        std::string kind;
        double time = 0;
        std::string envelope, digest;   // the envelope's JSON bytes and their hex SHA-256
        long long log_index = 0;
        std::string keyid;
    };
    std::optional<ReceiptRow> last_receipt(const std::string &run);
    bool has_receipt(const std::string &run, long long attempt, const std::string &kind);
    void insert_receipt(const ReceiptRow &r);
    // In chain order, from the first seq above after, at most limit (-1: all).
    std::vector<ReceiptRow> list_receipts(const std::string &run, long long after = 0, long long limit = -1);
    // The log: its size (leaves), and perfect subtree (level, index) as 32
    // raw bytes ("" when not stored: not complete yet, or past the end).
    long long log_size();
    std::string log_node(int level, long long index);
    void put_log_node(int level, long long index, const std::string &hash);
    struct TreeHeadRow { long long size = 0; std::string root, envelope; double time = 0; };
    std::optional<TreeHeadRow> last_tree_head();
    std::optional<TreeHeadRow> tree_head(long long size);
    void insert_tree_head(const TreeHeadRow &h);
    // Which keys signed receipts here, when first and last, and each one's
    // public half (GET /v1/keys lists a key rotated away from it).
    struct KeyUse { std::string keyid; double first = 0, last = 0; long long receipts = 0; std::string pem; };
    std::vector<KeyUse> key_uses();
    // A signing key's public half, kept from when it is configured (before
    // it signs anything), so that a key rotated away stays listed.
    void record_key(const std::string &keyid, const std::string &pem);
};

}  // namespace shardnet::broker
