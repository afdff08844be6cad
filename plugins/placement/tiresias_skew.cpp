// tiresias_skew: consolidate only the jobs whose model needs it.
//
// Source: Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep
// Learning" (USENIX NSDI'19), its placement: a job's communication cost
// depends on how skewed its model's tensor sizes are, so only jobs of skewed
// models are consolidated on as few servers as possible; the others are
// placed wherever GPUs are free, which shortens their wait. The default list
// of skewed models comes from the tensor sizes in Tiresias's simulator
// (SymbioticLab/Tiresias, simulator/models.py): in vgg11, vgg16 and vgg19 the
// largest tensor (392 MB) is 72-77% of the model, in alexnet (144 MB) 61%;
// in resnet50/101/152 and inception3/4 it is 14% or less.
//
// The rule as implemented:
// - A job is skewed when its model (JobSpec::model, compared without case)
//   is in `skewed_models`.
// - A skewed job runs consolidated or not at all: on one node if one node
//   of its GPU type is large enough for it, else on the fewest nodes its size
//   allows (its GPUs over the largest node). Among the nodes that can take
//   it whole, the one with the fewest usable GPUs (lowest id among equals;
//   on it, the tightest GPUs for fractional shares); across nodes, the
//   roomiest nodes whole and the rest on the tightest-fitting node. If the
//   free GPUs do not allow it, the job waits, with the reason.
// - Any other job takes GPUs wherever they are, the fullest nodes first (the
//   fewest usable GPUs, lowest id among equals), which keeps whole nodes free
//   for the skewed jobs.
//
// Simplifications: Tiresias's profiler measures the skew at run time and
// compares it with a threshold; here the user names the skewed models. Its
// placement also places parameter servers; tessel jobs are GPUs only.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include <tessel/tessel.hpp>

#include <tessel/gpu_choice.hpp>

namespace {

using tessel::gpu_choice::NodeRoom;

constexpr tessel::ArgSpec kArgs[] = {
    {"skewed_models", tessel::ArgType::string_list, R"(["vgg11", "vgg16", "vgg19", "alexnet"])",
     "models whose tensor sizes are skewed: their jobs are consolidated or wait"},
};

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

class TiresiasSkew final : public tessel::PlacementPolicy {
 public:
  explicit TiresiasSkew(const tessel::PluginContext& context) {
    for (const std::string& model : context.args().strings("skewed_models")) {
      if (model.empty()) throw tessel::ArgumentError("skewed_models", "model names must not be empty");
      skewed_.push_back(lowercase(model));
    }
  }

  bool time_sensitive() const override { return false; }

  tessel::PlacementChoice place(const tessel::SchedulerView& view, const tessel::JobState& job,
                                const tessel::Resources& want) override {
    const tessel::ClusterState& cluster = view.cluster();
    tessel::PlacementChoice choice;
    const std::string& model = job.spec.model;
    const int total = tessel::gpu_choice::rooms_for(cluster, want, rooms_);
    if (total < want.gpus) {
      choice.reason = tessel::Reason("needs {} GPUs, {} usable in the cluster", want.gpus, total);
      return choice;
    }
    if (!skewed(model)) {
      std::sort(rooms_.begin(), rooms_.end(), [](const NodeRoom& a, const NodeRoom& b) {
        return a.gpus != b.gpus ? a.gpus < b.gpus : a.node < b.node;
      });
      int needed = want.gpus, nodes = 0;
      for (const NodeRoom& room : rooms_) {
        const int here = std::min(needed, room.gpus);
        tessel::gpu_choice::take_tightest(cluster, room.node, want, here, choice.gpus);
        needed -= here;
        ++nodes;
        if (needed == 0) break;
      }
      choice.reason = tessel::Reason::text(label(model) + " is not skewed: placed on the fullest nodes, " +
                                           std::to_string(nodes) + " node(s)");
      return choice;
    }

    const int consolidated = tessel::gpu_choice::fewest_nodes_possible(cluster, want);
    if (consolidated == 1) {
      const NodeRoom* best = nullptr;
      for (const NodeRoom& room : rooms_)
        if (room.gpus >= want.gpus && (best == nullptr || room.gpus < best->gpus)) best = &room;
      if (best == nullptr) {
        int largest = 0;
        for (const NodeRoom& room : rooms_) largest = std::max(largest, room.gpus);
        choice.reason = tessel::Reason::text(model + " is skewed: waits for one node with " +
                                             std::to_string(want.gpus) + " usable GPUs, the most on one node is " +
                                             std::to_string(largest));
        return choice;
      }
      tessel::gpu_choice::take_tightest(cluster, best->node, want, want.gpus, choice.gpus);
      choice.reason = tessel::Reason::text(model + " is skewed: consolidated on node " +
                                           cluster.node(best->node).spec.name);
      return choice;
    }
    const int needed_nodes = tessel::gpu_choice::fewest_nodes(rooms_, want.gpus);
    if (needed_nodes > consolidated) {
      choice.reason = tessel::Reason::text(model + " is skewed: waits to run on " + std::to_string(consolidated) +
                                           " nodes, the free GPUs would need " + std::to_string(needed_nodes));
      return choice;
    }
    tessel::gpu_choice::spread_over_fewest_nodes(cluster, want, rooms_, choice.gpus);
    choice.reason = tessel::Reason::text(model + " is skewed: consolidated on " + std::to_string(consolidated) +
                                         " nodes, the fewest possible");
    return choice;
  }

 private:
  bool skewed(const std::string& model) const {
    if (model.empty()) return false;
    const std::string name = lowercase(model);
    return std::find(skewed_.begin(), skewed_.end(), name) != skewed_.end();
  }

  static std::string label(const std::string& model) { return model.empty() ? "a job with no model" : model; }

  std::vector<std::string> skewed_;
  std::vector<NodeRoom> rooms_;  // reused across calls
};

}  // namespace

TESSEL_PLUGIN_WITH_ARGS(TiresiasSkew, placement, "tiresias_skew", "1.0",
                        "consolidate jobs of skewed models (VGG, AlexNet) or make them wait; others anywhere, "
                        "fullest nodes first",
                        kArgs)
