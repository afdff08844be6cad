// The layout of every public struct that crosses the plugin boundary, pinned.
//
// A plugin is compiled against these headers and runs against the core's
// copy of the same structs, so a struct that changes size, alignment or the
// offset of a member breaks every plugin built before the change, silently:
// the plugin reads the wrong bytes. The pins below turn such a change into a
// compile error telling the developer to bump kAbiVersion (plugin.hpp) and
// update the pins here; and kAbiLayout, a fingerprint of the same facts
// (names, sizes, alignments, offsets), goes into every plugin's record, so
// that the loader also refuses a plugin whose headers differed although the
// version was not bumped.
//
// What the pins cannot see: a virtual function added to or moved in a stage
// interface (vtable layout), a changed function signature, a changed enum.
// Those still need a manual bump of kAbiVersion.
//
// The numbers hold for the toolchain tessel is built with: g++ or clang with
// libstdc++ on x86-64 (Itanium C++ ABI, LP64), where std::string is 32 bytes,
// std::vector 24, std::optional<double> 16. A plugin built with another
// standard library or data model (libc++, -D_GLIBCXX_DEBUG, 32-bit) cannot
// share these structs with the core anyway; here it fails to compile rather
// than crash at run time. offsetof on the structs holding std::string and
// other non-standard-layout members is conditionally supported; g++ and
// clang support it for classes without virtual bases, as here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "tessel/cluster.hpp"
#include "tessel/job.hpp"
#include "tessel/lab.hpp"
#include "tessel/plugin.hpp"
#include "tessel/reason.hpp"
#include "tessel/slots.hpp"
#include "tessel/stages.hpp"
#include "tessel/throughput.hpp"
#include "tessel/view.hpp"

// TYPE(struct, sizeof, alignof) and FIELD(struct, member, offsetof), for
// every public struct the core and a plugin hand each other (and, for the
// classes whose members are private, their size and alignment alone).
#define TESSEL_ABI_PINS(TYPE, FIELD) \
  TYPE(Resources, 32, 8) \
  FIELD(Resources, gpus, 0) \
  FIELD(Resources, gpu_milli, 4) \
  FIELD(Resources, cpus, 8) \
  FIELD(Resources, mem_gb, 16) \
  FIELD(Resources, gpu_type, 24) \
  TYPE(JobSpec, 216, 8) \
  FIELD(JobSpec, id, 0) \
  FIELD(JobSpec, name, 8) \
  FIELD(JobSpec, tenant, 40) \
  FIELD(JobSpec, vc, 72) \
  FIELD(JobSpec, model, 104) \
  FIELD(JobSpec, arrival, 136) \
  FIELD(JobSpec, gpus, 144) \
  FIELD(JobSpec, min_gpus, 148) \
  FIELD(JobSpec, max_gpus, 152) \
  FIELD(JobSpec, gpu_milli, 156) \
  FIELD(JobSpec, total_work, 160) \
  FIELD(JobSpec, cpus, 168) \
  FIELD(JobSpec, mem_gb, 176) \
  FIELD(JobSpec, batch_size, 184) \
  FIELD(JobSpec, parameters, 192) \
  FIELD(JobSpec, priority, 200) \
  FIELD(JobSpec, tracked, 208) \
  TYPE(JobLayout, 12, 4) \
  FIELD(JobLayout, batch_size, 0) \
  FIELD(JobLayout, tensor_parallel, 4) \
  FIELD(JobLayout, pipeline_parallel, 8) \
  TYPE(Allocation, 64, 8) \
  FIELD(Allocation, gpus, 0) \
  FIELD(Allocation, gpu_milli, 24) \
  FIELD(Allocation, cpus, 32) \
  FIELD(Allocation, mem_gb, 40) \
  FIELD(Allocation, layout, 48) \
  TYPE(JobState, 400, 8) \
  FIELD(JobState, spec, 0) \
  FIELD(JobState, status, 216) \
  FIELD(JobState, allocation, 224) \
  FIELD(JobState, attained_service, 288) \
  FIELD(JobState, executed_work, 296) \
  FIELD(JobState, gpu_seconds, 304) \
  FIELD(JobState, first_start, 312) \
  FIELD(JobState, finish, 328) \
  FIELD(JobState, waiting_since, 344) \
  FIELD(JobState, last_run_seconds, 352) \
  FIELD(JobState, preemptions, 360) \
  FIELD(JobState, attempts, 364) \
  FIELD(JobState, shared_seconds, 368) \
  FIELD(JobState, slots, 376) \
  TYPE(SlotStorage, 24, 8) \
  TYPE(SlotKey, 16, 8) \
  FIELD(SlotKey, registry, 0) \
  FIELD(SlotKey, index, 8) \
  TYPE(NodeSpec, 104, 8) \
  FIELD(NodeSpec, name, 0) \
  FIELD(NodeSpec, gpu_type, 32) \
  FIELD(NodeSpec, gpus, 64) \
  FIELD(NodeSpec, cpus, 72) \
  FIELD(NodeSpec, mem_gb, 80) \
  FIELD(NodeSpec, rack, 88) \
  FIELD(NodeSpec, gpu_mem_gb, 96) \
  TYPE(Node, 168, 8) \
  FIELD(Node, id, 0) \
  FIELD(Node, spec, 8) \
  FIELD(Node, type, 112) \
  FIELD(Node, up, 116) \
  FIELD(Node, first_gpu, 120) \
  FIELD(Node, free_gpus, 124) \
  FIELD(Node, free_cpus, 128) \
  FIELD(Node, free_mem_gb, 136) \
  FIELD(Node, slots, 144) \
  TYPE(Gpu, 40, 8) \
  FIELD(Gpu, node, 0) \
  FIELD(Gpu, used_milli, 4) \
  FIELD(Gpu, jobs, 8) \
  FIELD(Gpu, sharers, 32) \
  TYPE(Shape, 120, 8) \
  FIELD(Shape, gpus, 0) \
  FIELD(Shape, gpu_type, 8) \
  FIELD(Shape, nodes, 40) \
  FIELD(Shape, racks, 44) \
  FIELD(Shape, gpu_milli, 48) \
  FIELD(Shape, cpus, 56) \
  FIELD(Shape, mem_gb, 64) \
  FIELD(Shape, gpu_mem_gb, 72) \
  FIELD(Shape, layout, 80) \
  FIELD(Shape, node_gpus, 96) \
  TYPE(ClusterState, 160, 8) \
  TYPE(SchedulerSettings, 24, 8) \
  FIELD(SchedulerSettings, round_seconds, 0) \
  FIELD(SchedulerSettings, service, 8) \
  FIELD(SchedulerSettings, decisions_recorded, 9) \
  FIELD(SchedulerSettings, restart_seconds, 16) \
  TYPE(SchedulerView, 120, 8) \
  TYPE(BatchSizeRange, 8, 4) \
  FIELD(BatchSizeRange, smallest, 0) \
  FIELD(BatchSizeRange, largest, 4) \
  TYPE(Reason, 80, 8) \
  TYPE(AdmissionDecision, 88, 8) \
  FIELD(AdmissionDecision, job, 0) \
  FIELD(AdmissionDecision, verdict, 4) \
  FIELD(AdmissionDecision, reason, 8) \
  TYPE(Grant, 128, 8) \
  FIELD(Grant, job, 0) \
  FIELD(Grant, resources, 8) \
  FIELD(Grant, reason, 40) \
  FIELD(Grant, share_with, 120) \
  TYPE(AllocationPlan, 136, 8) \
  FIELD(AllocationPlan, ranked, 0) \
  FIELD(AllocationPlan, stop_at_first_unplaced, 24) \
  FIELD(AllocationPlan, revisit_at, 32) \
  FIELD(AllocationPlan, keep_running, 40) \
  FIELD(AllocationPlan, provisional, 128) \
  TYPE(PlacementChoice, 104, 8) \
  FIELD(PlacementChoice, gpus, 0) \
  FIELD(PlacementChoice, reason, 24) \
  TYPE(ResizeProposal, 104, 8) \
  FIELD(ResizeProposal, job, 0) \
  FIELD(ResizeProposal, gpus, 4) \
  FIELD(ResizeProposal, layout, 8) \
  FIELD(ResizeProposal, reason, 24) \
  TYPE(ForecastOptions, 16, 8) \
  FIELD(ForecastOptions, horizon_seconds, 0) \
  FIELD(ForecastOptions, known_arrivals, 8) \
  TYPE(Forecast, 40, 8) \
  FIELD(Forecast, jobs, 0) \
  FIELD(Forecast, finished, 8) \
  FIELD(Forecast, mean_time_in_system, 16) \
  FIELD(Forecast, mean_queueing_delay, 24) \
  FIELD(Forecast, end, 32) \
  TYPE(PluginInfo, 632, 8) \
  FIELD(PluginInfo, abi_version, 0) \
  FIELD(PluginInfo, kind, 4) \
  FIELD(PluginInfo, layout, 8) \
  FIELD(PluginInfo, arg_count, 16) \
  FIELD(PluginInfo, name, 24) \
  FIELD(PluginInfo, version, 88) \
  FIELD(PluginInfo, description, 120) \
  TYPE(ArgRecord, 1352, 4) \
  FIELD(ArgRecord, name, 0) \
  FIELD(ArgRecord, type, 64) \
  FIELD(ArgRecord, has_default, 68) \
  FIELD(ArgRecord, default_value, 72) \
  FIELD(ArgRecord, help, 328) \
  FIELD(ArgRecord, choices, 840) \
  TYPE(ArgDeclaration, 144, 8) \
  FIELD(ArgDeclaration, name, 0) \
  FIELD(ArgDeclaration, type, 32) \
  FIELD(ArgDeclaration, default_value, 40) \
  FIELD(ArgDeclaration, help, 80) \
  FIELD(ArgDeclaration, choices, 112) \
  TYPE(FactoryError, 72, 8) \
  FIELD(FactoryError, argument, 0) \
  FIELD(FactoryError, message, 32) \
  FIELD(FactoryError, interrupted, 64) \
  TYPE(PluginArgs, 48, 8) \
  TYPE(ArgValue, 56, 8) \
  TYPE(PluginContext, 56, 8) \
  TYPE(SlotRegistry, 16, 8)

namespace tessel {

static_assert(kAbiVersion == 14,
              "tessel ABI: the pins in tessel/abi_layout.hpp describe ABI 14; check that they describe the new "
              "version's structs and change this number with kAbiVersion");

// The records the loader reads from the library file are plain data, with no
// padding whose bytes could differ.
static_assert(std::is_trivially_copyable_v<PluginInfo> && std::is_standard_layout_v<PluginInfo> &&
              std::has_unique_object_representations_v<PluginInfo>);
static_assert(std::is_trivially_copyable_v<ArgRecord> && std::is_standard_layout_v<ArgRecord> &&
              std::has_unique_object_representations_v<ArgRecord>);

namespace abi {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"

#define TESSEL_ABI_CHECK_TYPE_(T, size, align)                                                        \
  static_assert(sizeof(T) == (size) && alignof(T) == (align),                                         \
                "tessel ABI: the size or alignment of " #T " changed. Plugins built against the old " \
                "header would misread it: bump kAbiVersion in tessel/plugin.hpp and update the pins " \
                "in tessel/abi_layout.hpp");
#define TESSEL_ABI_CHECK_FIELD_(T, member, offset)                                                    \
  static_assert(offsetof(T, member) == (offset),                                                     \
                "tessel ABI: " #T "::" #member " moved. Plugins built against the old header would "  \
                "misread it: bump kAbiVersion in tessel/plugin.hpp and update the pins in "           \
                "tessel/abi_layout.hpp");
TESSEL_ABI_PINS(TESSEL_ABI_CHECK_TYPE_, TESSEL_ABI_CHECK_FIELD_)
#undef TESSEL_ABI_CHECK_TYPE_
#undef TESSEL_ABI_CHECK_FIELD_

// FNV-1a, over text and numbers alike.
constexpr std::uint64_t mix(std::uint64_t hash, std::uint64_t value) {
  for (int byte = 0; byte < 8; ++byte) hash = (hash ^ ((value >> (8 * byte)) & 0xff)) * 0x100000001b3ull;
  return hash;
}
constexpr std::uint64_t mix(std::uint64_t hash, const char* text) {
  for (; *text != '\0'; ++text) hash = (hash ^ static_cast<unsigned char>(*text)) * 0x100000001b3ull;
  return mix(hash, std::uint64_t{0});
}

// The fingerprint of the real layout, not of the pinned numbers, so that it
// would differ even where a pin were edited without a version bump.
consteval std::uint64_t layout_fingerprint() {
  std::uint64_t hash = 0xcbf29ce484222325ull;
#define TESSEL_ABI_MIX_TYPE_(T, size, align) hash = mix(mix(mix(hash, #T), sizeof(T)), alignof(T));
#define TESSEL_ABI_MIX_FIELD_(T, member, offset) hash = mix(mix(hash, #member), offsetof(T, member));
  TESSEL_ABI_PINS(TESSEL_ABI_MIX_TYPE_, TESSEL_ABI_MIX_FIELD_)
#undef TESSEL_ABI_MIX_TYPE_
#undef TESSEL_ABI_MIX_FIELD_
  return hash;
}

#pragma GCC diagnostic pop

}  // namespace abi

// Goes into every plugin's info record (PluginInfo::layout); the loader
// refuses a plugin whose fingerprint is not this tessel's.
inline constexpr std::uint64_t kAbiLayout = abi::layout_fingerprint();

}  // namespace tessel
