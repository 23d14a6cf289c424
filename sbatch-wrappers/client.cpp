#include "sbatch-wrappers/client.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/http_client.hpp"

namespace shardnet::cli {

namespace json = boost::json;

namespace {

std::string read_token_file(const std::string &path, std::string &err) {
    std::ifstream f(path);
    if (!f) { err = "cannot read token file " + path; return ""; }
    std::string t;
    std::getline(f, t);
    while (!t.empty() && (t.back() == '\r' || t.back() == ' ')) t.pop_back();
    return t;
}

std::string broker_from(const json::object &o, const std::string &where, BrokerRef &b) {
    auto str = [&](const char *k, std::string &out) -> std::string {
        if (auto *v = o.if_contains(k)) {
            if (!v->is_string()) return where + "." + k + ": expected a string";
            out = std::string(v->as_string());
        }
        return "";
    };
    std::string token_file;
    for (auto err : {str("url", b.url), str("token", b.token), str("token_file", token_file), str("ca_file", b.ca_file)})
        if (!err.empty()) return err;
    if (!token_file.empty()) {
        std::string err;
        b.token = read_token_file(token_file, err);
        if (!err.empty()) return where + ".token_file: " + err;
    }
    return "";
}

}  // namespace

std::string load_cli_config(CliConfig &cfg, const BrokerRef &flags) {
    std::string path;
    if (const char *p = std::getenv("SHARD_CONFIG")) path = p;
    else if (const char *h = std::getenv("HOME")) path = std::string(h) + "/.config/shardnet/shard.json";
    std::ifstream f(path);
    if (f) {
        std::stringstream ss;
        ss << f.rdbuf();
        json::error_code ec;
        json::value v = json::parse(ss.str(), ec);
        if (ec || !v.is_object()) return path + ": not a JSON object";
        const auto &o = v.as_object();
        for (const auto &kv : o)
            if (kv.key() != "broker" && kv.key() != "brokers" && kv.key() != "clusters")
                return path + ": unknown key " + std::string(kv.key()) + " (expected broker, brokers, clusters)";
        if (auto *b = o.if_contains("broker")) {
            if (!b->is_object()) return path + ": broker: expected {url, token|token_file, ca_file}";
            if (auto err = broker_from(b->as_object(), path + ": broker", cfg.broker); !err.empty()) return err;
        }
        if (auto *bs = o.if_contains("brokers"); bs && bs->is_object())
            for (const auto &kv : bs->as_object()) {
                BrokerRef b;
                b.name = std::string(kv.key());
                if (!kv.value().is_object()) return path + ": brokers." + b.name + ": expected an object";
                if (auto err = broker_from(kv.value().as_object(), path + ": brokers." + b.name, b); !err.empty()) return err;
                cfg.brokers[b.name] = b;
            }
        if (auto *cs = o.if_contains("clusters"); cs && cs->is_object())
            for (const auto &kv : cs->as_object())
                if (auto *c = kv.value().is_object() ? kv.value().as_object().if_contains("slurm_conf") : nullptr; c && c->is_string())
                    cfg.slurm_conf[std::string(kv.key())] = std::string(c->as_string());
    }
    if (const char *e = std::getenv("SHARD_BROKER")) cfg.broker.url = e;
    if (const char *e = std::getenv("SHARD_TOKEN")) cfg.broker.token = e;
    if (const char *e = std::getenv("SHARD_CA_FILE")) cfg.broker.ca_file = e;
    if (!flags.url.empty()) cfg.broker.url = flags.url;
    if (!flags.token.empty()) cfg.broker.token = flags.token;
    if (!flags.ca_file.empty()) cfg.broker.ca_file = flags.ca_file;
    while (!cfg.broker.url.empty() && cfg.broker.url.back() == '/') cfg.broker.url.pop_back();
    if (cfg.broker.url.empty()) return "no broker: give --broker URL, SHARD_BROKER or \"broker\" in " + path;
    if (cfg.broker.token.empty()) return "no token: give --token, SHARD_TOKEN or a token in " + path;
    return "";
}

Answer call(const BrokerRef &b, const std::string &method, const std::string &path, const std::string &body, long timeout_ms,
            std::size_t max_body) {
    // One connection, kept alive; never destroyed (libcurl, loaded at run
    // time, may be gone before static destructors run).
    static HttpClient &client = *new HttpClient;
    HttpRequest r;
    r.method = method;
    r.url = b.url + path;
    r.body = body;
    r.bearer = b.token;
    r.ca_file = b.ca_file;
    r.timeout_ms = timeout_ms;
    r.max_body = max_body;
    HttpResponse res = client.send(r);
    Answer a;
    a.status = res.status;
    if (!res.status) { a.error = b.url + ": " + res.error; return a; }
    json::error_code ec;
    a.bytes = res.body.size();
    a.body = json::parse(res.body, ec);
    if (ec) a.body = nullptr;
    if (!a.ok()) {
        const json::object *e = a.body.is_object() && a.body.as_object().contains("error") && a.body.as_object().at("error").is_object()
                                    ? &a.body.as_object().at("error").as_object() : nullptr;
        a.error = "HTTP " + std::to_string(res.status) +
                  (e && e->contains("message") ? ": " + std::string(e->at("message").as_string()) : "");
    }
    return a;
}

}  // namespace shardnet::cli
