// `amdahl`: work is GPU-seconds at one reference GPU, as in `linear`, but
// more GPUs help sub-linearly, by Amdahl's law:
//
//   rate(n GPUs) = share x n / (1 + serial_fraction x (n - 1))
//
// where `share` is the held share of each GPU (gpu_milli / 1000). One GPU
// runs at rate 1 whatever the fraction; n GPUs never reach more than
// 1 / serial_fraction times one. `serial_fraction = 0` is the linear model.
//
//   model = { name = "amdahl", serial_fraction = 0.086 }
//
// Source: G. M. Amdahl, "Validity of the single processor approach to
// achieving large scale computing capabilities", AFIPS'67. Data-parallel
// training scales sub-linearly because gradient synchronisation does not
// shrink with more workers; Gavel's measured throughputs
// (stanford-futuredata/gavel, scheduler/simulation_throughputs.json) give
// V100 jobs, on average over the job types measured on several GPUs, 1.9x
// on 2 GPUs and 2.5x on 4.
//
// Simplifications: one fraction for every job; placement, GPU type, CPU and
// memory do not matter (wrap it in `placement-penalty` for spread jobs).
#include <sstream>

#include "models/models.hpp"

namespace tessel {

namespace {

class AmdahlModel final : public ThroughputModel {
 public:
  explicit AmdahlModel(double serial_fraction) : serial_(serial_fraction) {}
  std::string_view name() const override { return "amdahl"; }
  double rate(const JobSpec&, const Shape& shape) const override {
    if (shape.gpus <= 0) return 0;
    return (shape.gpu_milli / 1000.0) * shape.gpus / (1 + serial_ * (shape.gpus - 1));
  }

 private:
  double serial_;
};

}  // namespace

std::unique_ptr<ThroughputModel> parse_amdahl_model(TableReader& arguments, const ModelSettings&) {
  auto fraction = arguments.number("serial_fraction", 0.1);
  if (fraction && !(*fraction >= 0 && *fraction < 1)) {
    std::ostringstream message;
    message << "'serial_fraction' in [" << arguments.table_name() << "] must be in [0, 1), got " << *fraction;
    arguments.error("serial_fraction", message.str());
    fraction.reset();
  }
  return std::make_unique<AmdahlModel>(fraction.value_or(0.1));
}

}  // namespace tessel
