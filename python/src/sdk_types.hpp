// The plugin SDK's view and decisions as Python types (pybind11), for
// policies written in Python. The extension module (tessel._tessel)
// registers them once per interpreter; the bridge plugin hands a policy its
// view through them.
//
// The Python view mirrors the C++ one: a C++ data member is a Python
// attribute, a C++ method a Python method of the same name. Nothing is
// copied up front: a job is the C++ object itself, read when an attribute
// is, and lives as long as the run. Nodes and GPUs are small copies, made
// when asked for. The view, and the job lists, cluster and throughput model
// taken from it, refuse to be read once the call that received them has
// returned.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include <pybind11/pybind11.h>

#include <tessel/tessel.hpp>

namespace tessel::python {

// The Python object of each job a policy has seen, made on first sight and
// kept for the policy's life (its `spec` too), so that reading a job in a
// later round costs a lookup, not an allocation. Used with the GIL held.
class JobObjects {
 public:
  JobObjects() = default;
  JobObjects(const JobObjects&) = delete;
  JobObjects& operator=(const JobObjects&) = delete;
  // The policy, and the run, end: an object a policy kept past them reads
  // as a RuntimeError, not as freed memory.
  ~JobObjects();
  pybind11::object get(const JobState& job);

 private:
  struct Entry {
    const JobState* job = nullptr;  // another scheduler's job (a fork's) may reuse an id
    pybind11::object object;
  };
  void forget(Entry& entry);
  std::vector<Entry> by_id_;
};

// Open while the stage call that handed out a view runs. Every object
// whose C++ data may move after the call (the view, its job lists) checks it.
struct CallScope {
  bool open = true;
};

// The SchedulerView of one stage call.
class PolicyView {
 public:
  PolicyView(const SchedulerView& view, JobObjects& jobs)
      : view_(&view), jobs_(&jobs), scope_(std::make_shared<CallScope>()) {}

  // Throws RuntimeError (in Python) once the call has returned.
  const SchedulerView& get() const;
  JobObjects& jobs() const { return *jobs_; }
  const std::shared_ptr<CallScope>& scope() const { return scope_; }
  // The call returned: what it handed out may no longer be read.
  void close() {
    scope_->open = false;
    view_ = nullptr;
  }

 private:
  const SchedulerView* view_;
  JobObjects* jobs_;
  std::shared_ptr<CallScope> scope_;
};

// view.pending(), view.active(), view.jobs(): a sequence of jobs, read lazily.
class JobList {
 public:
  JobList(std::span<const JobState* const> jobs, const PolicyView& view)
      : jobs_(jobs), objects_(&view.jobs()), scope_(view.scope()) {}
  std::span<const JobState* const> get() const;
  JobObjects& objects() const { return *objects_; }

 private:
  std::span<const JobState* const> jobs_;
  JobObjects* objects_;
  std::shared_ptr<CallScope> scope_;
};

// view.cluster(), view.throughput(): the scheduler's own object, read in
// place during the call. Kept past it, it would read a cluster that has
// changed since, or one its run has freed.
template <class T>
class InCall {
 public:
  InCall(const T& object, const PolicyView& view) : object_(&object), scope_(view.scope()) {}
  const T& get() const;  // throws RuntimeError (in Python) once the call has returned

 private:
  const T* object_;
  std::shared_ptr<CallScope> scope_;
};

// The JobState behind a Python job object, or null for any other object.
const JobState* job_state_of(pybind11::handle object);

// Registers the SDK types in `module`.
void bind_sdk(pybind11::module_& module);

}  // namespace tessel::python
