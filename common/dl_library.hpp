// A shared library loaded on first use with dlopen, its entry points looked
// up by name. For libraries that are costly to load and not always needed
// (libcurl, UCX, libcrypto) or not always present (NVML).
#pragma once
#include <dlfcn.h>
#include <type_traits>

namespace shardnet {

class DlLibrary {
public:
    explicit DlLibrary(const char *soname) : handle_(dlopen(soname, RTLD_NOW | RTLD_LOCAL)) {}
    ~DlLibrary() { if (handle_) dlclose(handle_); }
    DlLibrary(const DlLibrary &) = delete;
    DlLibrary &operator=(const DlLibrary &) = delete;

    bool loaded() const { return handle_ != nullptr; }
    // Looks fn up; remembers a miss so that one check after a series of
    // sym() calls tells whether all were found.
    template <typename F>
    DlLibrary &sym(F &fn, const char *name) {
        fn = handle_ ? reinterpret_cast<F>(dlsym(handle_, name)) : nullptr;
        complete_ = complete_ && fn;
        return *this;
    }
    bool complete() const { return handle_ && complete_; }

private:
    void *handle_;
    bool complete_ = true;
};

}  // namespace shardnet
