// Append-only logs and file checksums: a failed append leaves whole records only; a checksum
// manifest catches a flipped bit and names the file.
#include "util/append_file.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support.hpp"
#include "util/checksum.hpp"
#include "util/error.hpp"
#include "util/json.hpp"

using namespace cotan;
namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("cotan-append-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("appends: whole records, and a failed one is cut back off the file") {
  const fs::path dir = fresh_dir("log");
  const std::string path = (dir / "metrics.jsonl").string();
  {
    AppendFile log(path, "train");
    log.append("{\"step\":0}\n");
    log.append("{\"step\":1}\n");
    log.sync();
  }
  AppendFile again(path, "train");  // appends, never truncates
  again.append("{\"step\":2}\n");
  CHECK(read_all(path) == "{\"step\":0}\n{\"step\":1}\n{\"step\":2}\n");
  {
    // The disk fills up in the middle of the next record: the part written is removed again.
    FileSizeLimit limit(40);
    CHECK(error_of([&] { again.append("{\"step\":3,\"loss\":2.5}\n"); }) ==
          "[train] " + path + ": cannot append: File too large");
  }
  CHECK(read_all(path) == "{\"step\":0}\n{\"step\":1}\n{\"step\":2}\n");
  CHECK(error_of([&] { AppendFile((dir / "missing" / "x").string(), "train"); }) ==
        "[train] " + (dir / "missing" / "x").string() + ": cannot open for appending: No such file or directory");
  fs::remove_all(dir);
}

TEST_CASE("checksum manifests: XXH3-64 of each file, a changed byte or size named") {
  const fs::path dir = fresh_dir("sums");
  std::ofstream(dir / "a.bin", std::ios::binary) << "hello";
  std::ofstream(dir / "b.bin", std::ios::binary) << "";
  const Json manifest = checksum_manifest(dir.string(), {"a.bin", "b.bin"}, "checkpoint");
  // XXH3-64 of "hello" and of no bytes, as the reference implementation gives them.
  CHECK(manifest.dump() ==
        R"({"a.bin":{"bytes":5,"xxh3_64":"9555e8555c62dcfd"},"b.bin":{"bytes":0,"xxh3_64":"2d06800538d394c2"}})");
  verify_manifest(dir.string(), manifest, "resume", "trainer.json");
  std::ofstream(dir / "a.bin", std::ios::binary) << "hellp";
  CHECK(error_of([&] { verify_manifest(dir.string(), manifest, "resume", "trainer.json"); }) ==
        "[resume] " + (dir / "a.bin").string() +
            ": checksum mismatch (XXH3-64 is " + checksum_manifest(dir.string(), {"a.bin"}, "x")["a.bin"]["xxh3_64"].get<std::string>() +
            ", trainer.json recorded 9555e8555c62dcfd): the file is corrupted");
  std::ofstream(dir / "a.bin", std::ios::binary) << "hell";
  CHECK(error_of([&] { verify_manifest(dir.string(), manifest, "resume", "trainer.json"); }) ==
        "[resume] " + (dir / "a.bin").string() + ": the file is 4 bytes, trainer.json recorded 5: it is damaged");
  fs::remove(dir / "b.bin");
  Json only_b = Json::object();
  only_b["b.bin"] = manifest["b.bin"];
  CHECK(error_of([&] { verify_manifest(dir.string(), only_b, "resume", "trainer.json"); }) ==
        "[resume] " + (dir / "b.bin").string() + ": missing (trainer.json records it)");
  Json outside = Json::object();
  outside["../a.bin"] = manifest["a.bin"];
  CHECK(error_of([&] { verify_manifest(dir.string(), outside, "resume", "trainer.json"); }) ==
        "[resume] trainer.json: field 'checksums' names '../a.bin', not a file of the directory");
  fs::remove_all(dir);
}
