// PolicyLab: other policies, and what-if simulations, for policies that
// choose among policies (Blox's scheduler synthesizer).
//
// The simulator forks its current state (only jobs that are not done are
// copied) and runs a candidate composition forward. A forecast asked for
// during a round starts where the run stands: this round's admission has
// already happened, so the candidate allocates from this round on and
// admits from the next one, exactly as a policy switched on now would. The
// fork sees the planned cluster changes and continues the run's random
// failures (the same draws); with `known_arrivals` it also sees the jobs
// that will arrive. Plugins created here start with no memory of the run so
// far, like a policy switched on now.
//
// A policy named here is a plugin name, optionally with arguments as a TOML
// inline table: "las", "load_based { factor = 1.4 }".
#pragma once

#include <string_view>

#include "tessel/stages.hpp"

namespace tessel {

struct ForecastOptions {
  // How far ahead to simulate; 0: until every job the forecast counts is
  // done (or can never be placed), as Blox's synthesizer does.
  double horizon_seconds = 14400;
  // True: jobs that arrive during the horizon arrive in the fork too (an
  // oracle of the arrivals). False: only the jobs already submitted are
  // simulated (Blox's synthesizer).
  bool known_arrivals = true;
};

// What a what-if simulation saw over its horizon, for the jobs that were
// admitted or pending when it started or arrived during it.
struct Forecast {
  std::size_t jobs = 0;
  std::size_t finished = 0;
  // Seconds from arrival to finish, or to the end of the horizon for
  // unfinished jobs: a lower bound that compares candidates fairly.
  double mean_time_in_system = 0;
  // Seconds from arrival to first start, or to the end of the horizon.
  double mean_queueing_delay = 0;
  // Where the forecast stopped: now + horizon, or when its jobs were done.
  double end = 0;
};

class PolicyLab {
 public:
  virtual ~PolicyLab() = default;

  // Simulates forward from the current state with these admission and
  // allocation policies and the run's placement and elasticity.
  // Throws std::invalid_argument for an unknown policy or bad arguments.
  virtual Forecast forecast(std::string_view admission, std::string_view allocation,
                            const ForecastOptions& options) = 0;

  // A live instance of another policy, created once per spelling for the
  // run, to delegate decisions to.
  virtual AllocationPolicy& allocation(std::string_view policy) = 0;

  // Switches the run's admission policy from the next round on; this is how
  // a synthesizer applies the admission half of its choice.
  virtual void use_admission(std::string_view policy) = 0;
};

}  // namespace tessel
