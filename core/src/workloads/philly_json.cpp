// `kind = "philly-json"`: Microsoft's Philly `cluster_job_log`
// (msr-fiddle/philly-traces), a JSON list of jobs:
//
//   {"status": "Pass", "vc": "6214e9", "jobid": "application_...", "user": "...",
//    "submitted_time": "2017-10-03 07:52:22",
//    "attempts": [{"start_time": "2017-10-03 07:52:31", "end_time": "2017-10-03 09:15:02",
//                  "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]}
//
// The trace is 6.6 GB in all, so the log is read as a stream of SAX events
// and only the job being read is held in memory, never the document.
//
// Each job becomes one TraceJob:
//   name = jobid, tenant = user, vc = vc
//   arrival   submitted_time minus the earliest submitted_time among the kept jobs
//   gpus      the GPU count of the job's last attempt, the total length of its
//             detail[].gpus: the last attempt is the one that ran to the end. Blox
//             does the same; the philly-traces notebook counts the first attempt.
//   duration  see `duration` below
// A time may be None (JSON null, "None" or ""): the job was still running when
// the log was taken, or the log lost the time.
//
// [workload] keys:
//   path                      the cluster_job_log file (required)
//   duration = "sum"          "sum": the sum over attempts of end_time - start_time
//                             (Blox's sum_attempts); "last": the last attempt's alone
//   statuses = ["Pass", "Killed", "Failed"]   keep only jobs with these statuses
//   min_duration_seconds      keep jobs with duration > this   (none by default; Blox keeps
//   max_duration_seconds      keep jobs with duration < this    60*10^1.5 = 1897.4 < d < 60*10^4)
//   single_gpu_only = false   keep only jobs with exactly one GPU
//
// Jobs the mapping cannot use are skipped and counted in one note, each under
// the first reason that applies: no attempts; a None time among those the
// arrival and duration need (submitted_time, and the start and end of every
// attempt for "sum" or of the last one for "last"); no GPUs in the last
// attempt; no positive duration (zero, or an attempt that ends before it starts). The
// filters then apply in the order listed above, each with a note of how many
// jobs it removed.
//
// Unknown fields are ignored. A known field of the wrong type, or a time that
// does not parse, is a TraceError naming the line, the field and the job.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <istream>
#include <streambuf>
#include <vector>

#include <nlohmann/json.hpp>

#include "workloads/kinds.hpp"
#include "workloads/timestamps.hpp"

namespace tessel {

namespace {

enum class DurationMode { sum_of_attempts, last_attempt };

// Every status the log uses (philly-traces README).
const std::vector<std::string> kStatuses{"Pass", "Killed", "Failed"};

struct PhillyJsonOptions {
  std::string path;
  DurationMode duration = DurationMode::sum_of_attempts;
  std::vector<std::string> statuses = kStatuses;
  std::optional<double> min_duration_seconds;
  std::optional<double> max_duration_seconds;
  bool single_gpu_only = false;
};

// As for the CSV kind: a bound that keeps GPU counts well inside an int.
constexpr std::size_t kMaxGpus = 1 << 20;

// Hands the file to the parser in large blocks and knows the line it has
// reached: nlohmann tells a SAX handler no position, so without this a
// type error could not name its line.
class LineCountingBuffer final : public std::streambuf {
 public:
  explicit LineCountingBuffer(std::streambuf& source) : source_(source), block_(1 << 16) {}

  // The line of the last character the parser consumed.
  std::size_t line() {
    count_consumed();
    return newlines_ + 1;
  }
  // The line of a number the parser has just read: it reads one character
  // past a number to see where it ends, and that may be the newline after it.
  std::size_t line_of_number() {
    count_consumed();
    return newlines_ + 1 - (last_consumed_ == '\n' ? 1 : 0);
  }

 protected:
  int_type underflow() override {
    count_consumed();
    const std::streamsize read = source_.sgetn(block_.data(), static_cast<std::streamsize>(block_.size()));
    if (read <= 0) return traits_type::eof();
    setg(block_.data(), block_.data(), block_.data() + read);
    counted_to_ = block_.data();
    return traits_type::to_int_type(block_.front());
  }

 private:
  // Newlines are counted lazily, when a line is asked for or the block is
  // replaced, so reading costs one pass of std::count over the text.
  void count_consumed() {
    const char* consumed_to = gptr();
    if (consumed_to == counted_to_) return;
    newlines_ += static_cast<std::size_t>(std::count(counted_to_, consumed_to, '\n'));
    last_consumed_ = consumed_to[-1];
    counted_to_ = consumed_to;
  }

  std::streambuf& source_;
  std::vector<char> block_;
  const char* counted_to_ = nullptr;
  std::size_t newlines_ = 0;
  char last_consumed_ = 0;
};

// What the mapping needs of one job, gathered while its object streams by.
struct JobSummary {
  std::size_t ordinal = 0;  // 1-based position in the list, to name a job without a jobid
  std::string jobid, user, vc, status;
  std::optional<double> submitted;
  std::size_t attempts = 0;
  double attempt_seconds = 0;  // summed over attempts with both times
  bool attempt_time_missing = false;
  bool attempt_backwards = false;  // some attempt ends before it starts
  std::optional<double> last_start, last_end;
  std::size_t last_gpus = 0;

  void clear_attempts() {
    attempts = 0;
    attempt_seconds = 0;
    attempt_time_missing = attempt_backwards = false;
    last_start.reset();
    last_end.reset();
    last_gpus = 0;
  }
  std::string label() const {
    return jobid.empty() ? "job #" + std::to_string(ordinal) + " of the list" : "job '" + jobid + "'";
  }
};

struct Attempt {
  std::optional<double> start, end;
  std::size_t gpus = 0;
};

std::string seconds_text(double seconds) {
  char text[400];
  const auto [end, error] = std::to_chars(text, text + sizeof text, seconds, std::chars_format::fixed);
  return error == std::errc() ? std::string(text, end) : std::to_string(seconds);
}

std::string jobs_text(std::size_t n) { return count_text(n) + (n == 1 ? " job" : " jobs"); }

// Turns job summaries into TraceJobs: skips what cannot be mapped, applies
// the filters and counts what each left out, for the notes.
class PhillyTraceBuilder {
 public:
  explicit PhillyTraceBuilder(const PhillyJsonOptions& options) : options_(options) {}

  void add(const JobSummary& job) {
    ++read_;
    const bool last_only = options_.duration == DurationMode::last_attempt;
    if (job.attempts == 0) {
      ++without_attempts_;
      return;
    }
    const bool times_missing = !job.submitted || (last_only ? !job.last_start || !job.last_end
                                                            : job.attempt_time_missing);
    if (times_missing) {
      ++with_missing_times_;
      return;
    }
    if (job.last_gpus == 0) {
      ++without_gpus_;
      return;
    }
    const double duration = last_only ? *job.last_end - *job.last_start : job.attempt_seconds;
    if ((!last_only && job.attempt_backwards) || !(duration > 0)) {
      ++without_duration_;
      return;
    }

    const auto& statuses = options_.statuses;
    if (std::find(statuses.begin(), statuses.end(), job.status) == statuses.end()) {
      ++removed_by_status_;
      return;
    }
    if (options_.min_duration_seconds && !(duration > *options_.min_duration_seconds)) {
      ++removed_as_short_;
      return;
    }
    if (options_.max_duration_seconds && !(duration < *options_.max_duration_seconds)) {
      ++removed_as_long_;
      return;
    }
    if (options_.single_gpu_only && job.last_gpus != 1) {
      ++removed_as_multi_gpu_;
      return;
    }

    TraceJob& kept = trace_.jobs.emplace_back();
    kept.spec.name = job.jobid;
    kept.spec.tenant = job.user;
    kept.spec.vc = job.vc;
    kept.spec.arrival = *job.submitted;  // made relative in finish()
    kept.spec.gpus = kept.spec.min_gpus = kept.spec.max_gpus = static_cast<int>(job.last_gpus);
    kept.duration = duration;
    earliest_submission_ = std::min(earliest_submission_.value_or(*job.submitted), *job.submitted);
  }

  Trace finish() && {
    for (TraceJob& job : trace_.jobs) job.spec.arrival -= *earliest_submission_;
    auto& notes = trace_.notes;
    std::string reasons;
    auto reason = [&](std::size_t n, const std::string& what) {
      if (n > 0) reasons += (reasons.empty() ? "" : ", ") + count_text(n) + " " + what;
    };
    reason(without_attempts_, "with no attempts");
    reason(with_missing_times_, "with None times");
    reason(without_gpus_, "with no GPUs");
    reason(without_duration_, "with no positive duration");
    const std::size_t skipped = without_attempts_ + with_missing_times_ + without_gpus_ + without_duration_;
    if (skipped > 0) notes.push_back("skipped " + count_text(skipped) + " of " + jobs_text(read_) + ": " + reasons);
    if (removed_by_status_ > 0) {
      std::string allowed;
      for (const auto& status : options_.statuses) allowed += (allowed.empty() ? "" : ", ") + status;
      notes.push_back("statuses: removed " + jobs_text(removed_by_status_) + " with a status other than " + allowed);
    }
    if (removed_as_short_ > 0)
      notes.push_back("min_duration_seconds: removed " + jobs_text(removed_as_short_) + " of at most " +
                      seconds_text(*options_.min_duration_seconds) + " s");
    if (removed_as_long_ > 0)
      notes.push_back("max_duration_seconds: removed " + jobs_text(removed_as_long_) + " of at least " +
                      seconds_text(*options_.max_duration_seconds) + " s");
    if (removed_as_multi_gpu_ > 0)
      notes.push_back("single_gpu_only: removed " + jobs_text(removed_as_multi_gpu_) + " with more than one GPU");
    return std::move(trace_);
  }

 private:
  const PhillyJsonOptions& options_;
  Trace trace_;
  std::optional<double> earliest_submission_;
  std::size_t read_ = 0;
  std::size_t without_attempts_ = 0, with_missing_times_ = 0, without_gpus_ = 0, without_duration_ = 0;
  std::size_t removed_by_status_ = 0, removed_as_short_ = 0, removed_as_long_ = 0, removed_as_multi_gpu_ = 0;
};

// Follows the document's structure through nlohmann's SAX events, checks
// the type of every known field and hands each finished job to the builder.
// The structure is tracked with a level and a counter of skipped nesting,
// not with recursion, so deeply nested input cannot exhaust the stack.
class PhillyLogHandler final : public nlohmann::json_sax<nlohmann::json> {
 public:
  PhillyLogHandler(const std::string& path, LineCountingBuffer& input, PhillyTraceBuilder& builder)
      : path_(path), input_(input), builder_(builder) {}

  bool null() override { return value(Kind::null, "null"); }
  bool boolean(bool v) override { return value(Kind::boolean, v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return value(Kind::number, std::to_string(v)); }
  bool number_unsigned(number_unsigned_t v) override { return value(Kind::number, std::to_string(v)); }
  bool number_float(number_float_t, const string_t& text) override { return value(Kind::number, text); }
  bool string(string_t& text) override { return value(Kind::string, text); }
  bool binary(binary_t&) override { return true; }  // only binary formats (CBOR, ...) produce it

  bool start_object(std::size_t) override { return begin_container(Kind::object); }
  bool start_array(std::size_t) override { return begin_container(Kind::array); }

  bool key(string_t& name) override {
    if (skip_depth_ > 0) return true;
    field_ = field_named(name);
    // A key given twice in one object: which value the job holds would be
    // the parser's choice.
    std::uint32_t* seen = level_ == Level::job       ? &job_keys_
                          : level_ == Level::attempt ? &attempt_keys_
                          : level_ == Level::placement ? &placement_keys_
                                                       : nullptr;
    const std::uint32_t bit = 1u << static_cast<unsigned>(field_);
    if (seen != nullptr && field_ != Field::unknown) {
      if ((*seen & bit) != 0 && !pending_)
        pending_ = PendingError{input_.line(), field_path(), "appears twice in one object"};
      *seen |= bit;
    }
    return true;
  }

  bool end_object() override {
    if (skip_depth_ > 0) {
      --skip_depth_;
      return true;
    }
    switch (level_) {
      case Level::job:
        finish_job();
        level_ = Level::job_list;
        break;
      case Level::attempt:
        finish_attempt();
        level_ = Level::attempt_list;
        break;
      case Level::placement:
        level_ = Level::placement_list;
        break;
      default:
        break;
    }
    return true;
  }

  bool end_array() override {
    if (skip_depth_ > 0) {
      --skip_depth_;
      return true;
    }
    switch (level_) {
      case Level::job_list: level_ = Level::done; break;
      case Level::attempt_list: level_ = Level::job; break;
      case Level::placement_list: level_ = Level::attempt; break;
      case Level::gpu_list: level_ = Level::placement; break;
      default: break;
    }
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) override {
    // A type error earlier in the same job comes first in the file.
    if (pending_) raise_pending();
    // The job helps find the place when the whole list is on one line.
    const std::string in_job = inside_job() ? " in " + job_.label() : "";
    throw TraceError(path_, input_.line(), "", "malformed JSON" + in_job + ": " + json_problem(error));
  }

 private:
  enum class Kind { null, boolean, number, string, object, array };
  // Where the parser is: placements are the entries of an attempt's `detail`.
  enum class Level { document, job_list, job, attempt_list, attempt, placement_list, placement, gpu_list, done };
  enum class Field {
    unknown, status, vc, jobid, user, submitted_time, attempts, start_time, end_time, detail, ip, gpus
  };
  struct KnownField {
    Level level;
    Field field;
    std::string_view name;
  };
  static constexpr KnownField kKnownFields[] = {
      {Level::job, Field::status, "status"},
      {Level::job, Field::vc, "vc"},
      {Level::job, Field::jobid, "jobid"},
      {Level::job, Field::user, "user"},
      {Level::job, Field::submitted_time, "submitted_time"},
      {Level::job, Field::attempts, "attempts"},
      {Level::attempt, Field::start_time, "start_time"},
      {Level::attempt, Field::end_time, "end_time"},
      {Level::attempt, Field::detail, "detail"},
      {Level::placement, Field::ip, "ip"},
      {Level::placement, Field::gpus, "gpus"},
  };

  struct PendingError {
    std::size_t line;
    std::string field;
    std::string message;
  };

  Field field_named(std::string_view name) const {
    for (const KnownField& known : kKnownFields)
      if (known.level == level_ && known.name == name) return known.field;
    return Field::unknown;
  }

  std::string_view field_name() const {
    for (const KnownField& known : kKnownFields)
      if (known.field == field_) return known.name;
    return "";
  }

  bool inside_job() const {
    return level_ != Level::document && level_ != Level::job_list && level_ != Level::done;
  }

  bool begin_container(Kind kind) {
    if (skip_depth_ == 0) return value(kind, {});
    ++skip_depth_;
    return true;
  }

  // Every value, scalar or the start of a container, lands here.
  bool value(Kind kind, std::string_view text) {
    if (skip_depth_ > 0) return true;
    switch (level_) {
      case Level::document:
        if (kind != Kind::array)
          throw TraceError(path_, line_of(kind), "", "expected a JSON list of jobs, got " + describe(kind, text));
        level_ = Level::job_list;
        break;
      case Level::job_list:
        if (kind != Kind::object)
          throw TraceError(path_, line_of(kind), "",
                           "expected a job (a JSON object) as entry " + std::to_string(ordinal_ + 1) +
                               " of the list, got " + describe(kind, text));
        begin_job();
        level_ = Level::job;
        break;
      case Level::job:
        job_field(kind, text);
        break;
      case Level::attempt_list:
        if (kind != Kind::object) return mismatch(kind, text, "an attempt (a JSON object)");
        attempt_ = Attempt{};
        attempt_keys_ = 0;
        ++attempts_begun_;
        placements_begun_ = 0;
        level_ = Level::attempt;
        break;
      case Level::attempt:
        attempt_field(kind, text);
        break;
      case Level::placement_list:
        if (kind != Kind::object) return mismatch(kind, text, "a placement (a JSON object with ip and gpus)");
        ++placements_begun_;
        placement_keys_ = 0;
        gpus_seen_ = 0;
        level_ = Level::placement;
        break;
      case Level::placement:
        placement_field(kind, text);
        break;
      case Level::gpu_list:
        if (kind != Kind::string) return mismatch(kind, text, "a GPU name (a string)");
        if (attempt_.gpus == kMaxGpus)
          return mismatch(kind, text, "at most " + count_text(kMaxGpus) + " GPUs in one attempt");
        ++attempt_.gpus;
        ++gpus_seen_;
        break;
      case Level::done:
        break;  // strict parsing reports anything after the list as malformed
    }
    return true;
  }

  void job_field(Kind kind, std::string_view text) {
    switch (field_) {
      case Field::status: text_field(kind, text, job_.status); break;
      case Field::vc: text_field(kind, text, job_.vc); break;
      case Field::jobid: text_field(kind, text, job_.jobid); break;
      case Field::user: text_field(kind, text, job_.user); break;
      case Field::submitted_time: time_field(kind, text, job_.submitted); break;
      case Field::attempts:
        if (kind == Kind::array) {
          job_.clear_attempts();
          attempts_begun_ = 0;
          level_ = Level::attempt_list;
        } else if (kind != Kind::null) {
          mismatch(kind, text, "a list of attempts");
        }
        break;
      default:
        skip(kind);
    }
  }

  void attempt_field(Kind kind, std::string_view text) {
    switch (field_) {
      case Field::start_time: time_field(kind, text, attempt_.start); break;
      case Field::end_time: time_field(kind, text, attempt_.end); break;
      case Field::detail:
        if (kind == Kind::array) {
          attempt_.gpus = 0;
          placements_begun_ = 0;
          level_ = Level::placement_list;
        } else if (kind != Kind::null) {
          mismatch(kind, text, "a list of placements");
        }
        break;
      default:
        skip(kind);
    }
  }

  void placement_field(Kind kind, std::string_view text) {
    switch (field_) {
      case Field::ip:
        if (kind != Kind::string && kind != Kind::null) mismatch(kind, text, "a string");
        break;
      case Field::gpus:
        if (kind == Kind::array) {
          gpus_seen_ = 0;
          level_ = Level::gpu_list;
        } else if (kind != Kind::null) {
          mismatch(kind, text, "a list of GPU names");
        }
        break;
      default:
        skip(kind);
    }
  }

  void text_field(Kind kind, std::string_view text, std::string& out) {
    if (kind == Kind::string)
      out.assign(text);
    else if (kind == Kind::null)
      out.clear();
    else
      mismatch(kind, text, "a string");
  }

  void time_field(Kind kind, std::string_view text, std::optional<double>& out) {
    // The log writes a missing time as the string "None" (Python's); the
    // philly-traces notebook also takes "" and null for one.
    if (kind == Kind::null || (kind == Kind::string && (text == "None" || text.empty()))) {
      out.reset();
      return;
    }
    if (kind == Kind::string) out = parse_timestamp(text);
    if (kind != Kind::string || !out) mismatch(kind, text, "a time like 2017-10-03 07:52:22, or None");
  }

  void skip(Kind kind) {
    if (kind == Kind::object || kind == Kind::array) skip_depth_ = 1;
  }

  // Records a wrong value and skips it. The error is raised when the job
  // ends, so it can name the job even when its jobid comes later.
  bool mismatch(Kind kind, std::string_view text, const std::string& expected) {
    if (!pending_)
      pending_ = PendingError{line_of(kind), field_path(), "expected " + expected + ", got " + describe(kind, text)};
    skip(kind);
    return true;
  }

  [[noreturn]] void raise_pending() const {
    throw TraceError(path_, pending_->line, pending_->field, pending_->message + " (" + job_.label() + ")");
  }

  // The field the parser is in, as a path into the job: attempts[0].detail[1].gpus[2].
  std::string field_path() const {
    const std::string attempt = "attempts[" + std::to_string(attempts_begun_ - 1) + "]";
    const std::string placement = attempt + ".detail[" + std::to_string(placements_begun_ - 1) + "]";
    switch (level_) {
      case Level::job: return std::string(field_name());
      case Level::attempt_list: return "attempts[" + std::to_string(attempts_begun_) + "]";
      case Level::attempt: return attempt + "." + std::string(field_name());
      case Level::placement_list: return attempt + ".detail[" + std::to_string(placements_begun_) + "]";
      case Level::placement: return placement + "." + std::string(field_name());
      case Level::gpu_list: return placement + ".gpus[" + std::to_string(gpus_seen_) + "]";
      default: return {};
    }
  }

  std::size_t line_of(Kind kind) const { return kind == Kind::number ? input_.line_of_number() : input_.line(); }

  static std::string describe(Kind kind, std::string_view text) {
    constexpr std::size_t kShown = 40;
    switch (kind) {
      case Kind::object: return "an object";
      case Kind::array: return "a list";
      case Kind::string:
        return "'" + std::string(text.substr(0, kShown)) + (text.size() > kShown ? "...'" : "'");
      default: return std::string(text);
    }
  }

  // nlohmann's message without its prefix: "[json.exception.parse_error.101]
  // parse error at line 3, column 5: " (the line is given by TraceError).
  static std::string json_problem(const nlohmann::detail::exception& error) {
    std::string_view text = error.what();
    if (const auto id_end = text.find("] "); text.starts_with("[json.exception") && id_end != text.npos)
      text.remove_prefix(id_end + 2);
    if (const auto colon = text.find(": "); text.starts_with("parse error") && colon != text.npos)
      text.remove_prefix(colon + 2);
    return std::string(text);
  }

  void begin_job() {
    job_.ordinal = ++ordinal_;
    job_.jobid.clear();
    job_.user.clear();
    job_.vc.clear();
    job_.status.clear();
    job_.submitted.reset();
    job_.clear_attempts();
    attempts_begun_ = 0;
    job_keys_ = 0;
  }

  void finish_attempt() {
    ++job_.attempts;
    if (attempt_.start && attempt_.end) {
      job_.attempt_seconds += *attempt_.end - *attempt_.start;
      if (*attempt_.end < *attempt_.start) job_.attempt_backwards = true;
    } else {
      job_.attempt_time_missing = true;
    }
    job_.last_start = attempt_.start;
    job_.last_end = attempt_.end;
    job_.last_gpus = attempt_.gpus;
  }

  void finish_job() {
    if (pending_) raise_pending();
    builder_.add(job_);
  }

  const std::string& path_;
  LineCountingBuffer& input_;
  PhillyTraceBuilder& builder_;

  Level level_ = Level::document;
  Field field_ = Field::unknown;
  std::size_t skip_depth_ = 0;  // > 0 inside a value the mapping does not read
  std::size_t ordinal_ = 0;     // jobs begun
  std::size_t attempts_begun_ = 0, placements_begun_ = 0, gpus_seen_ = 0;  // in the current job, attempt, placement
  std::uint32_t job_keys_ = 0, attempt_keys_ = 0, placement_keys_ = 0;   // known keys seen in each, by Field
  JobSummary job_;
  Attempt attempt_;
  std::optional<PendingError> pending_;
};

class PhillyJsonWorkload final : public WorkloadSource {
 public:
  explicit PhillyJsonWorkload(PhillyJsonOptions options) : options_(std::move(options)) {}

  Trace read(std::uint64_t) const override {
    std::ifstream file(options_.path, std::ios::binary);
    if (!file) throw TraceError(options_.path, 0, "", std::string("cannot open trace: ") + std::strerror(errno));
    LineCountingBuffer input(*file.rdbuf());
    std::istream stream(&input);
    PhillyTraceBuilder builder(options_);
    PhillyLogHandler handler(options_.path, input, builder);
    // The handler throws on every error, so the parse never stops early.
    if (!nlohmann::json::sax_parse(stream, &handler))
      throw std::logic_error("philly-json: the JSON parser stopped without reporting why");
    return std::move(builder).finish();
  }

 private:
  PhillyJsonOptions options_;
};

}  // namespace

std::unique_ptr<WorkloadSource> parse_philly_json_workload(TableReader& reader) {
  PhillyJsonOptions options;
  options.path = reader.input_path("path", std::nullopt).value_or("");
  if (reader.choice("duration", {"sum", "last"}, "sum") == "last") options.duration = DurationMode::last_attempt;
  if (auto statuses = reader.strings("statuses", options.statuses)) {
    for (const std::string& status : *statuses)
      if (std::find(kStatuses.begin(), kStatuses.end(), status) == kStatuses.end())
        reader.error("statuses",
                     "unknown status '" + status + "' in 'statuses' of [workload] (valid: Pass, Killed, Failed)");
    if (statuses->empty()) reader.error("statuses", "'statuses' in [workload] must name at least one status");
    options.statuses = std::move(*statuses);
  }
  if (reader.present("min_duration_seconds"))
    options.min_duration_seconds = reader.number("min_duration_seconds", std::nullopt, 0);
  if (reader.present("max_duration_seconds"))
    options.max_duration_seconds = reader.number("max_duration_seconds", std::nullopt, 0);
  if (options.min_duration_seconds && options.max_duration_seconds &&
      *options.min_duration_seconds >= *options.max_duration_seconds)
    reader.error("max_duration_seconds",
                 "'max_duration_seconds' in [workload] must be greater than 'min_duration_seconds'");
  options.single_gpu_only = reader.boolean("single_gpu_only", false).value_or(false);
  return std::make_unique<PhillyJsonWorkload>(std::move(options));
}

}  // namespace tessel
