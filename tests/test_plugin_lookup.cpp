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
  fs::copy_file(test_plugin("newest_first"), other.path() / "newest_first.so");
  PluginRegistry registry({marked.dir.path().string(), other.path().string()});
  CHECK_THROWS_AS(registry.find(PluginKind::allocation, "newest_first"), PluginLoadError);
  CHECK_FALSE(marked.opened());
}

TEST_CASE("a plugin's file is named after it: a file of another name is refused, never opened") {
  TempDir dir, markers;
  REQUIRE(setenv("TESSEL_TEST_MARKER_DIR", markers.path().c_str(), 1) == 0);
  const fs::path renamed = dir.path() / "renamed.so";
  fs::copy_file(test_plugin("newest_first"), renamed);
  PluginRegistry registry({dir.path().string()});
  const std::string refusal = renamed.string() +
                              ": plugin file not named after its plugin: it defines allocation plugin "
                              "'newest_first', so it must be called newest_first.so to be found by that name "
                              "(or be named with `path`)";
  // Looked up by its name, it is not found, and the error says where it is.
  try {
    registry.find(PluginKind::allocation, "newest_first");
    FAIL("a misnamed file was found");
  } catch (const PluginLoadError& e) {
    CHECK(e.code() == LoadError::not_found);
    CHECK(std::string(e.what()).find("\n  note: refused " + refusal) != std::string::npos);
  }
  // Listed, it is refused, in the same words.
  REQUIRE(registry.rejected().size() == 1);
  CHECK(registry.rejected()[0].error == LoadError::misnamed);
  CHECK(registry.rejected()[0].message == refusal);
  CHECK_FALSE(fs::exists(markers.path() / "newest_first"));
  // Named by its path, it is what it says it is.
  CHECK(std::string_view(registry.open(renamed.string(), PluginKind::allocation).info.name) == "newest_first");
  unsetenv("TESSEL_TEST_MARKER_DIR");
}

TEST_CASE("a broken file of the name asked for is the answer, typed; one of another name is only noted in a listing") {
  TempDir dir;
  // Refused when read (another ABI), so a lookup that read it would have it
  // as a refusal; it is only noted when everything is listed.
  fs::copy_file(test_plugin("wrong_abi"), dir.path() / "wrong_abi.so");
  fs::copy_file(test_plugin("newest_first"), dir.path() / "newest_first.so");
  PluginRegistry registry({dir.path().string()});
  CHECK(registry.find(PluginKind::allocation, "newest_first").path == (dir.path() / "newest_first.so").string());
  // A broken file of the name asked for is the answer, typed, ahead of "not found".
  CHECK_THROWS_WITH_AS(registry.find(PluginKind::allocation, "wrong_abi"),
                       doctest::Contains("wrong_abi.so: plugin ABI mismatch"), PluginLoadError);
  REQUIRE(registry.rejected().size() == 1);
  CHECK(registry.rejected()[0].error == LoadError::abi_mismatch);
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
