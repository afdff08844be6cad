#include "frame.hpp"

namespace tessel::cluster {

namespace {
constexpr char kMagic[2] = {'t', 's'};
// Room kept between frames: one socket read (Connection's 64 KiB buffer).
constexpr std::size_t kKeptBufferBytes = 64 * 1024;
}  // namespace

std::string encode_frame(std::string_view payload) {
  if (payload.size() > kMaxFrameBytes)
    throw FrameError("message of " + std::to_string(payload.size()) + " bytes exceeds the " +
                     std::to_string(kMaxFrameBytes) + "-byte frame limit");
  std::string frame = frame_header(static_cast<std::uint32_t>(payload.size()));
  frame += payload;
  return frame;
}

std::string frame_header(std::uint32_t length) {
  std::string header;
  header.reserve(kFrameHeaderBytes);
  header += kMagic[0];
  header += kMagic[1];
  header += static_cast<char>(kProtocolVersion);
  for (int shift = 24; shift >= 0; shift -= 8) header += static_cast<char>((length >> shift) & 0xff);
  return header;
}

void FrameDecoder::fail(std::string message) {
  error_ = std::move(message);
  buffer_.clear();
  consumed_ = 0;
  throw FrameError(error_);
}

void FrameDecoder::feed(std::string_view bytes) {
  if (!error_.empty()) return;  // next() reports the error
  // Drop what was returned already once it dominates the buffer, so that a
  // long stream of small frames does not grow it.
  if (consumed_ > 0 && consumed_ >= buffer_.size() / 2) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(bytes);
}

std::optional<std::string> FrameDecoder::next() {
  if (!error_.empty()) throw FrameError(error_);
  const std::string_view pending = std::string_view(buffer_).substr(consumed_);
  // Check the magic and version as soon as their bytes are in, so that a
  // peer speaking something else is refused without waiting for more.
  if (!pending.empty() && pending[0] != kMagic[0]) fail("not a tessel frame (bad magic)");
  if (pending.size() >= 2 && pending[1] != kMagic[1]) fail("not a tessel frame (bad magic)");
  if (pending.size() >= 3 && static_cast<std::uint8_t>(pending[2]) != kProtocolVersion)
    fail("protocol version " + std::to_string(static_cast<std::uint8_t>(pending[2])) + ", expected " +
         std::to_string(kProtocolVersion));
  if (pending.size() < kFrameHeaderBytes) return std::nullopt;
  std::uint32_t length = 0;
  for (int i = 3; i < 7; ++i) length = (length << 8) | static_cast<std::uint8_t>(pending[i]);
  if (length > max_payload_)
    fail("frame of " + std::to_string(length) + " bytes exceeds the " + std::to_string(max_payload_) +
         "-byte limit");
  if (pending.size() < kFrameHeaderBytes + length) return std::nullopt;
  std::string payload(pending.substr(kFrameHeaderBytes, length));
  consumed_ += kFrameHeaderBytes + length;
  if (consumed_ == buffer_.size()) {
    // An idle connection keeps no room a large frame once needed.
    if (buffer_.capacity() > kKeptBufferBytes) buffer_ = std::string();
    else buffer_.clear();
    consumed_ = 0;
  }
  return payload;
}

}  // namespace tessel::cluster
