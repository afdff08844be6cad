#include "sdk_types.hpp"

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

std::string reason_text(const Reason& reason) { return reason.str(); }

}  // namespace

const SchedulerView& PolicyView::get() const {
  if (view_ == nullptr) closed();
  return *view_;
}

std::span<const JobState* const> JobList::get() const {
  if (!scope_->open) closed();
  return jobs_;
}

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
      .def_readwrite("layout", &Shape::layout);

  // ------------------------------------------------------------- jobs
  py::class_<JobSpec>(m, "JobSpec", "What the user asked for; never changes.")
      .def_readonly("id", &JobSpec::id)
      .def_readonly("name", &JobSpec::name)
      .def_readonly("tenant", &JobSpec::tenant)
      .def_readonly("vc", &JobSpec::vc)
      .def_readonly("model", &JobSpec::model)
      .def_readonly("arrival", &JobSpec::arrival)
      .def_readonly("gpus", &JobSpec::gpus)
      .def_readonly("min_gpus", &JobSpec::min_gpus)
      .def_readonly("max_gpus", &JobSpec::max_gpus)
      .def_readonly("gpu_milli", &JobSpec::gpu_milli)
      .def_readonly("total_work", &JobSpec::total_work)
      .def_readonly("cpus", &JobSpec::cpus)
      .def_readonly("mem_gb", &JobSpec::mem_gb)
      .def_readonly("batch_size", &JobSpec::batch_size)
      .def_readonly("parameters", &JobSpec::parameters)
      .def_readonly("priority", &JobSpec::priority)
      .def_readonly("tracked", &JobSpec::tracked)
      .def("elastic", &JobSpec::elastic)
      .def("request", &JobSpec::request);

  py::class_<JobState>(m, "JobState", "What the core has done with a job so far.")
      .def_property_readonly("spec", [](const JobState& j) { return &j.spec; }, kRef)
      .def_readonly("status", &JobState::status)
      .def_property_readonly("allocation", [](const JobState& j) { return &j.allocation; }, kRef)
      .def_readonly("attained_service", &JobState::attained_service)
      .def_readonly("executed_work", &JobState::executed_work)
      .def_readonly("gpu_seconds", &JobState::gpu_seconds)
      .def_readonly("first_start", &JobState::first_start)
      .def_readonly("finish", &JobState::finish)
      .def_readonly("waiting_since", &JobState::waiting_since)
      .def_readonly("last_run_seconds", &JobState::last_run_seconds)
      .def_readonly("preemptions", &JobState::preemptions)
      .def_readonly("attempts", &JobState::attempts)
      .def("running", &JobState::running)
      .def("waiting", &JobState::waiting)
      .def("active", &JobState::active)
      .def("done", &JobState::done)
      .def("remaining_work", &JobState::remaining_work)
      .def("held", &JobState::held)
      .def("__repr__", [](const JobState& j) {
        return "<JobState " + std::to_string(j.spec.id) + " " + std::string(to_string(j.status)) + ">";
      });

  py::class_<JobList>(m, "JobList", "A read-only sequence of jobs, in the order the view gives them.")
      .def("__len__", [](const JobList& list) { return list.get().size(); })
      .def(
          "__getitem__",
          [](const JobList& list, std::ptrdiff_t i) {
            const auto jobs = list.get();
            const auto n = static_cast<std::ptrdiff_t>(jobs.size());
            if (i < 0) i += n;
            if (i < 0 || i >= n) throw py::index_error("job list index out of range");
            return jobs[static_cast<std::size_t>(i)];
          },
          kRef)
      .def(
          "__iter__",
          [](const JobList& list) {
            const auto jobs = list.get();
            return py::make_iterator<kRef>(jobs.begin(), jobs.end());
          },
          py::keep_alive<0, 1>());

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
      .def_property_readonly("spec", [](const Node& n) { return &n.spec; }, kRef)
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

  auto node_list = [](std::span<const Node> nodes) {
    py::list out(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) out[i] = py::cast(&nodes[i], kRef);
    return out;
  };
  auto gpu_list = [](std::span<const Gpu> gpus) {
    py::list out(gpus.size());
    for (std::size_t i = 0; i < gpus.size(); ++i) out[i] = py::cast(&gpus[i], kRef);
    return out;
  };
  py::class_<ClusterState>(m, "ClusterState", "Nodes, their GPUs, and who holds each GPU.")
      .def("nodes", [node_list](const ClusterState& c) { return node_list(c.nodes()); })
      .def("node", &ClusterState::node, kRef)
      .def("gpus", [gpu_list](const ClusterState& c) { return gpu_list(c.gpus()); })
      .def("gpu", &ClusterState::gpu, kRef)
      .def("gpus_of", [gpu_list](const ClusterState& c, NodeId id) { return gpu_list(c.gpus_of(id)); })
      .def("installed_gpus", &ClusterState::installed_gpus)
      .def("total_gpus", &ClusterState::total_gpus)
      .def("free_gpus", &ClusterState::free_gpus)
      .def("largest_free_block", &ClusterState::largest_free_block)
      .def("max_gpus_per_node", &ClusterState::max_gpus_per_node)
      .def("rack_count", &ClusterState::rack_count)
      .def("gpu_types", &ClusterState::gpu_types)
      .def("type_index", &ClusterState::type_index)
      .def("shape_of", &ClusterState::shape_of)
      .def(
          "packed_shape",
          [](const ClusterState& c, const JobSpec& job, int gpus, const std::string& gpu_type) {
            return c.packed_shape(job, gpus, gpu_type);
          },
          py::arg("job"), py::arg("gpus"), py::arg("gpu_type") = "")
      .def("fits_on", &ClusterState::fits_on)
      .def("take",
           [](const ClusterState& c, NodeId id, const Resources& want, int count) {
             std::vector<GpuId> out;
             c.take(id, want, count, out);
             return out;
           })
      .def("can_assign", [](const ClusterState& c, const Allocation& allocation) {
        std::string why;
        const bool ok = c.can_assign(allocation, &why);
        return py::make_tuple(ok, why);
      });

  // ------------------------------------------------------------- model
  py::class_<ThroughputModel>(m, "ThroughputModel", "How fast a job progresses on what it is given.")
      .def("name", [](const ThroughputModel& t) { return std::string(t.name()); })
      .def("rate", &ThroughputModel::rate, py::arg("job"), py::arg("shape"))
      .def("rate_at", &ThroughputModel::rate_at, py::arg("job"), py::arg("shape"), py::arg("progress"))
      .def("seconds_for", &ThroughputModel::seconds_for, py::arg("job"), py::arg("work"), py::arg("shape"));

  // -------------------------------------------------------------- view
  py::class_<SchedulerSettings>(m, "SchedulerSettings")
      .def_readonly("round_seconds", &SchedulerSettings::round_seconds)
      .def_readonly("service", &SchedulerSettings::service)
      .def_readonly("restart_seconds", &SchedulerSettings::restart_seconds);

  py::class_<PolicyView>(m, "SchedulerView", "Everything a policy may look at during one stage call, read-only.")
      .def("now", [](const PolicyView& v) { return v.get().now(); })
      .def("settings", [](const PolicyView& v) { return &v.get().settings(); }, kRef)
      .def("cluster", [](const PolicyView& v) { return &v.get().cluster(); }, kRef)
      .def("throughput", [](const PolicyView& v) { return &v.get().throughput(); }, kRef)
      .def("pending", [](const PolicyView& v) { return JobList(v.get().pending(), v.scope()); })
      .def("active", [](const PolicyView& v) { return JobList(v.get().active(), v.scope()); })
      .def("jobs", [](const PolicyView& v) { return JobList(v.get().jobs(), v.scope()); })
      .def(
          "job",
          [](const PolicyView& v, JobId id) {
            const SchedulerView& view = v.get();
            if (id >= view.jobs().size()) throw py::index_error("no job " + std::to_string(id));
            return &view.job(id);
          },
          kRef)
      .def("remaining_seconds",
           [](const PolicyView& v, const JobState& job, const Shape& shape) {
             return v.get().remaining_seconds(job, shape);
           });

  // --------------------------------------------------------- decisions
  py::class_<AdmissionDecision>(m, "AdmissionDecision")
      .def(py::init([](JobId job, AdmissionVerdict verdict, std::string reason) {
             return AdmissionDecision{job, verdict, Reason::text(std::move(reason))};
           }),
           py::arg("job"), py::arg("verdict"), py::arg("reason") = "")
      .def_readonly("job", &AdmissionDecision::job)
      .def_readonly("verdict", &AdmissionDecision::verdict)
      .def_property_readonly("reason", [](const AdmissionDecision& d) { return reason_text(d.reason); });

  py::class_<Grant>(m, "Grant", "A job the policy wants running, with what it should get.")
      .def(py::init([](JobId job, const Resources& resources, std::string reason) {
             return Grant{job, resources, Reason::text(std::move(reason))};
           }),
           py::arg("job"), py::arg("resources"), py::arg("reason") = "")
      .def_readonly("job", &Grant::job)
      .def_readonly("resources", &Grant::resources)
      .def_property_readonly("reason", [](const Grant& g) { return reason_text(g.reason); });

  py::class_<AllocationPlan>(m, "AllocationPlan", "Grants, highest priority first.")
      .def(py::init([](const py::iterable& ranked, bool stop_at_first_unplaced) {
             AllocationPlan plan;
             plan.stop_at_first_unplaced = stop_at_first_unplaced;
             for (const py::handle item : ranked) {
               if (!py::isinstance<Grant>(item))
                 throw py::type_error("AllocationPlan ranks tessel.Grant objects, not " +
                                      std::string(py::str(py::type::of(item).attr("__name__"))));
               plan.ranked.push_back(item.cast<const Grant&>());
             }
             return plan;
           }),
           py::arg("ranked"), py::arg("stop_at_first_unplaced") = false)
      .def_readonly("ranked", &AllocationPlan::ranked)
      .def_readonly("stop_at_first_unplaced", &AllocationPlan::stop_at_first_unplaced);

  py::class_<PlacementChoice>(m, "PlacementChoice", "The GPUs chosen, or none (does not fit now), with the reason.")
      .def(py::init([](std::vector<GpuId> gpus, std::string reason) {
             return PlacementChoice{std::move(gpus), Reason::text(std::move(reason))};
           }),
           py::arg("gpus"), py::arg("reason") = "")
      .def_readonly("gpus", &PlacementChoice::gpus)
      .def_property_readonly("reason", [](const PlacementChoice& c) { return reason_text(c.reason); })
      .def("placed", &PlacementChoice::placed);

  py::class_<ResizeProposal>(m, "ResizeProposal", "A new size (or layout) for a running elastic job.")
      .def(py::init([](JobId job, int gpus, const JobLayout& layout, std::string reason) {
             return ResizeProposal{job, gpus, layout, Reason::text(std::move(reason))};
           }),
           py::arg("job"), py::arg("gpus"), py::arg("layout") = JobLayout{}, py::arg("reason") = "")
      .def_readonly("job", &ResizeProposal::job)
      .def_readonly("gpus", &ResizeProposal::gpus)
      .def_readonly("layout", &ResizeProposal::layout)
      .def_property_readonly("reason", [](const ResizeProposal& p) { return reason_text(p.reason); });
}

}  // namespace tessel::python
