// `linear`: work is GPU-seconds at one reference GPU, and speedup is linear
// in the GPUs held (times the held share for fractional jobs). Placement,
// GPU type, CPU and memory do not matter. A job that holds a share of 0 (it
// uses CPUs and memory only) does one unit of work a second: its work is its
// run time.
#include "models/models.hpp"

namespace tessel {

namespace {
class LinearModel final : public ThroughputModel {
 public:
  std::string_view name() const override { return "linear"; }
  double rate(const JobSpec&, const Shape& shape) const override {
    if (shape.gpu_milli == 0) return 1;
    return shape.gpus * (shape.gpu_milli / 1000.0);
  }
};
}  // namespace

std::unique_ptr<ThroughputModel> parse_linear_model(TableReader&, const ModelSettings&) {
  return std::make_unique<LinearModel>();
}

}  // namespace tessel
