#include "common/receipt_verify.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <map>
#include <set>
#include <sys/stat.h>
#include <thread>

#include "common/digest.hpp"

namespace shardnet::receipt {

namespace {

std::string short_hex(const std::string &h) { return h.size() > 16 ? h.substr(0, 16) + "..." : h; }

Failure fail(const Verified &v, std::string what) { return Failure{v.position, v.receipt.run, v.receipt.seq, std::move(what)}; }

// One run's receipts, verified ones only, in input order.
void check_run(const std::vector<const Verified *> &given, std::vector<Failure> &out) {
    // The order given: a broker lists a run's receipts by seq.
    long long top = 0;
    for (const Verified *v : given) {
        if (v->receipt.seq < top)
            out.push_back(fail(*v, "out of order: listed after seq " + std::to_string(top) + " (receipts swapped?)"));
        top = std::max(top, v->receipt.seq);
    }
    std::map<long long, std::vector<const Verified *>> by_seq;
    for (const Verified *v : given) by_seq[v->receipt.seq].push_back(v);
    const Verified *before = nullptr;   // the receipt at seq - 1, when exactly one is here
    long long expect = 1;
    for (const auto &[seq, here] : by_seq) {
        const Verified &v = *here.front();
        for (std::size_t i = 1; i < here.size(); ++i)
            out.push_back(fail(*here[i], here[i]->digest == v.digest
                                             ? "duplicate: the same receipt is listed again"
                                             : "two different receipts with seq " + std::to_string(seq) + " (a forked chain)"));
        if (seq != expect) {
            out.push_back(fail(v, "missing predecessor: no verified receipt with seq " +
                                      (seq - 1 == expect ? std::to_string(expect) : std::to_string(expect) + ".." + std::to_string(seq - 1))));
        } else if (before && v.receipt.previous != before->digest) {
            out.push_back(fail(v, "missing predecessor: previous is " + short_hex(v.receipt.previous) + ", but receipt seq " +
                                      std::to_string(seq - 1) + " here has digest " + short_hex(before->digest) + " (altered or replaced)"));
        }
        if (before && seq == expect && v.receipt.attempt < before->receipt.attempt)
            out.push_back(fail(v, "attempt " + std::to_string(v.receipt.attempt) + " after attempt " + std::to_string(before->receipt.attempt)));
        before = here.size() == 1 ? &v : nullptr;
        expect = seq + 1;
    }
}

// A shard's name is a path inside its checkpoint: relative, no "..".
bool inside(const std::string &name) {
    if (name.empty() || name[0] == '/') return false;
    std::size_t at = 0;
    while (at <= name.size()) {
        const std::size_t slash = std::min(name.find('/', at), name.size());
        if (name.compare(at, slash - at, "..") == 0 && slash - at == 2) return false;
        at = slash + 1;
    }
    return true;
}

}  // namespace

std::string Failure::text(const std::string &origin) const {
    const std::string where = origin.empty() ? "" : " (" + origin + ")";
    if (run.empty()) return "envelope #" + std::to_string(position + 1) + where + ": " + what;
    return "run " + run + " seq " + std::to_string(seq) + where + ": " + what;
}

ChainResult verify_chain(const std::vector<dsse::Envelope> &envs, const std::vector<SigningKey> &keys, const PinnedKeys &pinned,
                         const KeyRetirements &retired) {
    std::set<std::string> pinned_brokers;
    for (const auto &[keyid, broker] : pinned) pinned_brokers.insert(broker);
    // Signatures are independent and most of the cost (an Ed25519 verify is
    // ~50-100 us): a long history is checked on every core.
    std::vector<dsse::Verification> sigs(envs.size());
    const std::size_t workers = envs.size() < 256 ? 1 : std::min<std::size_t>(8, std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (std::size_t w = 0; w < workers; ++w)
        pool.emplace_back([&, w] {
            for (std::size_t i = w; i < envs.size(); i += workers) sigs[i] = dsse::verify(envs[i], keys);
        });
    for (auto &th : pool) th.join();
    ChainResult res;
    for (std::size_t i = 0; i < envs.size(); ++i) {
        const dsse::Envelope &env = envs[i];
        Verified v{i, {}, envelope_digest(env), ""};
        // Read before the signature is checked only to name the receipt in
        // a failure: nothing of an unverified payload is used otherwise.
        std::string bad = env.payload_type != dsse::kInTotoPayloadType
                              ? "payloadType " + env.payload_type + " is not " + dsse::kInTotoPayloadType
                              : parse_statement(env.payload, v.receipt);
        const dsse::Verification &sig = sigs[i];
        if (!bad.empty()) v.receipt.run.clear();
        if (sig.verdict != dsse::Verdict::good) {
            std::string what = sig.detail;
            if (sig.verdict == dsse::Verdict::bad_signature) what += " (payload or signature altered)";
            res.failures.push_back(fail(v, what + (bad.empty() ? "" : "; " + bad)));
            continue;
        }
        if (!bad.empty()) {
            res.failures.push_back(fail(v, bad));
            continue;
        }
        if (auto p = pinned.find(sig.keyid); p != pinned.end() && p->second != v.receipt.broker) {
            res.failures.push_back(fail(v, "signed by key " + sig.keyid + ", which is pinned to broker " + p->second + ", but it names broker " +
                                           v.receipt.broker));
            continue;
        }
        if (!pinned.count(sig.keyid) && pinned_brokers.count(v.receipt.broker)) {
            res.failures.push_back(fail(v, "names broker " + v.receipt.broker + ", whose pinned key(s) did not sign it (key " + sig.keyid + " did)"));
            continue;
        }
        // A retired key's signature on a later receipt is what a stolen or
        // leaked old key would make: the broker had stopped signing with it.
        if (auto r = retired.find(sig.keyid); r != retired.end() && (!is_utc_time(r->second) || compare_utc_times(v.receipt.time, r->second) > 0)) {
            res.failures.push_back(fail(v, "signed by key " + sig.keyid + " at " + v.receipt.time + ", after the key's valid_until " + r->second +
                                           " (a retired key signs nothing later)"));
            continue;
        }
        v.keyid = sig.keyid;
        res.receipts.push_back(std::move(v));
    }
    std::map<std::string, std::vector<const Verified *>> runs;
    for (const auto &v : res.receipts) runs[v.receipt.run].push_back(&v);
    for (const auto &[run, given] : runs) check_run(given, res.failures);
    std::stable_sort(res.failures.begin(), res.failures.end(),
                     [](const Failure &a, const Failure &b) { return a.position < b.position; });
    return res;
}

namespace {

// One file below dir against what was sealed of it (size < 0: not sealed).
void check_file(const Verified &sealed, const std::string &dir, const std::string &name, const std::string &sha256, double size,
                std::vector<Failure> &out) {
    if (!inside(name)) {
        out.push_back(fail(sealed, "shard " + name + ": not a path inside the checkpoint directory"));
        return;
    }
    const std::string path = dir + "/" + name;
    std::string err;
    unsigned long long bytes = 0;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) {
        out.push_back(fail(sealed, "shard " + name + " is missing: no " + path));
        return;
    }
    const std::string got = sha256_file_hex(path, bytes, err);
    if (!err.empty()) {
        out.push_back(fail(sealed, "shard " + name + ": " + err));
        return;
    }
    if (size >= 0 && size != double(bytes))
        out.push_back(fail(sealed, "size mismatch for shard " + name + ": " + std::to_string(bytes) + " bytes on disk, " +
                                       std::to_string((unsigned long long)size) + " sealed"));
    if (got != sha256)
        out.push_back(fail(sealed, "digest mismatch for shard " + name + ": " + path + " has sha256 " + short_hex(got) + ", the receipt sealed " +
                                       short_hex(sha256)));
}

}  // namespace

std::vector<Failure> verify_checkpoint_files(const Verified &sealed, const std::string &dir) {
    std::vector<Failure> out;
    if (sealed.receipt.kind != Kind::checkpoint_sealed) {
        out.push_back(fail(sealed, "not a checkpoint-sealed receipt"));
        return out;
    }
    for (const auto &s : sealed.receipt.subjects) {
        const auto *size = s.annotations.if_contains("size");
        check_file(sealed, dir, s.name, s.sha256, size && size->is_number() ? size->to_number<double>() : -1, out);
    }
    return out;
}

std::optional<file_list::Summary> sealed_list(const Receipt &r) {
    const auto *files = r.kind == Kind::checkpoint_sealed ? r.body.if_contains("files") : nullptr;
    file_list::Summary sum;
    if (!files || !file_list::read_summary(*files, "files", sum).empty()) return std::nullopt;
    return sum;
}

std::vector<Failure> verify_checkpoint_list(const Verified &sealed, const std::string &dir, const ListPages &pages,
                                            std::size_t max_file_failures) {
    std::vector<Failure> out;
    const auto want = sealed_list(sealed.receipt);
    if (!want) {
        out.push_back(fail(sealed, "not a checkpoint-sealed receipt with a file list's root (body.files)"));
        return out;
    }
    file_list::Folder folder;
    std::size_t file_failures = 0, unnamed = 0;
    for (bool last = false; !last;) {
        std::vector<file_list::Entry> page;
        const uint64_t from = folder.count();
        if (std::string err = pages(from, page, last); !err.empty()) {
            out.push_back(fail(sealed, "the checkpoint's file list could not be had from entry " + std::to_string(from) + ": " + err));
            return out;
        }
        if (page.empty() && !last) {
            out.push_back(fail(sealed, "the checkpoint's file list ends early: an empty page at entry " + std::to_string(from)));
            return out;
        }
        for (const auto &e : page) {
            if (folder.count() >= want->count) {
                out.push_back(fail(sealed, "the checkpoint's file list has more than the " + std::to_string(want->count) + " files sealed"));
                return out;
            }
            if (std::string err = folder.add(e, "files[" + std::to_string(folder.count()) + "]"); !err.empty()) {
                out.push_back(fail(sealed, "the checkpoint's file list: " + err));
                return out;
            }
            if (dir.empty()) continue;
            std::vector<Failure> one;
            check_file(sealed, dir, e.path, e.sha256, double(e.bytes), one);
            for (auto &f : one) {
                if (file_failures < max_file_failures) out.push_back(std::move(f)), ++file_failures;
                else ++unnamed;
            }
        }
    }
    if (unnamed) out.push_back(fail(sealed, std::to_string(unnamed) + " more file problem(s) not listed"));
    const auto got = folder.summary();
    if (got.root != want->root || got.count != want->count || got.bytes != want->bytes)
        out.push_back(fail(sealed, "the checkpoint's file list is not the one sealed: " + std::to_string(got.count) + " file(s), " +
                                       std::to_string(got.bytes) + " bytes, Merkle root " + short_hex(merkle::hex(got.root)) + "; the receipt seals " +
                                       std::to_string(want->count) + " file(s), " + std::to_string(want->bytes) + " bytes, root " +
                                       short_hex(merkle::hex(want->root))));
    return out;
}

std::string verify_tree_head_in_time(const dsse::Envelope &env, const std::vector<SigningKey> &keys, const KeyRetirements &retired,
                                     TreeHead &out) {
    if (std::string err = verify_tree_head(env, keys, out); !err.empty()) return err;
    std::string late;
    for (const auto &k : keys) {
        TreeHead h;
        if (!verify_tree_head(env, {k}, h).empty()) continue;
        const auto r = retired.find(k.keyid());
        if (r == retired.end()) return "";
        // A retired key's head must say when it was signed: an empty or
        // malformed timestamp compares before any date.
        if (!is_utc_time(out.timestamp)) {
            late = "signed by retired key " + k.keyid() + " with timestamp '" + out.timestamp +
                   "', not a UTC time (YYYY-MM-DDTHH:MM:SSZ): a retired key's head must say when it was signed";
            continue;
        }
        if (is_utc_time(r->second) && compare_utc_times(out.timestamp, r->second) <= 0) return "";
        late = "signed by key " + k.keyid() + " at " + out.timestamp + ", after the key's valid_until " + r->second +
               " (a retired key signs nothing later)";
    }
    return late;
}

}  // namespace shardnet::receipt
