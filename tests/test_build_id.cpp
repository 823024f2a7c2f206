// cmake/build_id.cmake, which names the build (core/build_id.h): run with
// CMake's script mode on small source trees built in the test, with and
// without git, as the build runs it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "core/build_id.h"
#include "process_testing.h"

using namespace trainer;
using namespace trainer::testing;
namespace fs = std::filesystem;

namespace {

/// build_id() as the script writes it for the tree at source (git: the git program, "" for none).
std::string id_of(const fs::path& source, const std::string& git, const fs::path& out) {
  const Run r = run(TRAINER_CMAKE, "-DGIT=" + git + " -DSOURCE_DIR=" + source.string() + " -DVERSION=1.2.3 -DOUT=" +
                                       out.string() + " -P " + TRAINER_SOURCE_DIR + "/cmake/build_id.cmake",
                    out.parent_path());
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  std::smatch m;
  const std::string text = slurp(out);
  REQUIRE(std::regex_search(text, m, std::regex("return \"([^\"]*)\";")));
  return m[1];
}

/// A tree shaped as the project's: what the sources hash covers, and a test file it does not.
void write_tree(const fs::path& root) {
  for (const char* dir : {"lib/core", "apps/trainer", "cmake", "tests"}) fs::create_directories(root / dir);
  std::ofstream(root / "CMakeLists.txt") << "project(x)\n";
  std::ofstream(root / "lib/core/a.cpp") << "int a() { return 1; }\n";
  std::ofstream(root / "apps/trainer/main.cpp") << "int main() {}\n";
  std::ofstream(root / "cmake/x.cmake") << "# x\n";
  std::ofstream(root / "tests/t.cpp") << "// t\n";
}

/// `git args` in dir, which must succeed.
void git(const std::string& dir, const std::string& args) {
  const Run r = run(TRAINER_GIT, "-C " + dir + " -c user.name=t -c user.email=t@example.com " + args, dir);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
}

const std::regex kSourcesOnly("1\\.2\\.3 \\(sources [0-9a-f]{12}\\)");

}  // namespace

TEST_CASE("the build id names the sources compiled in, however git sees them", "[build_id]") {
  TempDir tmp("build_id");
  const fs::path src = tmp.root / "src", out = tmp.root / "build_id.cpp";
  write_tree(src);
  const std::string plain = id_of(src, "", out);
  CHECK(std::regex_match(plain, kSourcesOnly));
  // The same sources, the same id; the file is not rewritten (nothing recompiles).
  const auto written = fs::last_write_time(out);
  CHECK(id_of(src, "", out) == plain);
  CHECK(fs::last_write_time(out) == written);
  // Any change to a compiled file, or a new one, gives another id; a test file does not count.
  std::ofstream(src / "tests/t.cpp") << "// changed\n";
  CHECK(id_of(src, "", out) == plain);
  std::ofstream(src / "lib/core/a.cpp") << "int a() { return 2; }\n";
  const std::string changed = id_of(src, "", out);
  CHECK(changed != plain);
  std::ofstream(src / "lib/core/new_pending_local.cpp") << "int b() { return 0; }\n";
  CHECK(id_of(src, "", out) != changed);
  fs::remove(src / "lib/core/new_pending_local.cpp");
  CHECK(id_of(src, "", out) == changed);
  std::ofstream(src / "lib/core/events.proto") << "syntax = \"proto3\";\n";  // compiled by protoc
  CHECK(id_of(src, "", out) != changed);
  fs::remove(src / "lib/core/events.proto");
  CHECK(id_of(src, "", out) == changed);
  CHECK(fs::last_write_time(out) != written);
  // Files the build does not compile do not count: hidden ones, which it leaves out too (an editor's backup,
  // its lock: a dangling link), and other kinds.
  std::ofstream(src / "lib/core/.#a.cpp") << "int a() { return 4; }\n";
  CHECK(id_of(src, "", out) == changed);
  fs::remove(src / "lib/core/.#a.cpp");
  fs::create_symlink(src / "lib/core/gone.cpp", src / "lib/core/.#a.cpp");
  std::ofstream(src / "lib/core/notes.md") << "notes\n";
  CHECK(id_of(src, "", out) == changed);
}

TEST_CASE("the build id names the git commit, and a checkout with local changes as modified", "[build_id]") {
  if (std::string(TRAINER_GIT).empty() || std::string(TRAINER_GIT).find("NOTFOUND") != std::string::npos) {
    WARN("skipped: CMake found no git program");
    return;
  }
  TempDir tmp("build_id_git");
  const fs::path src = tmp.root / "src", out = tmp.root / "build_id.cpp";
  write_tree(src);
  const std::string untracked = id_of(src, "", out);
  git(src.string(), "init -q");
  git(src.string(), "add .");
  git(src.string(), "commit -q -m one");
  const std::string head = run(TRAINER_GIT, "-C " + src.string() + " rev-parse HEAD", tmp.root).out.substr(0, 12);
  // The commit before the same sources' hash as without git.
  const std::string sources = untracked.substr(untracked.find("sources "));
  CHECK(id_of(src, TRAINER_GIT, out) == "1.2.3 (git " + head + "; " + sources);
  // A change to a file the build does not read is modified for git, not for the sources.
  std::ofstream(src / "tests/t.cpp") << "// changed\n";
  CHECK(id_of(src, TRAINER_GIT, out) == "1.2.3 (git " + head + ", modified; " + sources);
  std::ofstream(src / "lib/core/a.cpp") << "int a() { return 3; }\n";
  const std::string modified = id_of(src, TRAINER_GIT, out);
  CHECK_THAT(modified, Catch::StartsWith("1.2.3 (git " + head + ", modified; sources "));
  CHECK(modified.substr(modified.find("sources ")) != sources);
  // A copy of the sources inside another project's checkout is not that project's commit.
  const fs::path outer = tmp.root / "outer";
  fs::create_directories(outer);
  std::ofstream(outer / "README") << "another project\n";
  git(outer.string(), "init -q");
  git(outer.string(), "add README");
  git(outer.string(), "commit -q -m other");
  write_tree(outer / "trainer");
  CHECK(id_of(outer / "trainer", TRAINER_GIT, out) == "1.2.3 (" + sources);
}

TEST_CASE("this build's id has the form the script writes", "[build_id]") {
  CHECK(std::regex_match(build_id(), std::regex("[0-9]+\\.[0-9]+\\.[0-9]+ \\((git [0-9a-f]{12}(, modified)?; )?"
                                                "sources [0-9a-f]{12}\\)")));
}
