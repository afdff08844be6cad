// Why a decision was made, in words a user can act on:
//   Reason("needs {} GPUs on one node, largest free block is {}", 8, 4)
// A `{~}` placeholder prints like `{}` but marks a measurement that moves
// while the decision stands ("attained {~} GPU-s"): the decision log records
// a decision again when its words or its `{}` numbers change, not its `{~}`.
//
// Every decision carries one. Most rounds record none of them, so a Reason
// keeps its format string and numbers and only builds text when asked; that
// keeps the simulation's hot path free of string work. The format must be a
// string literal (it is stored by pointer). Placeholders are `{}`.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <type_traits>

namespace tessel {

class Reason {
 public:
  Reason() = default;

  template <class... Numbers>
    requires(sizeof...(Numbers) <= 4 && (std::is_arithmetic_v<Numbers> && ...))
  Reason(const char* format, Numbers... numbers)
      : format_(format), args_{static_cast<double>(numbers)...}, arg_count_(sizeof...(Numbers)) {}

  // For reasons that need words computed at run time (names, lists).
  static Reason text(std::string words) {
    Reason reason;
    reason.text_ = std::make_shared<const std::string>(std::move(words));
    return reason;
  }

  // This reason, read as "<who>: <reason>", for a policy that passes on
  // another's decisions (the synthesizer names the candidate that decided).
  // Shared and lazy like the rest: no text is built until str().
  Reason attributed_to(std::shared_ptr<const std::string> who) const {
    Reason reason = *this;
    reason.who_ = std::move(who);
    return reason;
  }

  bool empty() const { return format_ == nullptr && (!text_ || text_->empty()) && !who_; }
  std::string str() const;
  // The reason with its measurements (`{~}`) left out: the same decision
  // while only they move. The decision log records changes of kind.
  std::string kind() const;

 private:
  std::string render(bool measurements) const;

  const char* format_ = nullptr;
  std::array<double, 4> args_{};
  unsigned char arg_count_ = 0;
  std::shared_ptr<const std::string> text_;  // shared, so that reasons stay small and cheap to copy
  std::shared_ptr<const std::string> who_;   // attributed_to
};

}  // namespace tessel
