#include "slurm_executor.hpp"

#include <algorithm>
#include <csignal>
#include <fstream>
#include <sstream>

#include <boost/asio/post.hpp>

#include "engine/errors.hpp"
#include "log_line.hpp"

namespace tessel::cluster {

namespace fs = std::filesystem;

namespace {

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, by);) parts.push_back(part);
  return parts;
}

std::string first_line(const std::string& text) { return trimmed(text.substr(0, text.find('\n'))); }

std::string last_line(std::string text) {
  text = trimmed(std::move(text));
  return text.substr(text.rfind('\n') + 1);  // npos + 1 = 0: the only line
}

// Ended by Slurm's doing, not the job's: its processes were lost as with a
// node's agent, not failed.
bool lost_by_slurm(const std::string& state) {
  return state == "NODE_FAIL" || state == "BOOT_FAIL" || state == "PREEMPTED";
}

// "123" -> 123; nothing for anything but 1-18 digits (std::stoull would throw).
std::optional<std::uint64_t> number_of(const std::string& digits) {
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoull(digits);
}

// "tessel-<tag>-l<launch>" -> launch; nothing for another name.
std::optional<std::uint64_t> launch_of(const std::string& name, const std::string& tag) {
  const std::string prefix = "tessel-" + tag + "-l";
  if (name.rfind(prefix, 0) != 0) return std::nullopt;
  return number_of(name.substr(prefix.size()));
}

}  // namespace

bool slurm_job_ended(const std::string& state) {
  // Slurm's end states (job_state_string, slurm_protocol_defs.c): a job
  // shows one only when its processes are gone (while they end it shows
  // COMPLETING). Any other state, including ones a newer Slurm adds, keeps
  // the job counted as running: its GPUs are not handed on while it may
  // still hold them.
  for (const char* end : {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                          "DEADLINE", "OUT_OF_MEMORY"})
    if (state == end) return true;
  return false;
}

std::map<std::string, std::string> scontrol_fields(const std::string& line) {
  std::map<std::string, std::string> fields;
  std::stringstream words(line);
  for (std::string word; words >> word;)
    if (const auto eq = word.find('='); eq != std::string::npos && eq > 0) fields.emplace(word.substr(0, eq), word.substr(eq + 1));
  return fields;
}

std::optional<std::pair<int, std::string>> gres_gpus(const std::string& gres) {
  for (std::string entry : split(gres, ',')) {
    entry = entry.substr(0, entry.find('('));  // "(S:0-1)": the sockets
    const std::vector<std::string> parts = split(entry, ':');
    if (parts.size() < 2 || parts.size() > 3 || parts[0] != "gpu") continue;
    const std::string& count = parts.back();
    if (count.empty() || count.find_first_not_of("0123456789") != std::string::npos || count.size() > 6) continue;
    if (std::stoi(count) == 0) continue;
    return std::pair{std::stoi(count), parts.size() == 3 ? parts[1] : std::string("gpu")};
  }
  return std::nullopt;
}

std::vector<SlurmNode> slurm_nodes(const std::string& partition) {
  const fs::path folder = fs::temp_directory_path();
  const std::string where = partition.empty() ? "" : " in partition '" + partition + "'";
  std::vector<std::string> sinfo = {"sinfo", "-h", "-N", "-o", "%N"};
  if (!partition.empty()) sinfo.insert(sinfo.end(), {"-p", partition});
  CommandResult listed;
  try {
    listed = run_command(sinfo, folder);
  } catch (const UserError& e) {
    throw UserError(std::string("[serve] executor = \"slurm\": ") + e.what() + " (is Slurm's client installed?)");
  }
  if (listed.status != 0)
    throw UserError("[serve] executor = \"slurm\", but Slurm does not answer: sinfo: " +
                    first_line(listed.err.empty() ? listed.out : listed.err) + " (is slurmctld running, SLURM_CONF set?)");
  std::vector<std::string> names;
  for (const std::string& line : split(listed.out, '\n'))
    if (const std::string name = trimmed(line); !name.empty() && std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(name);
  if (names.empty()) throw UserError("[serve] executor = \"slurm\": sinfo lists no node" + where);
  const CommandResult shown = run_command({"scontrol", "show", "node", "-o"}, folder);
  if (shown.status != 0) throw UserError("[serve] executor = \"slurm\": scontrol show node: " + first_line(shown.err));
  std::vector<SlurmNode> nodes;
  std::string without_gpus;
  for (const std::string& line : split(shown.out, '\n')) {
    auto fields = scontrol_fields(line);
    const std::string name = fields["NodeName"];
    if (std::find(names.begin(), names.end(), name) == names.end()) continue;
    const auto gpus = gres_gpus(fields["Gres"]);
    if (!gpus) {
      without_gpus += (without_gpus.empty() ? "" : ", ") + name;
      continue;
    }
    // Slurm runs nothing on a node down or drained; one that returns later is not seen (nodes are read at start).
    const std::string state = fields["State"];
    if (state.find("DOWN") != std::string::npos || state.find("DRAIN") != std::string::npos ||
        state.find("FAIL") != std::string::npos) {
      log_line("tessel serve", "Slurm node " + name + " is " + state + ": left out");
      continue;
    }
    SlurmNode node;
    node.name = name;
    node.address = fields["NodeAddr"].empty() ? name : fields["NodeAddr"];
    node.gpus = gpus->first;
    node.gpu_type = gpus->second;
    node.cpus = std::atof(fields["CPUTot"].c_str());
    node.mem_gb = std::atof(fields["RealMemory"].c_str()) / 1024;
    nodes.push_back(node);
  }
  if (nodes.empty())
    throw UserError("[serve] executor = \"slurm\": no usable node" + where + " offers GPUs as GRES" +
                    (without_gpus.empty() ? "" : " (none on " + without_gpus + ")") +
                    "; configure Gres=gpu:N in slurm.conf and gres.conf");
  return nodes;
}

SlurmExecutor::SlurmExecutor(asio::io_context& io, std::string partition, Report report)
    : io_(io), partition_(std::move(partition)), report_(std::move(report)), nodes_(slurm_nodes(partition_)),
      poll_timer_(io) {
  worker_ = std::thread([this] {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return quitting_ || !tasks_.empty(); });
        if (quitting_) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  });
}

SlurmExecutor::~SlurmExecutor() {
  *alive_ = false;
  {
    std::lock_guard lock(mutex_);
    quitting_ = true;  // what is queued is dropped; the command running ends first
  }
  wake_.notify_one();
  worker_.join();
}

void SlurmExecutor::log(const std::string& line) const { log_line("tessel serve", "slurm: " + line); }

fs::path SlurmExecutor::job_folder(std::uint32_t job) const { return folder_ / ("job-" + std::to_string(job)); }

void SlurmExecutor::off_loop(std::vector<std::string> argv, std::function<void(const CommandResult&)> done) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back([this, argv = std::move(argv), done = std::move(done), alive = alive_] {
      CommandResult result;
      try {
        result = run_command(argv, folder_, command_seconds_);
      } catch (const std::exception& e) {  // nothing escapes the worker thread
        result.status = -1;
        result.err = e.what();
      }
      asio::post(io_, [alive, done, result] {
        if (*alive) done(result);
      });
    });
  }
  wake_.notify_one();
}

void SlurmExecutor::start(const fs::path& folder, const std::string& tag, double poll_seconds,
                          double command_seconds) {
  folder_ = folder;
  tag_ = tag;
  poll_seconds_ = poll_seconds;
  command_seconds_ = command_seconds;
  fs::create_directories(folder_);
  log("running jobs through Slurm on " + std::to_string(nodes_.size()) + " nodes; logs, progress and scripts in " +
      folder_.string());
  poll();
}

void SlurmExecutor::stop() {
  stopped_ = true;
  poll_timer_.cancel();
  for (auto& [id, launch] : launches_)
    if (launch.kill_timer) launch.kill_timer->cancel();
}

void SlurmExecutor::send(const std::string& node, const json& report) {
  // Posted, never called from here: an order (the daemon in its dispatch
  // loop) is never answered inside the call that gave it.
  asio::post(io_, [this, alive = alive_, node, report] {
    if (*alive && !stopped_) report_(node, report);
  });
}

void SlurmExecutor::node_closed(const std::string& node) { registered_.erase(node); }

void SlurmExecutor::order(const std::string& node, const Message& m) {
  if (stopped_) return;
  // The daemon gives its orders from deep in its own work (a round, a
  // dispatch): a bad one is logged here, not thrown into that.
  try {
    carry_out(node, m);
  } catch (const std::exception& e) {
    log("the order '" + m.type() + "' for " + node + " was not carried out: " + e.what());
  }
}

void SlurmExecutor::carry_out(const std::string& node, const Message& m) {
  if (m.type() == "launch") {
    const LaunchOrder order = LaunchOrder::from(m);
    Launch& launch = launches_[order.launch];
    launch.id = order.launch;
    launch.job = order.job;
    launch.orders.push_back(order);
    launch.ranks.push_back({order.rank, node});
    // The daemon sends a launch's ranks together, in one turn: the job is
    // submitted with the last.
    if (std::ssize(launch.orders) == order.world_size) submit(launch);
  } else if (m.type() == "stop") {
    const auto it = launches_.find(static_cast<std::uint64_t>(m.integer("launch", 0)));
    if (it == launches_.end()) return;  // ended meanwhile
    Launch& launch = it->second;
    if (!launch.stop_asked) launch.grace = m.number("grace_seconds");
    launch.stop_asked = true;
    if (!launch.slurm_id.empty()) stop_launch(launch);  // else once sbatch answers
  } else if (m.type() == "read_log") {
    const auto job = static_cast<std::uint32_t>(m.integer("job", 0, 0xfffffffe));
    const int rank = static_cast<int>(m.integer("rank", 0, 1 << 20));
    send(node, message("log", log_tail(static_cast<std::uint64_t>(m.integer("request", 0)),
                                       rank_log_path(folder_, job, rank), m.integer("max_bytes", 0, kMaxLogBytes), node)));
  } else if (m.type() == "exit_recorded") {
    unrecorded_.erase({static_cast<std::uint64_t>(m.integer("launch", 0)), static_cast<int>(m.integer("rank", 0))});
  } else if (m.type() != "registered" && m.type() != "ack") {
    throw ProtocolError("the Slurm executor takes no '" + m.type() + "' order");
  }
}

void SlurmExecutor::submit(Launch& launch) {
  std::sort(launch.orders.begin(), launch.orders.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  std::sort(launch.ranks.begin(), launch.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  const LaunchOrder& first = launch.orders.front();
  const fs::path dir = job_folder(launch.job);
  fs::create_directories(dir);
  const std::string stem = "launch-" + std::to_string(launch.id);
  launch.progress = std::make_unique<ProgressReader>(progress_path(folder_, launch.job, launch.id));

  // One component per node, in rank order: its ranks are consecutive.
  struct Component {
    std::string node;
    int tasks = 0, gpus = 0, base = 0;
  };
  std::vector<Component> components;
  std::string comment = "j" + std::to_string(launch.job);
  for (std::size_t i = 0; i < launch.orders.size(); ++i) {
    const std::string& node = launch.ranks[i].node;
    if (components.empty() || components.back().node != node) {
      components.push_back({node, 0, static_cast<int>(launch.orders[i].gpus.size()), launch.orders[i].rank});
      comment += ";" + node + "=";
    } else {
      comment += ",";
    }
    comment += std::to_string(launch.orders[i].rank);
    ++components.back().tasks;
  }

  std::string script = "#!/bin/sh\n";
  script += "#SBATCH --job-name=tessel-" + tag_ + "-l" + std::to_string(launch.id) + "\n";
  script += "#SBATCH --comment=" + comment + "\n";
  script += "#SBATCH --output=\"" + (dir / (stem + ".slurm.out")).string() + "\"\n";
  for (std::size_t c = 0; c < components.size(); ++c) {
    if (c > 0) script += "#SBATCH hetjob\n";
    const Component& part = components[c];
    // One task's worth of CPU per node: the ranks are started by srun,
    // overcommitted (a rank needs no core of its own; Slurm refuses more
    // tasks than cores beside GPUs, even with --overcommit on the job).
    script += "#SBATCH --nodes=1 --nodelist=" + part.node + " --ntasks=1";
    if (part.gpus > 0) script += " --gres=gpu:" + std::to_string(part.gpus);
    if (!partition_.empty()) script += " --partition=" + partition_;
    script += "\n";
  }
  // The job's env, then tessel's, as an agent gives them; the variables of
  // each rank are set by the rank's wrapper, and CUDA_VISIBLE_DEVICES by Slurm.
  std::map<std::string, std::string> env = first.env;
  for (const auto& [name, value] : rank_environment(first, "")) env[name] = value;
  for (const char* own : {"RANK", "LOCAL_RANK", "TESSEL_PROGRESS", "CUDA_VISIBLE_DEVICES"}) env.erase(own);
  for (const auto& [name, value] : env) script += "export " + name + "=" + shell_quoted(value) + "\n";
  if (!first.resume) script += "unset TESSEL_RESUME\n";

  const std::string d = shell_quoted(dir.string());
  const std::string exit_file = d + "/" + stem + ".rank-$r.exit";
  const std::string wrapper =
      "r=$((TESSEL_RANK_BASE + SLURM_LOCALID)); export RANK=$r LOCAL_RANK=$SLURM_LOCALID\n"
      "if [ \"$r\" = 0 ]; then export TESSEL_PROGRESS=" +
      shell_quoted(progress_path(folder_, launch.job, launch.id).string()) +
      "; else export TESSEL_PROGRESS=/dev/null; fi\n"
      "log=" + d + "/rank-$r.log\n"
      "echo \"tessel: $(date +%s.%N) launch " + std::to_string(launch.id) + " rank $r of " +
      std::to_string(first.world_size) + " on $SLURMD_NODENAME, Slurm job $SLURM_JOB_ID, GPUs [$CUDA_VISIBLE_DEVICES]" +
      (first.resume ? ", resumed" : "") + "\" >> \"$log\"\n"
      // TERM (a stop) is passed on and waited for, so that the exit status is
      // the job's and is written down.
      "child=; trap 'kill -TERM $child 2>/dev/null' TERM\n"
      // As an agent, it refuses a working directory that is not there
      // (Slurm would run the job in /tmp instead).
      "if cd " + shell_quoted(first.workdir) + " 2>/dev/null; then\n"
      "\"$@\" >> \"$log\" 2>&1 < /dev/null &\n"
      "child=$!\n"
      "while :; do wait $child; status=$?; kill -0 $child 2>/dev/null || break; done\n"
      "else printf 'tessel: cannot enter working directory %s on %s\\n' " + shell_quoted(first.workdir) +
      " \"$SLURMD_NODENAME\" >> \"$log\"; status=127; fi\n"
      "echo \"tessel: $(date +%s.%N) exited with status $status\" >> \"$log\"\n"
      "echo $status > " + exit_file + ".tmp && mv " + exit_file + ".tmp " + exit_file + "\n"
      "exit $status\n";
  std::string command;
  for (const std::string& word : first.command) command += " " + shell_quoted(word);
  for (std::size_t c = 0; c < components.size(); ++c)
    script += "TESSEL_RANK_BASE=" + std::to_string(components[c].base) + " srun" +
              (components.size() > 1 ? " --het-group=" + std::to_string(c) : "") +
              " --nodes=1 --ntasks=" + std::to_string(components[c].tasks) +
              " --overcommit --kill-on-bad-exit=0 /bin/sh -c " + shell_quoted(wrapper) + " tessel-rank" + command +
              " &\nstep" + std::to_string(c) + "=$!\n";
  // The job ends with srun's status: an srun that could not start its
  // ranks (they wrote none) fails the job with it, where a plain `wait`
  // (always 0) let it pass for a job killed without a word.
  script += "status=0\nfor step in";
  for (std::size_t c = 0; c < components.size(); ++c) script += " $step" + std::to_string(c);
  script += "; do wait $step || status=$?; done\nexit $status\n";

  const fs::path path = dir / (stem + ".sbatch");
  {
    std::ofstream out(path);
    out << script;
    if (!out.flush()) {
      exit_all(launch, 127, 0, "cannot write its batch script " + path.string());
      return;
    }
  }
  off_loop({"sbatch", "--parsable", path.string()}, [this, id = launch.id, path](const CommandResult& result) {
    const std::optional<std::string> slurm_id = parsable_job_id(result.out);
    if (result.status != 0 || !slurm_id)
      return on_submitted(id, "", "sbatch refused " + path.string() + ": " +
                                      first_line(result.err.empty() ? result.out : result.err));
    on_submitted(id, *slurm_id, "");
  });
}

void SlurmExecutor::on_submitted(std::uint64_t id, const std::string& slurm_id, const std::string& error) {
  const auto it = launches_.find(id);
  if (it == launches_.end()) return;
  Launch& launch = it->second;
  if (!error.empty()) {
    log("launch " + std::to_string(id) + ": " + error);
    exit_all(launch, 127, 0, error);
    return;
  }
  launch.slurm_id = slurm_id;
  log("launch " + std::to_string(id) + " of job " + std::to_string(launch.job) + " is Slurm job " + slurm_id);
  if (launch.stop_asked) stop_launch(launch);
}

void SlurmExecutor::stop_launch(Launch& launch) {
  if (launch.term_sent) return;
  launch.term_sent = true;
  // The polled state may lag Slurm's, so both cases are asked for, in order
  // on the one worker: a job still pending is cancelled outright
  // (`--state=PENDING` touches nothing that runs), and the steps of a running
  // one hear TERM and have the grace period to checkpoint; then everything
  // is killed. A plain scancel of a running job would end its batch script
  // too, and Slurm then kills every step at once, before any checkpoint.
  off_loop({"scancel", "--state=PENDING", launch.slurm_id}, [](const CommandResult&) {});
  off_loop({"scancel", "--signal=TERM", launch.slurm_id}, [](const CommandResult&) {});
  launch.kill_timer = std::make_unique<asio::steady_timer>(io_);
  launch.kill_timer->expires_after(seconds(launch.grace));
  launch.kill_timer->async_wait([this, id = launch.id](boost::system::error_code error) {
    const auto it = launches_.find(id);
    if (error || stopped_ || it == launches_.end()) return;
    log("launch " + std::to_string(id) + ": grace period over: killing Slurm job " + it->second.slurm_id);
    off_loop({"scancel", "--full", "--signal=KILL", it->second.slurm_id}, [](const CommandResult&) {});
  });
}

void SlurmExecutor::poll() {
  if (stopped_) return;
  off_loop({"scontrol", "show", "job", "-o"}, [this](const CommandResult& result) { on_polled(result); });
}

void SlurmExecutor::on_polled(const CommandResult& result) {
  if (stopped_) return;
  poll_timer_.expires_after(seconds(poll_seconds_));
  poll_timer_.async_wait([this](boost::system::error_code error) {
    if (!error) poll();
  });
  if (result.status != 0) {
    // No heartbeats meanwhile: past [serve] node_timeout_seconds the daemon
    // counts the nodes down, as it would silent agents.
    if (!poll_failing_) log("scontrol show job failed: " + first_line(result.err) + "; retrying");
    poll_failing_ = true;
    return;
  }
  if (poll_failing_) log("Slurm answers again");
  poll_failing_ = false;

  // This run's jobs, by launch; of a heterogeneous job, its first component.
  std::map<std::uint64_t, std::map<std::string, std::string>> ours;
  for (const std::string& line : split(result.out, '\n')) {
    auto fields = scontrol_fields(line);
    const auto launch = launch_of(fields["JobName"], tag_);
    if (!launch || (fields.contains("HetJobOffset") && fields["HetJobOffset"] != "0")) continue;
    ours[*launch] = std::move(fields);
  }
  if (!adopted_) {
    // After a restart: the launches Slurm still has are in the daemon's
    // journal; their ranks' nodes are in the job's comment.
    adopted_ = true;
    for (auto& [id, fields] : ours) {
      if (launches_.contains(id)) continue;
      // A comment submit() did not write (the job only bears this run's
      // name) is not adopted: read with std::stoul it threw out of the
      // event loop and ended the daemon. Unadopted, it is a stray below.
      const std::vector<std::string> parts = split(fields["Comment"], ';');
      const auto job = parts.empty() || parts[0].empty() || parts[0][0] != 'j' ? std::nullopt
                                                                                : number_of(parts[0].substr(1));
      Launch launch;
      launch.id = id;
      launch.job = static_cast<std::uint32_t>(job.value_or(0));
      bool readable = job.value_or(0xffffffffu) < 0xffffffffu;
      for (std::size_t i = 1; readable && i < parts.size(); ++i) {
        const auto eq = parts[i].find('=');
        readable = eq != std::string::npos;
        for (const std::string& rank : readable ? split(parts[i].substr(eq + 1), ',') : std::vector<std::string>{}) {
          const auto number = number_of(rank);
          readable = readable && number && *number <= (1u << 20);
          if (readable) launch.ranks.push_back({static_cast<int>(*number), parts[i].substr(0, eq)});
        }
      }
      if (!readable || launch.ranks.empty()) {
        log("Slurm job " + fields["JobId"] + " bears launch " + std::to_string(id) +
            "'s name but not a comment tessel wrote ('" + fields["Comment"].substr(0, 64) + "'): not adopted");
        continue;
      }
      launch.slurm_id = fields["JobId"];
      launch.started = true;
      launch.progress = std::make_unique<ProgressReader>(progress_path(folder_, launch.job, id));
      log("found launch " + std::to_string(id) + " of job " + std::to_string(launch.job) + " as Slurm job " +
          launch.slurm_id + " (" + fields["JobState"] + ")");
      launches_.emplace(id, std::move(launch));
    }
  }

  // A job of this run that no launch accounts for: its sbatch was killed
  // after submitting it (the launch failed meanwhile), or it came back after
  // its end was reported. Nothing may run that the daemon does not count.
  for (auto& [id, fields] : ours)
    if (!launches_.contains(id) && !slurm_job_ended(fields["JobState"]) && strays_.insert(fields["JobId"]).second) {
      log("Slurm job " + fields["JobId"] + " (launch " + std::to_string(id) +
          ") belongs to no launch of this run: cancelling it");
      off_loop({"scancel", fields["JobId"]}, [](const CommandResult&) {});
    }

  std::vector<std::uint64_t> ids;
  for (auto& [id, launch] : launches_) ids.push_back(id);
  std::map<std::string, json> progress;  // by node
  for (std::uint64_t id : ids) {
    Launch& launch = launches_.at(id);
    if (launch.slurm_id.empty()) continue;  // sbatch has not answered
    const auto found = ours.find(id);
    if (found == ours.end() || found->second["JobId"] != launch.slurm_id) {
      // Forgotten already (MinJobAge), or not listed yet just after sbatch.
      if (++launch.unseen_polls >= 3) ended(launch, {{"JobState", "UNKNOWN"}});
      continue;
    }
    launch.unseen_polls = 0;
    launch.state = found->second["JobState"];
    if (launch.stop_asked && !launch.term_sent) stop_launch(launch);
    if (launch.progress)
      if (const auto p = launch.progress->read(); p && p->iteration != launch.reported_iteration) {
        launch.reported_iteration = p->iteration;
        progress[launch.ranks.front().node].push_back(
            {{"launch", id}, {"rank", 0}, {"iteration", p->iteration}, {"total", p->total}});
      }
    if (slurm_job_ended(launch.state)) {
      ended(launch, found->second);
      continue;
    }
    if (!launch.started && launch.state != "PENDING" && launch.state != "CONFIGURING") report_started(launch);
  }

  for (const SlurmNode& node : nodes_) {
    if (registered_.contains(node.name)) {
      send(node.name, message("heartbeat", {{"progress", progress[node.name].is_null() ? json::array() : progress[node.name]}}));
      continue;
    }
    // As an agent registers: what still runs there, and the exits not yet recorded.
    json running = json::array(), exits = json::array(), gpus = json::array();
    for (const auto& [id, launch] : launches_)
      for (const Rank& rank : launch.ranks)
        if (rank.node == node.name) running.push_back({{"launch", id}, {"rank", rank.rank}});
    for (const auto& [key, kept] : unrecorded_)
      if (kept.first == node.name) exits.push_back(kept.second);
    for (int i = 0; i < node.gpus; ++i) gpus.push_back({{"index", i}, {"gpu_type", node.gpu_type}});
    registered_.insert(node.name);
    send(node.name, message("register", {{"name", node.name},
                                         {"address", node.address},
                                         {"gpus", gpus},
                                         {"cpus", node.cpus},
                                         {"mem_gb", node.mem_gb},
                                         {"running", running},
                                         {"exits", exits},
                                         {"log_dir", folder_.string()}}));
  }
}

void SlurmExecutor::ended(Launch& launch, const std::map<std::string, std::string>& fields) {
  const std::string state = fields.at("JobState");
  const bool outside = state == "CANCELLED" && !launch.stop_asked;
  if (outside)
    log("Slurm job " + launch.slurm_id + " (launch " + std::to_string(launch.id) + " of job " + std::to_string(launch.job) +
        ") was cancelled outside tessel: a failed attempt");
  else if (state != "COMPLETED" && !launch.stop_asked)
    log("Slurm job " + launch.slurm_id + " (launch " + std::to_string(launch.id) + ") ended " + state);
  // The job's own status, when a rank left none ("0:15": killed by SIGTERM).
  int job_code = 0, job_signal = 0;
  if (const auto it = fields.find("ExitCode"); it != fields.end()) {
    const auto parts = split(it->second, ':');
    if (parts.size() == 2) job_code = std::atoi(parts[0].c_str()), job_signal = std::atoi(parts[1].c_str());
  }
  if (launch.progress) launch.progress->read();
  std::vector<std::optional<int>> statuses;  // as each rank wrote it
  for (const Rank& rank : launch.ranks) {
    std::ifstream in(job_folder(launch.job) / ("launch-" + std::to_string(launch.id) + ".rank-" +
                                                std::to_string(rank.rank) + ".exit"));
    int status = 0;
    statuses.push_back(in >> status && status >= 0 && status <= 255 ? std::optional(status) : std::nullopt);
  }
  // A job too short for any poll to see it running still started.
  if (!launch.started && std::any_of(statuses.begin(), statuses.end(), [](auto s) { return s.has_value(); }))
    report_started(launch);
  for (std::size_t i = 0; i < launch.ranks.size(); ++i) {
    const Rank& rank = launch.ranks[i];
    int code = -1, signal = 0;
    std::string error;
    if (statuses[i]) {
      code = *statuses[i];
    } else if (job_signal > 0) {
      signal = job_signal;
    } else if (job_code != 0) {
      // Its srun failed before it ran (srun's status): Slurm's own words
      // are the last line of the job's output.
      code = job_code;
      error = last_line(file_text(job_folder(launch.job) / ("launch-" + std::to_string(launch.id) + ".slurm.out")));
    } else {
      // Killed before it could write its status: never a clean end.
      signal = state == "CANCELLED" ? SIGTERM : SIGKILL;
    }
    // Cancelled by someone else: not finished, whatever the process said.
    if (outside && code == 0) code = -1, signal = SIGTERM;
    json report = message("exited", {{"launch", launch.id},
                                     {"rank", rank.rank},
                                     {"code", code},
                                     {"signal", signal},
                                     {"stopped", launch.stop_asked || lost_by_slurm(state)}});
    if (!error.empty()) report["error"] = "no exit status; the Slurm job's output ends: " + error.substr(0, 1024);
    if (rank.rank == 0 && launch.progress && launch.progress->last()) {
      report["iteration"] = launch.progress->last()->iteration;
      report["total"] = launch.progress->last()->total;
    }
    keep_exit(launch, rank, std::move(report));
  }
  launches_.erase(launch.id);
}

void SlurmExecutor::report_started(Launch& launch) {
  launch.started = true;
  // A rank's pid, to the journal, is its Slurm job's id.
  for (const Rank& rank : launch.ranks)
    if (registered_.contains(rank.node))
      send(rank.node, message("started", {{"launch", launch.id}, {"rank", rank.rank}, {"pid", std::stoll(launch.slurm_id)}}));
}

void SlurmExecutor::exit_all(Launch& launch, int code, int signal, const std::string& error) {
  for (const Rank& rank : launch.ranks)
    keep_exit(launch, rank,
              message("exited", {{"launch", launch.id}, {"rank", rank.rank}, {"code", code}, {"signal", signal},
                                 {"error", error}}));
  launches_.erase(launch.id);
}

void SlurmExecutor::keep_exit(const Launch& launch, const Rank& rank, json report) {
  unrecorded_[{launch.id, rank.rank}] = {rank.node, report};
  if (registered_.contains(rank.node)) send(rank.node, report);
}

}  // namespace tessel::cluster
