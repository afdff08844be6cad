// The real-cluster subcommands: the daemon, the agent and the user's side.
// Each is a few calls into runners/cluster; main.cpp parses the command line.
//
// They live in a library of their own, libtessel_nodes.so (cluster_commands.cpp
// with runners/cluster and OpenSSL), which `tessel` opens only when one of them
// runs (nodes_library.cpp): every other command starts without loading and
// relocating libssl and libcrypto (issue 17). The functions below are the
// executable's side: each opens the library, checks its table and calls it.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::cli {

struct ServeOptions {
  std::string config;
  std::string listen;       // empty: [serve] listen
  std::string secret_file;  // empty: [serve] secret_file
  std::string database;     // empty: [output] database
  bool new_run = false;
  std::vector<std::string> overrides;
};

// --tls-cert/--tls-key/--tls-ca/--insecure, one set for the agent and
// every client command.
struct TlsFlags {
  std::string cert, key, ca;
  bool insecure = false;
};

struct AgentCommandOptions {
  std::string scheduler;
  std::string secret_file;
  std::string name;  // empty: the host name
  int fake_gpus = -1;
  std::string gpu_type = "fake";
  std::string log_dir = "tessel-logs";
  std::string address;
  TlsFlags tls;
};

struct ClientOptions {
  std::string scheduler;
  std::string secret_file;
  TlsFlags tls;
};

struct SubmitOptions {
  std::string job_file;  // empty: flags only
  std::vector<std::string> overrides;  // key=value, from --set and the flags
  std::vector<std::string> command;    // after --
  std::string batch_file;              // --file: many jobs, and nothing else
};

struct LogsOptions {
  std::uint32_t job = 0;
  int rank = 0;
  std::uint64_t launch = 0;            // 0: the job's latest
  std::int64_t bytes = 1024 * 1024;  // at most this much of the log's end
};

// What the error messages of `tessel` start with: "tessel: ", and while
// serve or agent runs, their log lines' stamp and name instead.
std::string message_prefix();

// `stop` is set by Ctrl-C (and SIGTERM): the daemon stops, its run marked 'interrupted'.
int serve(const ServeOptions& options, const std::atomic<bool>& stop);
int agent(const AgentCommandOptions& options);
int submit(const ClientOptions& client, const SubmitOptions& options);
int jobs(const ClientOptions& client, const std::string& format);
int cancel(const ClientOptions& client, std::uint32_t job);
int status(const ClientOptions& client);
int logs(const ClientOptions& client, const LogsOptions& options);
int progress(std::int64_t iteration, std::int64_t total);

// What libtessel_nodes.so hands the executable: its commands, behind a
// version and the layout of what crosses over, checked before any is
// called, so that a library of another build is an error, not a crash.
// Bump kNodesInterface when a function here or an options struct changes.
inline constexpr std::uint32_t kNodesInterface = 2;

struct NodesCommands {
  std::uint32_t interface;  // kNodesInterface
  std::uint32_t size;       // sizeof(NodesCommands)
  std::uint64_t layout;     // nodes_layout()
  std::string (*message_prefix)();
  int (*serve)(const ServeOptions&, const std::atomic<bool>&);
  int (*agent)(const AgentCommandOptions&);
  int (*submit)(const ClientOptions&, const SubmitOptions&);
  int (*jobs)(const ClientOptions&, const std::string&);
  int (*cancel)(const ClientOptions&, std::uint32_t);
  int (*status)(const ClientOptions&);
  int (*logs)(const ClientOptions&, const LogsOptions&);
  int (*progress)(std::int64_t, std::int64_t);
};

// The sizes of the options structs and of the standard types in them, so
// that a field added without a bump, or another standard library, is caught.
constexpr std::uint64_t nodes_layout() {
  std::uint64_t layout = 0;
  for (const std::uint64_t size : {sizeof(ServeOptions), sizeof(TlsFlags), sizeof(AgentCommandOptions),
                                   sizeof(ClientOptions), sizeof(SubmitOptions), sizeof(LogsOptions),
                                   sizeof(std::string), sizeof(std::vector<std::string>)})
    layout = layout * 1000003 + size;
  return layout;
}

// The library's one exported symbol, looked up by this name.
inline constexpr const char* kNodesEntryPoint = "tessel_nodes_commands";

}  // namespace tessel::cli

extern "C" const tessel::cli::NodesCommands* tessel_nodes_commands();
