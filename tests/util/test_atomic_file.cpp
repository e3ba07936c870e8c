// Atomic file replacement: a complete new file or the old one, never a partial one.
#include "util/atomic_file.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support.hpp"
#include "util/error.hpp"

using namespace cotan;
namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("atomic file: parts are written one after another and replace the old file") {
  TempDir dir;
  const std::string path = (dir.path / "out.bin").string();
  write_file_atomically(path, {"old"}, "test");
  CHECK(read(path) == "old");
  write_file_atomically(path, {"ab", "", std::string_view("c\0d", 3)}, "test");
  CHECK(read(path) == std::string("abc\0d", 5));
  CHECK_FALSE(fs::exists(path + ".tmp"));
}

TEST_CASE("atomic file: without commit the old file stays and the temporary goes") {
  TempDir dir;
  const std::string path = (dir.path / "shard.bin").string();
  write_file_atomically(path, {"complete"}, "test");
  {
    AtomicFile out(path, "test");
    out.write("half");
    CHECK(fs::exists(path + ".tmp"));
    CHECK(read(path) == "complete");  // nothing visible before commit
  }
  CHECK(read(path) == "complete");
  CHECK_FALSE(fs::exists(path + ".tmp"));

  AtomicFile out(path, "test");
  out.write("new ");
  out.write("bytes", 3);
  out.commit();
  CHECK(read(path) == "new byt");
  CHECK(error_of([&] { out.write("x"); }) == "[test] " + path + ": write after commit");
}

TEST_CASE("atomic file: errors name the op, the file and the reason") {
  TempDir dir;
  CHECK(error_of([&] { write_file_atomically((dir.path / "no/such/dir.bin").string(), {"x"}, "plot"); }) ==
        "[plot] " + (dir.path / "no/such/dir.bin").string() + ": cannot write: " +
            (dir.path / "no/such/dir.bin.tmp").string() + ": No such file or directory");
  // The rename fails when the target is a non-empty directory: the temporary is removed.
  const fs::path target = dir.path / "taken";
  fs::create_directories(target / "inside");
  CHECK(error_of([&] { write_file_atomically(target.string(), {"x"}, "data"); }) ==
        "[data] " + target.string() + ": cannot write: rename: Is a directory");
  CHECK_FALSE(fs::exists(target.string() + ".tmp"));
  CHECK(fs::is_directory(target / "inside"));
}
