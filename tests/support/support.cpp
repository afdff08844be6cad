#include "support.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "plugins/registry.hpp"
#include "simulation.hpp"

extern char** environ;

namespace tessel::test {

namespace {
std::string required_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) throw std::runtime_error(std::string("test needs ") + name + "; run it with meson test");
  return value;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
}  // namespace

fs::path source_root() { return required_env("TESSEL_SOURCE_ROOT"); }
fs::path build_root() { return required_env("TESSEL_BUILD_ROOT"); }
fs::path tessel_exe() { return required_env("TESSEL_EXE"); }
fs::path test_plugin(const std::string& name) {
  return fs::path(required_env("TESSEL_TEST_PLUGINS")) / (name + ".so");
}

std::optional<fs::path> shared_data(const std::string& relative) {
  const fs::path path = fs::path(required_env("TESSEL_SHARED_DATA")) / relative;
  if (!fs::exists(path)) return std::nullopt;
  return path;
}

TempDir::TempDir() {
  std::random_device random;
  path_ = fs::temp_directory_path() / ("tessel-test-" + std::to_string(::getpid()) + "-" + std::to_string(random()));
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

fs::path TempDir::write(const std::string& name, const std::string& contents) const {
  const fs::path file = path_ / name;
  fs::create_directories(file.parent_path());
  std::ofstream(file) << contents;
  return file;
}

TestMount TestMount::tmpfs(const fs::path& at, std::size_t bytes) {
  fs::create_directories(at);
  const std::string options = "size=" + std::to_string(bytes);
  return TestMount(::mount("tmpfs", at.c_str(), "tmpfs", 0, options.c_str()) == 0 ? at : fs::path());
}

TestMount TestMount::read_only(const fs::path& at) {
  if (::mount(at.c_str(), at.c_str(), nullptr, MS_BIND, nullptr) != 0) return TestMount(fs::path());
  TestMount bound(at);  // unmounted again if the remount fails
  if (::mount(nullptr, at.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) return TestMount(fs::path());
  return bound;
}

void fill_disk(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + file.string());
  // Pages first, then single bytes for what is left of a partly used page.
  const std::string chunk(4096, 'x');
  for (std::size_t size : {chunk.size(), std::size_t{1}})
    while (::write(fd, chunk.data(), size) > 0) {
    }
  ::close(fd);
}

TestMount::~TestMount() {
  if (!at_.empty()) ::umount2(at_.c_str(), MNT_DETACH);
}

CommandResult run_command(const std::vector<std::string>& argv, const fs::path& cwd,
                          const std::vector<std::string>& env) {
  TempDir capture;
  const fs::path out = capture.path() / "out", err = capture.path() / "err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // `env` entries ("NAME=value") replace inherited ones of the same name.
  std::vector<std::string> environment = env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('=') + 1);
    bool replaced = false;
    for (const auto& o : env) replaced = replaced || o.starts_with(name);
    if (!replaced) environment.push_back(entry);
  }
  std::vector<char*> envp;
  for (auto& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CommandResult result;
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = slurp(out);
  result.err = slurp(err);
  return result;
}

CommandResult run_tessel(const std::vector<std::string>& args, const fs::path& cwd,
                         const std::vector<std::string>& env) {
  std::vector<std::string> argv{tessel_exe().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, cwd, env);
}

RunResults simulate(const TempDir& dir, const std::string& toml, const std::string& name) {
  const ExperimentConfig config = load_experiment(dir.write(name, toml));
  PluginRegistry registry(config.scheduler.plugin_path);
  Simulation simulation(config, registry);
  return simulation.run();
}

int check_lazy_progress_changes_nothing(const ExperimentConfig& config) {
  auto run = [&](bool observed) {
    PluginRegistry registry(config.scheduler.plugin_path);
    Simulation simulation(config, registry);
    // An observer reads the scheduler after each round, so every round
    // accounts the running jobs.
    if (observed) simulation.observe_rounds([](double, const Scheduler&, const RoundOutcome&) {});
    return simulation.run();
  };
  return check_same_jobs(run(false), run(true));
}

int check_same_jobs(const RunResults& a, const RunResults& b) {
  REQUIRE(a.jobs.size() == b.jobs.size());
  int preemptions = 0;
  for (std::size_t i = 0; i < a.jobs.size(); ++i) {
    CAPTURE(i);
    CHECK(a.jobs[i].status == b.jobs[i].status);
    CHECK(a.jobs[i].first_start == b.jobs[i].first_start);
    CHECK(a.jobs[i].finish == b.jobs[i].finish);
    CHECK(a.jobs[i].preemptions == b.jobs[i].preemptions);
    CHECK(a.jobs[i].attained_service == b.jobs[i].attained_service);
    CHECK(a.jobs[i].gpu_seconds == b.jobs[i].gpu_seconds);
    preemptions += b.jobs[i].preemptions;
  }
  return preemptions;
}

std::string busy_experiment(const std::string& allocation, const std::string& extra, const BusyLoad& load) {
  return "[cluster]\nnodes = " + std::to_string(load.nodes) + "\ngpus_per_node = 4\n[workload]\n" +
         "kind = \"synthetic\"\njobs = " + std::to_string(load.jobs) +
         "\njobs_per_hour = " + std::to_string(load.jobs_per_hour) + "\nseed = " + std::to_string(load.seed) + R"(
[failures]
node_mtbf_hours = 40
node_repair_hours = 3
job_failure_probability = 0.1
max_retries = 1000
[scheduler]
round_seconds = 300
allocation = )" + allocation + R"(
placement = { plugin = "consolidated" }
)" + extra;
}

std::vector<double> finish_times(const RunResults& results) {
  std::vector<double> out;
  for (const JobRecord& job : results.jobs) out.push_back(job.finish.value_or(NAN));
  return out;
}

std::string reason_of(const RunResults& results, JobId job, double time, PluginKind stage) {
  for (const DecisionRecord& d : results.decisions)
    if (d.job == job && d.time == time && d.stage == stage) return d.reason;
  return "";
}

std::vector<double> placed_at(const RunResults& results, JobId job) {
  std::vector<double> times;
  for (const DecisionRecord& d : results.decisions)
    if (d.job == job && d.code == "place") times.push_back(d.time);
  return times;
}

std::int64_t count(const fs::path& db, const std::string& sql) {
  sql::Database database(db.string(), false);
  auto statement = database.prepare(sql);
  return statement.step() ? statement.integer(0) : 0;
}

std::string query_text(const fs::path& db, const std::string& sql) {
  sql::Database database(db.string(), false);
  auto statement = database.prepare(sql);
  return statement.step() ? statement.text(0) : "";
}

}  // namespace tessel::test
