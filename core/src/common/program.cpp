#include "common/program.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/errors.hpp"

extern char** environ;

namespace tessel {

ProgramExit run_program(const std::vector<std::string>& argv, const std::filesystem::path& out,
                        const std::filesystem::path& err, double timeout_seconds) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> words = argv;
  std::vector<char*> pointers;
  for (std::string& word : words) pointers.push_back(word.data());
  pointers.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, pointers[0], &actions, nullptr, pointers.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return {rc, -1};
  int status = 0;
  if (timeout_seconds > 0) {
    // Polled, not waited on: a Slurm command blocks on an unreachable
    // controller for as long as its own retries last.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
    for (;;) {
      const pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid || (done < 0 && errno != EINTR)) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        return {0, -1, true};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } else {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  return {0, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

CommandResult run_command(const std::vector<std::string>& argv, const std::filesystem::path& folder,
                          double timeout_seconds) {
  static std::atomic<unsigned> count{0};
  const std::string stem = ".command." + std::to_string(getpid()) + "." + std::to_string(count++);
  const std::filesystem::path out = folder / (stem + ".out"), err = folder / (stem + ".err");
  const ProgramExit exit = run_program(argv, out, err, timeout_seconds);
  if (exit.spawn_error != 0) throw UserError("cannot run " + argv.front() + ": " + std::strerror(exit.spawn_error));
  CommandResult result{exit.code, file_text(out), file_text(err)};
  if (exit.timed_out) {
    std::ostringstream limit;
    limit << timeout_seconds;
    result.err = argv.front() + " did not answer within " + limit.str() + " s: killed" +
                 (result.err.empty() ? "" : "; " + result.err);
  }
  std::error_code ignored;
  std::filesystem::remove(out, ignored);
  std::filesystem::remove(err, ignored);
  return result;
}

std::string sbatch(const std::filesystem::path& script, const std::filesystem::path& folder) {
  const CommandResult result = run_command({"sbatch", "--parsable", script.string()}, folder);
  if (result.status != 0)
    throw UserError("sbatch refused " + script.string() + ": " + trimmed(result.err.empty() ? result.out : result.err));
  const std::optional<std::string> id = parsable_job_id(result.out);
  if (!id) throw UserError("sbatch answered '" + trimmed(result.out) + "' for " + script.string() + ", not a job id");
  return *id;
}

std::optional<std::string> parsable_job_id(const std::string& out) {
  // --parsable prints "id" or "id;cluster".
  std::string id = trimmed(out);
  id = id.substr(0, id.find(';'));
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return id;
}

std::string shell_quoted(const std::string& word) {
  std::string text = "'";
  for (const char c : word) text += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return text + "'";
}

std::string trimmed(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

}  // namespace tessel
