// The receipts key and the head pin beside it (signer.hpp).
#include "broker/receipts/signer.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <stdexcept>

#include "broker/receipts/head_pin.hpp"
#include "broker/receipts/receipts.hpp"
#include "broker/util/log.hpp"
#include "common/dsse.hpp"
#include "common/receipt.hpp"
#include "common/tree_head.hpp"

namespace shardnet::broker::receipts {

namespace json = boost::json;

Signer::Signer(Store &store, const ReceiptKeys &keys) : store_(store), key_(keys.key), retired_(keys.retired) {
    if (keys.on()) store_.transaction([&] { store_.receipts().record_key(key_.keyid(), key_.public_pem()); });
    if (keys.on() && !keys.key_file.empty()) {
        head_pin_ = head_pin_path(keys.key_file);
        if (std::string why = check_head_pin(store_, head_pin_); !why.empty()) throw std::runtime_error(why);
        if (std::string why = head_pin_writable(head_pin_); !why.empty()) throw std::runtime_error(why);
    }
}

void Signer::rotate(const ReceiptKeys &fresh) {
    try {
        store_.transaction([&] {
            store_.receipts().record_key(key_.keyid(), key_.public_pem());
            store_.receipts().record_key(fresh.key.keyid(), fresh.key.public_pem());
        });
    } catch (const std::exception &e) {
        log_json("warn", "receipts: the signing keys' public halves not recorded", json::object{{"why", e.what()}});
    }
    if (fresh.key.keyid() != key_.keyid()) {
        SigningKey old = key_;
        key_ = fresh.key;
        std::string err;
        const std::string pin = fresh.key_file.empty() ? "" : head_pin_path(fresh.key_file);
        if (auto last = head_pin_.empty() ? std::nullopt : read_head_pin(head_pin_, err); last && !pin.empty() && pin != head_pin_)
            err = write_head_pin(pin, *last);
        // A pin that could not be copied beside the new key stays where it
        // was (and the heads go on being pinned there): a restart with the
        // new key would find no pin and take a rolled-back log.
        if (!err.empty())
            log_json("error", "receipts: the log head not pinned beside the new key; it stays beside the old one",
                     json::object{{"why", err}, {"pin", head_pin_}});
        else
            head_pin_ = pin, pinned_ = -1;
        log_json("info", "receipts: signing key rotated; the old key stays listed as retired",
                 json::object{{"old_keyid", old.keyid()}, {"new_keyid", key_.keyid()}});
    }
    retired_ = fresh.retired;
}

void Signer::pin(long long size, const std::string &root_hex) {
    if (head_pin_.empty()) return;
    if (std::string err = write_head_pin(head_pin_, HeadPin{size, root_hex}); !err.empty()) {
        log_json("error", "receipts: the log head not pinned, so not served", json::object{{"why", err}});
        throw std::runtime_error("the log's head of size " + std::to_string(size) + " not pinned: " + err);
    }
    pinned_ = std::max(pinned_, size);
}

Store::TreeHeadRow Signer::current_head(double now) {
    const long long size = store_.receipts().log_size();
    // Heads are signed by the key in force: a stored one another key signed
    // (a rotation since) is signed again.
    // A stored head is served as it is once its size is pinned (one stored
    // by an older broker, or whose pin failed, is pinned first).
    if (auto last = store_.receipts().last_tree_head(); last && last->size == size) {
        dsse::Envelope env;
        if (dsse::from_json(last->envelope, env).empty() && !env.signatures.empty() && env.signatures[0].keyid == key_.keyid()) {
            if (!head_pin_.empty() && size > pinned_) pin(size, merkle::hex(merkle::root(uint64_t(size), log_source(store_))));
            return *last;
        }
    }
    const merkle::Hash root = merkle::root(uint64_t(size), log_source(store_));
    dsse::Envelope env;
    if (std::string err = receipt::sign_tree_head(key_, receipt::TreeHead{(unsigned long long)size, root, receipt::utc_time(now)}, env);
        !err.empty())
        throw std::runtime_error("the log's head of size " + std::to_string(size) + " not signed: " + err);
    Store::TreeHeadRow row{size, std::string(reinterpret_cast<const char *>(root.data()), root.size()), dsse::to_json(env), now};
    // Pinned outside the database before anyone sees it: a head once shown
    // is never followed by a shorter log (head_pin.hpp). A head that cannot
    // be pinned is not shown (the caller answers 500 with why).
    pin(size, merkle::hex(root));
    store_.transaction([&] { store_.receipts().insert_tree_head(row); });
    return row;
}

}  // namespace shardnet::broker::receipts
