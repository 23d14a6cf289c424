#include "sbatch-wrappers/verify_files.hpp"

#include <boost/json.hpp>

#include "common/safe_path.hpp"

namespace shardnet::cli {

namespace json = boost::json;

namespace {

constexpr std::size_t kMaxListFile = 256u << 20;

std::string read_entries(const json::array &a, std::vector<file_list::Entry> &page, unsigned long long first) {
    for (std::size_t i = 0; i < a.size(); ++i) {
        file_list::Entry e;
        if (std::string err = file_list::read_entry(a[i], "files[" + std::to_string(first + i) + "]", e); !err.empty()) return err;
        page.push_back(std::move(e));
    }
    return "";
}

}  // namespace

receipt::ListPages pages_from_broker(const FilesPageGet &get, const std::string &run, const std::string &checkpoint,
                                     const std::string &sealer) {
    return [get, run, checkpoint, sealer](uint64_t from, std::vector<file_list::Entry> &page, bool &last) -> std::string {
        std::string body;
        if (std::string err = get(run, checkpoint, from, body); !err.empty()) return err;
        json::error_code ec;
        json::value v = json::parse(body, ec);
        const json::object *o = ec ? nullptr : v.if_object();
        if (!o) return "the answer is not a JSON object";
        const auto *r = o->if_contains("run"), *c = o->if_contains("checkpoint"), *f = o->if_contains("from"),
                   *files = o->if_contains("files"), *next = o->if_contains("next_from");
        if (!r || !r->is_string() || r->as_string() != run || !c || !c->is_string() || c->as_string() != checkpoint)
            return "the answer is not of run " + run + " checkpoint " + checkpoint;
        if (!f || !f->is_int64() || f->as_int64() != (long long)from) return "the answer does not start at entry " + std::to_string(from);
        const auto *by = o->if_contains("sealed_by"), *carried = o->if_contains("carried");
        if ((carried && carried->is_bool() && carried->as_bool()) || (by && (!by->is_string() || by->as_string() != sealer)))
            return "the answer is a seal of broker " + (by && by->is_string() ? std::string(by->as_string()) : std::string("?")) +
                   (carried && carried->is_bool() && carried->as_bool() ? " carried to the broker asked" : "") + ", not broker " + sealer +
                   "'s, whose receipt it is checked against";
        if (!files || !files->is_array()) return "the answer lists no files";
        if (!next || !(next->is_null() || (next->is_int64() && next->as_int64() == (long long)(from + files->as_array().size()))))
            return "next_from is not the entry after the page";
        last = next->is_null();
        return read_entries(files->as_array(), page, from);
    };
}

receipt::ListPages pages_from_file(const std::string &path) {
    return [path](uint64_t from, std::vector<file_list::Entry> &page, bool &last) -> std::string {
        last = true;
        if (from != 0) return "";
        std::string text;
        if (std::string err = read_small_file(path, kMaxListFile, text); !err.empty()) return err;
        json::error_code ec;
        json::value v = json::parse(text, ec);
        if (ec) return path + ": not JSON: " + ec.message();
        const json::value *files = v.is_object() ? v.as_object().if_contains("files") : &v;
        if (!files || !files->is_array()) return path + ": expected {\"files\": [...]} or an array of {path, sha256, bytes}";
        if (v.is_object())
            if (const auto *next = v.as_object().if_contains("next_from"); next && !next->is_null())
                return path + ": one page of the list (next_from " + json::serialize(*next) + "); save the whole list";
        if (std::string err = read_entries(files->as_array(), page, 0); !err.empty()) return path + ": " + err;
        return "";
    };
}

}  // namespace shardnet::cli
