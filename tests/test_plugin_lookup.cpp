// Looking a plugin up opens its library alone; every other file on the
// search path is only read (its records), never opened.
#include <doctest/doctest.h>

#include <cstdlib>

#include "plugins/registry.hpp"
#include "support.hpp"

using namespace tessel;
using namespace tessel::test;

namespace {

// A directory holding a fresh copy of the test plugin `newest_first`, whose
// static constructor leaves a marker file: a fresh file, so that no earlier
// load in this process hides the marker. Markers go to `markers`.
struct MarkedPlugin {
  TempDir dir, markers;
  MarkedPlugin() {
    fs::copy_file(test_plugin("newest_first"), dir.path() / "newest_first.so");
    REQUIRE(setenv("TESSEL_TEST_MARKER_DIR", markers.path().c_str(), 1) == 0);
  }
  ~MarkedPlugin() { unsetenv("TESSEL_TEST_MARKER_DIR"); }
  bool opened() const { return fs::exists(markers.path() / "newest_first"); }
};

}  // namespace

TEST_CASE("a lookup opens the library it returns and no other") {
  MarkedPlugin marked;
  PluginRegistry registry({marked.dir.path().string()});
  const PluginEntry& fifo = registry.find(PluginKind::allocation, "fifo");
  CHECK(fifo.library != nullptr);
  CHECK((fifo.factory != nullptr));
  CHECK_FALSE(marked.opened());
  // The other stages' lookups open theirs, and still not the marked one.
  CHECK(registry.find(PluginKind::placement, "consolidated").library != nullptr);
  CHECK_FALSE(marked.opened());

  // The control: looking the marked plugin up opens it, once.
  const PluginEntry& newest = registry.find(PluginKind::allocation, "newest_first");
  CHECK(newest.library != nullptr);
  CHECK(marked.opened());
  CHECK(&registry.find(PluginKind::allocation, "newest_first") == &newest);
}

TEST_CASE("a name not on the search path, or of another stage, opens nothing it need not") {
  MarkedPlugin marked;
  PluginRegistry registry({marked.dir.path().string()});
  // Another stage's name is told from the records alone.
  CHECK_THROWS_WITH_AS(registry.find(PluginKind::placement, "newest_first"),
                       "'newest_first' is an allocation plugin, not a placement plugin", PluginLoadError);
  CHECK_FALSE(marked.opened());
  // An unknown name lists the valid ones: those that open, so all are opened.
  try {
    registry.find(PluginKind::allocation, "no_such_policy");
    FAIL("an unknown name was found");
  } catch (const PluginLoadError& e) {
    CHECK(e.code() == LoadError::not_found);
    const std::string message = e.what();
    CHECK(message.find("unknown allocation plugin 'no_such_policy' (valid: ") == 0);
    CHECK(message.find("newest_first") != std::string::npos);
    CHECK(message.find("fifo") != std::string::npos);
  }
  CHECK(marked.opened());
}

TEST_CASE("listing the plugins opens every one") {
  MarkedPlugin marked;
  PluginRegistry registry({marked.dir.path().string()});
  bool listed = false;
  for (const PluginEntry& entry : registry.plugins()) {
    CAPTURE(entry.path);
    CHECK(entry.library != nullptr);
    CHECK((entry.factory != nullptr));
    listed |= std::string_view(entry.info.name) == "newest_first";
  }
  CHECK(listed);
  CHECK(marked.opened());
}

TEST_CASE("a name defined twice is refused although neither file is opened") {
  MarkedPlugin marked;
  TempDir other;
  fs::copy_file(test_plugin("newest_first"), other.path() / "renamed.so");
  PluginRegistry registry({marked.dir.path().string(), other.path().string()});
  CHECK_THROWS_AS(registry.find(PluginKind::allocation, "newest_first"), PluginLoadError);
  CHECK_FALSE(marked.opened());
}

TEST_CASE("tessel validate and tessel run open only the plugins the experiment names") {
  MarkedPlugin marked;
  TempDir work;
  const std::vector<std::string> env = {"TESSEL_PLUGIN_PATH=" + marked.dir.path().string(),
                                        "TESSEL_TEST_MARKER_DIR=" + marked.markers.path().string()};
  const std::string quickstart = (source_root() / "experiments" / "quickstart.toml").string();
  const auto validated = run_tessel({"validate", quickstart}, work.path(), env);
  CHECK_MESSAGE(validated.code == 0, validated.err);
  CHECK_FALSE(marked.opened());
  const auto ran = run_tessel({"run", quickstart, "--db", (work.path() / "r.db").string(), "-q",
                               "--set", "workload.jobs=20"},
                              work.path(), env);
  CHECK_MESSAGE(ran.code == 0, ran.err);
  CHECK_FALSE(marked.opened());
  // The control: an experiment naming it opens it.
  const auto named = run_tessel({"validate", quickstart, "--set", "scheduler.allocation.plugin=newest_first"},
                                work.path(), env);
  CHECK_MESSAGE(named.code == 0, named.err);
  CHECK(marked.opened());
}
