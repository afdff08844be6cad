// libFuzzer target: arbitrary bytes, split at arbitrary points, through the
// frame decoder and message parsing, as a daemon's connection reads them.
// Properties checked beyond "no crash, no sanitizer report":
//   - a payload never exceeds the decoder's limit;
//   - once the decoder fails it keeps failing;
//   - re-encoding a decoded payload and decoding it again gives it back.
//
//   CXX=clang++-14 meson setup build-fuzz -Dfuzz=true
//   ninja -C build-fuzz fuzz/frame_decoder_fuzzer
//   build-fuzz/fuzz/frame_decoder_fuzzer -max_total_time=300 fuzz/corpus
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "frame.hpp"
#include "protocol.hpp"

using namespace tessel::cluster;

namespace {
constexpr std::size_t kLimit = 512;  // small, so that the limit is hit often
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // The first byte chooses the chunk size the bytes arrive in.
  const std::size_t chunk = 1 + data[0] % 64;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  FrameDecoder decoder(kLimit);
  bool failed = false;
  for (std::size_t at = 0; at < bytes.size() && !failed; at += chunk) {
    decoder.feed(bytes.substr(at, chunk));
    try {
      while (auto payload = decoder.next()) {
        if (payload->size() > kLimit) std::abort();
        try {
          const Message message = Message::parse(*payload);
          (void)message.type();
          if (message.has("job")) (void)message.integer("job", 0, 1 << 20);
          if (message.has("command")) (void)message.array("command");
        } catch (const ProtocolError&) {
        }
        FrameDecoder again(kLimit);
        again.feed(encode_frame(*payload));
        const auto round_trip = again.next();
        if (!round_trip || *round_trip != *payload) std::abort();
      }
    } catch (const FrameError&) {
      failed = true;
    }
  }
  if (failed) {
    bool still_failing = false;
    try {
      (void)decoder.next();
    } catch (const FrameError&) {
      still_failing = true;
    }
    if (!still_failing) std::abort();
  }
  return 0;
}
