#include "job_request.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>

#include "config/toml_document.hpp"
#include "engine/errors.hpp"

namespace tessel::cluster {

namespace {

constexpr int kMaxGpus = 1 << 16;

bool valid_variable_name(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name)
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

}  // namespace

bool is_reserved_variable(const std::string& name) {
  static const char* const reserved[] = {"CUDA_VISIBLE_DEVICES", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                                         "MASTER_ADDR", "MASTER_PORT"};
  for (const char* r : reserved)
    if (name == r) return true;
  return name.starts_with("TESSEL_");
}

std::string JobRequest::problem() const {
  if (command.empty() || command.front().empty()) return "the job has no command";
  for (const std::string& arg : command)
    if (arg.find('\0') != std::string::npos) return "the command contains a NUL byte";
  if (workdir.empty() || workdir.front() != '/') return "the working directory must be an absolute path";
  if (gpus < 1 || gpus > kMaxGpus) return "gpus must be in 1.." + std::to_string(kMaxGpus);
  if (min_gpus != 0 || max_gpus != 0) {
    if (min_gpus < 1 || max_gpus > kMaxGpus || min_gpus > gpus || gpus > max_gpus)
      return "an elastic job needs 1 <= min_gpus <= gpus <= max_gpus";
  }
  if (iterations && *iterations < 1) return "iterations must be at least 1";
  for (const auto& [name, value] : env) {
    if (!valid_variable_name(name)) return "'" + name + "' is not a valid environment variable name";
    if (is_reserved_variable(name)) return "env may not set " + name + ": tessel sets it for every job";
    if (value.find('\0') != std::string::npos) return "env " + name + " contains a NUL byte";
  }
  if (!(priority > 0)) return "priority must be > 0";
  if (grace_seconds && !(*grace_seconds >= 0 && *grace_seconds <= 86400)) return "grace_seconds must be in 0..86400";
  return {};
}

json JobRequest::to_json() const {
  json body = {{"name", name},     {"command", command},   {"env", env},  {"workdir", workdir},
               {"gpus", gpus},     {"min_gpus", min_gpus}, {"max_gpus", max_gpus},
               {"per_node", per_node}, {"tenant", tenant}, {"vc", vc},    {"priority", priority}};
  if (iterations) body["iterations"] = *iterations;
  if (grace_seconds) body["grace_seconds"] = *grace_seconds;
  return body;
}

JobRequest JobRequest::from_json(const json& body) {
  const Message m = Message::of(body, "job");
  JobRequest r;
  r.name = m.text("name");
  for (const json& arg : m.array("command")) {
    if (!arg.is_string()) throw ProtocolError("'command' in 'job' must be an array of strings");
    r.command.push_back(arg.get<std::string>());
  }
  for (const auto& [name, value] : m.object("env").items()) {
    if (!value.is_string()) throw ProtocolError("env " + name + " must be a string");
    r.env[name] = value.get<std::string>();
  }
  r.workdir = m.text("workdir");
  r.gpus = static_cast<int>(m.integer("gpus", 0, kMaxGpus));
  r.min_gpus = static_cast<int>(m.integer("min_gpus", 0, kMaxGpus));
  r.max_gpus = static_cast<int>(m.integer("max_gpus", 0, kMaxGpus));
  if (m.has("iterations")) r.iterations = m.integer("iterations", 1);
  r.per_node = m.flag("per_node");
  r.tenant = m.text("tenant");
  r.vc = m.text("vc");
  r.priority = m.number("priority");
  if (m.has("grace_seconds")) r.grace_seconds = m.number("grace_seconds");
  if (const std::string why = r.problem(); !why.empty()) throw ProtocolError(why);
  return r;
}

JobSpec JobRequest::spec(double arrival) const {
  JobSpec s;
  s.name = name;
  s.tenant = tenant;
  s.vc = vc;
  s.arrival = arrival;
  s.gpus = gpus;
  s.min_gpus = min_gpus != 0 ? min_gpus : gpus;
  s.max_gpus = max_gpus != 0 ? max_gpus : gpus;
  // A job that ends by exit alone has no known length: size-based policies
  // see it as the longest.
  s.total_work = iterations ? static_cast<double>(*iterations) : std::numeric_limits<double>::infinity();
  s.priority = priority;
  return s;
}

namespace {

// One job's keys, from the top level of a job file or from one entry of a
// batch. Every problem goes to the reader's diagnostics; what only the whole
// request can tell (problem()) is reported at `where` unless a key already was.
JobRequest read_job_fields(TableReader& reader, const std::filesystem::path& base,
                           const std::filesystem::path& working_directory, const std::string& where) {
  const std::size_t problems_before = reader.diagnostics().items().size();
  JobRequest r;
  r.name = reader.string("name", "").value_or("");
  if (const toml::node* command = reader.node("command")) {
    if (command->is_string()) {
      r.command = {"/bin/sh", "-c", std::string(*command->value<std::string>())};
    } else if (auto args = reader.strings("command", std::nullopt)) {
      r.command = *args;
    }
  } else {
    reader.error("command", "the job needs a command (command = [\"prog\", \"arg\"] or a shell string)");
  }
  std::filesystem::path workdir = reader.string("workdir", "").value_or("");
  if (workdir.empty())
    workdir = working_directory;
  else if (workdir.is_relative())
    workdir = (reader.where("workdir").starts_with("--set") ? working_directory : base) / workdir;
  r.workdir = std::filesystem::absolute(workdir).lexically_normal().string();
  if (r.workdir.size() > 1 && r.workdir.back() == '/') r.workdir.pop_back();
  if (const toml::table* env = reader.table("env")) {
    for (auto&& [name, value] : *env) {
      if (const auto* text = value.as_string())
        r.env[std::string(name.str())] = text->get();
      else
        reader.error("env", "env." + std::string(name.str()) + " must be a string");
    }
  }
  r.gpus = static_cast<int>(reader.integer("gpus", 1, 1, kMaxGpus).value_or(1));
  r.min_gpus = static_cast<int>(reader.integer("min_gpus", 0, 0, kMaxGpus).value_or(0));
  r.max_gpus = static_cast<int>(reader.integer("max_gpus", 0, 0, kMaxGpus).value_or(0));
  if ((r.min_gpus != 0) != (r.max_gpus != 0))
    reader.error(r.min_gpus != 0 ? "min_gpus" : "max_gpus", "an elastic job needs both min_gpus and max_gpus");
  if (reader.present("iterations")) r.iterations = reader.integer("iterations", std::nullopt, 1);
  r.per_node = reader.choice("processes", {"per_gpu", "per_node"}, "per_gpu") == "per_node";
  const char* user = std::getenv("USER");
  r.tenant = reader.string("tenant", user ? user : "").value_or("");
  r.vc = reader.string("vc", "default").value_or("default");
  r.priority = reader.number("priority", 1, 1e-9).value_or(1);
  if (reader.present("grace_seconds")) r.grace_seconds = reader.number("grace_seconds", std::nullopt, 0, 86400);
  reader.finish();
  if (reader.diagnostics().items().size() == problems_before)
    if (const std::string why = r.problem(); !why.empty()) reader.diagnostics().error(where, why);
  return r;
}

// A JSON value as the TOML node it stands for, so that a JSON-lines job is
// read by the same TableReader as a TOML one. Null has no TOML form.
std::optional<toml::table> toml_table_of(const json& object, const std::string& where, Diagnostics& diagnostics);

bool to_toml(const json& value, const std::string& key, const std::string& where, Diagnostics& diagnostics,
             const std::function<void(toml::node&&)>& add) {
  switch (value.type()) {
    case json::value_t::string: add(toml::value<std::string>(value.get<std::string>())); return true;
    case json::value_t::boolean: add(toml::value<bool>(value.get<bool>())); return true;
    case json::value_t::number_integer: add(toml::value<std::int64_t>(value.get<std::int64_t>())); return true;
    case json::value_t::number_unsigned:
      if (value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) break;
      add(toml::value<std::int64_t>(value.get<std::int64_t>()));
      return true;
    case json::value_t::number_float: add(toml::value<double>(value.get<double>())); return true;
    case json::value_t::array: {
      toml::array array;
      for (const json& element : value)
        if (!to_toml(element, key, where, diagnostics, [&](toml::node&& n) { array.push_back(std::move(n)); }))
          return false;
      add(std::move(array));
      return true;
    }
    case json::value_t::object:
      if (auto table = toml_table_of(value, where, diagnostics)) {
        add(std::move(*table));
        return true;
      }
      return false;
    default: break;
  }
  diagnostics.error(where, "'" + key + "' is " + (value.is_null() ? "null" : "out of range") +
                               ": leave a key out for its default");
  return false;
}

std::optional<toml::table> toml_table_of(const json& object, const std::string& where, Diagnostics& diagnostics) {
  toml::table table;
  bool ok = true;
  for (const auto& [key, value] : object.items())
    ok = to_toml(value, key, where, diagnostics, [&](toml::node&& n) { table.insert(key, std::move(n)); }) && ok;
  if (!ok) return std::nullopt;
  return table;
}

std::vector<JobRequest> read_toml_batch(const std::filesystem::path& file,
                                        const std::filesystem::path& working_directory, Diagnostics& diagnostics) {
  const TomlDocument document = TomlDocument::load(file);
  TableReader root(document, diagnostics, &document.root(), "");
  std::vector<JobRequest> jobs;
  const toml::node* entries = root.node("job");
  const toml::array* array = entries != nullptr ? entries->as_array() : nullptr;
  if (entries != nullptr && (array == nullptr || !array->is_array_of_tables()))
    root.error("job", "'job' must be an array of tables: write each job as a [[job]] table");
  else if (array == nullptr || array->empty())
    diagnostics.error(file.string(), "no jobs: write each job as a [[job]] table");
  else
    for (const toml::node& entry : *array) {
      TableReader reader = root.nested(entry.as_table(), "job");
      jobs.push_back(read_job_fields(reader, document.base_directory(), working_directory, reader.where()));
    }
  root.finish();
  return jobs;
}

std::vector<JobRequest> read_json_lines(const std::filesystem::path& file,
                                        const std::filesystem::path& working_directory, Diagnostics& diagnostics) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UserError(file.string() + ": cannot open the job file: " + std::strerror(errno));
  std::vector<JobRequest> jobs;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines separate nothing
    // Each job's problems are named by its line: "jobs.jsonl:7".
    const std::string where = file.string() + ":" + std::to_string(number);
    json object;
    try {
      object = json::parse(line);
    } catch (const json::parse_error& e) {
      // nlohmann's text counts lines within the one it was given: keep its reason alone.
      std::string why = e.what();
      if (const auto at = why.find(": ", why.find("column")); at != std::string::npos) why = why.substr(at + 2);
      diagnostics.error(where + ":" + std::to_string(e.byte), "not JSON: " + why);
      continue;
    }
    if (!object.is_object()) {
      diagnostics.error(where, "each line must be one job object {\"command\": [...], ...}");
      continue;
    }
    std::optional<toml::table> table = toml_table_of(object, where, diagnostics);
    if (!table) continue;
    const TomlDocument document = TomlDocument::of_table(std::move(*table), where);
    TableReader reader(document, diagnostics, &document.root(), "job");
    jobs.push_back(read_job_fields(reader, file.parent_path(), working_directory, where));
  }
  if (jobs.empty() && diagnostics.empty()) diagnostics.error(file.string(), "no jobs: write one job object per line");
  return jobs;
}

}  // namespace

JobRequest read_job_request(const std::optional<std::filesystem::path>& file,
                            const std::vector<std::string>& overrides,
                            const std::filesystem::path& working_directory) {
  const TomlDocument document = file ? TomlDocument::load(*file, overrides)
                                     : TomlDocument::parse("", "command line", overrides);
  Diagnostics diagnostics;
  TableReader reader(document, diagnostics, &document.root(), "");
  const std::filesystem::path base = file ? document.base_directory() : working_directory;
  JobRequest r = read_job_fields(reader, base, working_directory, file ? file->string() : std::string("job"));
  diagnostics.raise_if_any();
  return r;
}

std::vector<JobRequest> read_job_batch(const std::filesystem::path& file,
                                       const std::filesystem::path& working_directory) {
  const std::string extension = file.extension().string();
  Diagnostics diagnostics;
  std::vector<JobRequest> jobs;
  if (extension == ".toml")
    jobs = read_toml_batch(file, working_directory, diagnostics);
  else if (extension == ".jsonl" || extension == ".json")
    jobs = read_json_lines(file, working_directory, diagnostics);
  else
    throw UserError(file.string() + ": unknown job file type '" + extension +
                    "' (valid: .toml for [[job]] tables, .jsonl or .json for one job object per line)");
  diagnostics.raise_if_any();
  return jobs;
}

}  // namespace tessel::cluster
