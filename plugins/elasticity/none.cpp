// none: jobs keep the size they started with.
#include <tessel/tessel.hpp>

namespace {

class NoElasticity final : public tessel::ElasticityPolicy {
 public:
  explicit NoElasticity(const tessel::PluginContext&) {}

  bool time_sensitive() const override { return false; }
  bool reads_progress() const override { return false; }

  std::vector<tessel::ResizeProposal> resize(const tessel::SchedulerView&) override { return {}; }
};

}  // namespace

TESSEL_PLUGIN(NoElasticity, elasticity, "none", "1.0", "never resize a running job")
