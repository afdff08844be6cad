// The Python bridge: policies written as Python classes, run by the core as
// ordinary plugins. Each stage has a plugin named "python"
// (plugins/<stage>/python.cpp) whose class is one of the four below; this
// library holds their code, and the one embedded interpreter they share.
//
//   allocation = { plugin = "python", module = "policies/sf.py", class = "SmallestFirst", preemptive = true }
//
// The module file is loaded afresh for every plugin instance, so runs of a
// sweep share none of its state; a policy that draws random numbers takes
// a `seed` parameter (the run's seed for this plugin, not an argument), and
// a sweep then gives the same results at any -j. Keys
// after `class` go to the class's constructor; its signature declares them
// (names, types from annotations or defaults, defaults, help from
// typing.Annotated) and the core checks them as a C++ plugin's.
//
// Each stage call takes the GIL, crosses into Python once, converts what
// the policy returned and releases the GIL. A Python exception or a return
// value of the wrong type is a HostedCodeError, and a module that does not
// load a factory error; each names the Python file and line.
#pragma once

#include <string>
#include <vector>

#include <tessel/tessel.hpp>

namespace tessel::python {

class LoadedClass;  // bridge.cpp: the Python class and its instance
class JobObjects;   // python/src/sdk_types.hpp

// One Python policy object: loads its module, creates the instance, calls it.
class TESSEL_VISIBLE HostedPolicy {
 public:
  HostedPolicy(const PluginContext& context, PluginKind kind);
  ~HostedPolicy();
  HostedPolicy(const HostedPolicy&) = delete;
  HostedPolicy& operator=(const HostedPolicy&) = delete;

  // "policies/sf.py:14, class SmallestFirst"
  std::string where() const;
  bool time_sensitive() const { return time_sensitive_; }
  bool reads_progress() const { return reads_progress_; }
  bool defines(const char* method) const;
  LoadedClass& loaded() const { return *loaded_; }
  JobObjects& jobs() const { return *jobs_; }

 private:
  LoadedClass* loaded_;
  JobObjects* jobs_;  // the Python objects of the jobs this policy has seen
  bool time_sensitive_ = true;
  bool reads_progress_ = true;
};

// The ArgumentDeclarer of a stage's "python" plugin: the class's constructor
// parameters. A class without the stage's method cannot declare any.
template <PluginKind kind>
TESSEL_VISIBLE bool declare_arguments(const PluginContext& context, std::vector<ArgDeclaration>& out,
                                            FactoryError& error) noexcept;

// The plugin's own arguments: module and class.
inline constexpr ArgSpec kBridgeArgs[] = {
    {"module", ArgType::string, nullptr, "the Python file that defines the policy class (relative to the experiment)"},
    {"class", ArgType::string, nullptr,
     "the policy class; its constructor's parameters are this stage's further arguments"},
};

class TESSEL_VISIBLE AdmissionBridge final : public AdmissionPolicy {
 public:
  explicit AdmissionBridge(const PluginContext& context) : policy_(context, PluginKind::admission) {}
  std::string hosted_code() const override { return policy_.where(); }
  bool time_sensitive() const override { return policy_.time_sensitive(); }
  bool reads_progress() const override { return policy_.reads_progress(); }
  std::vector<AdmissionDecision> admit(const SchedulerView& view) override;

 private:
  HostedPolicy policy_;
};

// allocate() is required; allocate_whole (called only after a provisional
// plan) is an error naming the class where the class does not define it.
class TESSEL_VISIBLE AllocationBridge final : public AllocationPolicy {
 public:
  explicit AllocationBridge(const PluginContext& context)
      : policy_(context, PluginKind::allocation), allocates_whole_(policy_.defines("allocate_whole")) {}
  std::string hosted_code() const override { return policy_.where(); }
  bool time_sensitive() const override { return policy_.time_sensitive(); }
  bool reads_progress() const override { return policy_.reads_progress(); }
  AllocationPlan allocate(const SchedulerView& view) override { return plan_from("allocate", view); }
  AllocationPlan allocate_whole(const SchedulerView& view) override;

 private:
  AllocationPlan plan_from(const char* method, const SchedulerView& view);

  HostedPolicy policy_;
  bool allocates_whole_;
};

class TESSEL_VISIBLE PlacementBridge final : public PlacementPolicy {
 public:
  explicit PlacementBridge(const PluginContext& context) : policy_(context, PluginKind::placement) {}
  std::string hosted_code() const override { return policy_.where(); }
  bool time_sensitive() const override { return policy_.time_sensitive(); }
  bool reads_progress() const override { return policy_.reads_progress(); }
  PlacementChoice place(const SchedulerView& view, const JobState& job, const Resources& want) override;

 private:
  HostedPolicy policy_;
};

// resize() is required; arrange, reconfiguration_seconds and keep_after_loss
// cross into Python only if the class defines them.
class TESSEL_VISIBLE ElasticityBridge final : public ElasticityPolicy {
 public:
  explicit ElasticityBridge(const PluginContext& context);
  std::string hosted_code() const override { return policy_.where(); }
  bool time_sensitive() const override { return policy_.time_sensitive(); }
  bool reads_progress() const override { return policy_.reads_progress(); }
  std::vector<ResizeProposal> resize(const SchedulerView& view) override;
  JobLayout arrange(const SchedulerView& view, const JobState& job, const Allocation& allocation) override;
  double reconfiguration_seconds(const SchedulerView& view, const JobState& job, const Allocation& from,
                                 const Allocation& to) const override;
  bool keep_after_loss(const SchedulerView& view, const JobState& job, const Allocation& remaining) override;

 private:
  HostedPolicy policy_;
  bool arranges_, prices_, keeps_;
};

}  // namespace tessel::python
