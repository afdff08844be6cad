#include "bridge.hpp"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <variant>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "python_paths.hpp"
#include "sdk_types.hpp"

namespace py = pybind11;

namespace tessel::python {

const ArgSpec kBridgeArgs[2] = {
    {"module", ArgType::string, nullptr, "the Python file that defines the policy class (relative to the experiment)"},
    {"class", ArgType::string, nullptr,
     "the policy class; its constructor's parameters are this stage's further arguments"},
};

namespace {

// Starts the interpreter unless this process has one (tessel started from
// the CLI rather than from Python); never a second one. Thread-safe.
void ensure_interpreter() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (Py_IsInitialized()) return;  // tessel runs inside Python: use that interpreter
    // The plugin loader opened libpython for this library alone; extension
    // modules (tessel._tessel, numpy) need its symbols global, as in python3.
    Dl_info libpython{};
    if (dladdr(reinterpret_cast<void*>(&Py_InitializeEx), &libpython) != 0 && libpython.dli_fname != nullptr)
      dlopen(libpython.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    Py_InitializeEx(0);  // no signal handlers: Ctrl-C stays tessel's
    PyEval_SaveThread();             // each call takes the GIL, from whichever thread
  });
}

// tessel._bridge, the Python half of the bridge. From a tessel started on
// the command line the package may not be on sys.path yet: the build tree's
// and the install's copies are tried in turn.
py::module_ bridge_module() {
  try {
    return py::module_::import("tessel._bridge");
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_ImportError)) throw;
  }
  py::list path = py::module_::import("sys").attr("path");
  std::string tried;
  for (const char* dir : {kPythonBuildDir, kPythonInstallDir}) {
    tried += std::string(tried.empty() ? "" : ", ") + dir;
    std::error_code ec;
    if (!std::filesystem::is_directory(std::filesystem::path(dir) / "tessel", ec)) continue;
    path.append(dir);
    try {
      return py::module_::import("tessel._bridge");
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_ImportError)) throw;
      throw std::runtime_error("the tessel Python package in " + std::string(dir) + " does not import: " + e.what());
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

}  // namespace

// The policy class, its instance and where they came from. Holds Python
// references, so it is created and destroyed with the GIL held.
class LoadedClass {
 public:
  py::module_ bridge;
  py::object instance;
  std::string path;        // the module file, as the user's config resolves it
  std::string class_name;
  std::string class_line;  // where the class is defined

  // A Python exception, as "file:line: Type: message" at the innermost frame
  // in the policy's own file.
  std::string describe(py::error_already_set& error) const {
    return bridge.attr("describe")(error.value(), error.trace(), path).cast<std::string>();
  }

  // Calls `method` and checks that it returned a T (what the message calls `expected`).
  template <class T, class... Args>
  T call(const char* method, const char* expected, Args&&... args) const {
    py::object result;
    try {
      result = instance.attr(method)(std::forward<Args>(args)...);
    } catch (py::error_already_set& error) {
      throw HostedCodeError(describe(error));
    }
    if constexpr (std::is_same_v<T, double>) {
      if (PyFloat_Check(result.ptr()) || (PyLong_Check(result.ptr()) && !PyBool_Check(result.ptr())))
        return result.cast<double>();
    } else if constexpr (std::is_same_v<T, bool>) {
      if (PyBool_Check(result.ptr())) return result.cast<bool>();
    } else {
      if (py::isinstance<T>(result)) return result.cast<T>();
    }
    throw HostedCodeError(wrong_return(method, result, expected));
  }

  // Calls `method`, which returns a list of T.
  template <class T, class... Args>
  std::vector<T> call_list(const char* method, const char* expected, Args&&... args) const {
    py::object result;
    try {
      result = instance.attr(method)(std::forward<Args>(args)...);
    } catch (py::error_already_set& error) {
      throw HostedCodeError(describe(error));
    }
    if (!py::isinstance<py::list>(result) && !py::isinstance<py::tuple>(result))
      throw HostedCodeError(wrong_return(method, result, (std::string("a list of ") + expected).c_str()));
    std::vector<T> out;
    out.reserve(py::len(result));
    for (const py::handle item : result) {
      if (!py::isinstance<T>(item))
        throw HostedCodeError(wrong_return(method, result, (std::string("a list of ") + expected).c_str()) +
                              " (it holds a " + type_name(item) + ")");
      out.push_back(item.cast<T>());
    }
    return out;
  }

 private:
  static std::string type_name(py::handle object) {
    return py::str(py::type::of(object).attr("__name__")).cast<std::string>();
  }
  std::string wrong_return(const char* method, py::handle result, const char* expected) const {
    const std::string line = bridge.attr("line_of")(py::type::of(instance).attr(method)).cast<std::string>();
    return path + ":" + line + ": " + class_name + "." + method + "() returned " + type_name(result) + ", not " +
           expected;
  }
};

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
    py::object cls = loaded->bridge.attr("load")(path, class_name, std::string(stage_method(kind)));
    loaded->class_line = loaded->bridge.attr("line_of")(cls).cast<std::string>();
    py::dict arguments;
    for (const auto& [name, value] : context.args().all())
      if (name != "module" && name != "class") arguments[py::str(name)] = to_python(value);
    loaded->instance = cls(**arguments);
    py::object sensitive = py::getattr(loaded->instance, "time_sensitive", py::none());
    if (!sensitive.is_none()) {
      if (PyCallable_Check(sensitive.ptr())) sensitive = sensitive();
      time_sensitive_ = sensitive.cast<bool>();
    }
  } catch (py::error_already_set& error) {
    if (loaded->bridge && error.matches(loaded->bridge.attr("ArgumentError"))) {
      py::object value = error.value();
      throw ArgumentError(value.attr("argument").cast<std::string>(), py::str(value).cast<std::string>());
    }
    throw std::runtime_error(loaded->bridge ? loaded->describe(error) : std::string(error.what()));
  }
  loaded_ = loaded.release();
}

HostedPolicy::~HostedPolicy() {
  py::gil_scoped_acquire gil;
  loaded_->bridge.attr("unload")(loaded_->instance);
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
      py::list declared =
          bridge.attr("declarations")(path, context.args().string("class"), std::string(stage_method(kind)));
      for (const py::handle item : declared) {
        const auto fields = item.cast<py::tuple>();
        ArgDeclaration declaration;
        declaration.name = fields[0].cast<std::string>();
        const std::string type = fields[1].cast<std::string>();
        bool known = false;
        for (ArgType t : {ArgType::boolean, ArgType::integer, ArgType::number, ArgType::string, ArgType::number_list,
                          ArgType::string_list, ArgType::number_table})
          if (to_string(t) == type) declaration.type = t, known = true;
        if (!known) throw std::logic_error("tessel._bridge declared unknown type " + type);
        if (!fields[2].is_none()) declaration.default_value = fields[2].cast<std::string>();
        declaration.help = fields[3].cast<std::string>();
        declaration.choices = fields[4].cast<std::string>();
        out.push_back(std::move(declaration));
      }
    } catch (py::error_already_set& e) {
      error.message =
          bridge ? bridge.attr("describe")(e.value(), e.trace(), path).cast<std::string>() : std::string(e.what());
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
  explicit ViewCall(const SchedulerView& view)
      : object_(py::cast(PolicyView(view))), view_(object_.cast<PolicyView*>()) {}
  ~ViewCall() { view_->close(); }
  const py::object& object() const { return object_; }

 private:
  py::object object_;
  PolicyView* view_;
};

constexpr auto kRef = py::return_value_policy::reference;

}  // namespace

std::vector<AdmissionDecision> AdmissionBridge::admit(const SchedulerView& view) {
  py::gil_scoped_acquire gil;
  const ViewCall call(view);
  return policy_.loaded().call_list<AdmissionDecision>("admit", "tessel.AdmissionDecision", call.object());
}

AllocationPlan AllocationBridge::allocate(const SchedulerView& view) {
  py::gil_scoped_acquire gil;
  const ViewCall call(view);
  return policy_.loaded().call<AllocationPlan>("allocate", "a tessel.AllocationPlan", call.object());
}

PlacementChoice PlacementBridge::place(const SchedulerView& view, const JobState& job, const Resources& want) {
  py::gil_scoped_acquire gil;
  const ViewCall call(view);
  return policy_.loaded().call<PlacementChoice>("place", "a tessel.PlacementChoice", call.object(),
                                                py::cast(&job, kRef), py::cast(want));
}

ElasticityBridge::ElasticityBridge(const PluginContext& context)
    : policy_(context, PluginKind::elasticity),
      arranges_(policy_.defines("arrange")),
      prices_(policy_.defines("reconfiguration_seconds")),
      keeps_(policy_.defines("keep_after_loss")) {}

std::vector<ResizeProposal> ElasticityBridge::resize(const SchedulerView& view) {
  py::gil_scoped_acquire gil;
  const ViewCall call(view);
  return policy_.loaded().call_list<ResizeProposal>("resize", "tessel.ResizeProposal", call.object());
}

JobLayout ElasticityBridge::arrange(const SchedulerView& view, const JobState& job, const Allocation& allocation) {
  if (!arranges_) return ElasticityPolicy::arrange(view, job, allocation);
  py::gil_scoped_acquire gil;
  const ViewCall call(view);
  return policy_.loaded().call<JobLayout>("arrange", "a tessel.JobLayout", call.object(), py::cast(&job, kRef),
                                          py::cast(allocation));
}

double ElasticityBridge::reconfiguration_seconds(const SchedulerView& view, const JobState& job,
                                                 const Allocation& from, const Allocation& to) const {
  if (!prices_) return ElasticityPolicy::reconfiguration_seconds(view, job, from, to);
  py::gil_scoped_acquire gil;
  const ViewCall call(view);
  return policy_.loaded().call<double>("reconfiguration_seconds", "a number of seconds", call.object(),
                                       py::cast(&job, kRef), py::cast(from), py::cast(to));
}

bool ElasticityBridge::keep_after_loss(const SchedulerView& view, const JobState& job, const Allocation& remaining) {
  if (!keeps_) return ElasticityPolicy::keep_after_loss(view, job, remaining);
  py::gil_scoped_acquire gil;
  const ViewCall call(view);
  return policy_.loaded().call<bool>("keep_after_loss", "True or False", call.object(), py::cast(&job, kRef),
                                     py::cast(remaining));
}

}  // namespace tessel::python
