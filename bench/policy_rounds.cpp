// bench/policy_rounds: what one scheduling round costs, per allocation policy.
//
// For each allocation plugin found, N synthetic jobs (Gavel's generator, all
// queued at time 0) wait on the Gavel cluster (36 V100 + 36 P100 + 36 K80
// GPUs, so LP policies see 3 GPU types); after a first round that admits
// them, it times further rounds (allocation, placement with consolidated,
// and the core's bookkeeping) and prints the mean, at N = 1,000 and 10,000.
// Target (issue #4): a Gavel LP round with 1,000 jobs on 3 types under 100 ms.
// Usage: build/bench/policy_rounds [PLUGIN...]   (default: every allocation plugin)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "config/experiment.hpp"
#include "workloads/workload.hpp"
#include "plugins/composition.hpp"
#include "plugins/registry.hpp"
#include "scheduler/scheduler.hpp"

using namespace tessel;

namespace {

// Arguments some policies need to run at all.
std::string arguments_for(std::string_view plugin) {
  if (plugin == "gittins") return ", distribution = \"../shared/data/tiresias/yarn-gput1000.csv\"";
  if (plugin == "gandiva") return ", packing = false";  // the synthetic jobs' model has no co-location rates
  return "";
}

double mean_round_ms(std::string_view plugin, int jobs, PluginRegistry& registry) {
  const std::string toml = "[cluster]\npreset = \"gavel\"\n[workload]\nkind = \"synthetic\"\njobs = " +
                           std::to_string(jobs) +
                           "\njobs_per_hour = 0\nelastic_min_gpus = 1\nelastic_max_gpus = 8\n"
                           "[scheduler]\nallocation = { plugin = \"" + std::string(plugin) + "\"" +
                           arguments_for(plugin) + " }\nplacement = { plugin = \"consolidated\" }\n";
  const ExperimentConfig config =
      read_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(toml, "policy_rounds.toml")));
  ClusterState cluster(config.cluster.nodes);
  Workload workload = build_workload(config.workload, cluster);
  Scheduler scheduler(compose_scheduler(config.scheduler, registry, 1, "."), std::move(cluster),
                      workload.model, config.scheduler.settings);
  for (JobSpec& job : workload.jobs) scheduler.submit(std::move(job), 0);
  scheduler.run_round(0);  // admits everyone and fills the cluster
  const int rounds = jobs > 5000 ? 3 : 10;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 1; r <= rounds; ++r) scheduler.run_round(300.0 * r);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / rounds;
}

}  // namespace

int main(int argc, char** argv) {
  PluginRegistry registry;
  std::vector<std::string> plugins(argv + 1, argv + argc);
  if (plugins.empty())
    for (const PluginEntry& entry : registry.plugins())
      if (entry.info.kind == PluginKind::allocation) plugins.emplace_back(entry.info.name);
  std::sort(plugins.begin(), plugins.end());

  std::printf("policy_rounds: mean round time, N jobs queued at once on 108 GPUs of 3 types\n");
  std::printf("%-22s %14s %14s\n", "allocation", "N = 1,000", "N = 10,000");
  for (const std::string& plugin : plugins) {
    try {
      const double small = mean_round_ms(plugin, 1'000, registry);
      const double large = mean_round_ms(plugin, 10'000, registry);
      std::printf("%-22s %11.2f ms %11.2f ms\n", plugin.c_str(), small, large);
      if (plugin == "gavel")
        std::printf("  gavel at 1,000 jobs: %.2f ms (target < 100 ms): %s\n", small, small < 100 ? "met" : "MISSED");
    } catch (const std::exception& e) {
      std::printf("%-22s cannot run here: %s\n", plugin.c_str(), e.what());
    }
  }
  return 0;
}
