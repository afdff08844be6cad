// Where a run's facts go. Both runners tell a RunSink what happens, in the
// same typed events, and both sinks turn them into the same rows through one
// set of statements (store.hpp: RunRows), so `report` reads a simulation and
// a real-node run alike.
//
//   BatchSink  a simulation's: gathers the run in memory (its RunResults),
//              which ResultsStore::complete_run writes in one transaction
//              at the end, so a stored run is never partial.
//   Journal    real nodes' (runners/cluster/journal.hpp): writes each event
//              through as it happens, before anyone is told.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "results/store.hpp"

namespace tessel {

// One process of a launch (real nodes).
struct RankRecord {
  int rank = 0;
  std::string node;
  std::vector<int> gpus;         // indices on the node
  std::optional<int> exit_code;  // -1 with a signal
  int signal = 0;
  bool exited() const { return exit_code.has_value(); }
};

// A job's processes, as decided (real nodes: a simulated job has none).
struct LaunchRecord {
  std::uint64_t id = 0;
  JobId job = 0;
  double decided = 0;
  bool resume = false;
  std::string outcome;  // empty while it runs unchallenged; the reason once stopping or ended
  std::vector<RankRecord> ranks;
  int master_port = 0;  // once dispatched (real nodes)
  std::optional<double> ended;  // when its last process was gone (run time)
};

// A node joined, went down or came back (real nodes: a simulated cluster is
// the experiment's).
struct NodeRecord {
  std::string name, address, gpu_type;
  int gpus = 0;
  double cpus = 0, mem_gb = 0;
  bool up = false;
  double time = 0;  // when last heard from
};

// The cluster over time as a step function: a sample is recorded when the
// cluster's state (all but the time) differs from the last one recorded, and
// that state holds until the next row. A round that changes nothing adds no
// row: at Blox's 300-s rounds half a run's rounds repeat the row before, and
// an idle real cluster would repeat one row for as long as it stays idle.
// The last of such rounds is recorded with the run's totals, so that the
// series reaches the run's last round.
class SampleSteps {
 public:
  // Whether to record `sample`: it changes the state.
  bool changes(const Sample& sample);
  // The latest sample not recorded since the last change, if any; forgotten.
  std::optional<Sample> take_unrecorded() { return std::exchange(unrecorded_, std::nullopt); }

 private:
  std::optional<Sample> recorded_;    // the last recorded
  std::optional<Sample> unrecorded_;  // the latest of the same state, since
};

class RunSink {
 public:
  virtual ~RunSink() = default;

  // The run starts (or, on real nodes, resumes): it is 'running'.
  virtual void run_started() = 0;
  // A job was submitted, started, stopped, shrunk or ended: its row as it stands.
  virtual void job_changed(const JobRecord& job) = 0;
  virtual void launched(const LaunchRecord& launch) = 0;
  virtual void resized(const ResizeRecord& resize) = 0;
  virtual void node_changed(const NodeRecord& node) = 0;
  virtual void sampled(const Sample& sample) = 0;
  virtual void decided(const DecisionRecord& decision) = 0;
  // The run's totals, and with them its figures (the `metrics` rows): at its
  // end, and on real nodes, whose run ends when its user says, as it goes.
  virtual void run_ended(const RunTotals& totals) = 0;
};

// A simulation's sink: everything in memory until the end.
class BatchSink final : public RunSink {
 public:
  // Starts the wall clock of RunTotals::wall_seconds.
  void run_started() override { started_ = std::chrono::steady_clock::now(); }
  void job_changed(const JobRecord& job) override;  // keeps each job's latest row
  // Room for `count` jobs' rows at once: a run of a million jobs then holds
  // no second, half-size copy of them while the rows grow.
  void expect_jobs(std::size_t count) { results_.jobs.reserve(count); }
  void launched(const LaunchRecord&) override {}     // simulated jobs run no processes
  void resized(const ResizeRecord& resize) override { results_.resizes.push_back(resize); }
  void node_changed(const NodeRecord&) override {}   // nodes are the experiment's [cluster]
  void sampled(const Sample& sample) override {
    if (steps_.changes(sample)) results_.samples.push_back(sample);
  }
  void decided(const DecisionRecord& decision) override { results_.decisions.push_back(decision); }
  // wall_seconds are measured here, from run_started; the totals' own are ignored.
  void run_ended(const RunTotals& totals) override;

  // What was gathered, for ResultsStore::complete_run; the sink is empty after.
  RunResults take() { return std::exchange(results_, RunResults{}); }

 private:
  RunResults results_;
  SampleSteps steps_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace tessel
