// Frames: how messages travel between the scheduler daemon, its agents and
// its clients. A frame is a 7-byte header and a payload:
//
//   bytes 0-1  magic "ts"         (anything else is not a tessel peer)
//   byte  2    protocol version   (kProtocolVersion)
//   bytes 3-6  payload length, unsigned big-endian, at most the decoder's maximum
//   ...        payload: one JSON object (protocol.hpp)
//
// FrameDecoder is pure and incremental: bytes go in as they arrive, in any
// split, and whole payloads come out. It knows nothing of sockets, so tests
// and the fuzzer (fuzz/frame_decoder_fuzzer.cpp) drive it directly. A
// malformed header breaks the decoder for good: the connection it serves is
// closed, and nothing else is affected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tessel::cluster {

inline constexpr std::uint8_t kProtocolVersion = 1;
inline constexpr std::size_t kFrameHeaderBytes = 7;
// Before a peer has authenticated it may send only small frames (a hello);
// afterwards up to kMaxFrameBytes (a long job list or command).
inline constexpr std::size_t kMaxHandshakeFrameBytes = 4 * 1024;
inline constexpr std::size_t kMaxFrameBytes = 16 * 1024 * 1024;

class FrameError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The header and payload of one frame, ready to write. Throws FrameError if
// the payload exceeds kMaxFrameBytes.
std::string encode_frame(std::string_view payload);
// The 7-byte header announcing a payload of `length` bytes, unchecked:
// encode_frame's, and what tests and benchmarks send to announce a frame
// they never finish.
std::string frame_header(std::uint32_t length);

class FrameDecoder {
 public:
  explicit FrameDecoder(std::size_t max_payload) : max_payload_(max_payload) {}

  // Raises or lowers the largest payload accepted from now on.
  void set_max_payload(std::size_t bytes) { max_payload_ = bytes; }
  // Appends bytes as they arrive from the peer.
  void feed(std::string_view bytes);
  // The next complete payload, or nothing until more bytes arrive. Throws
  // FrameError for a bad magic, an unknown version or an oversized length;
  // every later call throws the same.
  std::optional<std::string> next();
  // Bytes received and not yet returned as frames.
  std::size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  [[noreturn]] void fail(std::string message);

  std::string buffer_;
  std::size_t consumed_ = 0;
  std::size_t max_payload_;
  std::string error_;  // once set, the stream is unusable
};

}  // namespace tessel::cluster
