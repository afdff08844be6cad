// The messages of the scheduler protocol. Each frame (frame.hpp) carries one
// JSON object with a string "type"; the other fields depend on the type.
//
// Handshake (auth.hpp), the same for agents and clients:
//   daemon -> peer    challenge {nonce, protocol}
//   peer -> daemon    hello {role: "agent"|"client", nonce, proof}
//   daemon -> peer    welcome {proof}              or refused {reason}, then close
//
// Agent <-> daemon:
//   agent -> daemon   register {name, address, gpus: [{index, gpu_type}], cpus, mem_gb,
//                              running: [{launch, rank, pid}], exits: [exit...], [log_dir]}
//   daemon -> agent   registered {heartbeat_seconds, node_timeout_seconds}
//                     or refused {reason} when another live agent has the name;
//                     registered comes before any stop for what the agent still runs
//   agent -> daemon   heartbeat {progress: [{launch, iteration, total}]}
//   daemon -> agent   ack {}                        (renews the agent's lease)
//   daemon -> agent   launch {launch, job, rank, local_rank, world_size, gpus: [index...],
//                             command: [...], env: {...}, workdir, master_addr,
//                             master_port, resume}
//   agent -> daemon   started {launch, rank, pid}
//   daemon -> agent   stop {launch, grace_seconds}
//   agent -> daemon   exited {launch, rank, code, signal, stopped, seconds_ago, [iteration, total]}
//                            (code -1 when killed by a signal; stopped: the agent had
//                            sent SIGTERM; seconds_ago: how long before this message
//                            the process exited, so that an exit reported late keeps
//                            its time; iteration: the last progress line)
//                            [error]: why the process could not start (a missing workdir)
//   daemon -> agent   exit_recorded {launch, rank}   (the agent forgets the exit)
//   daemon -> agent   read_log {request, job, rank, max_bytes}
//   agent -> daemon   log {request, path, size, from, text}   (the log's last max_bytes from
//                            byte `from` of `size`) or log {request, path, error}
//
// Client <-> daemon (one request, one reply, in order; a connection may carry
// many; a submission is answered once it is in the journal):
//   submit {job: {...}}         -> submitted {job}
//   submit_batch {jobs: [{...}...]} -> submitted {jobs: [id...]}   (all or none)
//   jobs {}                     -> jobs {jobs: [...], total, epoch, database_error (while it cannot write)}
//   cancel {job}                -> cancelled {job}
//   logs {job, rank, [launch], max_bytes} -> log {job, launch, rank, node, path, size, from, text}
//                                  (the agent that ran the rank answers; `launch` 0 or
//                                  absent: the job's latest)
//   status {}                   -> status {run, nodes: [...], jobs: {running, waiting, done},
//                                          recovering, database: {writable, error, unwritten},
//                                          submissions: {jobs, commits} (by this daemon),
//                                          rounds: {count, p50_ms, p99_ms, max_ms, recent_ms}}
//   any request                 -> error {message} when it cannot be served
//
// A message that is not a JSON object, lacks a field or has one of the wrong
// type throws ProtocolError; the receiver closes that connection. A
// well-formed request that cannot be served ("no job 99") throws
// RequestError instead: the client gets an 'error' reply and may go on.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessel::cluster {

using nlohmann::json;

// The most of a log one `log` message carries: escaped as JSON (at most six
// bytes a byte) it fits a frame (kMaxFrameBytes).
inline constexpr std::int64_t kMaxLogBytes = 2 * 1024 * 1024;
// The most jobs one submit_batch may carry. They are journalled in one
// transaction on the daemon's only thread, which answers no agent meanwhile:
// 50,000 take 1.5-7 s at the 7,500-34,000 jobs/s bench/cluster_loopback
// measured, inside the default node timeout, so no lease runs out over a batch.
inline constexpr std::size_t kMaxBatchJobs = 50'000;

class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RequestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A received message with checked access to its fields.
class Message {
 public:
  // Parses one frame's payload. Throws ProtocolError.
  static Message parse(std::string_view payload);
  explicit Message(json body);

  const std::string& type() const { return type_; }
  const json& body() const { return body_; }

  bool has(std::string_view field) const;
  std::string text(std::string_view field) const;
  std::int64_t integer(std::string_view field, std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                       std::int64_t max = std::numeric_limits<std::int64_t>::max()) const;
  double number(std::string_view field) const;
  bool flag(std::string_view field) const;
  const json& array(std::string_view field) const;
  const json& object(std::string_view field) const;
  // An element of an array field, or a nested object, read the same way.
  static Message of(const json& element, std::string_view context);

 private:
  const json& field(std::string_view name) const;
  [[noreturn]] void wrong(std::string_view name, std::string_view expected) const;

  json body_;
  std::string type_;
};

// A message ready to send: {"type": type} plus `fields`.
json message(std::string_view type, json fields = json::object());

}  // namespace tessel::cluster
