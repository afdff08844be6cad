// Text for the user's eyes, shared by the readers.
#pragma once

#include <cstddef>
#include <string>

namespace tessel {

// A count with thousands separators, for notes and messages: "82,247".
inline std::string count_text(std::size_t n) {
  std::string digits = std::to_string(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<std::size_t>(i), ",");
  return digits;
}

}  // namespace tessel
