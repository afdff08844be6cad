#include "bridge.hpp"

#include <dlfcn.h>

#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <variant>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "python_paths.hpp"
#include "sdk_types.hpp"

namespace py = pybind11;

namespace tessel::python {

namespace {

// The threads running a policy's code now, as Python and pthread_self()
// name them. Read and written with the GIL held.
std::multiset<std::uint64_t>& calling_threads() {
  static std::multiset<std::uint64_t> threads;
  return threads;
}

// Marks the calling thread as running a policy's code while it lives.
class PolicyCode {
 public:
  PolicyCode() : entry_(calling_threads().insert(PyThread_get_thread_ident())) {}
  ~PolicyCode() {
    // An interrupt the policy's code returned before taking is dropped: the
    // run stops at its next event anyway, and the bridge's own Python after
    // the call must not take it for a mistake of its own.
    PyThreadState_SetAsyncExc(*entry_, nullptr);
    calling_threads().erase(entry_);
  }
  PolicyCode(const PolicyCode&) = delete;
  PolicyCode& operator=(const PolicyCode&) = delete;

 private:
  std::multiset<std::uint64_t>::iterator entry_;
};

// The core's interrupter (set_hosted_code_interrupter): raises
// KeyboardInterrupt in the policy code running on the stopping runs'
// threads, so that Ctrl-C stops a policy stuck in a loop too. Python
// delivers it at the policy's next bytecode: a policy blocked in one call
// into C (a long time.sleep) ends that call first.
void interrupt_policies(const std::vector<std::uint64_t>& threads) {
  const PyGILState_STATE state = PyGILState_Ensure();
  for (const std::uint64_t thread : threads)
    if (calling_threads().contains(thread))
      PyThreadState_SetAsyncExc(static_cast<unsigned long>(thread), PyExc_KeyboardInterrupt);
  PyGILState_Release(state);
}

// Starts the interpreter unless this process has one (tessel started from
// the CLI rather than from Python); never a second one. Thread-safe.
void ensure_interpreter() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!Py_IsInitialized()) {  // else tessel runs inside Python: use that interpreter
      // The plugin loader opened libpython for this library alone; extension
      // modules (tessel._tessel, numpy) need its symbols global, as in python3.
      Dl_info libpython{};
      if (dladdr(reinterpret_cast<void*>(&Py_InitializeEx), &libpython) != 0 && libpython.dli_fname != nullptr)
        dlopen(libpython.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
      Py_InitializeEx(0);  // no signal handlers: Ctrl-C stays tessel's
      PyEval_SaveThread();  // each call takes the GIL, from whichever thread
    }
    set_hosted_code_interrupter(&interrupt_policies);  // once there is an interpreter to interrupt in
  });
}

// The directory above this library's: in a wheel the library sits in the
// tessel package, so this is where the package is.
std::string above_this_library() {
  Dl_info library{};
  if (dladdr(reinterpret_cast<void*>(&above_this_library), &library) == 0 || library.dli_fname == nullptr) return {};
  // Loaded through a plugin's RPATH, the name may read ".../plugins/kind/../../lib.so".
  return std::filesystem::path(library.dli_fname).lexically_normal().parent_path().parent_path().string();
}

// tessel._bridge, the Python half of the bridge. From a tessel started on
// the command line the package may not be on sys.path yet: the build tree's
// copy, the one this library came with (a wheel) and the install's are
// tried in turn.
py::module_ bridge_module() {
  try {
    return py::module_::import("tessel._bridge");
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_ImportError)) throw;
  }
  py::list path = py::module_::import("sys").attr("path");
  std::string tried;
  const std::string beside = above_this_library();
  for (const std::string& dir : {std::string(kPythonBuildDir), beside, std::string(kPythonInstallDir)}) {
    if (dir.empty()) continue;
    tried += std::string(tried.empty() ? "" : ", ") + dir;
    std::error_code ec;
    if (!std::filesystem::is_directory(std::filesystem::path(dir) / "tessel", ec)) continue;
    path.append(dir);
    try {
      return py::module_::import("tessel._bridge");
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_ImportError)) throw;
      throw std::runtime_error("the tessel Python package in " + dir + " does not import: " + e.what());
    }
  }
  throw std::runtime_error("the tessel Python package is not importable (looked on PYTHONPATH and in " + tried +
                           "); build tessel, or pip install it");
}

std::string_view stage_method(PluginKind kind) {
  switch (kind) {
    case PluginKind::admission: return "admit";
    case PluginKind::allocation: return "allocate";
    case PluginKind::placement: return "place";
    case PluginKind::elasticity: return "resize";
  }
  return "?";
}

py::object to_python(const ArgValue& value) {
  return std::visit([](const auto& v) -> py::object { return py::cast(v); }, value);
}

// A Python exception, as "file:line: Type: message" at the innermost frame
// in the policy's file `path` (tessel._bridge.describe); pybind11's own
// words before the bridge module is loaded.
std::string describe(const py::module_& bridge, py::error_already_set& error, const std::string& path) {
  if (!bridge) return error.what();
  return bridge.attr("describe")(error.value(), error.trace(), path).cast<std::string>();
}

// Where the policy's code was when the user stopped it: "path:line" of
// describe()'s "path:line: KeyboardInterrupt: ".
std::string interrupted_at(const py::module_& bridge, py::error_already_set& error, const std::string& path) {
  const std::string described = describe(bridge, error, path);
  return described.substr(0, described.find(": KeyboardInterrupt"));
}

}  // namespace

// The policy class, its instance and where they came from. Holds Python
// references, so it is created and destroyed with the GIL held.
class LoadedClass {
 public:
  py::module_ bridge;
  py::object instance;
  // The classes of tessel/decisions.py, by name.
  std::map<std::string, py::object, std::less<>> decision_classes;
  std::string module_name;  // what the module was loaded under (tessel._bridge.load)
  std::string path;        // the module file, as the user's config resolves it
  std::string class_name;
  std::string class_line;  // where the class is defined

  // Calls the policy's `method`; a Python exception becomes a HostedCodeError,
  // KeyboardInterrupt (the user stopped the run) a HostedCodeInterrupted.
  template <class... Args>
  py::object call(const char* method, Args&&... args) const {
    try {
      const PolicyCode running;
      return instance.attr(method)(std::forward<Args>(args)...);
    } catch (py::error_already_set& error) {
      if (error.matches(PyExc_KeyboardInterrupt)) throw HostedCodeInterrupted(interrupted_at(bridge, error, path));
      throw HostedCodeError(describe(bridge, error, path));
    }
  }

  // "policies/sf.py:12: SmallestFirst.allocate() returned <what>"
  [[noreturn]] void returned(const char* method, const std::string& what) const {
    const std::string line = bridge.attr("line_of")(py::type::of(instance).attr(method)).cast<std::string>();
    throw HostedCodeError(path + ":" + line + ": " + class_name + "." + method + "() returned " + what);
  }

  // The decision class `name` of tessel/decisions.py.
  py::handle decision_class(std::string_view name) const { return decision_classes.find(name)->second; }
};

namespace {

std::string type_name(py::handle object) { return py::str(py::type::of(object).attr("__name__")).cast<std::string>(); }

// "an int", "a list": the type of `object`, with its article.
std::string a_type(py::handle object) {
  const std::string name = type_name(object);
  return (std::string("aeiouAEIOU").find(name.front()) == std::string::npos ? "a " : "an ") + name;
}

// A decision's field, by an interned name made once (and never freed: it
// must outlive the interpreter's shutdown).
py::object field(py::handle decision, const char* name) {
  static std::map<std::string_view, PyObject*> names;
  auto it = names.find(name);
  if (it == names.end()) it = names.emplace(name, PyUnicode_InternFromString(name)).first;
  PyObject* value = PyObject_GetAttr(decision.ptr(), it->second);
  if (value == nullptr) {
    py::error_already_set error;
    throw HostedCodeError(std::string("a returned decision has no '") + name + "': " + error.what());
  }
  return py::reinterpret_steal<py::object>(value);
}

// What a policy returned, read into the core's decisions: each reader says
// what is wrong with the value, in the policy's terms.
class Reader {
 public:
  Reader(const LoadedClass& policy, const char* method) : policy_(policy), method_(method) {}

  [[noreturn]] void wrong(const std::string& what) const { policy_.returned(method_, what); }

  py::list list_of(py::handle result, const char* item_class) const {
    if (!PyList_Check(result.ptr()) && !PyTuple_Check(result.ptr()))
      wrong(a_type(result) + ", not a list of tessel." + item_class);
    py::list items = py::reinterpret_borrow<py::object>(result);  // a tuple becomes a list
    const py::handle cls = policy_.decision_class(item_class);
    for (const py::handle item : items)
      if (PyObject_IsInstance(item.ptr(), cls.ptr()) != 1)
        wrong("a list holding " + a_type(item) + ", not only tessel." + item_class);
    return items;
  }

  void expect(py::handle result, const char* decision_class) const {
    if (PyObject_IsInstance(result.ptr(), policy_.decision_class(decision_class).ptr()) != 1)
      wrong(a_type(result) + ", not a tessel." + decision_class);
  }

  Reason reason(py::handle decision) const { return reason_text(field(decision, "reason"), "reason"); }

  // `text` (a decision's `what`) as a reason.
  Reason reason_text(py::handle text, const char* what) const {
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_Check(text.ptr()) ? PyUnicode_AsUTF8AndSize(text.ptr(), &size) : nullptr;
    if (utf8 == nullptr) {
      PyErr_Clear();
      wrong(std::string("a decision whose ") + what + " is " +
            (PyUnicode_Check(text.ptr()) ? "a str that is not valid Unicode (a lone surrogate)"
                                         : a_type(text) + ", not a str"));
    }
    return Reason::text(std::string(utf8, static_cast<std::size_t>(size)));
  }

  JobId job(py::handle job) const {
    if (const JobState* state = job_state_of(job)) return state->spec.id;
    if (PyLong_Check(job.ptr()) && !PyBool_Check(job.ptr())) {
      const long long id = PyLong_AsLongLong(job.ptr());
      if (id >= 0 && id < static_cast<long long>(kNoJob)) return static_cast<JobId>(id);
      PyErr_Clear();
    }
    wrong("a decision for job " + py::repr(job).cast<std::string>() + ", which is neither a JobState nor a job id");
  }

  // A PlacementChoice's GPUs: a sequence of ids, integers >= 0 (numpy's
  // too; a bool is no id).
  std::vector<GpuId> gpu_ids(py::handle gpus) const {
    if (!PySequence_Check(gpus.ptr()) || PyUnicode_Check(gpus.ptr()) || PyBytes_Check(gpus.ptr()))
      wrong("a decision whose gpus is " + a_type(gpus) + ", not a list of GPU ids");
    std::vector<GpuId> ids;
    for (const py::handle id : py::reinterpret_borrow<py::sequence>(gpus)) {
      long long value = -1;
      if (PyIndex_Check(id.ptr()) && !PyBool_Check(id.ptr())) {
        if (PyObject* index = PyNumber_Index(id.ptr())) {
          value = PyLong_AsLongLong(index);
          Py_DECREF(index);
        }
        if (value == -1 && PyErr_Occurred()) PyErr_Clear();  // past a long long: no id either
      }
      if (value < 0 || value > static_cast<long long>(std::numeric_limits<GpuId>::max()))
        wrong("a decision whose gpus hold " + py::repr(id).cast<std::string>() + " (" + a_type(id) +
              "), not only GPU ids (ints >= 0)");
      ids.push_back(static_cast<GpuId>(value));
    }
    return ids;
  }

  template <class T>
  T value(py::handle object, const char* what) const {
    try {
      return object.cast<T>();
    } catch (const py::cast_error&) {
      wrong(std::string("a decision whose ") + what + " is " + a_type(object));
    }
  }

 private:
  const LoadedClass& policy_;
  const char* method_;
};

}  // namespace

HostedPolicy::HostedPolicy(const PluginContext& context, PluginKind kind) {
  ensure_interpreter();
  const std::string path = context.resolve(context.args().string("module"));
  const std::string& class_name = context.args().string("class");
  py::gil_scoped_acquire gil;
  auto loaded = std::make_unique<LoadedClass>();
  loaded->path = path;
  loaded->class_name = class_name;
  try {
    loaded->bridge = bridge_module();
    const py::module_ decisions = py::module_::import("tessel.decisions");
    for (const char* name : {"AdmissionDecision", "AllocationPlan", "Grant", "PlacementChoice", "ResizeProposal"})
      loaded->decision_classes.emplace(name, decisions.attr(name));
    const PolicyCode running;  // the module's and the constructor's code
    const py::tuple found = loaded->bridge.attr("load")(path, class_name, std::string(stage_method(kind)));
    const py::object cls = found[0];
    loaded->module_name = found[1].cast<std::string>();
    loaded->class_line = loaded->bridge.attr("line_of")(cls).cast<std::string>();
    py::dict arguments;
    for (const auto& [name, value] : context.args().all())
      if (name != "module" && name != "class") arguments[py::str(name)] = to_python(value);
    if (loaded->bridge.attr("takes_seed")(cls).cast<bool>()) arguments["seed"] = context.seed();
    loaded->instance = cls(**arguments);
    // Optional declarations, read once: a method (or attribute) returning a
    // bool; absent, the plugin default (true) holds.
    const auto declared = [&](const char* name, bool& flag) {
      py::object value = py::getattr(loaded->instance, name, py::none());
      if (value.is_none()) return;
      if (PyCallable_Check(value.ptr())) value = value();
      if (!PyBool_Check(value.ptr()))
        throw std::runtime_error(path + ":" + loaded->class_line + ": " + class_name + "." + name + "() returned " +
                                 a_type(value) + ", not True or False");
      flag = value.cast<bool>();
    };
    declared("time_sensitive", time_sensitive_);
    declared("reads_progress", reads_progress_);
  } catch (py::error_already_set& error) {
    if (!loaded->module_name.empty()) loaded->bridge.attr("unload")(loaded->module_name);
    if (loaded->bridge && error.matches(loaded->bridge.attr("ArgumentError"))) {
      py::object value = error.value();
      throw ArgumentError(value.attr("argument").cast<std::string>(), py::str(value).cast<std::string>());
    }
    if (error.matches(PyExc_KeyboardInterrupt)) throw HostedCodeInterrupted(interrupted_at(loaded->bridge, error, path));
    throw std::runtime_error(describe(loaded->bridge, error, path));
  }
  loaded_ = loaded.release();
  jobs_ = new JobObjects;
}

HostedPolicy::~HostedPolicy() {
  py::gil_scoped_acquire gil;
  try {
    loaded_->bridge.attr("unload")(loaded_->module_name);
  } catch (const py::error_already_set&) {
    // Forgetting the module is tidiness; a destructor must not throw.
  }
  delete jobs_;
  delete loaded_;
}

std::string HostedPolicy::where() const {
  return loaded_->path + ":" + loaded_->class_line + ", class " + loaded_->class_name;
}

bool HostedPolicy::defines(const char* method) const {
  py::gil_scoped_acquire gil;
  return py::hasattr(loaded_->instance, method);
}

template <PluginKind kind>
bool declare_arguments(const PluginContext& context, std::vector<ArgDeclaration>& out, FactoryError& error) noexcept {
  try {
    ensure_interpreter();
    const std::string path = context.resolve(context.args().string("module"));
    py::gil_scoped_acquire gil;
    py::module_ bridge;
    try {
      bridge = bridge_module();
      py::list declared = [&] {
        const PolicyCode running;  // the module's code, imported to read the class
        return bridge.attr("declarations")(path, context.args().string("class"), std::string(stage_method(kind)));
      }();
      for (const py::handle item : declared) {
        const auto fields = item.cast<py::tuple>();
        ArgDeclaration declaration;
        declaration.name = fields[0].cast<std::string>();
        // tessel._bridge names the types as ArgType does.
        static const std::map<std::string, ArgType, std::less<>> kTypes = {
            {"boolean", ArgType::boolean},         {"integer", ArgType::integer},
            {"number", ArgType::number},           {"string", ArgType::string},
            {"number_list", ArgType::number_list}, {"string_list", ArgType::string_list},
            {"number_table", ArgType::number_table}};
        const std::string type = fields[1].cast<std::string>();
        const auto known = kTypes.find(type);
        if (known == kTypes.end()) throw std::logic_error("tessel._bridge declared unknown type " + type);
        declaration.type = known->second;
        if (!fields[2].is_none()) declaration.default_value = fields[2].cast<std::string>();
        declaration.help = fields[3].cast<std::string>();
        declaration.choices = fields[4].cast<std::string>();
        out.push_back(std::move(declaration));
      }
    } catch (py::error_already_set& e) {
      error.interrupted = e.matches(PyExc_KeyboardInterrupt);
      error.message = error.interrupted ? interrupted_at(bridge, e, path) : describe(bridge, e, path);
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    error.message = e.what();
    return false;
  }
}

template bool declare_arguments<PluginKind::admission>(const PluginContext&, std::vector<ArgDeclaration>&,
                                                       FactoryError&) noexcept;
template bool declare_arguments<PluginKind::allocation>(const PluginContext&, std::vector<ArgDeclaration>&,
                                                        FactoryError&) noexcept;
template bool declare_arguments<PluginKind::placement>(const PluginContext&, std::vector<ArgDeclaration>&,
                                                       FactoryError&) noexcept;
template bool declare_arguments<PluginKind::elasticity>(const PluginContext&, std::vector<ArgDeclaration>&,
                                                        FactoryError&) noexcept;

// ------------------------------------------------------------ the stages

namespace {

// The view handed to one call, closed when the call returns.
class ViewCall {
 public:
  ViewCall(const SchedulerView& view, JobObjects& jobs)
      : object_(py::cast(PolicyView(view, jobs))), view_(object_.cast<PolicyView*>()) {}
  ~ViewCall() { view_->close(); }
  const py::object& object() const { return object_; }

 private:
  py::object object_;
  PolicyView* view_;
};

}  // namespace

std::vector<AdmissionDecision> AdmissionBridge::admit(const SchedulerView& view) {
  py::gil_scoped_acquire gil;
  const ViewCall call(view, policy_.jobs());
  const LoadedClass& policy = policy_.loaded();
  const Reader read(policy, "admit");
  std::vector<AdmissionDecision> decisions;
  for (const py::handle d : read.list_of(policy.call("admit", call.object()), "AdmissionDecision"))
    decisions.push_back({read.job(field(d, "job")), read.value<AdmissionVerdict>(field(d, "verdict"), "verdict"),
                         read.reason(d)});
  return decisions;
}

AllocationPlan AllocationBridge::allocate_whole(const SchedulerView& view) {
  if (allocates_whole_) return plan_from("allocate_whole", view);
  py::gil_scoped_acquire gil;
  policy_.loaded().returned("allocate", "a provisional plan, and the class defines no allocate_whole(view) to give "
                                        "the whole one when a waiting job would preempt");
}

AllocationPlan AllocationBridge::plan_from(const char* method, const SchedulerView& view) {
  py::gil_scoped_acquire gil;
  const ViewCall call(view, policy_.jobs());
  const LoadedClass& policy = policy_.loaded();
  const Reader read(policy, method);
  const py::object result = policy.call(method, call.object());
  read.expect(result, "AllocationPlan");
  AllocationPlan plan;
  plan.stop_at_first_unplaced = read.value<bool>(field(result, "stop_at_first_unplaced"), "stop_at_first_unplaced");
  plan.revisit_at = read.value<double>(field(result, "revisit_at"), "revisit_at");
  if (const py::object keep = field(result, "keep_running"); !keep.is_none())
    plan.keep_running = read.reason_text(keep, "keep_running");
  plan.provisional = read.value<bool>(field(result, "provisional"), "provisional");
  const py::list ranked = read.list_of(field(result, "ranked"), "Grant");
  plan.ranked.reserve(ranked.size());
  for (const py::handle g : ranked) {
    const py::object job = field(g, "job"), resources = field(g, "resources");
    Grant grant{read.job(job), {}, read.reason(g)};
    if (!resources.is_none()) {
      grant.resources = read.value<Resources>(resources, "resources");
    } else if (const JobState* state = job_state_of(job)) {
      grant.resources = allocation::current_or_requested(*state);
    } else {
      read.wrong("a Grant for job id " + std::to_string(grant.job) +
                 " without resources; Grant(job) takes the job's own, Grant(job_id, resources) needs them");
    }
    plan.ranked.push_back(std::move(grant));
  }
  return plan;
}

PlacementChoice PlacementBridge::place(const SchedulerView& view, const JobState& job, const Resources& want) {
  py::gil_scoped_acquire gil;
  const ViewCall call(view, policy_.jobs());
  const LoadedClass& policy = policy_.loaded();
  const Reader read(policy, "place");
  const py::object result = policy.call("place", call.object(), policy_.jobs().get(job), py::cast(want));
  read.expect(result, "PlacementChoice");
  return {read.gpu_ids(field(result, "gpus")), read.reason(result)};
}

ElasticityBridge::ElasticityBridge(const PluginContext& context)
    : policy_(context, PluginKind::elasticity),
      arranges_(policy_.defines("arrange")),
      prices_(policy_.defines("reconfiguration_seconds")),
      keeps_(policy_.defines("keep_after_loss")) {}

std::vector<ResizeProposal> ElasticityBridge::resize(const SchedulerView& view) {
  py::gil_scoped_acquire gil;
  const ViewCall call(view, policy_.jobs());
  const LoadedClass& policy = policy_.loaded();
  const Reader read(policy, "resize");
  std::vector<ResizeProposal> proposals;
  for (const py::handle p : read.list_of(policy.call("resize", call.object()), "ResizeProposal")) {
    const py::object layout = field(p, "layout");
    proposals.push_back({read.job(field(p, "job")), read.value<int>(field(p, "gpus"), "gpus"),
                         layout.is_none() ? JobLayout{} : read.value<JobLayout>(layout, "layout"), read.reason(p)});
  }
  return proposals;
}

JobLayout ElasticityBridge::arrange(const SchedulerView& view, const JobState& job, const Allocation& allocation) {
  if (!arranges_) return ElasticityPolicy::arrange(view, job, allocation);
  py::gil_scoped_acquire gil;
  const ViewCall call(view, policy_.jobs());
  const LoadedClass& policy = policy_.loaded();
  const py::object result = policy.call("arrange", call.object(), policy_.jobs().get(job), py::cast(allocation));
  if (!py::isinstance<JobLayout>(result)) policy.returned("arrange", type_name(result) + ", not a tessel.JobLayout");
  return result.cast<JobLayout>();
}

double ElasticityBridge::reconfiguration_seconds(const SchedulerView& view, const JobState& job,
                                                 const Allocation& from, const Allocation& to) const {
  if (!prices_) return ElasticityPolicy::reconfiguration_seconds(view, job, from, to);
  py::gil_scoped_acquire gil;
  const ViewCall call(view, policy_.jobs());
  const LoadedClass& policy = policy_.loaded();
  const py::object result = policy.call("reconfiguration_seconds", call.object(), policy_.jobs().get(job),
                                        py::cast(from), py::cast(to));
  if (!(PyFloat_Check(result.ptr()) || PyLong_Check(result.ptr())) || PyBool_Check(result.ptr()))
    policy.returned("reconfiguration_seconds", type_name(result) + ", not a number of seconds");
  return result.cast<double>();
}

bool ElasticityBridge::keep_after_loss(const SchedulerView& view, const JobState& job, const Allocation& remaining) {
  if (!keeps_) return ElasticityPolicy::keep_after_loss(view, job, remaining);
  py::gil_scoped_acquire gil;
  const ViewCall call(view, policy_.jobs());
  const LoadedClass& policy = policy_.loaded();
  const py::object result = policy.call("keep_after_loss", call.object(), policy_.jobs().get(job), py::cast(remaining));
  if (!PyBool_Check(result.ptr())) policy.returned("keep_after_loss", type_name(result) + ", not True or False");
  return result.cast<bool>();
}

}  // namespace tessel::python
