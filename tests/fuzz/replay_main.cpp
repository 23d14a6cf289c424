// Corpus replay for `make check`: runs a fuzz target's entry point once on
// every file of the corpus directories (or files) given, or of CORPUS when
// none is given. Built with the ordinary compiler, so the seeds and every
// regression input stay tested without clang or libFuzzer.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size);
extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

namespace fs = std::filesystem;

namespace {

bool run_file(const fs::path &p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
        return false;
    }
    const std::string data{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t *>(data.data()), data.size());
    return true;
}

}  // namespace

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    std::vector<std::string> roots(argv + 1, argv + argc);
#ifdef CORPUS
    if (roots.empty()) roots.emplace_back(CORPUS);
#endif
    if (roots.empty()) {
        std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    std::size_t runs = 0;
    bool ok = true;
    for (const auto &root : roots) {
        std::error_code ec;
        if (fs::is_directory(root, ec)) {
            std::vector<fs::path> files;
            for (const auto &e : fs::recursive_directory_iterator(root, ec))
                if (e.is_regular_file()) files.push_back(e.path());
            std::sort(files.begin(), files.end());
            for (const auto &f : files) ok = run_file(f) && ok, ++runs;
        } else if (fs::is_regular_file(root, ec)) {
            ok = run_file(root) && ok;
            ++runs;
        } else {
            std::fprintf(stderr, "replay: %s: no such corpus\n", root.c_str());
            ok = false;
        }
    }
    std::printf("replay: %zu inputs run\n", runs);
    if (runs == 0) {
        std::fprintf(stderr, "replay: the corpus is empty\n");
        return 1;
    }
    return ok ? 0 : 1;
}
