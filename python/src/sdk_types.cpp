#include "sdk_types.hpp"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/operators.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace tessel::python {

namespace {

[[noreturn]] void closed() {
  throw std::runtime_error(
      "this view belonged to a stage call that has returned; a policy reads the view it is given, "
      "during the call");
}

// Objects of the core's state, handed out without copying or ownership.
constexpr auto kRef = py::return_value_policy::reference;

// ------------------------------------------------------------ fast paths
//
// What a policy reads of every job in every round goes through CPython's own
// descriptors rather than pybind11's dispatcher, which costs several times
// more per call: a policy's round is mostly these reads.

// The C++ object behind a pybind11 instance of T; null, with a Python
// RuntimeError set, for a job object whose run has ended (detach()).
template <class T>
const T* cpp(PyObject* self) {
  auto* instance = reinterpret_cast<py::detail::instance*>(self);
  const auto* object = static_cast<const T*>(instance->simple_layout ? instance->simple_value_holder[0]
                                                                     : instance->get_value_and_holder().value_ptr());
  if (object == nullptr)
    PyErr_SetString(PyExc_RuntimeError,
                    "this job belonged to a run that has ended; a policy keeps what it needs of a job, not the job");
  return object;
}

// Cuts a job object (or its spec) off the core's job, which its run is about
// to free: reading it then raises instead of reading freed memory, and a
// job made later at the same address gets an object of its own.
void detach(py::handle object) {
  auto* instance = reinterpret_cast<py::detail::instance*>(object.ptr());
  py::detail::value_and_holder value = instance->get_value_and_holder(py::detail::get_type_info(Py_TYPE(instance)));
  if (value.value_ptr() == nullptr) return;
  py::detail::deregister_instance(instance, value.value_ptr(), value.type);
  value.set_instance_registered(false);  // or its deallocation would deregister it again
  value.value_ptr() = nullptr;
}

PyObject* to_python(double value) { return PyFloat_FromDouble(value); }
PyObject* to_python(bool value) { return PyBool_FromLong(value); }
PyObject* to_python(int value) { return PyLong_FromLong(value); }
PyObject* to_python(std::uint32_t value) { return PyLong_FromUnsignedLong(value); }
PyObject* to_python(const std::string& value) {
  return PyUnicode_FromStringAndSize(value.data(), static_cast<Py_ssize_t>(value.size()));
}
PyObject* to_python(const std::optional<double>& value) {
  if (value) return PyFloat_FromDouble(*value);
  Py_RETURN_NONE;
}

template <class>
struct member_of;
template <class Owner, class Type>
struct member_of<Type Owner::*> {
  using owner = Owner;
};
template <class>
struct method_of;
template <class Owner, class Result>
struct method_of<Result (Owner::*)() const> {
  using owner = Owner;
};

template <auto Member>
PyObject* read_member(PyObject* self, void*) {
  const auto* owner = cpp<typename member_of<decltype(Member)>::owner>(self);
  return owner == nullptr ? nullptr : to_python(owner->*Member);
}

template <auto Method>
PyObject* call_method(PyObject* self, PyObject*) {
  const auto* owner = cpp<typename method_of<decltype(Method)>::owner>(self);
  return owner == nullptr ? nullptr : to_python((owner->*Method)());
}

// `definition` as a method, or an attribute, of `cls`: CPython's own
// descriptor, called without pybind11's dispatch. It must outlive `cls`.
void raw_method(py::handle cls, PyMethodDef& definition) {
  py::setattr(cls, definition.ml_name,
              py::reinterpret_steal<py::object>(PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()),
                                                                  &definition)));
}

void raw_attribute(py::handle cls, PyGetSetDef& definition) {
  py::setattr(cls, definition.name,
              py::reinterpret_steal<py::object>(PyDescr_NewGetSet(reinterpret_cast<PyTypeObject*>(cls.ptr()),
                                                                  &definition)));
}

// A read-only attribute of `cls` that reads the C++ member directly.
template <auto Member>
void fast_attribute(py::handle cls, const char* name) {
  static PyGetSetDef definition{name, read_member<Member>, nullptr, nullptr, nullptr};
  raw_attribute(cls, definition);
}

// A method of `cls`, taking no arguments, that calls the C++ const method directly.
template <auto Method>
void fast_method(py::handle cls, const char* name) {
  static PyMethodDef definition{name, call_method<Method>, METH_NOARGS, nullptr};
  raw_method(cls, definition);
}

// A value of a job object made by pybind11's conversion, read without its
// dispatch, which would allocate a fresh, unset object for one detached
// from its run rather than refuse it.
template <class T, class Read>
PyObject* read_cast(PyObject* self, Read read) {
  const T* object = cpp<T>(self);
  if (object == nullptr) return nullptr;
  try {
    return py::cast(read(*object)).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

PyObject* job_allocation(PyObject* self, void*) {
  return read_cast<JobState>(self, [](const JobState& job) { return job.allocation; });  // a copy: it outlives nothing
}
PyObject* job_held(PyObject* self, PyObject*) {
  return read_cast<JobState>(self, [](const JobState& job) { return job.held(); });
}
PyObject* job_repr(PyObject* self, PyObject*) {
  return read_cast<JobState>(self, [](const JobState& job) {
    return "<JobState " + std::to_string(job.spec.id) + " " + std::string(to_string(job.status)) + ">";
  });
}
PyObject* spec_request(PyObject* self, PyObject*) {
  return read_cast<JobSpec>(self, [](const JobSpec& spec) { return spec.request(); });
}

// JobStatus values as Python objects, made once: a job's status is read often.
PyObject* status_objects[7] = {};

PyObject* read_status(PyObject* self, void*) {
  const JobState* job = cpp<JobState>(self);
  if (job == nullptr) return nullptr;
  PyObject* status = status_objects[static_cast<std::size_t>(job->status)];
  Py_INCREF(status);
  return status;
}

}  // namespace

const JobState* job_state_of(py::handle object) {
  // Looked up, not remembered from bind_sdk: the bridge has its own copy of this file.
  static PyTypeObject* const job_state = reinterpret_cast<PyTypeObject*>(py::type::of<JobState>().ptr());
  if (!PyObject_TypeCheck(object.ptr(), job_state)) return nullptr;
  const JobState* job = cpp<JobState>(object.ptr());
  if (job == nullptr) throw py::error_already_set();  // its run has ended
  return job;
}

const SchedulerView& PolicyView::get() const {
  if (view_ == nullptr) closed();
  return *view_;
}

py::object JobObjects::get(const JobState& job) {
  const JobId id = job.spec.id;
  if (id >= by_id_.size()) by_id_.resize(id + 1);
  Entry& entry = by_id_[id];
  if (entry.job != &job) {
    if (entry.object) forget(entry);  // another scheduler's job of that id: a fork's, gone with it
    entry.job = &job;
    entry.object = py::cast(&job, kRef);
    entry.object.attr("spec") = py::cast(&job.spec, kRef);  // an attribute of its own: read without a call
  }
  return entry.object;
}

JobObjects::~JobObjects() {
  for (Entry& entry : by_id_)
    if (entry.object) forget(entry);
}

void JobObjects::forget(Entry& entry) {
  detach(entry.object.attr("spec"));
  detach(entry.object);
  entry.object = py::object();
}

std::span<const JobState* const> JobList::get() const {
  if (!scope_->open) closed();
  return jobs_;
}

template <class T>
const T& InCall<T>::get() const {
  if (!scope_->open) closed();
  return *object_;
}

namespace {

// A method of T, called on the object an InCall<T> holds.
template <class T, class R, class... Args>
auto in_call(R (T::*method)(Args...) const) {
  return [method](const InCall<T>& self, Args... args) -> R {
    return (self.get().*method)(std::forward<Args>(args)...);
  };
}

}  // namespace

void bind_sdk(py::module_& m) {
  // ------------------------------------------------------------- enums
  py::enum_<JobStatus>(m, "JobStatus")
      .value("pending", JobStatus::pending)
      .value("queued", JobStatus::queued)
      .value("running", JobStatus::running)
      .value("preempted", JobStatus::preempted)
      .value("finished", JobStatus::finished)
      .value("failed", JobStatus::failed)
      .value("rejected", JobStatus::rejected);
  py::enum_<AdmissionVerdict>(m, "AdmissionVerdict")
      .value("admit", AdmissionVerdict::admit)
      .value("hold", AdmissionVerdict::hold)
      .value("reject", AdmissionVerdict::reject);
  py::enum_<ServiceUnit>(m, "ServiceUnit")
      .value("gpu_seconds", ServiceUnit::gpu_seconds)
      .value("seconds", ServiceUnit::seconds);
  m.attr("ANY_GPU_TYPE") = kAnyGpuType;

  // ------------------------------------------------------ value types
  py::class_<Resources>(m, "Resources", "A request or a grant of resources for one job.")
      .def(py::init([](int gpus, int gpu_milli, double cpus, double mem_gb, int gpu_type) {
             return Resources{gpus, gpu_milli, cpus, mem_gb, gpu_type};
           }),
           py::arg("gpus") = 0, py::arg("gpu_milli") = 1000, py::arg("cpus") = 0.0, py::arg("mem_gb") = 0.0,
           py::arg("gpu_type") = kAnyGpuType)
      .def_readwrite("gpus", &Resources::gpus)
      .def_readwrite("gpu_milli", &Resources::gpu_milli)
      .def_readwrite("cpus", &Resources::cpus)
      .def_readwrite("mem_gb", &Resources::mem_gb)
      .def_readwrite("gpu_type", &Resources::gpu_type)
      .def("__repr__", [](const Resources& r) {
        return "Resources(gpus=" + std::to_string(r.gpus) + ", gpu_milli=" + std::to_string(r.gpu_milli) + ")";
      });

  py::class_<JobLayout>(m, "JobLayout", "How a job uses its GPUs; 0 means the job's own or the model's choice.")
      .def(py::init([](int batch_size, int tensor_parallel, int pipeline_parallel) {
             return JobLayout{batch_size, tensor_parallel, pipeline_parallel};
           }),
           py::arg("batch_size") = 0, py::arg("tensor_parallel") = 0, py::arg("pipeline_parallel") = 0)
      .def_readwrite("batch_size", &JobLayout::batch_size)
      .def_readwrite("tensor_parallel", &JobLayout::tensor_parallel)
      .def_readwrite("pipeline_parallel", &JobLayout::pipeline_parallel)
      .def(py::self == py::self);

  py::class_<Allocation>(m, "Allocation", "The GPUs a job holds, its share of each, CPUs, memory and layout.")
      .def(py::init<>())
      .def_readonly("gpus", &Allocation::gpus)
      .def_readonly("gpu_milli", &Allocation::gpu_milli)
      .def_readonly("cpus", &Allocation::cpus)
      .def_readonly("mem_gb", &Allocation::mem_gb)
      .def_readonly("layout", &Allocation::layout)
      .def("empty", &Allocation::empty)
      .def("gpu_count", &Allocation::gpu_count);

  py::class_<Shape>(m, "Shape", "The shape of an allocation, which throughput models price.")
      .def(py::init<>())
      .def_readwrite("gpus", &Shape::gpus)
      .def_readwrite("gpu_type", &Shape::gpu_type)
      .def_readwrite("nodes", &Shape::nodes)
      .def_readwrite("racks", &Shape::racks)
      .def_readwrite("gpu_milli", &Shape::gpu_milli)
      .def_readwrite("cpus", &Shape::cpus)
      .def_readwrite("mem_gb", &Shape::mem_gb)
      .def_readwrite("gpu_mem_gb", &Shape::gpu_mem_gb)
      .def_readwrite("layout", &Shape::layout)
      .def_readwrite("node_gpus", &Shape::node_gpus);

  // ------------------------------------------------------------- jobs
  py::class_<JobSpec> job_spec(m, "JobSpec", "What the user asked for; never changes.");
  static PyMethodDef request_definition{"request", spec_request, METH_NOARGS, nullptr};
  raw_method(job_spec, request_definition);
  fast_method<&JobSpec::elastic>(job_spec, "elastic");
  fast_attribute<&JobSpec::id>(job_spec, "id");
  fast_attribute<&JobSpec::name>(job_spec, "name");
  fast_attribute<&JobSpec::tenant>(job_spec, "tenant");
  fast_attribute<&JobSpec::vc>(job_spec, "vc");
  fast_attribute<&JobSpec::model>(job_spec, "model");
  fast_attribute<&JobSpec::arrival>(job_spec, "arrival");
  fast_attribute<&JobSpec::gpus>(job_spec, "gpus");
  fast_attribute<&JobSpec::min_gpus>(job_spec, "min_gpus");
  fast_attribute<&JobSpec::max_gpus>(job_spec, "max_gpus");
  fast_attribute<&JobSpec::gpu_milli>(job_spec, "gpu_milli");
  fast_attribute<&JobSpec::total_work>(job_spec, "total_work");
  fast_attribute<&JobSpec::cpus>(job_spec, "cpus");
  fast_attribute<&JobSpec::mem_gb>(job_spec, "mem_gb");
  fast_attribute<&JobSpec::batch_size>(job_spec, "batch_size");
  fast_attribute<&JobSpec::parameters>(job_spec, "parameters");
  fast_attribute<&JobSpec::priority>(job_spec, "priority");
  fast_attribute<&JobSpec::tracked>(job_spec, "tracked");

  // A job's `spec` is set on its object when JobObjects makes it.
  py::class_<JobState> job_state(m, "JobState", py::dynamic_attr(), "What the core has done with a job so far.");
  // Nothing of a job object goes through pybind11's dispatch: JobObjects
  // detaches each when its run ends, and every read then refuses it.
  static PyGetSetDef allocation_definition{"allocation", job_allocation, nullptr, nullptr, nullptr};
  raw_attribute(job_state, allocation_definition);
  static PyMethodDef held_definition{"held", job_held, METH_NOARGS, nullptr};
  raw_method(job_state, held_definition);
  static PyMethodDef repr_definition{"__repr__", job_repr, METH_NOARGS, nullptr};
  raw_method(job_state, repr_definition);
  for (JobStatus status : {JobStatus::pending, JobStatus::queued, JobStatus::running, JobStatus::preempted,
                           JobStatus::finished, JobStatus::failed, JobStatus::rejected})
    status_objects[static_cast<std::size_t>(status)] = py::cast(status).release().ptr();
  static PyGetSetDef status_definition{"status", read_status, nullptr, nullptr, nullptr};
  raw_attribute(job_state, status_definition);
  fast_attribute<&JobState::attained_service>(job_state, "attained_service");
  fast_attribute<&JobState::executed_work>(job_state, "executed_work");
  fast_attribute<&JobState::gpu_seconds>(job_state, "gpu_seconds");
  fast_attribute<&JobState::first_start>(job_state, "first_start");
  fast_attribute<&JobState::finish>(job_state, "finish");
  fast_attribute<&JobState::waiting_since>(job_state, "waiting_since");
  fast_attribute<&JobState::last_run_seconds>(job_state, "last_run_seconds");
  fast_attribute<&JobState::preemptions>(job_state, "preemptions");
  fast_attribute<&JobState::attempts>(job_state, "attempts");
  fast_method<&JobState::running>(job_state, "running");
  fast_method<&JobState::waiting>(job_state, "waiting");
  fast_method<&JobState::active>(job_state, "active");
  fast_method<&JobState::done>(job_state, "done");
  fast_method<&JobState::remaining_work>(job_state, "remaining_work");

  py::class_<JobList>(m, "JobList", "A read-only sequence of jobs, in the order the view gives them.")
      .def("__len__", [](const JobList& list) { return list.get().size(); })
      .def("__getitem__",
           [](const JobList& list, std::ptrdiff_t i) {
             const auto jobs = list.get();
             const auto n = static_cast<std::ptrdiff_t>(jobs.size());
             if (i < 0) i += n;
             if (i < 0 || i >= n) throw py::index_error("job list index out of range");
             return list.objects().get(*jobs[static_cast<std::size_t>(i)]);
           })
      .def("__iter__", [](const JobList& list) {
        const auto jobs = list.get();
        py::list objects(jobs.size());
        for (std::size_t i = 0; i < jobs.size(); ++i) objects[i] = list.objects().get(*jobs[i]);
        return py::iter(objects);
      });

  // ---------------------------------------------------------- cluster
  py::class_<NodeSpec>(m, "NodeSpec")
      .def_readonly("name", &NodeSpec::name)
      .def_readonly("gpu_type", &NodeSpec::gpu_type)
      .def_readonly("gpus", &NodeSpec::gpus)
      .def_readonly("cpus", &NodeSpec::cpus)
      .def_readonly("mem_gb", &NodeSpec::mem_gb)
      .def_readonly("rack", &NodeSpec::rack)
      .def_readonly("gpu_mem_gb", &NodeSpec::gpu_mem_gb);

  py::class_<Node>(m, "Node")
      .def_readonly("id", &Node::id)
      .def_property_readonly("spec", [](const Node& n) { return &n.spec; }, py::return_value_policy::reference_internal)
      .def_readonly("type", &Node::type)
      .def_readonly("up", &Node::up)
      .def_readonly("first_gpu", &Node::first_gpu)
      .def_readonly("free_gpus", &Node::free_gpus)
      .def_readonly("free_cpus", &Node::free_cpus)
      .def_readonly("free_mem_gb", &Node::free_mem_gb);

  py::class_<Gpu>(m, "Gpu")
      .def_readonly("node", &Gpu::node)
      .def_readonly("used_milli", &Gpu::used_milli)
      .def_readonly("jobs", &Gpu::jobs)
      .def("free", &Gpu::free)
      .def("free_milli", &Gpu::free_milli);

  // Nodes and GPUs are copies: the cluster's vectors may grow (a node
  // joins) after the call, and a policy may keep what it was given.
  auto copies = [](auto items) {
    py::list out(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) out[i] = py::cast(items[i]);
    return out;
  };
  using Cluster = InCall<ClusterState>;
  py::class_<Cluster>(m, "ClusterState", "Nodes, their GPUs, and who holds each GPU.")
      .def("nodes", [copies](const Cluster& c) { return copies(c.get().nodes()); })
      .def("node", in_call(&ClusterState::node), py::return_value_policy::copy)
      .def("gpus", [copies](const Cluster& c) { return copies(c.get().gpus()); })
      .def("gpu", in_call(&ClusterState::gpu), py::return_value_policy::copy)
      .def("gpus_of", [copies](const Cluster& c, NodeId id) { return copies(c.get().gpus_of(id)); })
      .def("installed_gpus", in_call(&ClusterState::installed_gpus))
      .def("total_gpus", in_call(&ClusterState::total_gpus))
      .def("free_gpus", in_call(&ClusterState::free_gpus))
      .def("largest_free_block", in_call(&ClusterState::largest_free_block))
      .def("max_gpus_per_node", in_call(&ClusterState::max_gpus_per_node))
      .def("rack_count", in_call(&ClusterState::rack_count))
      .def("gpu_types", in_call(&ClusterState::gpu_types), py::return_value_policy::copy)
      .def("type_index", in_call(&ClusterState::type_index))
      .def("shape_of", in_call(&ClusterState::shape_of))
      .def(
          "packed_shape",
          [](const Cluster& c, const JobSpec& job, int gpus, const std::string& gpu_type) {
            return c.get().packed_shape(job, gpus, gpu_type);
          },
          py::arg("job"), py::arg("gpus"), py::arg("gpu_type") = "")
      .def("fits_on", in_call(&ClusterState::fits_on))
      .def("take",
           [](const Cluster& c, NodeId id, const Resources& want, int count) {
             std::vector<GpuId> out;
             c.get().take(id, want, count, out);
             return out;
           })
      .def("can_assign", [](const Cluster& c, const Allocation& allocation) {
        std::string why;
        const bool ok = c.get().can_assign(allocation, &why);
        return py::make_tuple(ok, why);
      });

  // ------------------------------------------------------------- model
  using Model = InCall<ThroughputModel>;
  py::class_<Model>(m, "ThroughputModel", "How fast a job progresses on what it is given.")
      .def("name", [](const Model& t) { return std::string(t.get().name()); })
      .def("rate", in_call(&ThroughputModel::rate), py::arg("job"), py::arg("shape"))
      .def("rate_at", in_call(&ThroughputModel::rate_at), py::arg("job"), py::arg("shape"), py::arg("progress"))
      .def("seconds_for", in_call(&ThroughputModel::seconds_for), py::arg("job"), py::arg("work"), py::arg("shape"));

  // -------------------------------------------------------------- view
  py::class_<SchedulerSettings>(m, "SchedulerSettings")
      .def_readonly("round_seconds", &SchedulerSettings::round_seconds)
      .def_readonly("service", &SchedulerSettings::service)
      .def_readonly("restart_seconds", &SchedulerSettings::restart_seconds);

  py::class_<PolicyView>(m, "SchedulerView", "Everything a policy may look at during one stage call, read-only.")
      .def("now", [](const PolicyView& v) { return v.get().now(); })
      .def("settings", [](const PolicyView& v) { return v.get().settings(); })  // a copy: it may be kept
      .def("cluster", [](const PolicyView& v) { return InCall<ClusterState>(v.get().cluster(), v); })
      .def("throughput", [](const PolicyView& v) { return InCall<ThroughputModel>(v.get().throughput(), v); })
      .def("pending", [](const PolicyView& v) { return JobList(v.get().pending(), v); })
      .def("active", [](const PolicyView& v) { return JobList(v.get().active(), v); })
      .def("waiting", [](const PolicyView& v) { return JobList(v.get().waiting(), v); })
      .def("jobs", [](const PolicyView& v) { return JobList(v.get().jobs(), v); })
      .def("job",
           [](const PolicyView& v, JobId id) {
             const SchedulerView& view = v.get();
             if (id >= view.jobs().size()) throw py::index_error("no job " + std::to_string(id));
             return v.jobs().get(view.job(id));
           })
      .def("remaining_seconds",
           [](const PolicyView& v, const JobState& job, const Shape& shape) {
             return v.get().remaining_seconds(job, shape);
           })
      // Current even in rounds that skip per-job accounting (a policy whose
      // reads_progress() is False): job.attained_service and job.gpu_seconds
      // are then as of the job's last start, stop or resize.
      .def("attained_service", [](const PolicyView& v, const JobState& job) { return v.get().attained_service(job); })
      .def("gpu_seconds", [](const PolicyView& v, const JobState& job) { return v.get().gpu_seconds(job); });

  // Decisions are plain Python classes (tessel/decisions.py); the bridge
  // reads them.
}

}  // namespace tessel::python
