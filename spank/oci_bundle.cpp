#include "spank/oci_bundle.hpp"

#include <algorithm>
#include <boost/json.hpp>

namespace shardnet::oci {

namespace json = boost::json;

std::string bundle_arg(const std::vector<std::string> &args, size_t &at) {
    for (size_t i = 0; i < args.size(); ++i) {
        if ((args[i] == "--bundle" || args[i] == "-b") && i + 1 < args.size()) { at = i + 1; return args[i + 1]; }
        if (args[i].rfind("--bundle=", 0) == 0) { at = i; return args[i].substr(9); }
    }
    return "";
}

void set_bundle_arg(std::vector<std::string> &args, size_t at, const std::string &dir) {
    if (at >= args.size()) return;
    args[at] = args[at].rfind("--bundle=", 0) == 0 ? "--bundle=" + dir : dir;
}

std::vector<std::string> split_env(const std::string &text) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\0', start);
        if (end == std::string::npos) end = text.size();
        std::string e = text.substr(start, end - start);
        if (e.find('=') != std::string::npos && e[0] != '=') out.push_back(std::move(e));
        start = end + 1;
    }
    return out;
}

namespace {

std::string value_of(const std::vector<std::string> &env, const std::string &name) {
    std::string v;
    for (const auto &e : env)   // the last one counts, as getenv's would not: ours are set after Slurm's
        if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=') v = e.substr(name.size() + 1);
    return v;
}

std::string clean_dir(std::string d) {
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    return d;
}

bool usable_dir(const std::string &d) {
    return d.size() > 1 && d[0] == '/' && d.find('\n') == std::string::npos && d.find("/../") == std::string::npos &&
           (d.size() < 3 || d.compare(d.size() - 3, 3, "/..") != 0);
}

}  // namespace

std::string umoci_digest(const std::string &text) {
    boost::system::error_code ec;
    const json::value v = json::parse(text, ec);
    if (ec || !v.is_object()) return "";
    const auto *from = v.as_object().if_contains("from_descriptor_path");
    const auto *walk = from && from->is_object() ? from->as_object().if_contains("descriptor_walk") : nullptr;
    if (!walk || !walk->is_array()) return "";
    for (const auto &d : walk->as_array()) {
        if (!d.is_object()) continue;
        const auto *mt = d.as_object().if_contains("mediaType");
        const auto *dg = d.as_object().if_contains("digest");
        if (mt && mt->is_string() && mt->as_string() == "application/vnd.oci.image.manifest.v1+json" && dg && dg->is_string() &&
            dg->as_string().starts_with("sha256:") && dg->as_string().size() == 71 &&
            dg->as_string().find_first_not_of("0123456789abcdef", 7) == json::string::npos)
            return std::string(dg->as_string());
    }
    return "";
}

void add_bundle_digest(std::vector<std::string> &env, std::string (*read)(const std::string &path)) {
    if (!value_of(env, "SHARDNET_IMAGE_DIGEST").empty()) return;
    const std::string bundle = clean_dir(value_of(env, "SLURM_CONTAINER"));
    if (!usable_dir(bundle)) return;
    if (const std::string d = umoci_digest(read(bundle + "/umoci.json")); !d.empty()) env.push_back("SHARDNET_IMAGE_DIGEST=" + d);
}

std::vector<std::string> config_env(const std::string &config) {
    std::vector<std::string> out;
    boost::system::error_code ec;
    const json::value v = json::parse(config, ec);
    const json::value *p = !ec && v.is_object() ? v.as_object().if_contains("process") : nullptr;
    const json::value *e = p && p->is_object() ? p->as_object().if_contains("env") : nullptr;
    if (e && e->is_array())
        for (const auto &x : e->as_array())
            if (x.is_string() && x.as_string().find('=') != json::string::npos && !x.as_string().starts_with("=")) out.emplace_back(x.as_string());
    return out;
}

std::string task_config(const std::string &config, const std::string &bundle, const std::vector<std::string> &env, std::string &err,
                        const std::vector<std::string> &image_env) {
    json::value v;
    boost::system::error_code ec;
    v = json::parse(config, ec);
    if (ec || !v.is_object()) { err = "the bundle's config.json is not JSON"; return ""; }
    auto &c = v.as_object();
    auto *proc = c.if_contains("process");
    if (!proc || !proc->is_object()) { err = "the bundle's config.json has no process"; return ""; }
    // The bundle's own entries (the image's PATH, CUDA_HOME, ...) stay unless
    // the task sets the same name; the task's win.
    json::array e;
    auto name_of = [](const std::string &x) { return x.substr(0, x.find('=')); };
    std::vector<std::string> merged;
    auto set = [&](const std::string &x) {
        const std::string n = name_of(x);
        auto same = std::find_if(merged.begin(), merged.end(), [&](const std::string &m) { return name_of(m) == n; });
        if (same != merged.end()) *same = x;
        else merged.push_back(x);
    };
    for (const auto &x : image_env) set(x);
    for (const auto &x : config_env(config)) set(x);
    for (const auto &x : env) {
        if (x.rfind("SHARDNET_OCI_ENV=", 0) == 0) continue;
        set(x);
    }
    for (auto &x : merged) e.emplace_back(x);
    proc->as_object()["env"] = std::move(e);
    const std::string cwd = clean_dir(value_of(env, "PWD"));
    if (usable_dir(cwd)) proc->as_object()["cwd"] = cwd;
    if (auto *root = c.if_contains("root"); root && root->is_object()) {
        if (auto *p = root->as_object().if_contains("path"); p && p->is_string() && !p->as_string().starts_with("/"))
            *p = bundle + "/" + std::string(p->as_string());
        // The rootfs is shared by every job, attempt and node that runs this
        // digest: nothing a task writes may outlive it there.
        root->as_object()["readonly"] = true;
    } else {
        err = "the bundle's config.json has no root";
        return "";
    }
    std::vector<std::string> dirs;
    const std::string progress = value_of(env, "SHARDNET_PROGRESS");
    for (const std::string &d : {cwd, clean_dir(value_of(env, "SHARDNET_CKPT_DIR")),
                                 progress.rfind('/') != std::string::npos ? clean_dir(progress.substr(0, progress.rfind('/'))) : std::string()})
        if (usable_dir(d) && std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
    // A parent before what lies below it: the later mount goes over the earlier.
    std::sort(dirs.begin(), dirs.end(), [](const std::string &a, const std::string &b) { return a.size() < b.size(); });
    auto *mounts = c.if_contains("mounts");
    if (!mounts || !mounts->is_array()) mounts = &(c["mounts"] = json::array());
    // With the root read-only, scratch space of the task's own: a tmpfs at
    // /tmp and /var/tmp, before anything mounted below them (Slurm's
    // /tmp/slurm of a batch step), unless the bundle mounts something there.
    size_t front = 0;
    for (const char *t : {"/tmp", "/var/tmp"}) {
        const bool taken = std::any_of(mounts->as_array().begin(), mounts->as_array().end(), [&](const json::value &m) {
            auto *dst = m.is_object() ? m.as_object().if_contains("destination") : nullptr;
            return dst && dst->is_string() && clean_dir(std::string(dst->as_string())) == t;
        });
        if (!taken)
            mounts->as_array().insert(mounts->as_array().begin() + front++,
                                      json::object{{"destination", t}, {"type", "tmpfs"}, {"source", "tmpfs"},
                                                   {"options", json::array{"nosuid", "nodev", "mode=1777"}}});
    }
    for (const auto &d : dirs) {
        const bool taken = std::any_of(mounts->as_array().begin(), mounts->as_array().end(), [&](const json::value &m) {
            auto *dst = m.is_object() ? m.as_object().if_contains("destination") : nullptr;
            return dst && dst->is_string() && clean_dir(std::string(dst->as_string())) == d;
        });
        if (!taken)
            mounts->as_array().push_back(json::object{{"destination", d}, {"type", "bind"}, {"source", d}, {"options", json::array{"rbind", "rw"}}});
    }
    return json::serialize(v);
}

}  // namespace shardnet::oci
