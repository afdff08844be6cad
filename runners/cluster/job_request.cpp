#include "job_request.hpp"

#include <cstdlib>
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

JobRequest read_job_request(const std::optional<std::filesystem::path>& file,
                            const std::vector<std::string>& overrides,
                            const std::filesystem::path& working_directory) {
  const TomlDocument document = file ? TomlDocument::load(*file, overrides)
                                     : TomlDocument::parse("", "command line", overrides);
  Diagnostics diagnostics;
  TableReader reader(document, diagnostics, &document.root(), "");
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
  const std::filesystem::path base = file ? document.base_directory() : working_directory;
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
  diagnostics.raise_if_any();
  if (const std::string why = r.problem(); !why.empty())
    throw UserError((file ? file->string() : std::string("job")) + ": " + why);
  return r;
}

}  // namespace tessel::cluster
