// Running another program to its end: gnuplot for `plot`; sbatch, squeue,
// scontrol and scancel for sweeps on Slurm and for `tessel serve`'s Slurm executor.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

struct ProgramExit {
  int spawn_error = 0;     // errno when it could not start (ENOENT: not on PATH)
  int code = -1;           // its exit code; -1 when a signal ended it
  bool timed_out = false;  // killed (SIGKILL) for running past the time limit
};

// Runs `argv` (argv[0] looked up on $PATH) with its input from /dev/null and
// its output and errors written to the files `out` and `err`, and waits for
// it: to its end, or, when `timeout_seconds` > 0, at most that long before
// killing it.
ProgramExit run_program(const std::vector<std::string>& argv, const std::filesystem::path& out,
                        const std::filesystem::path& err, double timeout_seconds = 0);

// A whole file's text; empty if it cannot be read.
std::string file_text(const std::filesystem::path& path);

struct CommandResult {
  int status = 0;  // exit code; -1 when killed by a signal
  std::string out, err;
};

// run_program with its output read back: the files are made in `folder`,
// named by pid and a per-process count (so that threads and processes
// sharing the folder do not collide), and removed. Throws UserError when the
// program cannot start. Past `timeout_seconds` (> 0) the program is killed:
// status -1, and `err` says so.
CommandResult run_command(const std::vector<std::string>& argv, const std::filesystem::path& folder,
                          double timeout_seconds = 0);

// Submits a batch script with `sbatch --parsable`; returns its job id.
// Throws UserError with sbatch's own words when it refuses.
std::string sbatch(const std::filesystem::path& script, const std::filesystem::path& folder);

// The job id in what `sbatch --parsable` printed ("12" or "12;cluster");
// nothing when it printed something else.
std::optional<std::string> parsable_job_id(const std::string& out);

// A word the shell reads back as it is.
std::string shell_quoted(const std::string& word);

// The text without its trailing white space.
std::string trimmed(std::string text);

}  // namespace tessel
