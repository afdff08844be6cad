// What a user submits: the command, its resources and how it ends. Read from
// a job file (TOML, with `--set`-style overrides from the command line) by
// `tessel submit`, sent as JSON, and checked again by the daemon.
//
//   name = "resnet"                  # optional
//   command = ["python", "train.py"] # or a string, run by /bin/sh -c
//   workdir = "runs/resnet"          # relative to the job file; default: where submit runs
//   env = { NCCL_DEBUG = "INFO" }    # added to the agent's environment
//   gpus = 4                         # or min_gpus/max_gpus for an elastic job (gpus: its request)
//   iterations = 1000                # its length; leave out to end by exit alone
//   processes = "per_gpu"            # or "per_node": one process per node with all its GPUs
//   tenant = "alice"                 # default: $USER
//   vc = "default"
//   priority = 1
//   grace_seconds = 30               # SIGTERM to SIGKILL; default: the daemon's
//
// A job ends when all its processes have exited: finished if every one
// exited 0, a failed attempt otherwise (retried up to [serve] max_retries).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "protocol.hpp"
#include "tessel/job.hpp"

namespace tessel::cluster {

struct JobRequest {
  std::string name;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string workdir;  // absolute
  int gpus = 1;
  int min_gpus = 0;  // 0: rigid (gpus)
  int max_gpus = 0;
  std::optional<std::int64_t> iterations;
  bool per_node = false;  // processes = "per_node"
  std::string tenant;
  std::string vc = "default";
  double priority = 1;
  std::optional<double> grace_seconds;

  // The first problem, or empty. Applied to files and to the wire alike.
  std::string problem() const;
  json to_json() const;
  // Throws ProtocolError for a malformed or invalid request.
  static JobRequest from_json(const json& body);

  // The core's view: one work unit is one iteration (see README, "Progress").
  JobSpec spec(double arrival) const;
};

// Reads a job file; `overrides` are "key=value" like --set. With no file, the
// request is built from the overrides alone, relative to `working_directory`.
// Throws ConfigError (file:line:col) or UserError.
JobRequest read_job_request(const std::optional<std::filesystem::path>& file,
                            const std::vector<std::string>& overrides,
                            const std::filesystem::path& working_directory);

// Reads a file of many jobs, each with the keys of a job file: TOML, as
// [[job]] tables (.toml), or JSON lines, one job object per line (.jsonl or
// .json). Relative workdirs are relative to the file. Every problem of every
// job is reported at once, by file:line (and column for TOML) and key.
// Throws ConfigError, or UserError for an unreadable file or another extension.
std::vector<JobRequest> read_job_batch(const std::filesystem::path& file,
                                       const std::filesystem::path& working_directory);

// Variables tessel sets for every job process; a job's `env` may not set them.
bool is_reserved_variable(const std::string& name);

}  // namespace tessel::cluster
