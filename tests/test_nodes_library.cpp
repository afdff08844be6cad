// The real-node commands live in libtessel_nodes.so, which `tessel` opens
// only when one of them runs (runners/cli/nodes_library.cpp): no other
// command loads OpenSSL, and a missing or foreign library is a clear error.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "../runners/cli/cluster_commands.hpp"
#include "build_config.hpp"
#include "support.hpp"

using namespace tessel::test;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A secret file the client commands accept (mode 600).
fs::path write_secret(const TempDir& dir) {
  const fs::path secret = dir.path() / "secret";
  std::ofstream(secret) << "a-secret-for-the-nodes-library-test\n";
  fs::permissions(secret, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  return secret;
}

// A client command against a port nothing listens on: it gets as far as
// connecting only from inside the library.
std::vector<std::string> status_args(const fs::path& secret) {
  return {"status", "--scheduler", "127.0.0.1:1", "--insecure", "--secret-file", secret.string()};
}

// Compiles `source` into a shared library at `out`.
void compile_library(const TempDir& dir, const std::string& source, const fs::path& out) {
  const char* cxx = std::getenv("TESSEL_CXX");
  REQUIRE(cxx != nullptr);
  dir.write("entry.cpp", source);
  std::vector<std::string> argv;
  std::istringstream words(cxx);
  for (std::string word; words >> word;) argv.push_back(word);
  for (const std::string& flag : {std::string("-shared"), std::string("-fPIC"), std::string("-o"), out.string(),
                                  std::string("entry.cpp")})
    argv.push_back(flag);
  const CommandResult compiled = run_command(argv, dir.path());
  REQUIRE_MESSAGE(compiled.code == 0, compiled.err);
}

}  // namespace

TEST_CASE("the tessel executable does not link OpenSSL") {
  const CommandResult dynamic = run_command({"readelf", "-d", tessel_exe().string()});
  REQUIRE_MESSAGE(dynamic.code == 0, dynamic.err);
  CHECK(has(dynamic.out, "(NEEDED)"));
  CHECK(has(dynamic.out, "[libtessel.so]"));  // the list is read at all
  CHECK_FALSE(has(dynamic.out, "libssl"));
  CHECK_FALSE(has(dynamic.out, "libcrypto"));
}

TEST_CASE("validate maps no OpenSSL; a real-node command loads it with its library") {
  TempDir dir;
  // The dynamic loader names every library it maps (LD_DEBUG=libs).
  const CommandResult validate = run_tessel(
      {"validate", (source_root() / "experiments/quickstart.toml").string()}, dir.path(), {"LD_DEBUG=libs"});
  REQUIRE_MESSAGE(validate.code == 0, validate.err);
  CHECK(has(validate.err, "libtessel.so"));
  CHECK_FALSE(has(validate.err, "libssl"));
  CHECK_FALSE(has(validate.err, "libcrypto"));
  CHECK_FALSE(has(validate.err, "libtessel_nodes"));

  const CommandResult status = run_tessel(status_args(write_secret(dir)), dir.path(), {"LD_DEBUG=libs"});
  CHECK(status.code == 2);  // the user's error, thrown inside the library, caught in main
  CHECK(has(status.err, "tessel: cannot reach the scheduler at 127.0.0.1:1"));
  CHECK(has(status.err, tessel::kBuildNodesLibrary));
  CHECK(has(status.err, "libssl"));
}

TEST_CASE("a missing, foreign or stale real-node library: exit 1, naming the file") {
  TempDir dir;
  const fs::path secret = write_secret(dir);
  // tessel and its libtessel outside the build tree, in the layout its
  // RUNPATH ($ORIGIN/../../core) expects: it looks for the library beside
  // that libtessel, as an install does.
  const fs::path exe = dir.path() / "runners/cli/tessel";
  const fs::path core = dir.path() / "core";
  fs::create_directories(exe.parent_path());
  fs::create_directories(core);
  fs::copy_file(tessel_exe(), exe);
  fs::copy_file(fs::path(tessel::kBuildLibraryDir) / "libtessel.so", core / "libtessel.so");
  const fs::path library = fs::canonical(core) / tessel::kNodesLibrary;
  fs::create_directories(library.parent_path());
  const auto status = [&] {
    std::vector<std::string> argv = status_args(secret);
    argv.insert(argv.begin(), exe.string());
    // meson test points LD_LIBRARY_PATH at the build tree, ahead of the RUNPATH.
    return run_command(argv, dir.path(), {"LD_LIBRARY_PATH="});
  };
  // The simulator's commands do not need the library.
  CHECK(run_command({exe.string(), "--version"}, dir.path(), {"LD_LIBRARY_PATH="}).code == 0);

  const CommandResult missing = status();
  CHECK(missing.code == 1);
  CHECK(has(missing.err, "tessel: cannot load " + library.string() + ", which serve, agent and the client commands need: "));
  CHECK(has(missing.err, "No such file or directory"));

  // The build's library, installed there: the command runs.
  fs::copy_file(tessel::kBuildNodesLibrary, library);
  const CommandResult installed = status();
  CHECK(installed.code == 2);
  CHECK_MESSAGE(has(installed.err, "tessel: cannot reach the scheduler at 127.0.0.1:1"), installed.err);

  fs::remove(library);
  compile_library(dir, "extern \"C\" int something_else() { return 0; }\n", library);
  const CommandResult foreign = status();
  CHECK(foreign.code == 1);
  CHECK(has(foreign.err, library.string() + " is not tessel's real-node commands' library: "));
  CHECK(has(foreign.err, "tessel_nodes_commands"));  // dlerror() names the symbol

  // A table of another interface version is refused before anything else of it is read.
  const auto table = [](const std::string& interface, const std::string& size) {
    return "#include <cstdint>\n"
           "struct Table { std::uint32_t interface, size; std::uint64_t layout; void* functions[9]; };\n"
           "static const Table table{" + interface + ", " + size + ", 0, {}};\n"
           "extern \"C\" const Table* tessel_nodes_commands() { return &table; }\n";
  };
  fs::remove(library);
  compile_library(dir, table("999", "sizeof(Table)"), library);
  const CommandResult stale = status();
  CHECK(stale.code == 1);
  CHECK(has(stale.err, library.string() + " is from another tessel build: interface 999, this tessel uses " +
                           std::to_string(tessel::cli::kNodesInterface) + "; rebuild or reinstall tessel"));

  // The same version, but options laid out differently (a field added without a bump).
  fs::remove(library);
  compile_library(dir, table(std::to_string(tessel::cli::kNodesInterface), "sizeof(Table)"), library);
  const CommandResult layout = status();
  CHECK(layout.code == 1);
  CHECK(has(layout.err, library.string() + " is from another tessel build: its options are laid out differently"));
}
