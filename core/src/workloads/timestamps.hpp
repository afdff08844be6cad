// Calendar timestamps in traces ("2017-10-03 07:52:22", as the Philly logs
// write them), read as seconds. Traces carry no time zone; the result is
// only ever used relative to the trace's first timestamp.
#pragma once

#include <optional>
#include <string_view>

namespace tessel {

// Seconds since 1970-01-01 00:00:00 for "YYYY-MM-DD HH:MM:SS" (a 'T' may
// separate date and time); nullopt if the text is not such a timestamp.
std::optional<double> parse_timestamp(std::string_view text);

}  // namespace tessel
