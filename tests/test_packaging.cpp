// Packaging: `meson install` lays out the binary, library, headers, plugins
// and pkg-config file, and an out-of-tree plugin builds against them; the
// installed tessel opens its real-node commands' library from the install.
#include <doctest/doctest.h>

#include <fstream>
#include <iterator>

#include "support.hpp"

using namespace tessel::test;

TEST_CASE("the out-of-tree example builds against the installed SDK and runs") {
  TempDir dir;
  const fs::path stage = dir.path() / "stage";
  const auto install = run_command({"meson", "install", "-C", build_root().string(), "--no-rebuild",
                                    "--quiet", "--destdir", stage.string()});
  REQUIRE_MESSAGE(install.code == 0, install.err);

  // Find the staged pkg-config file whatever the libdir is.
  fs::path pc;
  for (const auto& entry : fs::recursive_directory_iterator(stage))
    if (entry.path().filename() == "tessel.pc") pc = entry.path();
  REQUIRE_FALSE(pc.empty());
  const fs::path prefix_root = stage;
  fs::path tessel, libtessel;
  bool has_header = false, has_layout_pins = false, has_plugin = false;
  for (const auto& entry : fs::recursive_directory_iterator(stage)) {
    if (entry.path().filename() == "tessel" && entry.path().parent_path().filename() == "bin") tessel = entry.path();
    if (entry.path().filename() == "libtessel.so") libtessel = entry.path();
    has_header |= entry.path().filename() == "tessel.hpp";
    has_layout_pins |= entry.path().filename() == "abi_layout.hpp";
    has_plugin |= entry.path().filename() == "fifo.so" && entry.path().parent_path().filename() == "allocation";
  }
  REQUIRE_FALSE(tessel.empty());
  REQUIRE_FALSE(libtessel.empty());
  CHECK(has_header);
  CHECK(has_layout_pins);
  CHECK(has_plugin);

  // The installed tessel, while the build tree still exists, uses the
  // installed plugins alone: the same names twice would be an error.
  const auto installed = run_command({tessel.string(), "plugins", "-v"}, dir.path(),
                                     {"LD_LIBRARY_PATH=" + libtessel.parent_path().string()});
  CHECK_MESSAGE(installed.code == 0, installed.err);
  CHECK(installed.err.empty());
  CHECK(installed.out.find("file: " + libtessel.parent_path().string()) != std::string::npos);
  CHECK(installed.out.find("file: " + build_root().string()) == std::string::npos);

  // The real-node commands come from the installed libtessel_nodes.so, which
  // tessel opens only for them: the program itself does not link OpenSSL.
  const fs::path nodes_library = fs::canonical(libtessel.parent_path()) / "tessel" / "libtessel_nodes.so";
  CHECK(fs::exists(nodes_library));
  const auto needed = run_command({"readelf", "-d", tessel.string()});
  REQUIRE_MESSAGE(needed.code == 0, needed.err);
  CHECK(needed.out.find("[libtessel.so]") != std::string::npos);
  CHECK(needed.out.find("libssl") == std::string::npos);
  CHECK(needed.out.find("libcrypto") == std::string::npos);
  const fs::path secret = dir.path() / "secret";
  std::ofstream(secret) << "a-secret-for-the-packaging-test\n";
  fs::permissions(secret, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  const auto status = run_command({tessel.string(), "status", "--scheduler", "127.0.0.1:1", "--insecure",
                                   "--secret-file", secret.string()},
                                  dir.path(), {"LD_LIBRARY_PATH=" + libtessel.parent_path().string(), "LD_DEBUG=libs"});
  CHECK(status.code == 2);
  CHECK_MESSAGE(status.err.find("tessel: cannot reach the scheduler at 127.0.0.1:1") != std::string::npos, status.err);
  CHECK(status.err.find("calling init: " + nodes_library.string()) != std::string::npos);
  CHECK(status.err.find(build_root().string()) == std::string::npos);

  const std::vector<std::string> env = {"PKG_CONFIG_PATH=" + pc.parent_path().string(),
                                        "PKG_CONFIG_SYSROOT_DIR=" + prefix_root.string()};
  // The SDK's headers need nothing beyond the standard library, so tessel.pc
  // requires nothing; the LP wrapper's GLPK comes with tessel-lp.
  for (const auto& entry : fs::recursive_directory_iterator(stage))
    if (entry.path().extension() == ".hpp" && entry.path().parent_path().filename() == "tessel") {
      std::ifstream header(entry.path());
      const std::string text{std::istreambuf_iterator<char>(header), {}};
      CHECK_MESSAGE(text.find("#include <boost/") == std::string::npos, entry.path().string());
    }
  const auto lp = run_command({"pkg-config", "--cflags", "--libs", "tessel-lp"}, dir.path(), env);
  REQUIRE_MESSAGE(lp.code == 0, lp.err);
  CHECK(lp.out.find("-ltessel") != std::string::npos);
  CHECK(lp.out.find("-lglpk") != std::string::npos);
  CHECK(lp.out.find("-std=c++20") != std::string::npos);
  const fs::path example = source_root() / "examples/out-of-tree-plugin";
  const fs::path build = dir.path() / "example-build";
  const auto setup = run_command({"meson", "setup", build.string(), example.string()}, dir.path(), env);
  REQUIRE_MESSAGE(setup.code == 0, (setup.out + setup.err));
  const auto compile = run_command({"ninja", "-C", build.string()}, dir.path(), env);
  REQUIRE_MESSAGE(compile.code == 0, (compile.out + compile.err));
  REQUIRE(fs::exists(build / "smallest_first.so"));

  const std::vector<std::string> plugin_env = {"TESSEL_PLUGIN_PATH=" + build.string()};
  const auto listed = run_tessel({"plugins", "--kind", "allocation"}, dir.path(), plugin_env);
  CHECK(listed.out.find("smallest_first") != std::string::npos);
  const auto run = run_tessel({"run", (source_root() / "experiments/quickstart.toml").string(), "--db", "q.db",
                               "--set", "scheduler.allocation.plugin=smallest_first", "--set", "workload.jobs=60"},
                              dir.path(), plugin_env);
  CHECK_MESSAGE(run.code == 0, run.err);
  CHECK(run.out.find("complete    60        60") != std::string::npos);
}
