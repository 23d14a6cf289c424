// Strict reading of a JSON object from outside (a file, a peer): every
// field typed, unknown fields refused, and each error naming the field by
// its path ("predicate.seq: expected an integer").
#pragma once
#include <boost/json.hpp>
#include <initializer_list>
#include <string>
#include <string_view>

#include "common/parse_util.hpp"

namespace shardnet {

// Every string in v (keys too) made well-formed UTF-8 (make_valid_utf8):
// for JSON read with allow_invalid_utf8 (Slurm's answers hold the bytes a
// job was given), before any of it is written out. True when any changed.
inline bool make_strings_valid_utf8(boost::json::value &v) {
    bool changed = false;
    if (auto *s = v.if_string()) {
        if (is_valid_utf8(*s)) return false;
        std::string text(*s);
        make_valid_utf8(text);
        *s = text;
        return true;
    }
    if (auto *a = v.if_array()) {
        for (auto &x : *a) changed = make_strings_valid_utf8(x) || changed;
    } else if (auto *o = v.if_object()) {
        boost::json::object fixed;
        bool keys = false;
        for (auto &kv : *o) {
            changed = make_strings_valid_utf8(kv.value()) || changed;
            keys = keys || !is_valid_utf8(kv.key());
        }
        if (keys) {
            for (auto &kv : *o) fixed[valid_utf8(kv.key())] = std::move(kv.value());
            *o = std::move(fixed);
            changed = true;
        }
    }
    return changed;
}

class JsonFields {
public:
    JsonFields(const boost::json::object &o, std::string path) : o_(o), path_(std::move(path)) {}

    // The first error met ("" while none), and the path of the object.
    const std::string &error() const { return err_; }
    bool ok() const { return err_.empty(); }
    std::string name(std::string_view k) const { return path_.empty() ? std::string(k) : path_ + "." + std::string(k); }

    bool fail(std::string_view k, const std::string &why) {
        if (err_.empty()) err_ = name(k) + ": " + why;
        return false;
    }
    // Refuses a field not in allowed (a typo would otherwise be ignored).
    bool only(std::initializer_list<std::string_view> allowed) {
        for (const auto &kv : o_) {
            bool known = false;
            for (auto a : allowed) known = known || kv.key() == a;
            if (!known) return fail(kv.key(), "unknown field");
        }
        return true;
    }
    const boost::json::value *get(std::string_view k, bool required) {
        const auto *v = o_.if_contains(k);
        if (!v && required) fail(k, "missing");
        return v;
    }
    bool str(std::string_view k, std::string &out, bool required = true) {
        const auto *v = get(k, required);
        if (!v) return !required && ok();
        if (!v->is_string()) return fail(k, "expected a string");
        out = std::string(v->as_string());
        return true;
    }
    bool integer(std::string_view k, long long lo, long long hi, long long &out, bool required = true) {
        const auto *v = get(k, required);
        if (!v) return !required && ok();
        if (!v->is_int64() && !(v->is_uint64() && v->as_uint64() <= (unsigned long long)hi)) return fail(k, "expected an integer");
        const long long n = v->is_int64() ? v->as_int64() : (long long)v->as_uint64();
        if (n < lo || n > hi) return fail(k, "expected " + std::to_string(lo) + ".." + std::to_string(hi) + ", not " + std::to_string(n));
        out = n;
        return true;
    }
    const boost::json::object *object(std::string_view k, bool required = true) {
        const auto *v = get(k, required);
        if (!v) return nullptr;
        if (!v->is_object()) { fail(k, "expected an object"); return nullptr; }
        return &v->as_object();
    }
    const boost::json::array *array(std::string_view k, bool required = true) {
        const auto *v = get(k, required);
        if (!v) return nullptr;
        if (!v->is_array()) { fail(k, "expected an array"); return nullptr; }
        return &v->as_array();
    }

private:
    const boost::json::object &o_;
    std::string path_, err_;
};

// Lower-case hex of exactly n characters (digests as the project writes them).
inline bool is_lower_hex(std::string_view s, std::size_t n) {
    if (s.size() != n) return false;
    for (char c : s)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

}  // namespace shardnet
