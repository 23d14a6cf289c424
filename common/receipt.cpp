#include "common/receipt.hpp"

#include <boost/json.hpp>
#include <cmath>
#include <ctime>
#include <stdexcept>

#include "common/digest.hpp"
#include "common/file_list.hpp"
#include "common/json_fields.hpp"
#include "common/parse_util.hpp"

namespace shardnet::receipt {

namespace json = boost::json;

namespace {

constexpr const char *kKinds[] = {"attempt-started", "checkpoint-sealed", "attempt-ended", "run-ended", "attempt-restarted"};

bool is_str_or_null(const json::object &o, const char *k) {
    const auto *v = o.if_contains(k);
    return v && (v->is_string() || v->is_null());
}

// The fields each kind's body must have (doc/receipts.md lists the rest).
std::string body_error(Kind k, const json::object &b) {
    JsonFields f(b, "predicate.body");
    std::string s;
    long long n = 0;
    switch (k) {
    case Kind::attempt_started:
        if (!f.str("cluster", s) || !f.integer("job", 1, 1LL << 53, n)) return f.error();
        break;
    case Kind::checkpoint_sealed:
        if (!f.str("checkpoint", s)) return f.error();
        if (!is_safe_name(s, 128)) return "predicate.body.checkpoint: 1-128 of [A-Za-z0-9._-]";
        if (!is_str_or_null(b, "parent")) return "predicate.body.parent: expected a checkpoint name or null";
        // The file list as its Merkle root (file_list.hpp); a receipt of an
        // earlier broker lists the files as subjects instead.
        if (const auto *files = b.if_contains("files")) {
            file_list::Summary sum;
            if (auto e = file_list::read_summary(*files, "predicate.body.files", sum); !e.empty()) return e;
        }
        break;
    case Kind::attempt_ended:
        if (!f.str("how", s)) return f.error();
        break;
    case Kind::run_ended:
        if (!f.str("state", s)) return f.error();
        break;
    case Kind::attempt_restarted:
        if (!f.integer("restart", 1, 1LL << 53, n)) return f.error();
        if (const auto *nodes = b.if_contains("nodes"); !nodes || !nodes->is_array()) return "predicate.body.nodes: expected a list of nodes";
        break;
    }
    return "";
}

json::object subject_json(const Subject &s) {
    json::object o{{"name", s.name}, {"digest", json::object{{"sha256", s.sha256}}}};
    if (!s.annotations.empty()) o["annotations"] = s.annotations;
    return o;
}

}  // namespace

const char *kind_name(Kind k) { return kKinds[int(k)]; }

std::optional<Kind> kind_of(std::string_view name) {
    for (std::size_t i = 0; i < std::size(kKinds); ++i)
        if (name == kKinds[i]) return Kind(i);
    return std::nullopt;
}

std::vector<Subject> shard_subjects(const std::vector<ShardFile> &files) {
    std::vector<Subject> out;
    out.reserve(files.size());
    for (const auto &f : files) {
        Subject s{f.path, f.sha256, json::object{{"size", f.bytes}}};
        if (f.rank >= 0) s.annotations["rank"] = f.rank;
        if (!f.node.empty()) s.annotations["node"] = f.node;
        out.push_back(std::move(s));
    }
    return out;
}

bool is_utc_time(std::string_view s) {
    const std::string_view shape = "dddd-dd-ddTdd:dd:dd";
    if (s.size() < shape.size() + 1 || s.back() != 'Z') return false;
    for (std::size_t i = 0; i < shape.size(); ++i)
        if (shape[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != shape[i]) return false;
    std::string_view rest = s.substr(shape.size(), s.size() - shape.size() - 1);
    if (rest.empty()) return true;
    if (rest[0] != '.' || rest.size() < 2) return false;
    for (char c : rest.substr(1))
        if (!(c >= '0' && c <= '9')) return false;
    return true;
}

int compare_utc_times(std::string_view a, std::string_view b) {
    // The seconds as strings, then the fractions as decimals: "…00.5Z" is
    // after "…00Z", which a plain string comparison gets wrong.
    if (const int c = a.substr(0, 19).compare(b.substr(0, 19)); c != 0) return c < 0 ? -1 : 1;
    auto frac = [](std::string_view s) { return s.size() > 21 ? s.substr(20, s.size() - 21) : std::string_view(); };
    std::string fa(frac(a)), fb(frac(b));
    fa.resize(std::max(fa.size(), fb.size()), '0');
    fb.resize(fa.size(), '0');
    return fa < fb ? -1 : fa > fb ? 1 : 0;
}

std::string utc_time(double t) {
    const std::time_t whole = std::time_t(std::floor(t));
    long ms = std::lround((t - double(whole)) * 1000);
    std::time_t secs = whole;
    if (ms >= 1000) ++secs, ms -= 1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[96];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                  tm.tm_min, tm.tm_sec, ms);
    return buf;
}

std::string receipt_error(const Receipt &r) {
    if (!is_safe_name(r.run, 128)) return "predicate.run: 1-128 of [A-Za-z0-9._-]";
    if (r.attempt < 1) return "predicate.attempt: from 1";
    if (r.broker.empty() || has_control_chars(r.broker) || r.broker.size() > 128) return "predicate.broker: a broker id of 1-128 bytes";
    if (!is_utc_time(r.time)) return "predicate.time: expected RFC 3339 UTC, YYYY-MM-DDTHH:MM:SS[.fff]Z";
    if (r.seq < 1) return "predicate.seq: from 1";
    if (r.seq == 1 && !r.previous.empty()) return "predicate.previous: must be null for seq 1";
    if (r.seq > 1 && !is_lower_hex(r.previous, 64)) return "predicate.previous: expected the hex SHA-256 of receipt seq " + std::to_string(r.seq - 1);
    if (auto e = body_error(r.kind, r.body); !e.empty()) return e;
    if (r.kind == Kind::checkpoint_sealed && r.subjects.empty()) return "subject: a sealed checkpoint names its shard files";
    for (std::size_t i = 0; i < r.subjects.size(); ++i) {
        const auto &s = r.subjects[i];
        const std::string at = "subject[" + std::to_string(i) + "]";
        if (s.name.empty() || has_control_chars(s.name)) return at + ".name: empty or with control characters";
        if (!is_lower_hex(s.sha256, 64)) return at + ".digest.sha256: expected 64 lower-case hex digits";
    }
    return "";
}

std::string make_statement(const Receipt &r) {
    if (auto e = receipt_error(r); !e.empty()) throw std::invalid_argument(e);
    json::array subjects;
    for (const auto &s : r.subjects) subjects.push_back(subject_json(s));
    if (subjects.empty())
        subjects.push_back(subject_json(Subject{"shardnet:" + r.run + "/attempt/" + std::to_string(r.attempt) + "/" + kind_name(r.kind),
                                                sha256_hex(json::serialize(r.body)), {}}));
    json::object pred{{"kind", kind_name(r.kind)}, {"run", r.run},         {"attempt", r.attempt},
                      {"broker", r.broker},        {"time", r.time},       {"seq", r.seq},
                      {"previous", r.previous.empty() ? json::value(nullptr) : json::value(r.previous)},
                      {"body", r.body}};
    return json::serialize(json::object{
        {"_type", kStatementType}, {"subject", std::move(subjects)}, {"predicateType", kPredicateType}, {"predicate", std::move(pred)}});
}

std::string parse_statement(std::string_view payload, Receipt &out) {
    json::error_code ec;
    json::value v = json::parse(payload, ec);
    if (ec) return "payload is not JSON: " + ec.message();
    if (!v.is_object()) return "payload: a Statement is a JSON object";
    JsonFields st(v.as_object(), "");
    std::string type, ptype;
    if (!st.only({"_type", "subject", "predicateType", "predicate"}) || !st.str("_type", type) || !st.str("predicateType", ptype))
        return st.error();
    if (type != kStatementType) return "_type: " + type + " is not " + kStatementType;
    if (ptype != kPredicateType) return "predicateType: " + ptype + " is not " + kPredicateType;
    Receipt r;
    const json::array *subjects = st.array("subject");
    if (!subjects) return st.error();
    if (subjects->empty()) return "subject: empty (in-toto needs one)";
    for (std::size_t i = 0; i < subjects->size(); ++i) {
        const std::string at = "subject[" + std::to_string(i) + "]";
        if (!(*subjects)[i].is_object()) return at + ": expected an object";
        JsonFields sf((*subjects)[i].as_object(), at);
        Subject s;
        const json::object *digest = nullptr, *ann = nullptr;
        if (!sf.only({"name", "digest", "annotations"}) || !sf.str("name", s.name) || !(digest = sf.object("digest"))) return sf.error();
        if ((ann = sf.object("annotations", false))) s.annotations = *ann;
        if (!sf.ok()) return sf.error();
        JsonFields df(*digest, at + ".digest");
        if (!df.str("sha256", s.sha256)) return df.error();
        r.subjects.push_back(std::move(s));
    }
    const json::object *pred = st.object("predicate");
    if (!pred) return st.error();
    JsonFields p(*pred, "predicate");
    std::string kind;
    const json::object *body = nullptr;
    if (!p.only({"kind", "run", "attempt", "broker", "time", "seq", "previous", "body"}) || !p.str("kind", kind) ||
        !p.str("run", r.run) || !p.integer("attempt", 1, 1LL << 53, r.attempt) || !p.str("broker", r.broker) ||
        !p.str("time", r.time) || !p.integer("seq", 1, 1LL << 53, r.seq) || !(body = p.object("body")))
        return p.error();
    auto k = kind_of(kind);
    if (!k) return "predicate.kind: " + kind + " is not attempt-started, checkpoint-sealed, attempt-ended, run-ended or attempt-restarted";
    r.kind = *k;
    r.body = *body;
    const json::value *prev = p.get("previous", true);
    if (!prev) return p.error();
    if (prev->is_string()) r.previous = std::string(prev->as_string());
    else if (!prev->is_null()) return "predicate.previous: expected a hex SHA-256 or null";
    if (auto e = receipt_error(r); !e.empty()) return e;
    out = std::move(r);
    return "";
}

std::string sign_receipt(const SigningKey &key, const Receipt &r, dsse::Envelope &out) {
    dsse::Envelope env{dsse::kInTotoPayloadType, "", {}};
    try {
        env.payload = make_statement(r);
    } catch (const std::invalid_argument &e) {
        return e.what();
    }
    if (auto err = dsse::sign(key, env); !err.empty()) return err;
    out = std::move(env);
    return "";
}

std::string envelope_digest(const dsse::Envelope &env) { return sha256_hex(dsse::to_json(env)); }

}  // namespace shardnet::receipt
