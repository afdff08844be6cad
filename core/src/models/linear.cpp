// `linear`: work is GPU-seconds at one reference GPU, and speedup is linear
// in the GPUs held (times the held share for fractional jobs). Placement,
// GPU type, CPU and memory do not matter.
#include "models/models.hpp"

namespace tessel {

namespace {
class LinearModel final : public ThroughputModel {
 public:
  std::string_view name() const override { return "linear"; }
  double rate(const JobSpec&, const Shape& shape) const override {
    return shape.gpus * (shape.gpu_milli / 1000.0);
  }
};
}  // namespace

std::unique_ptr<ThroughputModel> parse_linear_model(TableReader&, const TomlDocument&) {
  return std::make_unique<LinearModel>();
}

}  // namespace tessel
