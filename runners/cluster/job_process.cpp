#include "job_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <ctime>
#include <fstream>
#include <system_error>

extern char** environ;

namespace tessel::cluster {

namespace {

std::string timestamp() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  char text[48];
  std::snprintf(text, sizeof text, "%lld.%06ld", static_cast<long long>(now.tv_sec), now.tv_nsec / 1000);
  return text;
}

std::string join(const std::vector<int>& values) {
  std::string text;
  for (int v : values) text += (text.empty() ? "" : ",") + std::to_string(v);
  return text;
}

// A log holds whatever the job printed; a message carries JSON strings,
// which must be UTF-8: invalid bytes become U+FFFD.
std::string as_utf8(const std::string& bytes) {
  return json::parse(json(bytes).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
}

// Writes to the log from the child between fork and exec, where only
// async-signal-safe calls are allowed.
void child_fail(const char* what, const char* detail) {
  const char* reason = strerror(errno);  // not async-signal-safe in theory; glibc's is in practice
  for (const char* part : {"tessel: ", what, " '", detail, "': ", reason, "\n"})
    if (::write(2, part, strlen(part)) < 0) break;
  _exit(127);
}

}  // namespace

LaunchOrder LaunchOrder::from(const Message& m) {
  LaunchOrder o;
  o.launch = static_cast<std::uint64_t>(m.integer("launch", 1));
  o.job = static_cast<std::uint32_t>(m.integer("job", 0, 0xfffffffe));
  o.rank = static_cast<int>(m.integer("rank", 0, 1 << 20));
  o.local_rank = static_cast<int>(m.integer("local_rank", 0, 1 << 20));
  o.world_size = static_cast<int>(m.integer("world_size", 1, 1 << 20));
  for (const json& gpu : m.array("gpus")) {
    if (!gpu.is_number_integer() || gpu.get<std::int64_t>() < 0 || gpu.get<std::int64_t>() > 4096)
      throw ProtocolError("'gpus' in 'launch' must hold GPU indices");
    o.gpus.push_back(gpu.get<int>());
  }
  for (const json& arg : m.array("command")) {
    if (!arg.is_string()) throw ProtocolError("'command' in 'launch' must be strings");
    o.command.push_back(arg.get<std::string>());
  }
  if (o.command.empty()) throw ProtocolError("'command' in 'launch' is empty");
  for (const auto& [name, value] : m.object("env").items()) {
    if (!value.is_string()) throw ProtocolError("env values in 'launch' must be strings");
    o.env[name] = value.get<std::string>();
  }
  o.workdir = m.text("workdir");
  o.master_addr = m.text("master_addr");
  o.master_port = static_cast<int>(m.integer("master_port", 1, 65535));
  o.resume = m.flag("resume");
  o.grace_seconds = m.number("grace_seconds");
  if (!(o.grace_seconds >= 0 && o.grace_seconds <= 86400)) throw ProtocolError("bad 'grace_seconds' in 'launch'");
  return o;
}

std::filesystem::path rank_log_path(const std::filesystem::path& log_dir, std::uint32_t job, int rank) {
  return log_dir / ("job-" + std::to_string(job)) / ("rank-" + std::to_string(rank) + ".log");
}

std::string describe_exit(int code, int signal) {
  if (signal > 0) {
    const char* name = sigabbrev_np(signal);
    return "killed by signal " + std::to_string(signal) + (name ? " (SIG" + std::string(name) + ")" : "");
  }
  std::string text = "exited with code " + std::to_string(code);
  // The codes a shell or an exec failure give their usual meaning.
  if (code == 127) text += " (the command was not found or could not start)";
  else if (code == 126) text += " (the command could not be executed)";
  else if (const char* name = code > 128 ? sigabbrev_np(code - 128) : nullptr)
    text += " (128 + " + std::to_string(code - 128) + ": ended on SIG" + name + ", or a shell's child was)";
  return text;
}

std::optional<Progress> parse_progress_line(std::string_view line) {
  Progress p;
  long long iteration = 0, total = 0;
  char tail = 0;
  const std::string text(line.substr(0, 128));
  const int read = std::sscanf(text.c_str(), "iteration %lld of %lld %c", &iteration, &total, &tail);
  if (read == 2 && iteration >= 0 && total > 0) {
    p.iteration = iteration, p.total = total;
    return p;
  }
  if (std::sscanf(text.c_str(), "iteration %lld %c", &iteration, &tail) == 1 && iteration >= 0 &&
      text.find(" of") == std::string::npos) {
    p.iteration = iteration;
    return p;
  }
  return std::nullopt;
}

std::filesystem::path progress_path(const std::filesystem::path& log_dir, std::uint32_t job, std::uint64_t launch) {
  return log_dir / ("job-" + std::to_string(job)) / ("launch-" + std::to_string(launch) + ".progress");
}

std::map<std::string, std::string> rank_environment(const LaunchOrder& order, const std::filesystem::path& progress) {
  std::map<std::string, std::string> env;
  env["CUDA_VISIBLE_DEVICES"] = join(order.gpus);
  env["TESSEL_JOB_ID"] = std::to_string(order.job);
  env["TESSEL_LAUNCH_ID"] = std::to_string(order.launch);
  env["TESSEL_PROGRESS"] = progress.string();
  env["RANK"] = std::to_string(order.rank);
  env["WORLD_SIZE"] = std::to_string(order.world_size);
  env["LOCAL_RANK"] = std::to_string(order.local_rank);
  env["MASTER_ADDR"] = order.master_addr;
  env["MASTER_PORT"] = std::to_string(order.master_port);
  if (order.resume) env["TESSEL_RESUME"] = "1";
  return env;
}

json log_tail(std::uint64_t request, const std::filesystem::path& path, std::int64_t max_bytes, const std::string& node) {
  json reply = {{"request", request}, {"path", path.string()}};
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    reply["error"] = "node " + node + " has no log at " + path.string();
    return reply;
  }
  const std::int64_t size = in.tellg();
  const std::int64_t from = std::max<std::int64_t>(0, size - max_bytes);
  std::string text(static_cast<std::size_t>(size - from), '\0');
  in.seekg(from);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  reply["size"] = size;
  reply["from"] = from;
  reply["text"] = as_utf8(text);
  return reply;
}

JobProcess::JobProcess(asio::io_context& io, const LaunchOrder& order, const std::filesystem::path& log_dir,
                       const std::string& node)
    : order_(order),
      // Only rank 0 speaks for the job's progress; the others write nowhere.
      progress_path_(order.rank == 0 ? progress_path(log_dir, order.job, order.launch) : "/dev/null"),
      progress_(progress_path_), kill_timer_(io) {
  log_path_ = rank_log_path(log_dir, order.job, order.rank);
  const std::filesystem::path dir = log_path_.parent_path();
  std::filesystem::create_directories(dir);

  // Everything the child needs is built before fork().
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [name, value] : order.env) env[name] = value;
  // The agent's own TESSEL_RESUME must not make a first launch resume.
  env.erase("TESSEL_RESUME");
  for (const auto& [name, value] : rank_environment(order, progress_path_)) env[name] = value;
  std::vector<std::string> env_entries;
  for (const auto& [name, value] : env) env_entries.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& entry : env_entries) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = order.command;
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  const int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (log_fd < 0) throw std::system_error(errno, std::generic_category(), "cannot open " + log_path_.string());
  log("tessel: " + timestamp() + " launch " + std::to_string(order.launch) + " rank " + std::to_string(order.rank) +
      " of " + std::to_string(order.world_size) + " on " + node + ", GPUs [" + join(order.gpus) + "]" +
      (order.resume ? ", resumed" : ""));

  // Said before forking, so that the daemon hears why (the child could only
  // exit 127 and say it here).
  std::error_code missing;
  if (!std::filesystem::is_directory(order.workdir, missing)) {
    ::close(log_fd);
    const bool exists = std::filesystem::exists(order.workdir, missing);
    const std::string why = "working directory '" + order.workdir + "' " +
                            (exists ? "is not a directory" : "does not exist") + " on node " + node;
    log("tessel: " + timestamp() + " cannot launch: " + why);
    throw std::runtime_error(why);
  }

  const pid_t agent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    throw std::system_error(errno, std::generic_category(), "fork");
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != agent) _exit(127);  // the agent died before prctl took effect
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    // Nothing of the agent's (its socket to the scheduler) leaks into the job.
    if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
      for (int fd = 3; fd < 1024; ++fd) ::close(fd);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::chdir(order.workdir.c_str()) != 0) child_fail("cannot enter working directory", order.workdir.c_str());
    ::execvpe(argv[0], argv.data(), envp.data());
    child_fail("cannot run", argv[0]);
  }
  ::close(log_fd);
  // Also from the parent, so that a stop sent at once finds the group.
  ::setpgid(pid, pid);
  pid_ = pid;
  log("tessel: " + timestamp() + " started pid " + std::to_string(pid));
}

void JobProcess::log(const std::string& line) const {
  std::ofstream(log_path_, std::ios::app) << line << "\n";
}

void JobProcess::stop(double grace_seconds) {
  if (pid_ <= 0) return;
  if (!stopping_) {
    stopping_ = true;
    log("tessel: " + timestamp() + " stopping: SIGTERM, SIGKILL in " + std::to_string(grace_seconds) + " s");
    ::kill(-pid_, SIGTERM);
  }
  kill_timer_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(grace_seconds)));
  kill_timer_.async_wait([this, pid = pid_](boost::system::error_code error) {
    if (error || pid_ != pid) return;
    log("tessel: " + timestamp() + " grace period over: SIGKILL");
    ::kill(-pid, SIGKILL);
  });
}

std::optional<Progress> JobProcess::read_progress() {
  if (order_.rank != 0) return std::nullopt;
  return progress_.read();
}

std::optional<Progress> ProgressReader::read() {
  std::ifstream in(path_, std::ios::binary);
  if (!in) return std::nullopt;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  offset_ += chunk.size();
  partial_ += chunk;
  std::optional<Progress> latest;
  std::size_t start = 0;
  for (std::size_t end; (end = partial_.find('\n', start)) != std::string::npos; start = end + 1)
    if (auto p = parse_progress_line(std::string_view(partial_).substr(start, end - start))) latest = p;
  partial_.erase(0, start);
  if (partial_.size() > 4096) partial_.clear();  // not a progress file
  if (latest) last_ = latest;
  return latest;
}

void JobProcess::exited(int status) {
  kill_timer_.cancel();
  const std::string how = WIFEXITED(status) ? describe_exit(WEXITSTATUS(status), 0) : describe_exit(-1, WTERMSIG(status));
  log("tessel: " + timestamp() + " pid " + std::to_string(pid_) + " " + how);
  // Whatever the group left behind goes with its leader.
  ::kill(-pid_, SIGKILL);
  pid_ = -1;
}

}  // namespace tessel::cluster
