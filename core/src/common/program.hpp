// Running another program to its end: gnuplot for `plot`, sbatch and squeue
// for sweeps on Slurm.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tessel {

struct ProgramExit {
  int spawn_error = 0;  // errno when it could not start (ENOENT: not on PATH)
  int code = -1;        // its exit code; -1 when a signal ended it
};

// Runs `argv` (argv[0] looked up on $PATH) with its input from /dev/null and
// its output and errors written to the files `out` and `err`, and waits for it.
ProgramExit run_program(const std::vector<std::string>& argv, const std::filesystem::path& out,
                        const std::filesystem::path& err);

// A whole file's text; empty if it cannot be read.
std::string file_text(const std::filesystem::path& path);

}  // namespace tessel
