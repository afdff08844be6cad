// `tessel agent`: one per node. It registers the node's GPUs with the
// scheduler daemon, launches and stops job processes as told (JobProcess),
// forwards their progress with its heartbeats and reports every exit until
// the daemon has recorded it.
//
// It reconnects with exponential backoff when the daemon goes away, and
// re-registers with what still runs and what exited meanwhile, so the
// daemon can reconcile. Its jobs hold a lease: when the daemon has been
// silent for [serve] node_timeout_seconds, the agent stops them itself,
// because by then the daemon treats the node as down and may start them
// elsewhere; and it drops that connection for a new one, which a network
// partition may have left open here but dead.
#pragma once

#include <utility>  // before Asio (asio issue #944)

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "auth.hpp"
#include "connection.hpp"
#include "job_process.hpp"
#include "tls.hpp"

namespace tessel::cluster {

// What the node offers.
struct NodeInventory {
  std::vector<int> gpus;  // indices
  std::string gpu_type;
  double cpus = 0;
  double mem_gb = 0;

  // From `nvidia-smi` when present, or `fake_gpus` GPUs of `fake_type` when
  // fake_gpus >= 0. Throws UserError when neither gives GPUs.
  static NodeInventory detect(int fake_gpus, const std::string& fake_type);
};

// "Tesla V100-SXM2-16GB" -> "v100", "NVIDIA GeForce RTX 3090" -> "rtx3090".
std::string gpu_type_from_name(const std::string& name);

struct AgentOptions {
  std::string scheduler;  // HOST:PORT
  std::string name;       // the node's name; unique in the cluster
  std::filesystem::path log_dir;
  std::string address;    // MASTER_ADDR for ranks here; empty: this end of the scheduler connection
  TlsSettings tls;        // the default: TLS with the secret's key
};

class NodeAgent {
 public:
  // Throws UserError for bad TLS settings or files.
  NodeAgent(asio::io_context& io, AgentOptions options, Secret secret, NodeInventory inventory);

  void start();
  // Stops every job process and ends the agent once they have exited.
  void shut_down();
  // 0, or 2 when the daemon refused our secret or our TLS handshake (a
  // user error: retrying cannot help).
  int exit_code() const { return exit_code_; }

 private:
  using Key = std::pair<std::uint64_t, int>;  // launch, rank
  struct UnrecordedExit {
    json report;
    std::chrono::steady_clock::time_point at;  // when the process exited
  };

  void connect();
  void reconnect_later();
  void on_message(const Message& message);
  void on_registered(const Message& message);
  void on_launch(const Message& message);
  void on_stop(const Message& message);
  // Answers the daemon's read_log with the end of a rank's log here.
  void on_read_log(const Message& message);
  void send_register();
  void tick();
  void watch_children();
  void reap();
  void fence();
  void send(const json& message);
  // Keeps an exit until the daemon records it, and sends it if registered.
  void report_exit(const Key& key, json exit);
  json exit_report(const UnrecordedExit& exit) const;  // as sent now
  void finish_if_idle();

  asio::io_context& io_;
  AgentOptions options_;
  Secret secret_;
  std::shared_ptr<TlsContext> tls_;  // null when insecure
  NodeInventory inventory_;
  std::shared_ptr<Connection> connection_;
  std::optional<ClientHandshake> handshake_;
  enum class Phase { connecting, challenged, welcomed, registered } phase_ = Phase::connecting;

  std::map<Key, std::unique_ptr<JobProcess>> processes_;
  // Sent until the daemon records them, each with how long ago it happened.
  std::map<Key, UnrecordedExit> unrecorded_exits_;
  std::map<Key, std::int64_t> reported_iteration_;

  asio::steady_timer tick_timer_;
  asio::steady_timer reconnect_timer_;
  asio::signal_set children_;
  int failed_connects_ = 0;
  double heartbeat_seconds_ = 1;
  double node_timeout_seconds_ = 0;  // 0 until the first registration
  std::chrono::steady_clock::time_point last_heard_;
  bool fenced_ = false;
  bool shutting_down_ = false;
  int exit_code_ = 0;
};

}  // namespace tessel::cluster
