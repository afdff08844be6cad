#include "config/workload_settings.hpp"

namespace tessel {

namespace {

TraceTransforms read_transforms(TableReader& reader) {
  TraceTransforms t;
  if (reader.present("window")) {
    auto window = reader.numbers("window", std::nullopt, 0);
    if (window && (window->size() != 2 || (*window)[0] >= (*window)[1]))
      reader.error("window", "'window' in [workload] must be [start, end) seconds with start < end");
    else if (window)
      t.window = std::pair((*window)[0], (*window)[1]);
  }
  t.vcs = reader.strings("vcs", std::vector<std::string>{}).value_or(std::vector<std::string>{});
  t.tenants = reader.strings("tenants", std::vector<std::string>{}).value_or(std::vector<std::string>{});
  if (reader.present("max_jobs")) t.max_jobs = reader.integer("max_jobs", std::nullopt, 1);
  t.shuffle = reader.boolean("shuffle", false).value_or(false);
  if (reader.present("gpu_demand_ratio")) {
    t.gpu_demand_ratio = reader.number("gpu_demand_ratio", std::nullopt, 0);
    if (t.gpu_demand_ratio && *t.gpu_demand_ratio <= 0) {
      reader.error("gpu_demand_ratio", "'gpu_demand_ratio' in [workload] must be > 0");
      t.gpu_demand_ratio.reset();
    }
  }
  if (reader.present("poisson_jobs_per_hour")) {
    t.poisson_jobs_per_hour = reader.number("poisson_jobs_per_hour", std::nullopt, 0);
    if (t.poisson_jobs_per_hour && *t.poisson_jobs_per_hour <= 0) {
      reader.error("poisson_jobs_per_hour", "'poisson_jobs_per_hour' in [workload] must be > 0");
      t.poisson_jobs_per_hour.reset();
    }
  }
  t.arrival_rate_scale = reader.number("arrival_rate_scale", 1, 1e-6).value_or(1);
  t.duration_scale = reader.number("duration_scale", 1, 1e-6).value_or(1);
  t.elastic_min_gpus = static_cast<int>(reader.integer("elastic_min_gpus", 0, 0, 1 << 20).value_or(0));
  t.elastic_max_gpus = static_cast<int>(reader.integer("elastic_max_gpus", 0, 0, 1 << 20).value_or(0));
  if (t.elastic_min_gpus > 0 && t.elastic_max_gpus > 0 && t.elastic_min_gpus > t.elastic_max_gpus)
    reader.error("elastic_max_gpus", "'elastic_max_gpus' (" + std::to_string(t.elastic_max_gpus) +
                                         ") in [workload] is below 'elastic_min_gpus' (" +
                                         std::to_string(t.elastic_min_gpus) + ")");
  t.elastic_models = reader.strings("elastic_models", std::vector<std::string>{}).value_or(std::vector<std::string>{});
  return t;
}

}  // namespace

ModelSettings read_model_settings(TableReader& parent, std::shared_ptr<const TomlDocument> document,
                                  std::string_view key) {
  ModelSettings model;
  model.where = parent.where(key);
  model.arguments = {std::move(document), nullptr, parent.table_name() + "." + std::string(key), {}};
  const toml::node* node = parent.node(key);
  if (node == nullptr) {
    model.name = "linear";
  } else if (node->is_string()) {
    model.name = node->as_string()->get();
  } else if (node->is_table()) {
    const toml::node* name = node->as_table()->get("name");
    if (name == nullptr || !name->is_string()) {
      parent.error(key, "'" + std::string(key) + "' in [" + parent.table_name() + "] needs a string 'name'");
      return model;
    }
    model.name = name->as_string()->get();
    model.arguments.table = node->as_table();
    model.arguments.read = {"name"};
  } else {
    parent.error(key, "'" + std::string(key) + "' in [" + parent.table_name() +
                          "] must be a model name or a table, got " + std::string(type_name(*node)));
  }
  return model;
}

WorkloadSettings read_workload_settings(TableReader& reader, std::shared_ptr<const TomlDocument> document) {
  WorkloadSettings settings;
  settings.kind = reader.string("kind", std::nullopt);
  settings.seed = static_cast<std::uint64_t>(reader.integer("seed", 1, 0).value_or(1));
  if (reader.present("track")) {
    auto track = reader.numbers("track", std::nullopt, 0, 4e9);
    if (track && (track->size() != 2 || (*track)[0] >= (*track)[1] ||
                  (*track)[0] != static_cast<JobId>((*track)[0]) ||
                  (*track)[1] != static_cast<JobId>((*track)[1])))
      reader.error("track", "'track' in [workload] must be [first, last) job ids with first < last");
    else if (track)
      settings.track = {static_cast<JobId>((*track)[0]), static_cast<JobId>((*track)[1])};
  }
  if (reader.present("give_up_hours"))
    if (auto hours = reader.number("give_up_hours", std::nullopt, 0)) settings.give_up_seconds = 3600 * *hours;
  settings.model = read_model_settings(reader, document, "model");
  settings.reference_gpu_type = reader.string("reference_gpu_type", "").value_or("");
  settings.transforms = read_transforms(reader);
  settings.options = reader.defer(std::move(document));
  return settings;
}

}  // namespace tessel
