// Typed reads of a peer's answer at a path ("clusters[3].cluster"), the
// first failure kept with its path: what every parser of a peer's JSON in
// federation/ shares (internal to federation/).
#pragma once
#include <boost/json.hpp>
#include <string>

#include "broker/peers/peer_answer.hpp"
#include "common/parse_util.hpp"

namespace shardnet::broker::peer_read {

namespace json = boost::json;

struct Reader {
    std::string err, field;

    bool fail(const std::string &path, const std::string &why) {
        if (err.empty()) { field = path; err = path + ": " + why; }
        return false;
    }
    static std::string at(const std::string &path, const char *key) { return path.empty() ? key : path + "." + key; }

    const json::value *get(const json::object &o, const char *key, const std::string &path, bool required) {
        const json::value *v = o.if_contains(key);
        if (!v && required) fail(at(path, key), "missing");
        return v;
    }
    bool string(const json::object &o, const char *key, const std::string &path, std::size_t max, bool names,
                std::string &out, bool required) {
        const json::value *v = get(o, key, path, required);
        if (!v) return !required;
        if (!v->is_string()) return fail(at(path, key), "expected a string");
        const json::string &s = v->get_string();
        if (s.size() > max) return fail(at(path, key), "longer than " + std::to_string(max) + " bytes");
        if (names && has_control_chars(s)) return fail(at(path, key), "has control characters");
        out.assign(s.data(), s.size());
        return true;
    }
    bool name(const json::object &o, const char *key, const std::string &path, std::string &out, bool required = true) {
        return string(o, key, path, kPeerNameMax, true, out, required);
    }
    bool text(const json::object &o, const char *key, const std::string &path, std::string &out, bool required = true) {
        return string(o, key, path, kPeerTextMax, false, out, required);
    }
    bool integer(const json::object &o, const char *key, const std::string &path, long long lo, long long hi, long long &out,
                 bool required = true) {
        const json::value *v = get(o, key, path, required);
        if (!v) return !required;
        const std::string range = "expected " + std::to_string(lo) + ".." + std::to_string(hi);
        long long n = 0;
        if (const auto *i = v->if_int64()) n = *i;
        else if (const auto *u = v->if_uint64()) { if (*u > (unsigned long long)hi) return fail(at(path, key), range); n = (long long)*u; }
        else return fail(at(path, key), "expected an integer");
        if (n < lo || n > hi) return fail(at(path, key), range);
        out = n;
        return true;
    }
    bool boolean(const json::object &o, const char *key, const std::string &path, bool &out, bool required = true) {
        const json::value *v = get(o, key, path, required);
        if (!v) return !required;
        if (!v->is_bool()) return fail(at(path, key), "expected true or false");
        out = v->get_bool();
        return true;
    }
    const json::array *array(const json::object &o, const char *key, const std::string &path, std::size_t max, bool required) {
        const json::value *v = get(o, key, path, required);
        if (!v) return nullptr;
        const json::array *a = v->if_array();
        if (!a) { fail(at(path, key), "expected an array"); return nullptr; }
        if (a->size() > max) { fail(at(path, key), "more than " + std::to_string(max) + " entries"); return nullptr; }
        return a;
    }
};

// The body as a JSON object, or why not.
inline const json::object *body_object(const std::string &body, json::value &holder, Reader &rd) {
    json::error_code ec;
    holder = json::parse(body, ec);
    if (ec) { rd.fail("body", "not JSON (" + ec.message() + ")"); return nullptr; }
    if (!holder.is_object()) { rd.fail("body", "expected an object"); return nullptr; }
    return &holder.get_object();
}

inline std::string item(const std::string &path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

}  // namespace shardnet::broker::peer_read
