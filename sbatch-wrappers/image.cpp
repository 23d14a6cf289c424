#include "sbatch-wrappers/image.hpp"

#include <boost/json.hpp>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "common/find_program.hpp"
#include "common/safe_path.hpp"
#include "sbatch-wrappers/launch_slurm.hpp"

namespace shardnet::cli::image {

namespace json = boost::json;

namespace {

constexpr const char *kTagAnnotation = "org.opencontainers.image.ref.name";

bool is_hex(const std::string &s) {
    return !s.empty() && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

bool valid_digest(const std::string &d) {
    return d.rfind("sha256:", 0) == 0 && d.size() == 7 + 64 && is_hex(d.substr(7));
}

// OCI's ref.name grammar, loosely: what skopeo and umoci take as a tag.
bool valid_tag(const std::string &t) {
    if (t.empty() || t.size() > 128) return false;
    for (char c : t)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
    return true;
}

// The caller's home as the accounts say (a job's HOME may be its submitter's).
std::string home_dir() {
    struct passwd pw, *r = nullptr;
    char buf[4096];
    if (getpwuid_r(getuid(), &pw, buf, sizeof buf, &r) == 0 && r && pw.pw_dir[0] == '/') return pw.pw_dir;
    const char *h = std::getenv("HOME");
    return h && *h == '/' ? h : "/tmp";
}

std::string absolute(const std::string &p) {
    if (!p.empty() && p[0] == '/') return p;
    char cwd[PATH_MAX];
    return getcwd(cwd, sizeof cwd) ? std::string(cwd) + "/" + p : p;
}

bool mkdirs(const std::string &path) {
    for (size_t i = 1; i <= path.size(); ++i)
        if (i == path.size() || path[i] == '/')
            if (::mkdir(path.substr(0, i).c_str(), 0700) != 0 && errno != EEXIST) return false;
    return true;
}

bool write_text(const std::string &path, const std::string &text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    const bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
    ::close(fd);
    return ok;
}

std::string last_line(std::string s);

// A cache dir (or an entry in one) that only the caller can have put there:
// a directory, not a symlink, the caller's, not writable by group or others.
// "" or why not.
std::string owned_dir(const std::string &path) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) return "cannot stat " + path + ": " + std::strerror(errno);
    if (S_ISLNK(st.st_mode)) return path + " is a symlink";
    if (!S_ISDIR(st.st_mode)) return path + " is not a directory";
    if (st.st_uid != ::getuid()) return path + " belongs to uid " + std::to_string(st.st_uid) + ", not to you (uid " + std::to_string(::getuid()) + ")";
    if (st.st_mode & 022) {
        char m[8];
        std::snprintf(m, sizeof m, "%04o", unsigned(st.st_mode & 07777));
        return path + " is writable by group or others (mode " + m + ")";
    }
    return "";
}

// Where PATH finds TOOL, "" when nowhere.
bool in_path(const std::string &tool) {
    const char *p = std::getenv("PATH");
    return !find_program(tool, p && *p ? p : "/usr/local/bin:/usr/bin:/bin").empty();
}

// TOOL's failure in words: not installed, or its last line.
std::string tool_failed(const std::string &tool, int rc, const std::string &out) {
    if (!in_path(tool)) return "cannot run " + tool + ": not found (install it: apt-get install " + tool + ")";
    const std::string last = last_line(out);
    return tool + (rc < 0 ? " was killed or could not start" : " failed (exit " + std::to_string(rc) + ")") + (last.empty() ? "" : ": " + last);
}

// An exclusive lock on the file PATH (made 0600, never through a symlink),
// held while it lives: one writer per cache entry.
class FileLock {
public:
    explicit FileLock(const std::string &path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) {
        if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) { ::close(fd_); fd_ = -1; }
    }
    ~FileLock() { if (fd_ >= 0) ::close(fd_); }
    FileLock(const FileLock &) = delete;
    FileLock &operator=(const FileLock &) = delete;
    bool held() const { return fd_ >= 0; }

private:
    int fd_;
};

// Removes DIR and what is below it, as the caller: umoci's rootless unpack
// leaves directories mode 0555 that rm -rf cannot empty.
void remove_tree(const std::string &dir) {
    struct stat st;
    if (::lstat(dir.c_str(), &st) != 0) return;
    std::string out;
    if (S_ISDIR(st.st_mode)) run_capture({"chmod", "-R", "u+rwX", "--", dir}, out, 10 * 60 * 1000);
    run_capture({"rm", "-rf", "--", dir}, out, 10 * 60 * 1000);
}

// A name for a docker:// repository in the image cache: letters, digits,
// '.' and '-' as they are, anything else (the '/' of the path, '_') as _XX
// (hex): two repositories never share a name.
std::string cache_name(const std::string &repo) {
    std::string out;
    for (unsigned char c : repo) {
        if (std::isalnum(c) || c == '.' || c == '-') out += char(c);
        else {
            char h[4];
            std::snprintf(h, sizeof h, "_%02x", unsigned(c));
            out += h;
        }
    }
    return out;
}

std::string last_line(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    const auto nl = s.rfind('\n');
    return nl == std::string::npos ? s : s.substr(nl + 1);
}

// The manifest entry of the layout's index.json that R names.
std::string find_manifest(const Ref &r, json::object &entry) {
    const std::string what = "oci:" + r.dir + (r.digest.empty() ? r.tag.empty() ? "" : ":" + r.tag : "@" + r.digest);
    std::string text;
    if (auto err = read_small_file(r.dir + "/index.json", 16u << 20, text); !err.empty())
        return what + ": no OCI image layout at " + r.dir + " (" + err + ")";
    boost::system::error_code ec;
    json::value index = json::parse(text, ec);
    const json::value *ms = !ec && index.is_object() ? index.as_object().if_contains("manifests") : nullptr;
    if (!ms || !ms->is_array()) return what + ": " + r.dir + "/index.json is not an OCI image index";
    std::vector<json::object> hits;
    std::string tags;
    for (const auto &m : ms->as_array()) {
        if (!m.is_object()) continue;
        const auto &o = m.as_object();
        std::string tag, digest;
        if (auto *a = o.if_contains("annotations"); a && a->is_object())
            if (auto *t = a->as_object().if_contains(kTagAnnotation); t && t->is_string()) tag = std::string(t->as_string());
        if (auto *d = o.if_contains("digest"); d && d->is_string()) digest = std::string(d->as_string());
        if (!tag.empty()) tags += (tags.empty() ? "" : ", ") + tag;
        if (!r.digest.empty() ? digest == r.digest : r.tag.empty() || tag == r.tag) hits.push_back(o);
    }
    if (!r.digest.empty() && hits.size() > 1) hits.resize(1);
    if (hits.empty())
        return what + ": no such image in the layout" + (tags.empty() ? std::string() : " (its tags: " + tags + ")");
    if (hits.size() > 1) return what + ": the layout holds " + std::to_string(hits.size()) + " images; name one by tag (" + tags + ")";
    entry = hits[0];
    return "";
}

}  // namespace

std::string parse(const std::string &text, Ref &r) {
    r = Ref{};
    if (text.find_first_of("\n\r\t ") != std::string::npos || text.find('\'') != std::string::npos)
        return "'" + text + "': an image reference has no blanks or quotes";
    if (text.rfind("docker://", 0) == 0) {
        r.transport = "docker";
        r.remote = text.substr(9);
        if (r.remote.empty() || r.remote[0] == '/' || r.remote.find("..") != std::string::npos)
            return "'" + text + "': expected docker://REGISTRY/NAME[:TAG|@sha256:HEX]";
        std::string name = r.remote;
        if (auto at = name.find('@'); at != std::string::npos) {
            if (!valid_digest(name.substr(at + 1))) return "'" + text + "': expected a digest sha256:HEX (64 hex digits) after @";
            name.resize(at);
        } else if (auto colon = name.rfind(':'); colon != std::string::npos && name.find('/', colon) == std::string::npos) {
            if (!valid_tag(name.substr(colon + 1))) return "'" + text + "': '" + name.substr(colon + 1) + "' is not a tag (letters, digits, '.', '_', '-')";
            name.resize(colon);
        }
        if (name.empty() || name.back() == '/') return "'" + text + "': expected docker://REGISTRY/NAME[:TAG|@sha256:HEX]";
        return "";
    }
    if (text.rfind("oci:", 0) != 0)
        return "'" + text + "': expected oci:DIR[:TAG], oci:DIR@sha256:HEX or docker://REF";
    r.transport = "oci";
    std::string rest = text.substr(4);
    if (auto at = rest.rfind('@'); at != std::string::npos) {
        r.digest = rest.substr(at + 1);
        rest.resize(at);
        if (!valid_digest(r.digest)) return "'" + text + "': expected a digest sha256:HEX (64 hex digits) after @";
    } else if (auto colon = rest.rfind(':'); colon != std::string::npos && rest.find('/', colon) == std::string::npos) {
        r.tag = rest.substr(colon + 1);
        rest.resize(colon);
        if (!valid_tag(r.tag)) return "'" + text + "': '" + r.tag + "' is not a tag (letters, digits, '.', '_', '-')";
    }
    if (rest.empty()) return "'" + text + "': expected the image layout's directory after oci:";
    if (auto err = check_path_syntax(absolute(rest)); !err.empty()) return "'" + text + "': " + err;
    r.dir = absolute(rest);
    while (r.dir.size() > 1 && r.dir.back() == '/') r.dir.pop_back();
    return "";
}

std::string resolve_layout(const Ref &r, std::string &digest) {
    json::object entry;
    if (auto err = find_manifest(r, entry); !err.empty()) return err;
    const json::value *d = entry.if_contains("digest");
    const json::value *mt = entry.if_contains("mediaType");
    const std::string dg = d && d->is_string() ? std::string(d->as_string()) : "";
    if (!valid_digest(dg)) return "oci:" + r.dir + ": the image's digest '" + dg + "' is not sha256:HEX";
    if (mt && mt->is_string() && mt->as_string() != "application/vnd.oci.image.manifest.v1+json")
        return "oci:" + r.dir + ": " + dg + " is a " + std::string(mt->as_string()) + ", not an image manifest (a multi-platform index? copy one platform's image)";
    struct stat st;
    if (::stat((r.dir + "/blobs/sha256/" + dg.substr(7)).c_str(), &st) != 0 || !S_ISREG(st.st_mode))
        return "oci:" + r.dir + ": the manifest blob of " + dg + " is missing";
    digest = dg;
    return "";
}

std::string pinned(const std::string &dir, const std::string &digest) { return "oci:" + dir + "@" + digest; }

std::string layout_of(const std::string &pinned_ref) {
    Ref r;
    return parse(pinned_ref, r).empty() && r.transport == "oci" ? r.dir : "";
}

std::string image_cache() {
    const char *e = std::getenv("SHARDNET_IMAGE_CACHE");
    return e && *e == '/' ? e : home_dir() + "/.shardnet/images";
}

std::string bundle_cache() {
    const char *e = std::getenv("SHARDNET_BUNDLE_CACHE");
    return e && *e == '/' ? e : home_dir() + "/.shardnet/bundles";
}

std::string resolve(const std::string &text, std::string &pinned_ref, std::string &digest) {
    Ref r;
    if (auto err = parse(text, r); !err.empty()) return err;
    if (r.transport == "docker") {
        // The registry's image, copied into a layout of the image cache:
        // the job then needs no registry, and every attempt finds it there.
        // A layout per repository (its name made injective), a tag per
        // reference (a pinned one: the digest's).
        std::string name = r.remote, tag = "latest";
        bool by_digest = false;
        if (auto at = name.find('@'); at != std::string::npos) tag = "sha256-" + name.substr(at + 8), name.resize(at), by_digest = true;
        else if (auto colon = name.rfind(':'); colon != std::string::npos && name.find('/', colon) == std::string::npos)
            tag = name.substr(colon + 1), name.resize(colon);
        const std::string cache = image_cache(), dir = cache + "/" + cache_name(name);
        if (!mkdirs(cache)) return text + ": cannot make the image cache " + cache;
        if (auto err = owned_dir(cache); !err.empty()) return text + ": refusing the image cache: " + err;
        // One copy into a repository's layout at a time (two shard runs of
        // one repository: the second waits, then finds its blobs there).
        const FileLock lock(cache + "/." + cache_name(name) + ".lock");
        if (!lock.held()) return text + ": cannot lock the image cache " + cache;
        struct stat st;
        const bool existed = ::lstat(dir.c_str(), &st) == 0;
        if (existed)
            if (auto err = owned_dir(dir); !err.empty()) return text + ": refusing the image cache: " + err;
        // By digest: that very manifest (skopeo would otherwise convert a
        // Docker manifest to OCI, under another digest).
        std::vector<std::string> argv{"skopeo", "copy", "--quiet"};
        if (by_digest) argv.push_back("--preserve-digests");
        argv.push_back("docker://" + r.remote);
        argv.push_back("oci:" + dir + ":" + tag);
        std::string out;
        if (int rc = run_capture(argv, out, 30 * 60 * 1000); rc != 0) {
            std::string why = tool_failed("skopeo", rc, out);
            if (by_digest && in_path("skopeo"))
                why += " (a digest names that manifest as the registry has it; one skopeo would have to convert to OCI, a Docker "
                       "manifest, cannot be pinned by it: pin by tag, or copy the image into an OCI layout and use oci:DIR@DIGEST)";
            // A layout skopeo began for a repository it could not read is
            // not left in the cache (this call made it, under the lock).
            if (!existed) remove_tree(dir);
            return text + ": skopeo copy: " + why;
        }
        // Resolved under the lock: no other copy moves the tag meanwhile.
        r = Ref{"oci", dir, tag, "", ""};
        if (auto err = resolve_layout(r, digest); !err.empty()) return err;
        pinned_ref = pinned(r.dir, digest);
        return "";
    }
    if (auto err = resolve_layout(r, digest); !err.empty()) return err;
    pinned_ref = pinned(r.dir, digest);
    return "";
}

std::string bundle(const std::string &pinned_ref, std::string &dir) {
    Ref r;
    if (auto err = parse(pinned_ref, r); !err.empty()) return err;
    if (r.transport != "oci" || r.digest.empty()) return "'" + pinned_ref + "': expected a pinned reference oci:DIR@sha256:HEX";
    const std::string cache = bundle_cache(), hex = r.digest.substr(7);
    const std::string out_dir = cache + "/" + hex;
    struct stat st;
    // Only what the caller unpacked counts: in a cache others could write
    // to, or an entry of someone else's, their rootfs would run as ours.
    auto ready = [&](std::string &why) {
        why.clear();
        if (::lstat(out_dir.c_str(), &st) != 0) return false;
        for (const std::string &p : {out_dir, out_dir + "/rootfs"})
            if (why = owned_dir(p); !why.empty()) { why = "refusing the bundle " + out_dir + ": " + why; return false; }
        if (::lstat((out_dir + "/config.json").c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::getuid() || (st.st_mode & 022)) {
            why = "refusing the bundle " + out_dir + ": its config.json is missing, not a regular file of yours, or writable by others";
            return false;
        }
        return true;
    };
    std::string why;
    if (!mkdirs(cache)) return "cannot make the bundle cache " + cache;
    if (auto err = owned_dir(cache); !err.empty()) return "refusing the bundle cache: " + err + " (set SHARDNET_BUNDLE_CACHE to a dir of your own)";
    if (ready(why)) { dir = out_dir; return ""; }
    if (!why.empty()) return why;
    // One unpack per digest: the others wait for it (nodes sharing the cache).
    const FileLock lock(cache + "/." + hex + ".lock");
    if (!lock.held()) return "cannot lock the bundle cache " + cache;
    if (ready(why)) { dir = out_dir; return ""; }
    if (!why.empty()) return why;
    // What an unpack that died (a killed job, a node lost) left of this
    // digest: nobody else works on it while we hold the lock.
    if (DIR *d = ::opendir(cache.c_str())) {
        std::vector<std::string> stale;
        while (const dirent *e = ::readdir(d)) {
            const std::string n = e->d_name;
            if (n.rfind("." + hex + ".unpack.", 0) == 0 || n.rfind("." + hex + ".layout.", 0) == 0) stale.push_back(cache + "/" + n);
        }
        ::closedir(d);
        for (const auto &p : stale) remove_tree(p);
    }
    std::string digest;
    if (auto err = resolve_layout(r, digest); !err.empty()) return err;
    // A layout of our own that names only the pinned manifest (the blobs
    // are the source's): the source's tags may have moved since.
    const std::string pid = std::to_string(::getpid());
    const std::string layout = cache + "/." + hex + ".layout." + pid, tmp = cache + "/." + hex + ".unpack." + pid;
    std::string out;
    if (::mkdir(layout.c_str(), 0700) != 0) return "cannot make " + layout + ": " + std::strerror(errno);
    ::stat((r.dir + "/blobs/sha256/" + hex).c_str(), &st);
    const json::object index{{"schemaVersion", 2},
                             {"manifests", json::array{json::object{{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                                                                    {"digest", r.digest}, {"size", st.st_size},
                                                                    {"annotations", json::object{{kTagAnnotation, "pinned"}}}}}}};
    std::string err;
    if (!write_text(layout + "/oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}") || !write_text(layout + "/index.json", json::serialize(index)) ||
        ::symlink((r.dir + "/blobs").c_str(), (layout + "/blobs").c_str()) != 0)
        err = "cannot write the layout " + layout;
    else if (int rc = run_capture({"umoci", "unpack", "--rootless", "--image", layout + ":pinned", tmp}, out, 60 * 60 * 1000); rc != 0)
        err = pinned_ref + ": umoci unpack: " + tool_failed("umoci", rc, out);
    else if (::rename(tmp.c_str(), out_dir.c_str()) != 0)
        err = "cannot move the bundle into " + out_dir + ": " + std::strerror(errno);
    remove_tree(layout);
    remove_tree(tmp);
    if (!err.empty()) return err;
    dir = out_dir;
    return "";
}

}  // namespace shardnet::cli::image
