// A sealed checkpoint's file list as one Merkle root (common/file_list.hpp,
// merkle::RootBuilder) and its check against a receipt
// (receipt::verify_checkpoint_list): the same root as the log's tree, a
// list out of order or not the sealed one refused, files re-hashed on disk.
#include <doctest/doctest.h>
#include <boost/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/digest.hpp"
#include "common/file_list.hpp"
#include "common/receipt_verify.hpp"

using namespace shardnet;
namespace json = boost::json;

namespace {

std::vector<file_list::Entry> entries(int n) {
    std::vector<file_list::Entry> out;
    for (int i = 0; i < n; ++i) {
        const std::string p = "rank-" + std::to_string(i) + ".pt";
        out.push_back(file_list::Entry{p, sha256_hex(p), (unsigned long long)(100 + i), i});
    }
    file_list::sort(out);
    return out;
}

receipt::Verified sealed_receipt(const file_list::Summary &s) {
    receipt::Verified v;
    v.receipt.kind = receipt::Kind::checkpoint_sealed;
    v.receipt.run = "r1";
    v.receipt.seq = 2;
    v.receipt.body = json::object{{"checkpoint", "checkpoint-10"}, {"parent", nullptr}, {"files", file_list::summary_json(s)}};
    return v;
}

receipt::ListPages pages_of(const std::vector<file_list::Entry> &all, std::size_t page_size) {
    return [all, page_size](uint64_t from, std::vector<file_list::Entry> &page, bool &last) {
        for (std::size_t i = from; i < all.size() && i - from < page_size; ++i) page.push_back(all[i]);
        last = from + page_size >= all.size();
        return std::string();
    };
}

std::string failures(const std::vector<receipt::Failure> &fs) {
    std::string out;
    for (const auto &f : fs) out += f.text() + "\n";
    return out;
}

}  // namespace

TEST_CASE("RootBuilder's root is the log tree's (RFC 9162 MTH) for every size 0..130, in O(log n) hashes") {
    merkle::MemoryTree tree;
    merkle::RootBuilder b;
    CHECK(b.root() == merkle::empty_root());
    for (int n = 1; n <= 130; ++n) {
        const std::string leaf = "leaf " + std::to_string(n);
        tree.append(leaf);
        b.add(leaf);
        CHECK(b.size() == uint64_t(n));
        CHECK_MESSAGE(b.root() == merkle::root(tree.size(), tree.source()), "n = " << n);
    }
}

TEST_CASE("a leaf is the file's manifest line; the list is in path order, each leaf once") {
    const file_list::Entry e{"rank-0.pt", std::string(64, 'a'), 18, 3};
    CHECK(file_list::leaf_data(e) == std::string(64, 'a') + " 18 rank-0.pt");
    CHECK(file_list::leaf(e) == merkle::leaf_hash(std::string(64, 'a') + " 18 rank-0.pt"));
    std::vector<file_list::Entry> l{{"b", std::string(64, '1'), 1, 0}, {"a/z", std::string(64, '2'), 2, 1}, {"b", std::string(64, '0'), 1, 2},
                                    {"a/z", std::string(64, '2'), 2, 3}};
    file_list::sort(l);
    REQUIRE(l.size() == 3);   // the same file from two ranks is one leaf
    CHECK(l[0].path == "a/z");
    CHECK(l[0].rank == 1);
    CHECK(l[1].sha256 == std::string(64, '0'));
    CHECK(file_list::index_of(l, {"b", std::string(64, '1'), 1, -1}) == 2u);
    CHECK_FALSE(file_list::index_of(l, {"b", std::string(64, '1'), 2, -1}));
    // Entries the leaf's rules refuse, each naming the field.
    CHECK(file_list::entry_error({"", std::string(64, 'a'), 1}).rfind("path:", 0) == 0);
    CHECK(file_list::entry_error({"/etc/passwd", std::string(64, 'a'), 1}).find("absolute") != std::string::npos);
    CHECK(file_list::entry_error({"a/../../x", std::string(64, 'a'), 1}).find("..") != std::string::npos);
    CHECK(file_list::entry_error({"a\nb", std::string(64, 'a'), 1}).rfind("path:", 0) == 0);
    CHECK(file_list::entry_error({"a", std::string(64, 'A'), 1}).rfind("sha256:", 0) == 0);
    CHECK(file_list::entry_error({"a", std::string(64, 'a'), 1ULL << 51}).rfind("bytes:", 0) == 0);
    CHECK(file_list::entry_error({"..a/b..", std::string(64, 'a'), 1}) == "");
    file_list::Entry got;
    CHECK(file_list::read_entry(json::parse(R"({"path":"x","sha256":"00","bytes":1})"), "files[2]", got) ==
          "files[2].sha256: expected 64 lower-case hex digits");
    CHECK(file_list::read_entry(json::parse(R"({"path":"x","bytes":1})"), "files[0]", got) == "files[0].sha256: missing");
    CHECK(file_list::read_entry(json::parse(R"({"path":"x","sha256":"00","bytes":1,"evil":1})"), "f", got) == "f.evil: unknown field");
    // A list given out of order is refused as it arrives.
    file_list::Folder f;
    CHECK(f.add({"b", std::string(64, 'a'), 1}, "files[0]") == "");
    CHECK(f.add({"a", std::string(64, 'a'), 1}, "files[1]").find("is not after b") != std::string::npos);
    CHECK(f.add({"b", std::string(64, 'a'), 1}, "files[1]").find("each file once") != std::string::npos);
    file_list::Summary s;
    CHECK(file_list::read_summary(json::parse(R"({"merkle_root":"zz","count":1,"bytes":1})"), "body.files", s) ==
          "body.files.merkle_root: expected 64 lower-case hex digits");
}

TEST_CASE("a list checked against a seal's root, a page at a time: the sealed one passes; another, a longer or a shorter one fails") {
    const auto all = entries(37);
    const auto sum = file_list::summarize(all);
    const auto v = sealed_receipt(sum);
    CHECK(receipt::sealed_list(v.receipt)->count == 37);
    CHECK(failures(receipt::verify_checkpoint_list(v, "", pages_of(all, 5))) == "");
    auto changed = all;
    changed[20].sha256 = sha256_hex("another");
    CHECK(failures(receipt::verify_checkpoint_list(v, "", pages_of(changed, 5))).find("is not the one sealed: 37 file(s)") != std::string::npos);
    auto shorter = all;
    shorter.pop_back();
    CHECK(failures(receipt::verify_checkpoint_list(v, "", pages_of(shorter, 5))).find("36 file(s)") != std::string::npos);
    auto longer = all;
    longer.push_back({"zz", std::string(64, 'f'), 1});
    CHECK(failures(receipt::verify_checkpoint_list(v, "", pages_of(longer, 5))).find("more than the 37 files sealed") != std::string::npos);
    auto swapped = all;
    std::swap(swapped[3], swapped[4]);
    CHECK(failures(receipt::verify_checkpoint_list(v, "", pages_of(swapped, 50))).find("files[4]") != std::string::npos);
    // A broker that pages on with nothing: refused, not a loop.
    CHECK(failures(receipt::verify_checkpoint_list(v, "", [](uint64_t, std::vector<file_list::Entry> &, bool &last) {
              last = false;
              return std::string();
          })).find("ends early") != std::string::npos);
    // A receipt that lists its files as subjects has no root to check.
    receipt::Verified old;
    old.receipt.kind = receipt::Kind::checkpoint_sealed;
    CHECK_FALSE(receipt::sealed_list(old.receipt));
    CHECK(failures(receipt::verify_checkpoint_list(old, "", pages_of(all, 5))).find("with a file list's root") != std::string::npos);
}

TEST_CASE("the files on disk against the sealed list: a changed or missing file is named, the rest counted") {
    const auto dir = std::filesystem::temp_directory_path() / ("shardnet-file-list-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir / "checkpoint-10");
    std::vector<file_list::Entry> all;
    for (int i = 0; i < 3; ++i) {
        const std::string p = "rank-" + std::to_string(i) + ".pt", body = "weights " + std::to_string(i);
        std::ofstream(dir / "checkpoint-10" / p) << body;
        all.push_back({p, sha256_hex(body), body.size(), i});
    }
    file_list::sort(all);
    const auto v = sealed_receipt(file_list::summarize(all));
    const std::string d = (dir / "checkpoint-10").string();
    CHECK(failures(receipt::verify_checkpoint_list(v, d, pages_of(all, 2))) == "");
    std::ofstream(dir / "checkpoint-10" / "rank-1.pt") << "weights X";
    std::filesystem::remove(dir / "checkpoint-10" / "rank-2.pt");
    const std::string out = failures(receipt::verify_checkpoint_list(v, d, pages_of(all, 2)));
    CHECK(out.find("digest mismatch for shard rank-1.pt") != std::string::npos);
    CHECK(out.find("shard rank-2.pt is missing") != std::string::npos);
    CHECK(out.find("is not the one sealed") == std::string::npos);   // the list itself is the sealed one
    const std::string capped = failures(receipt::verify_checkpoint_list(v, d, pages_of(all, 2), 1));
    CHECK(capped.find("1 more file problem(s) not listed") != std::string::npos);
    std::filesystem::remove_all(dir);
}
