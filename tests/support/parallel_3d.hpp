// parallel-3d for the Megatron-LM tests (test_tenplex_megatron.cpp,
// test_megatron_rows.cpp): the model of a [workload.model] table's keys, and
// the seconds of one step of a job on one node's GPUs as (t, p).
#pragma once

#include <memory>
#include <string>

#include "config/toml_document.hpp"
#include "models/models.hpp"

namespace tessel::test {

// parallel-3d with `arguments` (TOML keys after the name), or UserError.
inline std::shared_ptr<const ThroughputModel> parallel_3d_model(const std::string& arguments) {
  const auto document = std::make_shared<const TomlDocument>(
      TomlDocument::parse("[workload]\nmodel = { name = \"parallel-3d\", " + arguments + " }\n", "megatron.toml"));
  Diagnostics diagnostics;
  TableReader workload(*document, diagnostics, document->root()["workload"].as_table(), "workload");
  auto model = build_throughput_model(read_model_settings(workload, document), diagnostics);
  diagnostics.raise_if_any();
  return model;
}

// Seconds of one step: `gpus` GPUs of one node with 80 GB each, (t, p) =
// (tp, pp), so gpus / (tp pp) replicas.
inline double step_seconds(const ThroughputModel& model, double parameters, int batch, const std::string& gpu_type,
                           int gpus, int tp, int pp) {
  JobSpec job;
  job.parameters = parameters;
  job.batch_size = batch;
  Shape shape;
  shape.gpus = gpus;
  shape.nodes = 1;
  shape.gpu_type = gpu_type;
  shape.gpu_mem_gb = 80;
  shape.layout.tensor_parallel = tp;
  shape.layout.pipeline_parallel = pp;
  return 1 / model.rate(job, shape);
}

}  // namespace tessel::test
