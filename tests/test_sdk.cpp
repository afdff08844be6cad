// The public data model: reasons, the random generator, cluster bookkeeping.
#include <doctest/doctest.h>

#include <cmath>

#include "tessel/tessel.hpp"

using namespace tessel;

TEST_CASE("a reason formats its numbers only when asked") {
  CHECK(Reason("needs {} GPUs on one node, largest free block is {}", 8, 4).str() ==
        "needs 8 GPUs on one node, largest free block is 4");
  CHECK(Reason("ratio {}", 0.125).str() == "ratio 0.125");
  CHECK(Reason("no placeholders").str() == "no placeholders");
  CHECK(Reason("more {} than {}", 1).str() == "more 1 than {}");
  CHECK(Reason::text("vc 'research' is over quota").str() == "vc 'research' is over quota");
  CHECK(Reason().empty());
}

TEST_CASE("the random generator is reproducible and well spread") {
  Rng a(7), b(7), c(8);
  for (int i = 0; i < 100; ++i) CHECK(a.next() == b.next());
  CHECK(Rng(7).next() != c.next());

  Rng rng(1);
  double sum = 0;
  const int n = 200'000;
  for (int i = 0; i < n; ++i) sum += rng.exponential(2.0);
  CHECK(sum / n == doctest::Approx(0.5).epsilon(0.01));

  const double weights[] = {0.7, 0.1, 0.15, 0.05};
  int counts[4] = {};
  for (int i = 0; i < n; ++i) ++counts[rng.weighted(weights)];
  CHECK(counts[0] / double(n) == doctest::Approx(0.7).epsilon(0.02));
  CHECK(counts[3] / double(n) == doctest::Approx(0.05).epsilon(0.05));
}

namespace {
ClusterState two_racks() {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 4; ++i) nodes.push_back({"n" + std::to_string(i), i < 2 ? "v100" : "k80", 4, 16, 64, i / 2});
  return ClusterState(nodes);
}
Allocation gpus(std::vector<GpuId> ids) { return Allocation{std::move(ids), 1000, 0, 0}; }
}  // namespace

TEST_CASE("the cluster keeps free counts and the largest free block") {
  ClusterState cluster = two_racks();
  CHECK(cluster.total_gpus() == 16);
  CHECK(cluster.free_gpus() == 16);
  CHECK(cluster.largest_free_block() == 4);
  CHECK(cluster.gpu_types() == std::vector<std::string>{"v100", "k80"});
  CHECK(cluster.rack_count() == 2);

  cluster.assign(1, gpus({0, 1, 2}));  // 3 on n0
  cluster.assign(2, gpus({4, 5, 6, 7}));  // all of n1
  CHECK(cluster.free_gpus() == 9);
  CHECK(cluster.node(0).free_gpus == 1);
  CHECK(cluster.largest_free_block() == 4);
  cluster.assign(3, gpus({8, 9, 12, 13}));  // 2 on n2, 2 on n3
  CHECK(cluster.largest_free_block() == 2);
  CHECK(cluster.gpu(8).jobs == std::vector<JobId>{3});

  const Shape shape = cluster.shape_of(gpus({0, 1, 8}));
  CHECK(shape.gpus == 3);
  CHECK(shape.nodes == 2);
  CHECK(shape.racks == 2);
  CHECK(shape.gpu_type == "v100");
  CHECK(shape.node_gpus == std::vector<int>{2, 1});
  // In the order the allocation first names each node, not by node id.
  CHECK(cluster.shape_of(gpus({8, 0, 9, 12})).node_gpus == std::vector<int>{2, 1, 1});

  cluster.release(3, gpus({8, 9, 12, 13}));
  CHECK(cluster.largest_free_block() == 4);
  cluster.set_up(2, false);
  CHECK(cluster.total_gpus() == 12);
  CHECK(cluster.free_gpus() == 5);
  CHECK(cluster.fits_on(2, {1, 1000, 0, 0}) == 0);
}

TEST_CASE("the cluster refuses impossible assignments with the reason") {
  ClusterState cluster = two_racks();
  cluster.assign(1, gpus({0}));
  std::string why;
  CHECK_FALSE(cluster.can_assign(gpus({0}), &why));
  CHECK(why == "GPU 0 is held by job 1");
  CHECK_FALSE(cluster.can_assign(gpus({1, 1}), &why));
  CHECK(why == "GPU 1 is chosen twice");
  CHECK_FALSE(cluster.can_assign(gpus({99}), &why));
  CHECK(why == "GPU 99 does not exist");
  CHECK_FALSE(cluster.can_assign(Allocation{{4}, 1000, 17, 0}, &why));  // 16 CPUs per node
  CHECK(why == "node n1 lacks CPU or memory for the job's share");
  CHECK_THROWS_AS(cluster.assign(2, gpus({0})), std::logic_error);
}

TEST_CASE("fractional GPUs share a device up to 1000 milli") {
  ClusterState cluster = two_racks();
  cluster.assign(1, Allocation{{0}, 600, 0, 0});
  CHECK(cluster.free_gpus() == 15);
  CHECK(cluster.fits_on(0, {1, 400, 0, 0}) == 4);
  CHECK(cluster.fits_on(0, {1, 500, 0, 0}) == 3);
  cluster.assign(2, Allocation{{0}, 400, 0, 0});
  CHECK(cluster.gpu(0).jobs.size() == 2);
  CHECK(cluster.gpu(0).free_milli() == 0);
  cluster.release(1, Allocation{{0}, 600, 0, 0});
  CHECK(cluster.gpu(0).jobs == std::vector<JobId>{2});
  cluster.release(2, Allocation{{0}, 400, 0, 0});
  CHECK(cluster.free_gpus() == 16);
}

TEST_CASE("CPU and memory limit how many of a job's GPUs a node takes") {
  ClusterState cluster = two_racks();  // 16 CPUs, 64 GB per node
  CHECK(cluster.fits_on(0, {4, 1000, 24, 0}) == 2);  // 6 CPUs per GPU
  CHECK(cluster.fits_on(0, {4, 1000, 0, 200}) == 1);  // 50 GB per GPU
  std::vector<GpuId> taken;
  cluster.take(1, {2, 1000, 0, 0}, 2, taken);
  CHECK(taken == std::vector<GpuId>{4, 5});
  const Shape packed = cluster.packed_shape(JobSpec{}, 6);
  CHECK(packed.nodes == 2);
  CHECK(packed.node_gpus == std::vector<int>{4, 2});  // full nodes, then the rest
  CHECK(packed.gpu_type == "v100");
}

TEST_CASE("a GPU-type request limits the nodes that fit") {
  ClusterState cluster = two_racks();  // n0, n1: v100; n2, n3: k80
  CHECK(cluster.type_index("k80") == 1);
  CHECK(cluster.type_index("a100") == kAnyGpuType);
  CHECK(cluster.node(2).type == 1);
  const Resources k80{2, 1000, 0, 0, cluster.type_index("k80")};
  CHECK(cluster.fits_on(0, k80) == 0);
  CHECK(cluster.fits_on(2, k80) == 4);
  CHECK(cluster.fits_on(0, Resources{2, 1000, 0, 0, kAnyGpuType}) == 4);
}

TEST_CASE("reason numbers read naturally") {
  CHECK(Reason("{} {} {} {}", 38728.3, 12.3456, 0.125, 3.0).str() == "38728 12.35 0.125 3");
  CHECK(Reason("{}", 1e-5).str() == "1e-05");
}

TEST_CASE("a slot belongs to its registry: copies carry it, other registries never see it, types are checked") {
  SlotRegistry parent, fork;
  const SlotKey mine_key = parent.next_job_slot();
  const SlotKey theirs_key = fork.next_job_slot();
  CHECK(mine_key.index == theirs_key.index);  // the same index, in two registries
  Slot<int> mine(mine_key);
  Slot<std::string> theirs(theirs_key);

  SlotStorage original;
  mine(original) = 7;
  SlotStorage copy = original;  // as a fork copies a job
  CHECK(mine(copy) == 7);
  CHECK(theirs(copy).empty());  // a fork's plugin starts afresh, whatever sits at its index
  theirs(copy) = "fork's";
  mine(copy) = 8;
  CHECK(mine(original) == 7);  // the original never sees the fork's writes
  CHECK(theirs(copy) == "fork's");

  Slot<double> wrong_type(mine_key);
  CHECK_THROWS_AS(wrong_type(original), std::logic_error);
}
