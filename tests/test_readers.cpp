// Trace and cluster-spec readers: exact fields on small files written here,
// counts on the real files of ../shared/data (skipped when absent), and the
// located error every malformed row raises.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "support.hpp"
#include "workloads/workload.hpp"
#include "config/cluster_specs.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

std::string experiment(const std::string& workload) {
  return "[cluster]\nnodes = 1\ngpus_per_node = 8\n\n[workload]\n" + workload +
         "\n[scheduler]\nallocation = { plugin = \"fifo\" }\nplacement = { plugin = \"first_fit\" }\n";
}

std::string kind_and_path(const std::string& kind, const std::string& path) {
  return "kind = \"" + kind + "\"\npath = \"" + path + "\"\n";
}

ExperimentConfig configure(const TempDir& dir, const std::string& workload) {
  return load_experiment(dir.write("experiment.toml", experiment(workload)));
}

// What the reader of `kind` makes of `path` (relative to `dir`, or absolute).
Trace read_trace(const TempDir& dir, const std::string& kind, const std::string& path) {
  return build_workload_source(configure(dir, kind_and_path(kind, path)).workload)->read(1);
}

// The jobs as a run gets them: sorted, numbered and priced by the linear model.
Workload build(const TempDir& dir, const std::string& kind, const std::string& path) {
  const ExperimentConfig config = configure(dir, kind_and_path(kind, path));
  return build_workload(config.workload, ClusterState(config.cluster.nodes));
}

// The error that reading `contents` as a `kind` trace raises, with the
// temporary directory cut from the file name; "no error" if it reads.
std::string trace_error(const std::string& kind, const std::string& contents) {
  TempDir dir;
  dir.write("trace.csv", contents);
  try {
    read_trace(dir, kind, "trace.csv");
  } catch (const TraceError& e) {
    std::string message = e.what();
    const std::string prefix = (dir.path() / "").string();
    if (message.starts_with(prefix)) message.erase(0, prefix.size());
    return message;
  }
  return "no error";
}

// The same for a cluster-spec reader, with its file named "spec.csv".
std::string spec_error(std::vector<NodeSpec> (*read)(const std::string&), const std::string& contents) {
  TempDir dir;
  const std::string path = dir.write("spec.csv", contents).string();
  try {
    read(path);
  } catch (const TraceError& e) {
    std::string message = e.what();
    if (message.starts_with(path)) message.replace(0, path.size(), "spec.csv");
    return message;
  }
  return "no error";
}

std::map<int, int> gpu_histogram(const Trace& trace) {
  std::map<int, int> counts;
  for (const TraceJob& job : trace.jobs) ++counts[job.spec.gpus];
  return counts;
}

double latest_arrival(const Trace& trace) {
  double latest = 0;
  for (const TraceJob& job : trace.jobs) latest = std::max(latest, job.spec.arrival);
  return latest;
}

double earliest_arrival(const Trace& trace) {
  double earliest = INFINITY;
  for (const TraceJob& job : trace.jobs) earliest = std::min(earliest, job.spec.arrival);
  return earliest;
}

}  // namespace

// --- pollux-csv -------------------------------------------------------------

TEST_CASE("pollux-csv: arrivals count from the earliest timestamp, skipped rows included") {
  TempDir dir;
  dir.write("philly.csv",
            "timestamp,duration,num_gpus,gpu_time,cluster\n"
            "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
            "2017-10-08 23:59:50,2951.5,4,11806.0,6214e9\n"
            "2017-10-08 23:59:40,120.0,0,0.0,6c71a0\n"  // 0 GPUs: skipped, but the earliest
            "2017-10-09 00:00:10,0.0,2,0.0,6c71a0\n");  // 0 seconds: skipped
  const Trace trace = read_trace(dir, "pollux-csv", "philly.csv");
  REQUIRE(trace.jobs.size() == 2);
  const JobSpec& first = trace.jobs[0].spec;
  CHECK(first.arrival == 7 * 3600 + 2 * 60 + 15);  // 23:59:40 -> 07:01:55 the next day
  CHECK(first.gpus == 1);
  CHECK(first.min_gpus == 1);
  CHECK(first.max_gpus == 1);
  CHECK(first.vc == "11cb48");
  CHECK(first.name.empty());
  CHECK(trace.jobs[0].duration == 66);
  const JobSpec& second = trace.jobs[1].spec;
  CHECK(second.arrival == 10);
  CHECK(second.gpus == 4);
  CHECK(second.max_gpus == 4);
  CHECK(second.vc == "6214e9");
  CHECK(trace.jobs[1].duration == 2951.5);
  CHECK(trace.notes == std::vector<std::string>{"skipped 1 jobs of 0 GPUs", "skipped 1 jobs of 0 seconds"});

  // Built, the jobs are in arrival order and their durations priced on packed GPUs.
  const Workload workload = build(dir, "pollux-csv", "philly.csv");
  REQUIRE(workload.jobs.size() == 2);
  CHECK(workload.jobs[0].vc == "6214e9");
  CHECK(workload.jobs[0].total_work == 2951.5 * 4);
  CHECK(workload.jobs[1].total_work == 66);
}

TEST_CASE("pollux-csv: the real Philly-derived file") {
  const auto path = shared_data("pollux/philly.csv");
  if (!path) {
    MESSAGE("skipped: ../shared/data/pollux/philly.csv is absent");
    return;
  }
  TempDir dir;
  const Trace trace = read_trace(dir, "pollux-csv", path->string());
  // The data README says 82,248; the file holds 82,247 rows and a blank last line.
  CHECK(trace.jobs.size() == 82'247);
  CHECK(trace.notes.empty());
  CHECK(gpu_histogram(trace) == std::map<int, int>{{1, 76'627}, {2, 1'818}, {4, 1'870}, {8, 1'643}, {12, 7},
                                                   {16, 199}, {24, 7}, {32, 67}, {64, 6}, {128, 3}});
  // Earliest 2017-09-04 10:30:41, latest 2017-12-22 08:02:11; the first row 2017-10-09 07:01:55.
  CHECK(earliest_arrival(trace) == 0);
  CHECK(latest_arrival(trace) == 9'408'690);
  CHECK(trace.jobs.front().spec.arrival == 3'011'474);
  CHECK(trace.jobs.front().spec.vc == "11cb48");
  CHECK(trace.jobs.front().duration == 66);
}

TEST_CASE("pollux-csv: malformed rows name file, line and field") {
  const std::string header = "timestamp,duration,num_gpus,gpu_time,cluster\n";
  const std::string good = "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n";
  CHECK(trace_error("pollux-csv", header + good + "2017-10-09 07:01:55,66.0,x,66.0,11cb48\n") ==
        "trace.csv:3: field 'num_gpus': expected an integer in 0..1048576, got 'x'");
  CHECK(trace_error("pollux-csv", header + "2017-10-09 07:01:55,66.0,-1,66.0,11cb48\n") ==
        "trace.csv:2: field 'num_gpus': expected an integer in 0..1048576, got '-1'");
  CHECK(trace_error("pollux-csv", header + "2017-13-09 07:01:55,66.0,1,66.0,11cb48\n") ==
        "trace.csv:2: field 'timestamp': expected a time 'YYYY-MM-DD HH:MM:SS', got '2017-13-09 07:01:55'");
  CHECK(trace_error("pollux-csv", header + good + "\n" + "2017-10-09 07:01:55,,1,66.0,11cb48\n") ==
        "trace.csv:4: field 'duration': expected a number >= 0, got an empty field");
  CHECK(trace_error("pollux-csv", header + "2017-10-09 07:01:55,66.0,1,lots,11cb48\n") ==
        "trace.csv:2: field 'gpu_time': expected a number >= 0, got 'lots'");
  CHECK(trace_error("pollux-csv", header + "2017-10-09 07:01:55,66.0,1,66.0\n") ==
        "trace.csv:2: expected 5 fields, got 4");
  CHECK(trace_error("pollux-csv", "timestamp,duration,num_gpus,cluster\n" + good) ==
        "trace.csv:1: header lacks column 'gpu_time' (columns: timestamp, duration, num_gpus, gpu_time, cluster)");
  // Once accepted: the first of two columns was read, and the date counted as 2 March.
  CHECK(trace_error("pollux-csv", "timestamp,duration,num_gpus,gpu_time,cluster,num_gpus\n"
                                  "2017-10-09 07:01:55,66.0,1,66.0,11cb48,4\n") ==
        "trace.csv:1: column 'num_gpus' appears twice in the header");
  CHECK(trace_error("pollux-csv", header + "2017-02-30 07:01:55,66.0,1,66.0,11cb48\n") ==
        "trace.csv:2: field 'timestamp': expected a time 'YYYY-MM-DD HH:MM:SS', got '2017-02-30 07:01:55'");
  CHECK(trace_error("pollux-csv", header + "2016-02-29 07:01:55,66.0,1,66.0,11cb48\n") == "no error");  // a leap day
}

// --- pollux-workload --------------------------------------------------------

TEST_CASE("pollux-workload: the request and the batch size, with no duration") {
  TempDir dir;
  dir.write("workload.csv",
            "name,time,application,num_replicas,batch_size\n"
            "cifar10-0,107,cifar10,6,2048\n"
            "ncf-1,135.5,ncf,1,32768\n");
  const Trace trace = read_trace(dir, "pollux-workload", "workload.csv");
  REQUIRE(trace.jobs.size() == 2);
  const JobSpec& cifar = trace.jobs[0].spec;
  CHECK(cifar.name == "cifar10-0");
  CHECK(cifar.arrival == 107);
  CHECK(cifar.model == "cifar10");
  CHECK(cifar.gpus == 6);
  CHECK(cifar.min_gpus == 6);
  CHECK(cifar.max_gpus == 6);
  CHECK(cifar.batch_size == 2048);
  CHECK(cifar.total_work == 0);
  CHECK(trace.jobs[0].duration == 0);
  const JobSpec& ncf = trace.jobs[1].spec;
  CHECK(ncf.name == "ncf-1");
  CHECK(ncf.arrival == 135.5);
  CHECK(ncf.model == "ncf");
  CHECK(ncf.gpus == 1);
  CHECK(ncf.batch_size == 32768);
  CHECK(trace.notes.empty());

  // The linear model cannot size a job from its application: it says so.
  CHECK_THROWS_WITH_AS(build(dir, "pollux-workload", "workload.csv"),
                       "job 0 ('cifar10-0') has no duration or work, and throughput model 'linear' cannot size it",
                       UserError);
}

TEST_CASE("pollux-workload: the eight real workloads hold 160 jobs each") {
  for (int n = 1; n <= 8; ++n) {
    const std::string name = "pollux/workloads/workload-" + std::to_string(n) + ".csv";
    const auto path = shared_data(name);
    if (!path) {
      MESSAGE("skipped: ../shared/data/" << name << " is absent");
      return;
    }
    CAPTURE(name);
    TempDir dir;
    const Trace trace = read_trace(dir, "pollux-workload", path->string());
    CHECK(trace.jobs.size() == 160);
    for (const TraceJob& job : trace.jobs) {
      CHECK(job.spec.batch_size > 0);
      CHECK(job.duration == 0);
    }
    if (n == 1) {
      CHECK(trace.jobs.front().spec.name == "cifar10-0");
      CHECK(trace.jobs.front().spec.arrival == 107);
      CHECK(trace.jobs.back().spec.name == "ncf-159");
      CHECK(trace.jobs.back().spec.arrival == 27695);
      CHECK(gpu_histogram(trace) ==
            std::map<int, int>{{1, 68}, {4, 3}, {6, 22}, {8, 18}, {12, 26}, {16, 19}, {24, 1}, {32, 3}});
    }
  }
}

TEST_CASE("pollux-workload: malformed rows name file, line and field") {
  const std::string header = "name,time,application,num_replicas,batch_size\n";
  CHECK(trace_error("pollux-workload", header + "cifar10-0,107,cifar10,0,2048\n") ==
        "trace.csv:2: field 'num_replicas': expected an integer in 1..1048576, got '0'");
  CHECK(trace_error("pollux-workload", header + "cifar10-0,107,,6,2048\n") ==
        "trace.csv:2: field 'application': expected a value, got an empty field");
  CHECK(trace_error("pollux-workload", header + "cifar10-0,-5,cifar10,6,2048\n") ==
        "trace.csv:2: field 'time': expected a number >= 0, got '-5'");
  CHECK(trace_error("pollux-workload", header + "cifar10-0,107,cifar10,6,2048.5\n") ==
        "trace.csv:2: field 'batch_size': expected an integer in 1..2147483647, got '2048.5'");
}

// --- gavel-trace ------------------------------------------------------------

namespace {
// Two jobs as Gavel writes them: Job.__str__ plus the arrival time, tab-separated.
const char* kGavelTrace =
    "ResNet-50 (batch size 64)\tpython3 main.py -j 2 -a resnet50 -b 64 %s/imagenet/\timage_classification/imagenet"
    "\t--num_minibatches\t1\t2931\t1\t1\t-1.000000\t0\n"
    "Transformer (batch size 16)\tpython3 train.py -batch_size 16\ttranslation\t-step\t0\t11005\t2\t5\t1.200000"
    "\t3600\n";
}  // namespace

TEST_CASE("gavel-trace: steps, scale factor, priority and arrival from a headerless tab-separated trace") {
  TempDir dir;
  dir.write("jobs.trace", kGavelTrace);
  const Trace trace = read_trace(dir, "gavel-trace", "jobs.trace");
  REQUIRE(trace.jobs.size() == 2);
  const JobSpec& resnet = trace.jobs[0].spec;
  CHECK(resnet.model == "ResNet-50 (batch size 64)");
  CHECK(resnet.total_work == 2931);
  CHECK(resnet.gpus == 1);
  CHECK(resnet.priority == 1);
  CHECK(resnet.arrival == 0);
  CHECK(trace.jobs[0].duration == 0);
  const JobSpec& transformer = trace.jobs[1].spec;
  CHECK(transformer.model == "Transformer (batch size 16)");
  CHECK(transformer.total_work == 11005);
  CHECK(transformer.gpus == 2);
  CHECK(transformer.min_gpus == 2);
  CHECK(transformer.max_gpus == 2);
  CHECK(transformer.priority == 5);
  CHECK(transformer.arrival == 3600);
  CHECK(trace.notes == std::vector<std::string>{"ignored the SLO of 1 jobs: tessel has no deadlines"});

  // The work is kept as the trace gives it, not re-derived from a duration.
  const Workload workload = build(dir, "gavel-trace", "jobs.trace");
  REQUIRE(workload.jobs.size() == 2);
  CHECK(workload.jobs[1].total_work == 11005);
}

TEST_CASE("gavel-trace: malformed lines name file, line and field") {
  const std::string good = "LM (batch size 10)\tpython main.py\tlanguage_modeling\t--steps\t1\t8601\t1\t1\t-1.000000\t0\n";
  CHECK(trace_error("gavel-trace", good + "LM (batch size 10)\tpython main.py\tlm\t--steps\t1\t8601\t1\t1\t-1\n") ==
        "trace.csv:2: expected 10 fields, got 9");
  CHECK(trace_error("gavel-trace", good + good +
                                       "LM (batch size 10)\tpython main.py\tlm\t--steps\t1\t8601\t0\t1\t-1\t0\n") ==
        "trace.csv:3: field 'scale_factor': expected an integer in 1..1048576, got '0'");
  CHECK(trace_error("gavel-trace", "LM (batch size 10)\tpython main.py\tlm\t--steps\t1\t8601\t1\t0.0\t-1\t0\n") ==
        "trace.csv:1: field 'priority_weight': expected a number > 0, got '0.0'");
  CHECK(trace_error("gavel-trace", "LM (batch size 10)\tpython main.py\tlm\t--steps\t2\t8601\t1\t1\t-1\t0\n") ==
        "trace.csv:1: field 'needs_data_dir': expected an integer in 0..1, got '2'");
  CHECK(trace_error("gavel-trace", "LM (batch size 10)\tpython main.py\tlm\t--steps\t1\t8601.5\t1\t1\t-1\t0\n") ==
        "trace.csv:1: field 'total_steps': expected an integer >= 1, got '8601.5'");
  CHECK(trace_error("gavel-trace", "LM (batch size 10)\tpython main.py\tlm\t--steps\t1\t8601\t1\t1\tnone\t0\n") ==
        "trace.csv:1: field 'SLO': expected a number, got 'none'");
  CHECK(trace_error("gavel-trace", "\tpython main.py\tlm\t--steps\t1\t8601\t1\t1\t-1\t0\n") ==
        "trace.csv:1: field 'job_type': expected a value, got an empty field");
}

// --- tiresias-csv -----------------------------------------------------------

TEST_CASE("tiresias-csv: job id, GPUs, submit time, model and duration") {
  TempDir dir;
  dir.write("jobs.csv",
            "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
            "0,1,0,606,vgg19,164,30\n"
            "1,8,30,133,vgg11,147.5,23");  // no newline at the end, as Tiresias's files
  const Trace trace = read_trace(dir, "tiresias-csv", "jobs.csv");
  REQUIRE(trace.jobs.size() == 2);
  const JobSpec& vgg19 = trace.jobs[0].spec;
  CHECK(vgg19.name == "0");
  CHECK(vgg19.gpus == 1);
  CHECK(vgg19.arrival == 0);
  CHECK(vgg19.model == "vgg19");
  CHECK(trace.jobs[0].duration == 164);
  const JobSpec& vgg11 = trace.jobs[1].spec;
  CHECK(vgg11.name == "1");
  CHECK(vgg11.gpus == 8);
  CHECK(vgg11.min_gpus == 8);
  CHECK(vgg11.max_gpus == 8);
  CHECK(vgg11.arrival == 30);
  CHECK(vgg11.model == "vgg11");
  CHECK(trace.jobs[1].duration == 147.5);
  CHECK(trace.notes.empty());
  // Two rows of one job: once read as two jobs of one name.
  CHECK(trace_error("tiresias-csv", "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                                    "0,1,0,606,vgg19,164,30\n1,8,30,133,vgg11,147,23\n0,2,60,10,vgg16,10,0\n") ==
        "trace.csv:4: field 'job_id': job '0' is given again (first on line 2)");
}

TEST_CASE("tiresias-csv: a small trace simulated, JCTs by hand") {
  // One node of 8 GPUs, FIFO, 100-second rounds.
  // t=0: job 0 (4 GPUs, 150 s) starts.  t=100: job 1 (arrived 30, 8 GPUs) waits.
  // t=150: job 0 ends (JCT 150).  t=200: job 1 starts, ends 260 (JCT 230).
  TempDir dir;
  dir.write("jobs.csv",
            "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
            "0,4,0,100,resnet50,150,30\n"
            "1,8,30,100,vgg16,60,0\n");
  const RunResults results = simulate(dir, R"([cluster]
nodes = 1
gpus_per_node = 8
[workload]
kind = "tiresias-csv"
path = "jobs.csv"
[scheduler]
round_seconds = 100
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)");
  REQUIRE(results.jobs.size() == 2);
  CHECK(results.jobs[0].name == "0");
  CHECK(results.jobs[0].model == "resnet50");
  CHECK(results.jobs[0].finish == 150);
  CHECK(results.jobs[1].finish == 260);
  CHECK(results.jobs[1].finish.value_or(NAN) - results.jobs[1].arrival == 230);
}

TEST_CASE("tiresias-csv: the real 60-job trace") {
  const auto path = shared_data("tiresias/60_job.csv");
  if (!path) {
    MESSAGE("skipped: ../shared/data/tiresias/60_job.csv is absent");
    return;
  }
  TempDir dir;
  const Trace trace = read_trace(dir, "tiresias-csv", path->string());
  REQUIRE(trace.jobs.size() == 60);
  CHECK(gpu_histogram(trace) == std::map<int, int>{{1, 30}, {2, 10}, {4, 10}, {8, 10}});
  double total_duration = 0;
  for (const TraceJob& job : trace.jobs) total_duration += job.duration;
  CHECK(total_duration == 10705);
  CHECK(trace.jobs.back().spec.name == "59");
  CHECK(trace.jobs.back().spec.model == "inception3");
  CHECK(trace.jobs.back().spec.arrival == 1779);
}

TEST_CASE("tiresias-csv: malformed rows name file, line and field") {
  const std::string header = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n";
  CHECK(trace_error("tiresias-csv", header + "0,1,0,606,vgg19,0,30\n") ==
        "trace.csv:2: field 'duration': expected a number > 0, got '0'");
  CHECK(trace_error("tiresias-csv", header + "0,1,0,606,vgg19,-3,30\n") ==  // once told ">= 0"
        "trace.csv:2: field 'duration': expected a number > 0, got '-3'");
  CHECK(trace_error("tiresias-csv", header + "0,1,0,606,vgg19,164,30\n1,0,30,133,vgg11,147,23\n") ==
        "trace.csv:3: field 'num_gpu': expected an integer in 1..1048576, got '0'");
  CHECK(trace_error("tiresias-csv", header + "0,1,0,606,,164,30\n") ==
        "trace.csv:2: field 'model_name': expected a value, got an empty field");
  CHECK(trace_error("tiresias-csv", header + "0,1,0,many,vgg19,164,30\n") ==
        "trace.csv:2: field 'iterations': expected an integer >= 0, got 'many'");
  CHECK(trace_error("tiresias-csv", header + "0,1,0,606,vgg19,164,soon\n") ==
        "trace.csv:2: field 'interval': expected a number >= 0, got 'soon'");
}

// --- openb ------------------------------------------------------------------

namespace {
const char* kPodHeader =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    "scheduled_time\n";
}  // namespace

TEST_CASE("openb: fractional GPUs, CPU and memory, run time from scheduling to deletion") {
  TempDir dir;
  dir.write("pods.csv", std::string(kPodHeader) +
                            "openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061\n"
                            "openb-pod-0002,88000,327680,8,1000,V100M16|V100M32,Burstable,Succeeded,100,1100,160\n"
                            "openb-pod-0003,2000,4096,0,0,,BE,Running,200,300,200\n"         // CPU-only
                            "openb-pod-0004,4000,15258,1,220,,BE,Pending,300,420,\n"         // never scheduled
                            "openb-pod-0005,4000,15258,1,1000,,BE,Failed,400,500,500\n");  // ran 0 s
  const Trace trace = read_trace(dir, "openb", "pods.csv");
  REQUIRE(trace.jobs.size() == 2);
  const JobSpec& shared = trace.jobs[0].spec;
  CHECK(shared.name == "openb-pod-0001");
  CHECK(shared.cpus == 6);
  CHECK(shared.mem_gb == 12);
  CHECK(shared.gpus == 1);
  CHECK(shared.gpu_milli == 460);
  CHECK(shared.arrival == 427061);
  CHECK(trace.jobs[0].duration == 12902960 - 427061);
  const JobSpec& whole = trace.jobs[1].spec;
  CHECK(whole.name == "openb-pod-0002");
  CHECK(whole.cpus == 88);
  CHECK(whole.mem_gb == 320);
  CHECK(whole.gpus == 8);
  CHECK(whole.min_gpus == 8);
  CHECK(whole.max_gpus == 8);
  CHECK(whole.gpu_milli == 1000);
  CHECK(whole.arrival == 100);
  CHECK(trace.jobs[1].duration == 1100 - 160);
  CHECK(trace.notes == std::vector<std::string>{"skipped 1 CPU-only pods", "skipped 2 GPU pods that never ran",
                                                "ignored the GPU-type constraint (gpu_spec) of 1 pods"});

  // A fractional pod progresses at its share of a GPU under the linear model.
  const Workload workload = build(dir, "openb", "pods.csv");
  REQUIRE(workload.jobs.size() == 2);
  CHECK(workload.jobs[1].name == "openb-pod-0001");
  CHECK(workload.jobs[1].total_work == doctest::Approx((12902960 - 427061) * 0.46));
}

TEST_CASE("openb with times = \"ignore\": every pod arrives at 0 and never leaves, as in the ATC'23 runs") {
  TempDir dir;
  dir.write("pods.csv", std::string(kPodHeader) +
                            "openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061\n"
                            "openb-pod-0003,2000,4096,0,0,,BE,Running,200,300,200\n"     // CPU-only
                            "openb-pod-0004,4000,15258,1,220,,BE,Pending,300,420,\n"     // never scheduled: kept
                            "openb-pod-0005,4000,15258,2,1000,,BE,Failed,400,500,500\n");  // ran 0 s: kept
  const Trace trace =
      build_workload_source(configure(dir, kind_and_path("openb", "pods.csv") + "times = \"ignore\"\n").workload)
          ->read(1);
  REQUIRE(trace.jobs.size() == 3);
  std::vector<std::string> names;
  for (const TraceJob& job : trace.jobs) {
    names.push_back(job.spec.name);
    CHECK(job.spec.arrival == 0);
    CHECK(std::isinf(job.duration));
  }
  CHECK(names == std::vector<std::string>{"openb-pod-0001", "openb-pod-0004", "openb-pod-0005"});
  CHECK(trace.jobs[1].spec.gpu_milli == 220);
  CHECK(trace.jobs[2].spec.gpus == 2);
  CHECK(trace.notes == std::vector<std::string>{"skipped 1 CPU-only pods"});
  CHECK_THROWS_WITH_AS(configure(dir, kind_and_path("openb", "pods.csv") + "times = \"forget\"\n"),
                       doctest::Contains("times"), ConfigError);

  // cpu_only = "keep": the CPU-only pod is a job of 1 GPU at a share of 0,
  // which the linear model runs at one unit of work a second.
  dir.write("pods.csv", std::string(kPodHeader) +
                            "openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061\n"
                            "openb-pod-0003,2000,4096,0,0,,BE,Running,200,300,200\n"     // CPU-only
                            "openb-pod-0004,4000,15258,1,220,,BE,Pending,300,420,\n"     // never scheduled
                            "openb-pod-0005,4000,15258,2,1000,,BE,Failed,400,500,500\n"  // ran 0 s
                            "openb-pod-0006,4000,15258,0,0,,BE,Pending,400,500,\n");      // CPU-only, never ran
  const std::string keep = kind_and_path("openb", "pods.csv") + "times = \"replay\"\ncpu_only = \"keep\"\n";
  const Trace kept = build_workload_source(configure(dir, keep).workload)->read(1);
  REQUIRE(kept.jobs.size() == 2);  // pod 1 and the CPU-only pod 3; 4, 5 and 6 never ran
  const JobSpec& cpu_only = kept.jobs[1].spec;
  CHECK(cpu_only.name == "openb-pod-0003");
  CHECK(cpu_only.gpus == 1);
  CHECK(cpu_only.gpu_milli == 0);
  CHECK(cpu_only.cpus == 2);
  CHECK(kept.notes ==
        std::vector<std::string>{"skipped 2 GPU pods that never ran", "skipped 1 CPU-only pods that never ran"});
  const ExperimentConfig config = configure(dir, keep);
  const Workload workload = build_workload(config.workload, ClusterState(config.cluster.nodes));
  CHECK(workload.jobs[0].name == "openb-pod-0003");
  CHECK(workload.jobs[0].total_work == 100);  // 300 - 200 seconds

  // Other models give a job of share 0 no progress: said, not run forever.
  const ExperimentConfig amdahl = configure(dir, keep + "model = { name = \"amdahl\", serial_fraction = 0.1 }\n");
  CHECK_THROWS_WITH_AS(build_workload(amdahl.workload, ClusterState(amdahl.cluster.nodes)),
                       doctest::Contains("holds no share of its GPU"), UserError);
}

TEST_CASE("openb: the real pod list") {
  const auto path = shared_data("alibaba-openb/openb_pod_list_default.csv");
  if (!path) {
    MESSAGE("skipped: ../shared/data/alibaba-openb/openb_pod_list_default.csv is absent");
    return;
  }
  TempDir dir;
  const Trace trace = read_trace(dir, "openb", path->string());
  // 8,152 pods = 1,088 CPU-only + 861 GPU pods never scheduled + 6,203 jobs.
  CHECK(trace.jobs.size() == 6'203);
  CHECK(trace.notes == std::vector<std::string>{"skipped 1,088 CPU-only pods", "skipped 861 GPU pods that never ran"});
  CHECK(gpu_histogram(trace) == std::map<int, int>{{1, 6'129}, {2, 15}, {4, 15}, {8, 44}});
  int fractional = 0;
  for (const TraceJob& job : trace.jobs) fractional += job.spec.gpu_milli < 1000;
  CHECK(fractional == 2'573);
  CHECK(trace.jobs.front().spec.name == "openb-pod-0000");
  CHECK(trace.jobs.back().spec.name == "openb-pod-8151");
  CHECK(trace.jobs.back().spec.arrival == 12'901'761);
  CHECK(trace.jobs.back().duration == 30);

  // Read as the ATC'23 experiments read it: every GPU pod, 7,064 of 8,152,
  // asking for 6,086.8 GPUs (98% of the openb cluster's 6,212).
  const Trace all =
      build_workload_source(configure(dir, kind_and_path("openb", path->string()) + "times = \"ignore\"\n").workload)
          ->read(1);
  CHECK(all.jobs.size() == 7'064);
  double milli = 0;
  for (const TraceJob& job : all.jobs) milli += job.spec.gpus * job.spec.gpu_milli;
  CHECK(milli == 6'086'800);
}

TEST_CASE("openb: malformed rows name file, line and field") {
  const std::string header = kPodHeader;
  CHECK(trace_error("openb", header + "p,6000,12288,1,0,,LS,Running,0,10,0\n") ==
        "trace.csv:2: field 'gpu_milli': expected an integer in 1..1000, got '0'");
  CHECK(trace_error("openb", header + "p,6000,12288,2,500,,LS,Running,0,10,0\n") ==
        "trace.csv:2: field 'gpu_milli': expected 1000 on a pod of 2 GPUs (shares apply to single-GPU pods), "
        "got '500'");
  CHECK(trace_error("openb", header + "p,6000,12288,1,1000,,LS,Running,100,400,500\n") ==
        "trace.csv:2: field 'deletion_time': expected a number >= 500, got '400'");
  CHECK(trace_error("openb", header + "p,6000,12288,1,1000,,LS,Running,100,400,50\n") ==
        "trace.csv:2: field 'scheduled_time': expected a number >= 100, got '50'");
  CHECK(trace_error("openb", header + "p,6000,12288,1,1000,,LS,Pending,100,50,\n") ==
        "trace.csv:2: field 'deletion_time': expected a number >= 100, got '50'");
  CHECK(trace_error("openb", header + "p,6.5k,12288,1,1000,,LS,Running,0,10,0\n") ==
        "trace.csv:2: field 'cpu_milli': expected an integer >= 0, got '6.5k'");
  CHECK(trace_error("openb", header + ",6000,12288,1,1000,,LS,Running,0,10,0\n") ==
        "trace.csv:2: field 'name': expected a value, got an empty field");
}

// --- every kind, on garbage -------------------------------------------------

TEST_CASE("no reader crashes on garbage: it reads or raises a TraceError") {
  const std::vector<std::string> garbage{
      "",
      "\n\n",
      "\"unterminated\n",
      "a,b,c\n1,2,3\n",
      std::string("\xEF\xBB\xBF\0\xff\xfe,\x01\n", 10),
      "timestamp,duration,num_gpus,gpu_time,cluster\n9999-99-99 99:99:99,1e999,99999999999999999999,nan,\n",
      "name,time,application,num_replicas,batch_size\nx,inf,y,2147483648,-0\n",
      "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n,,,,,,\n",
      std::string(kPodHeader) + "p,-1,-1,-1,-1,,,,-1,-1,-1\n",
      "\t\t\t\t\t\t\t\t\t\n",
      "x\t\"y\t\"\tz\t1\t1\t1\t1\t1\t1\n",
  };
  for (const char* kind : {"pollux-csv", "pollux-workload", "gavel-trace", "tiresias-csv", "openb"})
    for (const std::string& contents : garbage) {
      CAPTURE(kind);
      CAPTURE(contents);
      TempDir dir;
      dir.write("trace.csv", contents);
      try {
        read_trace(dir, kind, "trace.csv");
      } catch (const TraceError&) {
        // expected; any other exception escapes and fails the test
      }
    }
  TempDir dir;
  CHECK_THROWS_AS(read_trace(dir, "openb", "missing.csv"), TraceError);
}

TEST_CASE("each new kind needs a path") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(configure(dir, "kind = \"gavel-trace\"\n"),
                       (dir.path().string() + "/experiment.toml:5:1: [workload] is missing required key 'path'").c_str(),
                       ConfigError);
}

// --- cluster specs ----------------------------------------------------------

TEST_CASE("a Tiresias cluster spec: one node per switch and slot, racks by switch") {
  TempDir dir;
  const std::string path =
      dir.write("n2s3g4.csv", "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n2,3,4,40,256")
          .string();
  const std::vector<NodeSpec> nodes = read_tiresias_cluster(path);
  REQUIRE(nodes.size() == 6);
  std::vector<std::string> names;
  for (const NodeSpec& node : nodes) {
    names.push_back(node.name + "@" + std::to_string(node.rack));
    CHECK(node.gpus == 4);
    CHECK(node.cpus == 40);
    CHECK(node.mem_gb == 256);
    CHECK(node.gpu_type == "gpu");
  }
  CHECK(names == std::vector<std::string>{"s0n0@0", "s0n1@0", "s0n2@0", "s1n0@1", "s1n1@1", "s1n2@1"});
}

TEST_CASE("the real Tiresias cluster specs") {
  struct Expected {
    std::string file;
    std::size_t nodes;
    int gpus, racks;
    double cpus, mem_gb;
  };
  for (const Expected& expected : {Expected{"tiresias/n32g4.csv", 32, 4, 1, 40, 256},
                                   Expected{"tiresias/n160g8.csv", 160, 8, 5, 128, 256},
                                   Expected{"tiresias/cluster_spec.csv", 16, 4, 1, 128, 254}}) {
    CAPTURE(expected.file);
    const auto path = shared_data(expected.file);
    if (!path) {
      MESSAGE("skipped: ../shared/data/" << expected.file << " is absent");
      continue;
    }
    const std::vector<NodeSpec> nodes = read_tiresias_cluster(path->string());
    REQUIRE(nodes.size() == expected.nodes);
    for (const NodeSpec& node : nodes) {
      CHECK(node.gpus == expected.gpus);
      CHECK(node.cpus == expected.cpus);
      CHECK(node.mem_gb == expected.mem_gb);
    }
    CHECK(nodes.back().rack == expected.racks - 1);
    CHECK(ClusterState(nodes).installed_gpus() == static_cast<int>(expected.nodes) * expected.gpus);
  }
}

TEST_CASE("a malformed Tiresias cluster spec names file, line and field") {
  const std::string header = "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n";
  CHECK(spec_error(read_tiresias_cluster, header) == "spec.csv:1: expected a row after the header, found none");
  CHECK(spec_error(read_tiresias_cluster, header + "1,32,4,40,256\n2,32,4,40,256\n") ==
        "spec.csv:3: expected one row after the header, found another");
  CHECK(spec_error(read_tiresias_cluster, header + "1,32,0,40,256\n") ==
        "spec.csv:2: field 'num_gpu_p_node': expected an integer in 1..1024, got '0'");
  CHECK(spec_error(read_tiresias_cluster, header + "1000,1001,4,40,256\n") ==
        "spec.csv:2: field 'num_node_p_switch': expected at most 1,000,000 nodes in all, got 1000 switches of "
        "1001");
  CHECK(spec_error(read_tiresias_cluster, header + "1,32,4,forty,256\n") ==
        "spec.csv:2: field 'num_cpu_p_node': expected a number >= 0, got 'forty'");
}

TEST_CASE("openb nodes: name, GPUs and their model, CPUs and memory") {
  TempDir dir;
  const std::string path = dir.write("nodes.csv",
                                     "sn,cpu_milli,memory_mib,gpu,model\n"
                                     "openb-node-0000,64000,262144,2,P100\n"
                                     "openb-node-0227,96000,786432,8,V100M32\n")
                               .string();
  const std::vector<NodeSpec> nodes = read_openb_nodes(path);
  REQUIRE(nodes.size() == 2);
  CHECK(nodes[0].name == "openb-node-0000");
  CHECK(nodes[0].cpus == 64);
  CHECK(nodes[0].mem_gb == 256);
  CHECK(nodes[0].gpus == 2);
  CHECK(nodes[0].gpu_type == "P100");
  CHECK(nodes[0].rack == 0);
  CHECK(nodes[1].name == "openb-node-0227");
  CHECK(nodes[1].cpus == 96);
  CHECK(nodes[1].mem_gb == 768);
  CHECK(nodes[1].gpus == 8);
  CHECK(nodes[1].gpu_type == "V100M32");
}

TEST_CASE("openb nodes: the real GPU-node list") {
  const auto path = shared_data("alibaba-openb/openb_node_list_gpu_node.csv");
  if (!path) {
    MESSAGE("skipped: ../shared/data/alibaba-openb/openb_node_list_gpu_node.csv is absent");
    return;
  }
  const std::vector<NodeSpec> nodes = read_openb_nodes(path->string());
  CHECK(nodes.size() == 1'213);
  std::map<std::string, int> by_model;
  for (const NodeSpec& node : nodes) ++by_model[node.gpu_type];
  CHECK(by_model == std::map<std::string, int>{{"A10", 2}, {"G2", 549}, {"G3", 39}, {"P100", 134},
                                               {"T4", 404}, {"V100M16", 55}, {"V100M32", 30}});
  CHECK(ClusterState(nodes).installed_gpus() == 6'212);
}

TEST_CASE("malformed openb nodes name file, line and field") {
  const std::string header = "sn,cpu_milli,memory_mib,gpu,model\n";
  CHECK(spec_error(read_openb_nodes, header) == "spec.csv:1: expected a row after the header, found none");
  CHECK(spec_error(read_openb_nodes, header + "n0,32000,262144,0,nan\n") ==
        "spec.csv:2: field 'gpu': expected an integer in 1..1024, got '0'");
  CHECK(spec_error(read_openb_nodes, header + "n0,32000,262144,2,P100\nn1,32000,262144,2,\n") ==
        "spec.csv:3: field 'model': expected a value, got an empty field");
  CHECK(spec_error(read_openb_nodes, header + "n0,32000,262144,2,P100\n\nn0,32000,262144,2,P100\n") ==
        "spec.csv:4: field 'sn': node 'n0' is already on line 2");
  CHECK(spec_error(read_openb_nodes, header + "n0,32k,262144,2,P100\n") ==
        "spec.csv:2: field 'cpu_milli': expected an integer >= 0, got '32k'");
}
