// The philly-json workload kind: Philly's cluster_job_log read into jobs,
// checked on small logs written here with values worked out by hand, on
// malformed logs (each error's exact text and line), and on a large
// generated log read as a stream.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "config/experiment.hpp"
#include "experiment_runner.hpp"
#include "support.hpp"
#include "workloads/workload.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

std::string experiment(const std::string& workload_keys) {
  return R"([cluster]
nodes = 1
gpus_per_node = 4

[workload]
kind = "philly-json"
path = "log.json"
)" + workload_keys + R"(
[scheduler]
round_seconds = 100
allocation = { plugin = "fifo" }
placement = { plugin = "first_fit" }
)";
}

// Reads `log` as the kind would at the start of a run, without ordering or
// pricing the jobs: what the reader itself produced.
Trace read_log(const TempDir& dir, const std::string& log, const std::string& workload_keys = "") {
  dir.write("log.json", log);
  const ExperimentConfig config = load_experiment(dir.write("experiment.toml", experiment(workload_keys)));
  return build_workload_source(config.workload)->read(config.workload.seed);
}

std::string log_path(const TempDir& dir) { return (dir.path() / "log.json").string(); }

// The reader's message for `log`, or "" if it read the log.
std::string read_error(const TempDir& dir, const std::string& log) {
  try {
    read_log(dir, log);
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> config_problems(const std::string& workload_keys) {
  try {
    load_experiment(std::make_shared<TomlDocument>(TomlDocument::parse(experiment(workload_keys), "x.toml")));
  } catch (const ConfigError& e) {
    std::vector<std::string> lines;
    for (const auto& d : e.diagnostics()) lines.push_back(d.str());
    return lines;
  }
  return {};
}

// One job on one line: `attempts` is the JSON text of the list.
std::string job(const std::string& jobid, const std::string& status, const std::string& submitted,
                const std::string& attempts) {
  return R"({"status": ")" + status + R"(", "vc": "vc1", "jobid": ")" + jobid +
         R"(", "user": "u1", "submitted_time": ")" + submitted + R"(", "attempts": )" + attempts + "}";
}

std::string attempt(const std::string& start, const std::string& end, int gpus) {
  std::string names;
  for (int i = 0; i < gpus; ++i) names += (i ? ", " : "") + std::string("\"gpu") + std::to_string(i) + "\"";
  return R"({"start_time": ")" + start + R"(", "end_time": ")" + end + R"(", "detail": [{"ip": "m1", "gpus": [)" +
         names + "]}]}";
}

std::string list(const std::vector<std::string>& entries) {
  std::string text = "[\n";
  for (std::size_t i = 0; i < entries.size(); ++i) text += entries[i] + (i + 1 < entries.size() ? ",\n" : "\n");
  return text + "]\n";
}

std::vector<std::string> names(const Trace& trace) {
  std::vector<std::string> out;
  for (const TraceJob& j : trace.jobs) out.push_back(j.spec.name);
  return out;
}

std::vector<double> durations(const Trace& trace) {
  std::vector<double> out;
  for (const TraceJob& j : trace.jobs) out.push_back(j.duration);
  return out;
}

// Three jobs in the layout of the philly-traces README, fields in varied orders.
const char* kThreeJobs = R"([
  {"status": "Pass", "vc": "vc1", "jobid": "application_1", "user": "alice",
   "submitted_time": "2017-10-03 08:00:00",
   "attempts": [
     {"start_time": "2017-10-03 08:00:10", "end_time": "2017-10-03 08:10:10",
      "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]},
     {"start_time": "2017-10-03 08:20:00", "end_time": "2017-10-03 09:00:00",
      "detail": [{"ip": "m3", "gpus": ["gpu0", "gpu1"]}, {"ip": "m4", "gpus": ["gpu6", "gpu7"]}]}]},
  {"attempts": [{"detail": [{"gpus": ["gpu3"], "ip": "m2"}],
                 "end_time": "2017-10-03 08:00:30", "start_time": "2017-10-03 07:59:30"}],
   "submitted_time": "2017-10-03 07:59:00", "user": "bob", "jobid": "application_2", "vc": "vc2",
   "status": "Killed"},
  {"status": "Failed", "vc": "vc1", "user": "alice", "submitted_time": "2017-10-04 08:00:00",
   "comment": {"unknown": [1, 2.5, {"deep": [null, true]}], "fields": "are ignored"},
   "attempts": [{"start_time": "2017-10-04 23:30:00", "end_time": "2017-10-05 00:30:00", "retries": 3,
                 "detail": [{"ip": null, "gpus": ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7"],
                             "util": 0.9}]}],
   "jobid": "application_3"}
]
)";

}  // namespace

TEST_CASE("jobs map to arrivals, last-attempt GPUs and summed attempt durations") {
  TempDir dir;
  const Trace trace = read_log(dir, kThreeJobs);
  REQUIRE(trace.jobs.size() == 3);
  CHECK(trace.notes.empty());
  CHECK(names(trace) == std::vector<std::string>{"application_1", "application_2", "application_3"});

  const JobSpec& first = trace.jobs[0].spec;
  CHECK(first.tenant == "alice");
  CHECK(first.vc == "vc1");
  // Arrivals count from the earliest submission, application_2's at 07:59:00.
  CHECK(first.arrival == 60);
  CHECK(trace.jobs[1].spec.arrival == 0);
  CHECK(trace.jobs[2].spec.arrival == 86400 + 60);
  // The last attempt's GPUs, summed over its detail: 2 + 2; not the first attempt's 2.
  CHECK(first.gpus == 4);
  CHECK(first.min_gpus == 4);
  CHECK(first.max_gpus == 4);
  CHECK(trace.jobs[1].spec.gpus == 1);
  CHECK(trace.jobs[2].spec.gpus == 8);
  // 600 s + 2400 s; 60 s; an attempt across midnight, 3600 s.
  CHECK(durations(trace) == std::vector<double>{3000, 60, 3600});
  CHECK(trace.jobs[1].spec.tenant == "bob");
  CHECK(trace.jobs[1].spec.vc == "vc2");
}

TEST_CASE("duration = \"last\" takes the last attempt alone") {
  TempDir dir;
  const Trace trace = read_log(dir, kThreeJobs, "duration = \"last\"\n");
  CHECK(durations(trace) == std::vector<double>{2400, 60, 3600});
  CHECK(trace.jobs[0].spec.gpus == 4);
}

TEST_CASE("jobs the mapping cannot use are skipped and counted in one note") {
  const std::string ok = attempt("2017-10-03 08:00:00", "2017-10-03 09:00:00", 1);
  const std::vector<std::string> jobs{
      job("no_attempts", "Pass", "2017-10-03 08:00:00", "[]"),
      R"({"status": "Pass", "jobid": "no_attempts_key", "submitted_time": "2017-10-03 08:00:00"})",
      job("end_none", "Pass", "2017-10-03 08:00:00", "[" + attempt("2017-10-03 08:00:00", "None", 1) + "]"),
      job("end_missing", "Pass", "2017-10-03 08:00:00",
          R"([{"start_time": "2017-10-03 08:00:00", "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}])"),
      job("submitted_empty", "Pass", "", "[" + ok + "]"),
      // Its first attempt lacks a start (JSON null): unusable for "sum", fine for "last".
      job("first_start_null", "Pass", "2017-10-03 08:00:00",
          R"([{"start_time": null, "end_time": "2017-10-03 08:00:00", "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}, )" +
              attempt("2017-10-03 08:10:00", "2017-10-03 08:40:00", 2) + "]"),
      job("last_without_gpus", "Pass", "2017-10-03 08:00:00",
          "[" + ok + R"(, {"start_time": "2017-10-03 09:00:00", "end_time": "2017-10-03 10:00:00", "detail": []}])"),
      job("backwards", "Pass", "2017-10-03 08:00:00",
          "[" + attempt("2017-10-03 09:00:00", "2017-10-03 08:00:00", 1) + "]"),
      job("instant", "Pass", "2017-10-03 08:00:00",
          "[" + attempt("2017-10-03 09:00:00", "2017-10-03 09:00:00", 1) + "]"),
      job("good", "Pass", "2017-10-03 08:30:00", "[" + ok + "]"),
  };
  TempDir dir;

  const Trace summed = read_log(dir, list(jobs));
  CHECK(names(summed) == std::vector<std::string>{"good"});
  CHECK(summed.jobs[0].spec.arrival == 0);  // the earliest kept job, not the earliest in the log
  REQUIRE(summed.notes.size() == 1);
  CHECK(summed.notes[0] ==
        "skipped 9 of 10 jobs: 2 with no attempts, 4 with None times, 1 with no GPUs, 2 with no positive duration");

  const Trace last = read_log(dir, list(jobs), "duration = \"last\"\n");
  CHECK(names(last) == std::vector<std::string>{"first_start_null", "good"});
  CHECK(durations(last) == std::vector<double>{1800, 3600});
  CHECK(last.jobs[0].spec.gpus == 2);
  CHECK(last.jobs[0].spec.arrival == 0);
  CHECK(last.jobs[1].spec.arrival == 1800);
  REQUIRE(last.notes.size() == 1);
  CHECK(last.notes[0] ==
        "skipped 8 of 10 jobs: 2 with no attempts, 3 with None times, 1 with no GPUs, 2 with no positive duration");
}

TEST_CASE("each filter keeps min < duration < max, strictly, and reports what it removed") {
  const std::string start = "2017-10-01 00:00:00";
  const std::vector<std::string> jobs{
      job("1000s", "Pass", start, "[" + attempt(start, "2017-10-01 00:16:40", 1) + "]"),
      job("1897s", "Killed", start, "[" + attempt(start, "2017-10-01 00:31:37", 2) + "]"),
      job("5000s", "Failed", start, "[" + attempt(start, "2017-10-01 01:23:20", 1) + "]"),
      job("600000s", "Pass", start, "[" + attempt(start, "2017-10-07 22:40:00", 1) + "]"),
      job("10000s", "Pass", start, "[" + attempt(start, "2017-10-01 02:46:40", 4) + "]"),
      job("2000s", "Pass", start, "[" + attempt(start, "2017-10-01 00:33:20", 1) + "]"),
  };
  TempDir dir;
  const std::string log = list(jobs);
  CHECK(read_log(dir, log).jobs.size() == 6);  // no filter by default

  const Trace passed = read_log(dir, log, "statuses = [\"Pass\"]\n");
  CHECK(names(passed) == std::vector<std::string>{"1000s", "600000s", "10000s", "2000s"});
  CHECK(passed.notes == std::vector<std::string>{"statuses: removed 2 jobs with a status other than Pass"});

  const Trace long_enough = read_log(dir, log, "min_duration_seconds = 1897\n");
  CHECK(names(long_enough) == std::vector<std::string>{"5000s", "600000s", "10000s", "2000s"});
  CHECK(long_enough.notes == std::vector<std::string>{"min_duration_seconds: removed 2 jobs of at most 1897 s"});

  const Trace short_enough = read_log(dir, log, "max_duration_seconds = 600000\n");
  CHECK(names(short_enough) == std::vector<std::string>{"1000s", "1897s", "5000s", "10000s", "2000s"});
  CHECK(short_enough.notes ==
        std::vector<std::string>{"max_duration_seconds: removed 1 job of at least 600000 s"});

  const Trace single = read_log(dir, log, "single_gpu_only = true\n");
  CHECK(names(single) == std::vector<std::string>{"1000s", "5000s", "600000s", "2000s"});
  CHECK(single.notes == std::vector<std::string>{"single_gpu_only: removed 2 jobs with more than one GPU"});

  // Blox's Philly selection, one filter after another.
  const Trace blox = read_log(dir, log,
                              "min_duration_seconds = 1897.4\nmax_duration_seconds = 600000\n"
                              "single_gpu_only = true\nstatuses = [\"Pass\", \"Failed\"]\n");
  CHECK(names(blox) == std::vector<std::string>{"5000s", "2000s"});
  CHECK(blox.notes == std::vector<std::string>{
                          "statuses: removed 1 job with a status other than Pass, Failed",
                          "min_duration_seconds: removed 1 job of at most 1897.4 s",
                          "max_duration_seconds: removed 1 job of at least 600000 s",
                          "single_gpu_only: removed 1 job with more than one GPU"});
}

TEST_CASE("the options are checked like every other key") {
  const auto found = config_problems(
      "duration = \"mean\"\nstatuses = [\"Pass\", \"Running\"]\nmin_duration_seconds = 600\n"
      "max_duration_seconds = 60\nsingle_gpu_only = 1\n");
  REQUIRE(found.size() == 4);
  CHECK(found[0] == "x.toml:8:12: unknown duration 'mean' in [workload] (valid: sum, last)");
  CHECK(found[1] == "x.toml:9:12: unknown status 'Running' in 'statuses' of [workload] (valid: Pass, Killed, Failed)");
  CHECK(found[2] == "x.toml:11:24: 'max_duration_seconds' in [workload] must be greater than 'min_duration_seconds'");
  CHECK(found[3] == "x.toml:12:19: 'single_gpu_only' in [workload] must be a boolean, got an integer");

  CHECK(config_problems("statuses = []\n") ==
        std::vector<std::string>{"x.toml:8:12: 'statuses' in [workload] must name at least one status"});
}

TEST_CASE("a Philly log runs end to end: FIFO JCTs by hand") {
  // One node of 4 GPUs, 100-second rounds. application_2 (1 GPU, 60 s) arrives
  // at 0 and runs at once: JCT 60. application_1 (4 GPUs, 3000 s) arrives at
  // 60 and starts at the round at 100: ends at 3100, JCT 3040. application_3
  // asks for 8 GPUs and is left out by the window.
  TempDir dir;
  dir.write("log.json", kThreeJobs);
  const RunResults results = simulate(dir, experiment("window = [0, 3600]\n"));
  REQUIRE(results.jobs.size() == 2);
  CHECK(results.jobs[0].name == "application_2");
  CHECK(results.jobs[0].finish == 60);
  CHECK(results.jobs[1].name == "application_1");
  CHECK(results.jobs[1].gpus == 4);
  CHECK(results.jobs[1].tenant == "alice");
  CHECK(results.jobs[1].first_start == 100);
  CHECK(results.jobs[1].finish == 3100);
}

TEST_CASE("malformed JSON names the file and the line") {
  TempDir dir;
  const std::string log = log_path(dir);
  CHECK(read_error(dir, "") ==
        log + ":1: malformed JSON: syntax error while parsing value - unexpected end of input; expected '[', '{', or a "
              "literal");
  CHECK(read_error(dir, "[\n{\"jobid\": \"a\", \"attempts\": [") ==
        log + ":2: malformed JSON in job 'a': syntax error while parsing value - unexpected end of input; "
              "expected '[', '{', or a literal");
  CHECK(read_error(dir, "[\n{\"jobid\": \"a\",\n \"status\" \"Pass\"}]") ==
        log + ":3: malformed JSON in job 'a': syntax error while parsing object separator - "
              "unexpected string literal; expected ':'");
  CHECK(read_error(dir, "[]\n]") ==
        log + ":2: malformed JSON: syntax error while parsing value - unexpected ']'; expected end of input");
  CHECK(read_error(dir, "[{\"jobid\": \"a\", \"big\": 1e999}]") ==
        log + ":1: malformed JSON in job 'a': number overflow parsing '1e999'");
  // Deeply nested garbage: refused where it stops being a list of jobs, or
  // where it ends when it hides in a field the reader skips.
  CHECK(read_error(dir, std::string(100000, '[')) ==
        log + ":1: expected a job (a JSON object) as entry 1 of the list, got a list");
  CHECK(read_error(dir, "[{\"x\": " + std::string(100000, '[')) ==
        log + ":1: malformed JSON in job #1 of the list: syntax error while parsing value - "
              "unexpected end of input; expected '[', '{', or a literal");
}

TEST_CASE("a document that is not a list of jobs is refused") {
  TempDir dir;
  const std::string log = log_path(dir);
  CHECK(read_error(dir, R"({"jobs": []})") == log + ":1: expected a JSON list of jobs, got an object");
  CHECK(read_error(dir, "\n\"None\"") == log + ":2: expected a JSON list of jobs, got 'None'");
  // The number is followed by a newline, which the parser reads to see where 42 ends.
  CHECK(read_error(dir, "[\n" + job("a", "Pass", "2017-10-03 08:00:00", "[]") + ",\n42\n]") ==
        log + ":3: expected a job (a JSON object) as entry 2 of the list, got 42");
  CHECK(read_log(dir, "[]").jobs.empty());
}

TEST_CASE("a known field of the wrong type names the line, the field and the job") {
  TempDir dir;
  const std::string log = log_path(dir);
  const std::string start = R"([
  {"status": "Pass", "vc": "vc1", "jobid": "application_7", "user": "alice",
   "submitted_time": "2017-10-03 08:00:00",
   "attempts": [{"start_time": "2017-10-03 08:00:10", "end_time": "2017-10-03 08:10:10",
)";
  // `gpus` is a number followed by a newline: the line is the number's.
  CHECK(read_error(dir, start + "      \"detail\": [{\"ip\": \"m1\", \"gpus\": 3\n}]}]}\n]") ==
        log + ":5: field 'attempts[0].detail[0].gpus': expected a list of GPU names, got 3 (job 'application_7')");
  CHECK(read_error(dir, start + "      \"detail\": [{\"ip\": \"m1\", \"gpus\": [\"gpu0\", 1]}]}]}\n]") ==
        log + ":5: field 'attempts[0].detail[0].gpus[1]': expected a GPU name (a string), got 1 (job 'application_7')");
  CHECK(read_error(dir, start + "      \"detail\": [{\"ip\": [\"m1\"], \"gpus\": []}]}]}\n]") ==
        log + ":5: field 'attempts[0].detail[0].ip': expected a string, got a list (job 'application_7')");
  CHECK(read_error(dir, start + "      \"detail\": [\"m1\"]}, 17]}\n]") ==
        log + ":5: field 'attempts[0].detail[0]': expected a placement (a JSON object with ip and gpus), got 'm1' "
              "(job 'application_7')");
  CHECK(read_error(dir, start + "      \"detail\": []}, 17]}\n]") ==
        log + ":5: field 'attempts[1]': expected an attempt (a JSON object), got 17 (job 'application_7')");
  CHECK(read_error(dir, start + "      \"detail\": {\"ip\": \"m1\"}}]}\n]") ==
        log + ":5: field 'attempts[0].detail': expected a list of placements, got an object (job 'application_7')");

  CHECK(read_error(dir, R"([{"jobid": "application_8", "user": 7, "attempts": []}])") ==
        log + ":1: field 'user': expected a string, got 7 (job 'application_8')");
  CHECK(read_error(dir, R"([{"jobid": "application_8", "attempts": {"start_time": "None"}}])") ==
        log + ":1: field 'attempts': expected a list of attempts, got an object (job 'application_8')");
  CHECK(read_error(dir, R"([{"jobid": "application_8", "submitted_time": false, "attempts": []}])") ==
        log + ":1: field 'submitted_time': expected a time like 2017-10-03 07:52:22, or None, got false "
              "(job 'application_8')");
}

TEST_CASE("a time that does not parse is an error, wherever the jobid comes") {
  TempDir dir;
  const std::string log = log_path(dir);
  // The jobid follows the bad time; the error still names the job.
  CHECK(read_error(dir, "[\n{\"attempts\": [{\"start_time\": \"2017/10/03 07:52:31\",\n"
                        "  \"end_time\": \"2017-10-03 09:15:02\", \"detail\": []}],\n"
                        " \"jobid\": \"application_9\"}\n]") ==
        log + ":2: field 'attempts[0].start_time': expected a time like 2017-10-03 07:52:22, or None, got "
              "'2017/10/03 07:52:31' (job 'application_9')");
  // Without a jobid, the job's place in the list names it; the first error is the one reported.
  CHECK(read_error(dir, "[\n" + job("a", "Pass", "2017-10-03 08:00:00", "[]") +
                            ",\n{\"submitted_time\": \"yesterday\", \"user\": 7}\n]") ==
        log + ":3: field 'submitted_time': expected a time like 2017-10-03 07:52:22, or None, got 'yesterday' "
              "(job #2 of the list)");
  // A type error comes before the malformed JSON that follows it in the same job.
  CHECK(read_error(dir, "[{\"jobid\": \"application_10\", \"vc\": 1,\n \"attempts\": [") ==
        log + ":1: field 'vc': expected a string, got 1 (job 'application_10')");
}

// The parser kept the last; the job would have been whichever the log's
// writer meant, or not.
TEST_CASE("a known key given twice in one object is an error, in a job, an attempt or a placement") {
  TempDir dir;
  const std::string log = log_path(dir);
  CHECK(read_error(dir, R"([{"jobid": "application_8", "status": "Pass", "status": "Failed", "attempts": []}])") ==
        log + ":1: field 'status': appears twice in one object (job 'application_8')");
  CHECK(read_error(dir, "[{\"jobid\": \"a\", \"attempts\": [{\"start_time\": \"None\",\n"
                        "\"start_time\": \"None\", \"detail\": []}]}]") ==
        log + ":2: field 'attempts[0].start_time': appears twice in one object (job 'a')");
  CHECK(read_error(dir, R"([{"jobid": "a", "attempts": [{"detail": [{"ip": "m1", "ip": "m2", "gpus": []}]}]}])") ==
        log + ":1: field 'attempts[0].detail[0].ip': appears twice in one object (job 'a')");
  // The same key in two objects, and unknown keys, are not repeats.
  CHECK(read_error(dir, R"([{"jobid": "a", "x": 1, "x": 2, "attempts": [{"detail": []}, {"detail": []}]},
                            {"jobid": "b", "attempts": []}])") == "");
}

TEST_CASE("an unreadable file is a trace error") {
  TempDir dir;
  dir.write("experiment.toml", experiment(""));
  const ExperimentConfig config = load_experiment(dir.path() / "experiment.toml");
  CHECK_THROWS_WITH_AS(build_workload_source(config.workload)->read(1),
                       (log_path(dir) + ": cannot open trace: No such file or directory").c_str(), TraceError);
}

TEST_CASE("deep nesting in unknown fields is skipped without recursion") {
  TempDir dir;
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const Trace trace = read_log(
      dir, "[" + job("deep", "Pass", "2017-10-03 08:00:00",
                     "[" + attempt("2017-10-03 08:00:00", "2017-10-03 08:01:00", 1) + "], \"x\": " + deep) + "]");
  CHECK(names(trace) == std::vector<std::string>{"deep"});
}

TEST_CASE("any damage to a log gives a TraceError, never a crash") {
  // Every prefix of a good log, and random byte edits of it: each either
  // reads or fails as a TraceError.
  TempDir dir;
  const ExperimentConfig config = load_experiment(dir.write("experiment.toml", experiment("")));
  const std::unique_ptr<WorkloadSource> source = build_workload_source(config.workload);
  auto read_or_refuse = [&](const std::string& log) {
    dir.write("log.json", log);
    try {
      source->read(1);
    } catch (const TraceError&) {
    }
  };
  const std::string good = kThreeJobs;
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    CAPTURE(cut);
    read_or_refuse(good.substr(0, cut));
  }
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\":, 0123456789.-eE\\nulltruefalseNone\n\x80\xff";
  for (int trial = 0; trial < 500; ++trial) {
    std::string damaged = good;
    for (int edit = 0; edit < 3; ++edit) damaged[rng() % damaged.size()] = alphabet[rng() % alphabet.size()];
    CAPTURE(damaged);
    read_or_refuse(damaged);
  }
}

TEST_CASE("a large log is read as a stream") {
  // 200,000 jobs; every tenth has no attempts. Job i: submitted i seconds
  // after the first, 1 + i % 8 GPUs over two placements in its last attempt,
  // attempts of 60 s and (i % 1000) s.
  constexpr int kJobs = 200'000;
  TempDir dir;
  {
    std::ofstream out(dir.path() / "log.json");
    out << "[\n";
    auto time = [](int seconds) {
      char text[32];
      std::snprintf(text, sizeof text, "2017-10-%02d %02d:%02d:%02d", 1 + seconds / 86400, seconds / 3600 % 24,
                    seconds / 60 % 60, seconds % 60);
      return std::string(text);
    };
    for (int i = 0; i < kJobs; ++i) {
      out << R"({"status": "Pass", "vc": "vc)" << i % 14 << R"(", "jobid": "application_)" << i
          << R"(", "user": "u)" << i % 100 << R"(", "submitted_time": ")" << time(i) << R"(", "attempts": [)";
      if (i % 10 != 0) {
        const int gpus = 1 + i % 8;
        out << R"({"start_time": ")" << time(i) << R"(", "end_time": ")" << time(i + 60)
            << R"(", "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}, {"start_time": ")" << time(i + 100)
            << R"(", "end_time": ")" << time(i + 100 + i % 1000) << R"(", "detail": [{"ip": "m2", "gpus": [)";
        for (int g = 0; g < gpus; ++g) out << (g == 0 ? "" : ", ") << "\"gpu" << g << '"';
        out << R"(]}, {"ip": "m3", "gpus": []}]})";
      }
      out << "]}" << (i + 1 < kJobs ? ",\n" : "\n");
    }
    out << "]\n";
  }
  dir.write("experiment.toml", experiment(""));
  const ExperimentConfig config = load_experiment(dir.path() / "experiment.toml");
  const Trace trace = build_workload_source(config.workload)->read(1);

  REQUIRE(trace.jobs.size() == kJobs - kJobs / 10);
  CHECK(trace.notes == std::vector<std::string>{"skipped 20,000 of 200,000 jobs: 20,000 with no attempts"});
  // In file order; the earliest kept job is job 1, so job i arrives at i - 1.
  std::size_t mismatches = 0, kept = 0;
  for (int i = 0; i < kJobs; ++i) {
    if (i % 10 == 0) continue;
    const TraceJob& job = trace.jobs[kept++];
    if (job.spec.name != "application_" + std::to_string(i) || job.spec.arrival != i - 1 ||
        job.spec.gpus != 1 + i % 8 || job.duration != 60 + i % 1000 || job.spec.vc != "vc" + std::to_string(i % 14) ||
        job.spec.tenant != "u" + std::to_string(i % 100))
      ++mismatches;
  }
  CHECK(mismatches == 0);
}
