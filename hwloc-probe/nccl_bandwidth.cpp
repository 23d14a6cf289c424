#include "hwloc-probe/nccl_bandwidth.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "common/dl_library.hpp"

namespace shardnet::probe {

namespace {

// The few ABI-stable CUDA runtime and NCCL declarations we need, so the
// probe builds and runs where neither is installed.
using cudaStream = void *;
using ncclComm = void *;
constexpr int kNcclFloat32 = 7, kNcclSum = 0;

struct Cuda {
    DlLibrary lib13{"libcudart.so.13"}, lib12{"libcudart.so.12"};
    DlLibrary &lib() { return lib13.loaded() ? lib13 : lib12; }
    int (*device_count)(int *);
    int (*set_device)(int);
    int (*malloc)(void **, size_t);
    int (*free)(void *);
    int (*memset)(void *, int, size_t);
    int (*stream_create)(cudaStream *);
    int (*stream_sync)(cudaStream);
    int (*stream_destroy)(cudaStream);
    const char *(*error_string)(int);
    bool load() {
        lib().sym(device_count, "cudaGetDeviceCount").sym(set_device, "cudaSetDevice").sym(malloc, "cudaMalloc")
            .sym(free, "cudaFree").sym(memset, "cudaMemset").sym(stream_create, "cudaStreamCreate")
            .sym(stream_sync, "cudaStreamSynchronize").sym(stream_destroy, "cudaStreamDestroy")
            .sym(error_string, "cudaGetErrorString");
        return lib().complete();
    }
};

struct Nccl {
    DlLibrary lib{"libnccl.so.2"};
    int (*version)(int *);
    int (*init_all)(ncclComm *, int, const int *);
    int (*destroy)(ncclComm);
    int (*group_start)();
    int (*group_end)();
    int (*all_reduce)(const void *, void *, size_t, int, int, ncclComm, cudaStream);
    const char *(*error_string)(int);
    bool load() {
        lib.sym(version, "ncclGetVersion").sym(init_all, "ncclCommInitAll").sym(destroy, "ncclCommDestroy")
            .sym(group_start, "ncclGroupStart").sym(group_end, "ncclGroupEnd").sym(all_reduce, "ncclAllReduce")
            .sym(error_string, "ncclGetErrorString");
        return lib.complete();
    }
};

}  // namespace

std::string measure_nccl_allreduce(BandwidthResult &r, size_t bytes, int iters) {
    Cuda cuda;
    if (!cuda.load()) return "";  // no CUDA runtime: no GPUs we can drive
    int n = 0;
    if (cuda.device_count(&n) != 0 || n == 0) return "";
    r.gpus = n;
    Nccl nccl;
    if (!nccl.load()) return "libnccl.so.2 not found: install NCCL to measure bandwidth";
    int v = 0;
    if (nccl.version(&v) == 0) r.nccl_version = std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
    const size_t count = bytes / sizeof(float);
    const size_t gpus = static_cast<size_t>(n);
    std::vector<void *> send(gpus, nullptr), recv(gpus, nullptr);
    std::vector<cudaStream> streams(gpus, nullptr);
    std::vector<ncclComm> comms(gpus, nullptr);
    std::string err;
    auto cuda_check = [&](int rc, const char *what) {
        if (rc != 0 && err.empty()) err = std::string(what) + ": " + cuda.error_string(rc);
        return rc == 0;
    };
    for (int i = 0; i < n && err.empty(); ++i) {
        cuda_check(cuda.set_device(i), "cudaSetDevice");
        cuda_check(cuda.malloc(&send[size_t(i)], bytes), "cudaMalloc");
        cuda_check(cuda.malloc(&recv[size_t(i)], bytes), "cudaMalloc");
        cuda_check(cuda.memset(send[size_t(i)], 0, bytes), "cudaMemset");
        cuda_check(cuda.stream_create(&streams[size_t(i)]), "cudaStreamCreate");
    }
    bool comms_up = false;
    if (err.empty()) {
        int rc = nccl.init_all(comms.data(), n, nullptr);
        if (rc != 0) err = std::string("ncclCommInitAll: ") + nccl.error_string(rc);
        comms_up = rc == 0;
    }
    std::vector<double> times;
    for (int it = 0; err.empty() && it < iters + 5; ++it) {
        auto t0 = std::chrono::steady_clock::now();
        nccl.group_start();
        for (int i = 0; i < n; ++i)
            nccl.all_reduce(send[size_t(i)], recv[size_t(i)], count, kNcclFloat32, kNcclSum, comms[size_t(i)],
                            streams[size_t(i)]);
        int rc = nccl.group_end();
        if (rc != 0) { err = std::string("ncclAllReduce: ") + nccl.error_string(rc); break; }
        for (int i = 0; i < n; ++i) {
            cuda.set_device(i);
            cuda_check(cuda.stream_sync(streams[size_t(i)]), "cudaStreamSynchronize");
        }
        if (it >= 5) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    for (int i = 0; i < n; ++i) {
        if (comms_up) nccl.destroy(comms[size_t(i)]);
        cuda.set_device(i);
        if (streams[size_t(i)]) cuda.stream_destroy(streams[size_t(i)]);
        if (send[size_t(i)]) cuda.free(send[size_t(i)]);
        if (recv[size_t(i)]) cuda.free(recv[size_t(i)]);
    }
    if (!err.empty()) return err;
    std::sort(times.begin(), times.end());
    r.bytes = bytes;
    r.seconds = times[times.size() / 2];
    r.algbw_gbps = double(bytes) / r.seconds / 1e9;
    r.busbw_gbps = r.algbw_gbps * 2.0 * (n - 1) / n;
    return "";
}

}  // namespace shardnet::probe
