// The plugin SDK's view and decisions as Python types (pybind11), for
// policies written in Python. The extension module (tessel._tessel)
// registers them once per interpreter; the bridge plugin hands a policy its
// view through them.
//
// The Python view mirrors the C++ one: a C++ data member is a Python
// attribute, a C++ method a Python method of the same name. Nothing is
// copied up front: a job, node or GPU is the C++ object itself, read when
// an attribute is. What a stage call receives is valid during that call
// only; the view and the job lists taken from it refuse to be read after.
#pragma once

#include <memory>
#include <span>

#include <pybind11/pybind11.h>

#include <tessel/tessel.hpp>

namespace tessel::python {

// Open while the stage call that handed out a view runs. Every object
// whose C++ data may move after the call (the view, its job lists) checks it.
struct CallScope {
  bool open = true;
};

// The SchedulerView of one stage call.
class PolicyView {
 public:
  explicit PolicyView(const SchedulerView& view) : view_(&view), scope_(std::make_shared<CallScope>()) {}

  // Throws RuntimeError (in Python) once the call has returned.
  const SchedulerView& get() const;
  const std::shared_ptr<CallScope>& scope() const { return scope_; }
  // The call returned: what it handed out may no longer be read.
  void close() {
    scope_->open = false;
    view_ = nullptr;
  }

 private:
  const SchedulerView* view_;
  std::shared_ptr<CallScope> scope_;
};

// view.pending(), view.active(), view.jobs(): a sequence of jobs, read lazily.
class JobList {
 public:
  JobList(std::span<const JobState* const> jobs, std::shared_ptr<CallScope> scope)
      : jobs_(jobs), scope_(std::move(scope)) {}
  std::span<const JobState* const> get() const;

 private:
  std::span<const JobState* const> jobs_;
  std::shared_ptr<CallScope> scope_;
};

// Registers the SDK types in `module`.
void bind_sdk(pybind11::module_& module);

}  // namespace tessel::python
