// Placement decisions over a synthetic inventory: 100,000 idle nodes in 50
// clusters with mixed accelerator classes, GPU counts, memory and fabrics.
// Prints the median and p99 of one decision (target: median <= 1 ms).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "broker/inventory/placement.hpp"

using namespace shardnet::broker;

int main(int argc, char **argv) {
    const int n_clusters = 50, n_nodes = argc > 1 ? std::atoi(argv[1]) : 100000, runs = 1001;
    const char *classes[] = {"H100-SXM", "H200-SXM", "B200", "A100", "MI300X", "RTX-PRO-6000"};
    const unsigned fabrics[] = {f_infiniband, f_infiniband | f_nvlink, f_roce, f_ethernet};
    std::mt19937 rng(42);
    std::vector<ClusterOffer> clusters(n_clusters);
    for (int c = 0; c < n_clusters; ++c) {
        clusters[c].name = "c" + std::to_string(c);
        clusters[c].region = c % 3 == 0 ? "eu" : c % 3 == 1 ? "us" : "ap";
        // Mostly one class per cluster, as real sites are.
        const char *cls = classes[c % 6];
        for (int i = 0; i < n_nodes / n_clusters; ++i) {
            NodeOffer n;
            n.name = clusters[c].name + "n" + std::to_string(i);
            n.described = true;
            n.accel_class = rng() % 10 ? cls : classes[rng() % 6];
            n.gpus = rng() % 8 ? 8 : 4;
            n.gpu_memory_gb = n.accel_class == "H200-SXM" ? 141 : 80;
            n.fabric = fabrics[(c + rng() % 2) % 4];
            n.memory_gb = rng() % 4 ? 2048 : 1024;
            n.arch = "x86_64";
            n.cuda = 12.4;
            clusters[c].idle.push_back(std::move(n));
        }
    }
    std::vector<double> us;
    std::size_t placed = 0;
    for (int i = 0; i < runs; ++i) {
        Requirements r;
        r.nodes = 1 + int(rng() % 64);
        r.accel_class = classes[rng() % 3];
        r.gpus_per_node = 8;
        r.fabric = rng() % 2 ? "infiniband" : "";
        r.memory_gb = 1024;
        const std::string home = clusters[rng() % n_clusters].name;
        auto t0 = std::chrono::steady_clock::now();
        Placement p = place(r, clusters, home, "eu", home + "n0");
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        placed += !p.cluster.empty();
    }
    std::sort(us.begin(), us.end());
    std::printf("placement over %d nodes in %d clusters, %d decisions (%zu placed)\n", n_nodes, n_clusters, runs, placed);
    std::printf("  median %8.1f us   (target <= 1000 us)\n  p99    %8.1f us\n", us[us.size() / 2], us[us.size() * 99 / 100]);
    return 0;
}
