// `tessel merge`: the runs of several results databases (a sweep's shards,
// one per Slurm array task) copied into one.
//
// Each run gets a fresh id in the output, and every row of every table keyed
// by run (jobs, samples, decisions, metrics, resizes, the cluster_* tables)
// follows it, in one transaction per shard. Merging is idempotent: a run is
// recognised by what it ran and when (label, axes, fingerprint, config,
// seed, mode, start time, status and totals), so a shard merged twice adds
// nothing. Shards of another schema version than this tessel's are refused,
// all named, before anything is written; so are runs still 'running', which
// are left out with a note.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tessel {

struct MergeOutcome {
  std::size_t copied = 0;   // runs added to the output
  std::size_t present = 0;  // runs the output had already
  std::vector<std::string> notes;  // runs left out, and why
};

// Throws UserError: a shard missing, not a tessel database, of another
// schema, named twice or the output itself.
MergeOutcome merge_databases(const std::string& output, const std::vector<std::string>& shards);

}  // namespace tessel
