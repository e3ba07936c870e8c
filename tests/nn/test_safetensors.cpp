// safetensors: bit-exact round trips, the byte layout against the format, F16/U8 conversion,
// sharded checkpoints, atomic writes, and one test per kind of bad file with its exact message.
#include "nn/safetensors.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tensor/ops.hpp"
#include "tests/support.hpp"
#include "util/json.hpp"

using namespace cotan;
namespace fs = std::filesystem;

namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(out.good());
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string le_u64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((v >> (8 * i)) & 0xff);
  return out;
}

// A file as a foreign writer might make it: no padding unless the header text has it.
std::string file_bytes(const std::string& header, const std::string& data) {
  return le_u64(header.size()) + header + data;
}

// A contiguous tensor filled with random bits; bool gets 0/1, bf16 and f32 get some NaN patterns.
Tensor random_tensor(const Shape& shape, DType dtype, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* bytes = static_cast<unsigned char*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(rng());
  if (dtype == DType::boolean)
    for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] &= 1;
  if (dtype == DType::bf16 && t.numel() >= 3) {
    const uint16_t nans[] = {0x7fc0, 0xffc1, 0x7f81};  // quiet, negative with payload, signalling
    std::memcpy(bytes, nans, sizeof nans);
  }
  if (dtype == DType::f32 && t.numel() >= 2) {
    const uint32_t nans[] = {0x7fc00000u, 0xff800001u};
    std::memcpy(bytes, nans, sizeof nans);
  }
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Tensor ca = contiguous(a), cb = contiguous(b);
  return a.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), a.nbytes()) == 0;
}

uint32_t float_bits(float f) { return std::bit_cast<uint32_t>(f); }

const DType kAllDTypes[] = {DType::f64, DType::f32, DType::bf16, DType::i32, DType::i64, DType::boolean};

}  // namespace

TEST_CASE("safetensors: bit-exact round trip of every dtype, scalars and empty tensors") {
  TempDir dir;
  std::mt19937_64 rng(1234);
  const std::vector<Shape> shapes = {{3, 5}, {}, {0}, {2, 0, 3}, {7}, {2, 3, 4}};
  std::map<std::string, Tensor> tensors;
  for (DType dtype : kAllDTypes)
    for (size_t s = 0; s < shapes.size(); ++s)
      tensors[cat("t.", dtype_name(dtype), ".", s)] = random_tensor(shapes[s], dtype, rng);

  const std::string path = dir / "all.safetensors";
  save_safetensors(path, tensors);
  auto loaded = load_safetensors(path);
  REQUIRE(loaded.size() == tensors.size());
  for (const auto& [name, t] : tensors) {
    INFO(name);
    REQUIRE(loaded.count(name));
    CHECK(same_bits(loaded.at(name), t));
    CHECK(loaded.at(name).is_contiguous());
  }

  SafetensorsFile file(path);
  std::vector<std::string> expected_names;
  for (const auto& item : tensors) expected_names.push_back(item.first);
  CHECK(file.names() == expected_names);
  const SafetensorsEntry& info = file.info("t.bf16.0");
  CHECK(info.dtype == "BF16");
  CHECK(info.shape == Shape{3, 5});
  CHECK(info.nbytes() == 30);
  CHECK(info.loads_as == DType::bf16);
  CHECK(file.info("t.bool.1").dtype == "BOOL");
  CHECK(file.metadata().empty());
}

TEST_CASE("safetensors: strided and offset views are written as their row-major values") {
  TempDir dir;
  std::vector<float> values(24);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i) * 0.5f - 3.0f;
  Tensor x = from_vector(values, {4, 6});
  Tensor t = transpose(x);                 // [6, 4], not contiguous
  Tensor s = slice(x, 1, 1, 5, 2);         // [4, 2], strided, offset
  save_safetensors(dir / "views.safetensors", {{"t", t}, {"s", s}});
  auto loaded = load_safetensors(dir / "views.safetensors");
  CHECK(loaded.at("t").shape() == Shape{6, 4});
  CHECK(loaded.at("t").to_vector<float>() == t.to_vector<float>());
  CHECK(loaded.at("s").to_vector<float>() == s.to_vector<float>());
}

TEST_CASE("safetensors: metadata round trip, first in the header") {
  TempDir dir;
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "120"}, {"note", "a \"quoted\"\nline é"}};
  save_safetensors(dir / "m.safetensors", {{"w", ones({2}, DType::f32)}}, metadata);
  SafetensorsFile file(dir / "m.safetensors");
  CHECK(file.metadata() == metadata);
  std::string bytes = read_bytes(dir / "m.safetensors");
  CHECK(bytes.substr(8, 16) == "{\"__metadata__\":");

  save_safetensors(dir / "empty.safetensors", {}, {{"k", "v"}});
  SafetensorsFile empty(dir / "empty.safetensors");
  CHECK(empty.names().empty());
  CHECK(empty.metadata().at("k") == "v");
  save_safetensors(dir / "empty.safetensors", {});
  CHECK(read_bytes(dir / "empty.safetensors") == le_u64(8) + "{}      ");
  CHECK(load_safetensors(dir / "empty.safetensors").empty());
}

TEST_CASE("safetensors: the data section starts 8-byte aligned") {
  TempDir dir;
  for (size_t length = 1; length <= 17; ++length) {
    const std::string path = dir / "a.safetensors";
    save_safetensors(path, {{std::string(length, 'x'), zeros({3}, DType::bf16)}}, {{"k", std::string(length % 5, 'v')}});
    std::string bytes = read_bytes(path);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
    CHECK((8 + n) % 8 == 0);
    CHECK(bytes.size() == 8 + n + 6);
    CHECK(SafetensorsFile(path).data_start() == 8 + n);
    // Padding is spaces after the closing brace.
    std::string header = bytes.substr(8, n);
    CHECK(header.find_last_not_of(' ') == header.rfind('}'));
  }
}

TEST_CASE("safetensors: the written bytes match the format exactly") {
  TempDir dir;
  save_safetensors(dir / "spec.safetensors",
                   {{"b", scalar(7, DType::i64)}, {"a", from_vector(std::vector<float>{1.0f, -2.0f}, {2})}},
                   {{"format", "pt"}});
  // 138 bytes of JSON + 6 spaces = 144 = 0x90, so the data starts at 152 = 19 * 8.
  std::string expected = std::string("\x90\0\0\0\0\0\0\0", 8) +
                         R"({"__metadata__":{"format":"pt"},)"
                         R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"I64","shape":[],"data_offsets":[8,16]}})"
                         "      " +
                         std::string("\x00\x00\x80\x3f" "\x00\x00\x00\xc0", 8) +  // 1.0f, -2.0f
                         std::string("\x07\0\0\0\0\0\0\0", 8);                     // int64 7
  CHECK(read_bytes(dir / "spec.safetensors") == expected);
  CHECK(safetensors_header({{"b", scalar(7, DType::i64)}, {"a", zeros({2})}}, {{"format", "pt"}}) ==
        expected.substr(0, 152));
}

TEST_CASE("safetensors: F16 loads as f32, U8 as i32, BOOL bytes normalised") {
  // Each half bit pattern next to the float it denotes, written out independently.
  const std::vector<std::pair<uint16_t, float>> halves = {
      {0x3c00, 1.0f},
      {0xc000, -2.0f},
      {0x7bff, 65504.0f},                   // largest finite
      {0x0400, std::ldexp(1.0f, -14)},      // smallest normal
      {0x0001, std::ldexp(1.0f, -24)},      // smallest subnormal
      {0x03ff, std::ldexp(1023.0f, -24)},   // largest subnormal
      {0x8001, -std::ldexp(1.0f, -24)},
      {0x3555, 0.333251953125f},
      {0x0000, 0.0f},
      {0x8000, -0.0f},
      {0x7c00, INFINITY},
      {0xfc00, -INFINITY},
  };
  std::string f16_data;
  for (auto [bits, value] : halves) f16_data += std::string{char(bits & 0xff), char(bits >> 8)};
  const uint16_t nans[] = {0x7e00, 0xfc01, 0x7c01};
  for (uint16_t bits : nans) f16_data += std::string{char(bits & 0xff), char(bits >> 8)};
  const size_t n_f16 = halves.size() + 3;
  const std::string u8_data("\x00\x01\x7f\x80\xff", 5);
  const std::string bool_data("\x00\x01\x02", 3);

  std::string header = cat(R"({"h":{"dtype":"F16","shape":[)", n_f16, R"(],"data_offsets":[0,)", 2 * n_f16,
                           R"(]},"u":{"dtype":"U8","shape":[5],"data_offsets":[)", 2 * n_f16, ",", 2 * n_f16 + 5,
                           R"(]},"b":{"dtype":"BOOL","shape":[3],"data_offsets":[)", 2 * n_f16 + 5, ",",
                           2 * n_f16 + 8, "]}}");
  TempDir dir;
  write_bytes(dir / "h.safetensors", file_bytes(header, f16_data + u8_data + bool_data));
  SafetensorsFile file(dir / "h.safetensors");
  CHECK(file.info("h").dtype == "F16");
  CHECK(file.info("h").loads_as == DType::f32);
  CHECK(file.info("u").loads_as == DType::i32);

  Tensor h = file.load("h");
  REQUIRE(h.dtype() == DType::f32);
  const float* hv = h.data<float>();
  for (size_t i = 0; i < halves.size(); ++i) {
    INFO("half 0x" << std::hex << halves[i].first);
    CHECK(float_bits(hv[i]) == float_bits(halves[i].second));
  }
  for (size_t i = 0; i < 3; ++i) CHECK(std::isnan(hv[halves.size() + i]));
  CHECK(std::signbit(hv[halves.size() + 1]));

  Tensor u = file.load("u");
  CHECK(u.dtype() == DType::i32);
  CHECK(u.to_vector<int32_t>() == std::vector<int32_t>{0, 1, 127, 128, 255});

  Tensor b = file.load("b");
  CHECK(b.dtype() == DType::boolean);
  const auto* bb = static_cast<const uint8_t*>(b.data_ptr());
  CHECK((bb[0] == 0 && bb[1] == 1 && bb[2] == 1));
}

TEST_CASE("safetensors: half_to_float agrees with the definition for all 65536 inputs") {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint32_t exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
    float sign = (bits & 0x8000) ? -1.0f : 1.0f;
    float got = half_to_float(uint16_t(bits));
    if (exponent == 0x1f) {
      if (mantissa == 0) CHECK(got == sign * INFINITY);
      else CHECK(std::isnan(got));
      continue;
    }
    // value = (-1)^s * 2^(e-15) * (1 + m/1024) for normals, (-1)^s * 2^-14 * (m/1024) for subnormals.
    double value = exponent == 0 ? std::ldexp(double(mantissa), -24) : std::ldexp(1024.0 + mantissa, int(exponent) - 25);
    float expected = sign * float(value);
    if (float_bits(got) != float_bits(expected)) {
      FAIL("half 0x" << std::hex << bits << " gave " << got << ", expected " << expected);
    }
  }
}

TEST_CASE("safetensors: zero-copy tensors outlive the file object and writes never reach the file") {
  TempDir dir;
  const std::string path = dir / "z.safetensors";
  save_safetensors(path, {{"w", from_vector(std::vector<float>{1, 2, 3, 4}, {4})}});
  const std::string before = read_bytes(path);
  Tensor w;
  {
    SafetensorsFile file(path);
    w = file.load("w");
  }
  CHECK(w.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
  // Both are views into one map: their addresses differ by their offsets in the file.
  save_safetensors(path, {{"a", zeros({4}, DType::f64)}, {"b", ones({2}, DType::i32)}});
  {
    SafetensorsFile file(path);
    Tensor a = file.load("a"), b = file.load("b");
    CHECK(static_cast<char*>(b.data_ptr()) - static_cast<char*>(a.data_ptr()) ==
          int64_t(file.info("b").begin - file.info("a").begin));
  }
  save_safetensors(path, {{"w", from_vector(std::vector<float>{1, 2, 3, 4}, {4})}});
  w.data<float>()[0] = 42.0f;
  CHECK(w.to_vector<float>()[0] == 42.0f);
  CHECK(read_bytes(path) == before);
}

TEST_CASE("safetensors: a tensor at an unaligned offset is copied and reads correctly") {
  // Header of odd length and no padding: the F32 data starts at file offset 8 + 61 = 69.
  std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header += std::string(61 - header.size(), ' ');
  std::string data = std::string("\x00\x00\x80\x3f" "\x00\x00\x40\x40", 8);  // 1.0f, 3.0f
  TempDir dir;
  write_bytes(dir / "u.safetensors", file_bytes(header, data));
  CHECK(load_safetensors(dir / "u.safetensors").at("w").to_vector<float>() == std::vector<float>{1.0f, 3.0f});
}

TEST_CASE("safetensors: corrupted and truncated files fail cleanly") {
  // Every prefix of a valid file, and files with random bytes changed, either load or throw an
  // Error; none may crash or read out of bounds.
  TempDir dir;
  std::mt19937_64 rng(99);
  const std::string good_path = dir / "good.safetensors";
  save_safetensors(good_path, {{"a", random_tensor({3, 2}, DType::f32, rng)}, {"b", random_tensor({5}, DType::bf16, rng)},
                               {"c", random_tensor({}, DType::boolean, rng)}},
                   {{"format", "pt"}});
  const std::string good = read_bytes(good_path);
  const std::string path = dir / "bad.safetensors";
  auto try_load = [&](const std::string& bytes) {
    write_bytes(path, bytes);
    try {
      load_safetensors(path);
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  size_t loaded = 0;
  for (size_t n = 0; n < good.size(); ++n) loaded += try_load(good.substr(0, n));
  CHECK(loaded == 0);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = good;
    int changes = 1 + int(rng() % 3);
    for (int k = 0; k < changes; ++k) bytes[rng() % bytes.size()] = char(rng());
    try_load(bytes);
  }
  CHECK(try_load(good));
}

TEST_CASE("safetensors: save is atomic") {
  TempDir dir;
  const std::string path = dir / "a.safetensors";
  save_safetensors(path, {{"old", ones({3})}});
  Tensor old_view = SafetensorsFile(path).load("old");

  SUBCASE("a successful save replaces the file and leaves no temporary behind") {
    save_safetensors(path, {{"new", zeros({2}, DType::i32)}});
    CHECK(SafetensorsFile(path).names() == std::vector<std::string>{"new"});
    CHECK_FALSE(fs::exists(path + ".tmp"));
    // The old file's map is still valid: the rename left its inode alive.
    CHECK(old_view.to_vector<float>() == std::vector<float>{1, 1, 1});
  }
  SUBCASE("a failed save leaves the old file untouched") {
    const std::string before = read_bytes(path);
    CHECK(error_of([&] { save_safetensors(path, {{"a", ones({2})}, {"b", Tensor()}}); }) ==
          "[safetensors] " + path + ": tensor 'b' is undefined");
    CHECK(error_of([&] { save_safetensors(path, {{"__metadata__", ones({2})}}); }) ==
          "[safetensors] " + path + ": '__metadata__' is reserved and cannot name a tensor");
    fs::create_directory(path + ".tmp");  // the temporary cannot be opened
    CHECK(error_of([&] { save_safetensors(path, {{"a", ones({2})}}); }) ==
          "[safetensors] " + path + ": cannot write: " + path + ".tmp: Is a directory");
    CHECK(read_bytes(path) == before);
  }
}

TEST_CASE("safetensors: sharded save and load") {
  TempDir dir;
  std::mt19937_64 rng(7);
  std::map<std::string, Tensor> tensors = {
      {"a.weight", random_tensor({10}, DType::f32, rng)},   // 40 bytes
      {"b.weight", random_tensor({5}, DType::f64, rng)},    // 40 bytes
      {"c.bias", random_tensor({4}, DType::bf16, rng)},     // 8 bytes
      {"d.big", random_tensor({40}, DType::f32, rng)},      // 160 bytes: over the limit, alone
      {"e.ids", random_tensor({3}, DType::i64, rng)},       // 24 bytes
      {"f.mask", random_tensor({2, 2}, DType::boolean, rng)},
  };
  // Files a previous save left behind, which this one must not leave in place.
  write_bytes(dir / "model.safetensors", "stale");
  write_bytes(dir / "model-00007-of-00009.safetensors", "stale");
  write_bytes(dir / "notes.txt", "kept");
  write_bytes(dir / "model-1-of-2.safetensors", "kept: not the shard pattern");
  write_bytes(dir / "model-00001-of-00003.safetensors.bak", "kept");

  auto shards = save_sharded(dir.path.string(), tensors, 100, {{"format", "pt"}});
  const std::vector<std::string> expected_shards = {"model-00001-of-00003.safetensors",
                                                    "model-00002-of-00003.safetensors",
                                                    "model-00003-of-00003.safetensors"};
  CHECK(shards == expected_shards);
  CHECK_FALSE(fs::exists(dir / "model.safetensors"));
  CHECK_FALSE(fs::exists(dir / "model-00007-of-00009.safetensors"));
  CHECK(fs::exists(dir / "notes.txt"));
  CHECK(fs::exists(dir / "model-1-of-2.safetensors"));
  CHECK(fs::exists(dir / "model-00001-of-00003.safetensors.bak"));
  CHECK(SafetensorsFile(dir / expected_shards[0]).names() == std::vector<std::string>{"a.weight", "b.weight", "c.bias"});
  CHECK(SafetensorsFile(dir / expected_shards[1]).names() == std::vector<std::string>{"d.big"});
  CHECK(SafetensorsFile(dir / expected_shards[2]).names() == std::vector<std::string>{"e.ids", "f.mask"});
  CHECK(SafetensorsFile(dir / expected_shards[2]).metadata().at("format") == "pt");

  Json index = read_json_file(dir / "model.safetensors.index.json");
  Json expected_index = parse_json(R"({
    "metadata": {"total_size": 276},
    "weight_map": {
      "a.weight": "model-00001-of-00003.safetensors",
      "b.weight": "model-00001-of-00003.safetensors",
      "c.bias": "model-00001-of-00003.safetensors",
      "d.big": "model-00002-of-00003.safetensors",
      "e.ids": "model-00003-of-00003.safetensors",
      "f.mask": "model-00003-of-00003.safetensors"
    }
  })");
  CHECK(index == expected_index);

  for (const std::string& source : {dir.path.string(), dir / "model.safetensors.index.json"}) {
    INFO(source);
    auto loaded = load_sharded(source);
    REQUIRE(loaded.size() == tensors.size());
    for (const auto& [name, t] : tensors) CHECK(same_bits(loaded.at(name), t));
  }
  SafetensorsCheckpoint checkpoint(dir.path.string());
  CHECK(checkpoint.files().size() == 3);
  CHECK(checkpoint.index_metadata().at("total_size") == "276");
  CHECK(checkpoint.info("d.big").shape == Shape{40});
  CHECK(checkpoint.file_of("e.ids").path() == dir / expected_shards[2]);
}

TEST_CASE("safetensors: a directory with a single model.safetensors, or a file path, loads as a checkpoint") {
  TempDir dir;
  save_safetensors(dir / "model.safetensors", {{"w", full({2, 2}, 1.5)}});
  CHECK(load_sharded(dir.path.string()).at("w").to_vector<float>() == std::vector<float>{1.5, 1.5, 1.5, 1.5});
  CHECK(SafetensorsCheckpoint(dir / "model.safetensors").names() == std::vector<std::string>{"w"});
  CHECK(SafetensorsCheckpoint(dir.path.string()).index_metadata().empty());
}

// ---- bad input: one clear error naming the file and the tensor ----

namespace {

// Writes `bytes` to a fresh file and returns the error opening (or loading `name` from) it gives.
struct BadFile {
  TempDir dir;
  std::string path = dir / "model.safetensors";
  std::string open_error(const std::string& bytes) {
    write_bytes(path, bytes);
    return error_of([&] { SafetensorsFile file(path); });
  }
  std::string prefix() const { return "[safetensors] " + path + ": "; }
};

const std::string kGoodEntry = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
const std::string kEightBytes(8, '\0');

}  // namespace

TEST_CASE("safetensors errors: file shorter than the length prefix") {
  BadFile f;
  CHECK(f.open_error(std::string("\x05\0\0", 3)) == f.prefix() + "file is 3 bytes, too short to hold the 8-byte header length");
  CHECK(f.open_error("") == f.prefix() + "file is 0 bytes, too short to hold the 8-byte header length");
  CHECK(f.open_error("{") == f.prefix() + "file is 1 byte, too short to hold the 8-byte header length");
}

TEST_CASE("safetensors errors: header length past the end of the file") {
  BadFile f;
  CHECK(f.open_error(le_u64(1000) + "{}") ==
        f.prefix() + "header length 1000 bytes runs past the end of the file (2 bytes follow the length)");
  CHECK(f.open_error(le_u64(UINT64_MAX)) ==
        f.prefix() + "header length 18446744073709551615 bytes exceeds the limit of 100000000 bytes");
}

TEST_CASE("safetensors errors: header over 100 MB") {
  BadFile f;
  CHECK(f.open_error(le_u64(100'000'001) + "{}") ==
        f.prefix() + "header length 100000001 bytes exceeds the limit of 100000000 bytes");
}

TEST_CASE("safetensors errors: truncated data section") {
  BadFile f;
  // The header promises 8 bytes of data; the file stops after 5.
  CHECK(f.open_error(file_bytes("{" + kGoodEntry + "}", "12345")) ==
        f.prefix() + "tensor 'w' has data_offsets [0, 8] past the end of the 5-byte data section");
}

TEST_CASE("safetensors errors: invalid JSON, with its position") {
  BadFile f;
  CHECK(f.open_error(file_bytes("{\"w\":{\"dtype\" \"F32\"}}", "")) ==
        f.prefix() + "invalid JSON header at line 1, column 19: syntax error while parsing object separator - "
                     "unexpected string literal; expected ':'");
  CHECK(f.open_error(file_bytes("{\n  \"w\": {\"dtype\": \"F32\",\n  ", "")) ==
        f.prefix() + "invalid JSON header at line 3, column 3: syntax error while parsing object key - unexpected end "
                     "of input; expected string literal");
  CHECK(f.open_error(file_bytes("[1, 2]", "")) == f.prefix() + "header is an array, not a JSON object");
}

TEST_CASE("safetensors errors: entry missing dtype, shape or data_offsets") {
  BadFile f;
  CHECK(f.open_error(file_bytes(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has no 'dtype'");
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has no 'shape'");
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":[2]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has no 'data_offsets'");
  CHECK(f.open_error(file_bytes(R"({"w":[1]})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has an entry that is an array, not an object");
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":32,"shape":[2],"data_offsets":[0,8]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has dtype 32, not a string");
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has data_offsets [0], not [begin, end] with non-negative integers");
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has data_offsets [-8, 0], not [begin, end] with non-negative integers");
}

TEST_CASE("safetensors errors: data_offsets out of range of the data section") {
  BadFile f;
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has data_offsets [8, 16] past the end of the 8-byte data section");
}

TEST_CASE("safetensors errors: begin after end") {
  BadFile f;
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has data_offsets [8, 0]: begin is after end");
}

TEST_CASE("safetensors errors: overlapping tensors") {
  BadFile f;
  CHECK(f.open_error(file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                R"("b":{"dtype":"I32","shape":[3],"data_offsets":[4,16]}})",
                                std::string(16, '\0'))) ==
        f.prefix() + "tensors 'a' (bytes [0, 8]) and 'b' (bytes [4, 16]) overlap in the data section");
  // One tensor inside another, listed the other way round.
  CHECK(f.open_error(file_bytes(R"({"inner":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                                R"("outer":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                                std::string(16, '\0'))) ==
        f.prefix() + "tensors 'outer' (bytes [0, 16]) and 'inner' (bytes [4, 8]) overlap in the data section");
  // Adjacent tensors, holes and empty tensors are fine.
  write_bytes(f.path, file_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                 R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                                 R"("c":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                                 R"("d":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                                 std::string(16, '\0')));
  CHECK(SafetensorsFile(f.path).names().size() == 4);
}

TEST_CASE("safetensors errors: unknown dtype") {
  BadFile f;
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has unknown dtype 'F8_E4M3' (supported: F64, F32, BF16, F16, I32, I64, U8, BOOL)");
}

TEST_CASE("safetensors errors: shape and byte size disagree") {
  BadFile f;
  CHECK(f.open_error(file_bytes(R"({"model.norm.weight":{"dtype":"F32","shape":[4,8],"data_offsets":[0,120]}})",
                                std::string(128, '\0'))) ==
        f.prefix() +
            "tensor 'model.norm.weight' has shape [4, 8] (32 elements of F32 = 128 bytes) but data_offsets span 120 bytes");
  CHECK(f.open_error(file_bytes(R"({"s":{"dtype":"BF16","shape":[],"data_offsets":[0,4]}})", kEightBytes)) ==
        f.prefix() + "tensor 's' has shape [] (1 element of BF16 = 2 bytes) but data_offsets span 4 bytes");
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
                                kEightBytes)) ==
        f.prefix() + "tensor 'w' has shape [4294967296, 4294967296], too many elements to address");
}

TEST_CASE("safetensors errors: shapes whose strides cannot be addressed, even when empty") {
  BadFile f;
  // 2^62 * 4 = 2^64: the strides of [0, 2^62, 4] overflow an int64 although it holds nothing.
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})", "")) ==
        f.prefix() + "tensor 'w' has shape [0, 4611686018427387904, 4], too many elements to address");
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"U8","shape":[4611686018427387904,2,0],"data_offsets":[0,0]}})", "")) ==
        f.prefix() + "tensor 'w' has shape [4611686018427387904, 2, 0], too many elements to address");
  // One below: 2 * (2^62 - 1) = 2^63 - 2 fits.
  write_bytes(f.path, file_bytes(R"({"w":{"dtype":"F32","shape":[0,4611686018427387903,2],"data_offsets":[0,0]}})", ""));
  Tensor w = SafetensorsFile(f.path).load("w");
  CHECK(w.shape() == Shape{0, 4611686018427387903, 2});
  CHECK(w.numel() == 0);
}

TEST_CASE("safetensors errors: a shape of more than 64 dimensions") {
  BadFile f;
  auto ones = [](size_t rank) {
    std::string out;
    for (size_t i = 0; i < rank; ++i) out += i ? ",1" : "1";
    return out;
  };
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":[)" + ones(65) + R"(],"data_offsets":[0,4]}})", "1234")) ==
        f.prefix() + "tensor 'w' has rank 65, more than the 64 dimensions supported");
  // A million dimensions are counted, not kept.
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":[)" + ones(1'000'000) + "]}}", "")) ==
        f.prefix() + "tensor 'w' has rank 1000000, more than the 64 dimensions supported");
  write_bytes(f.path, file_bytes(R"({"w":{"dtype":"F32","shape":[)" + ones(64) + R"(],"data_offsets":[0,4]}})", "1234"));
  CHECK(SafetensorsFile(f.path).info("w").shape == Shape(64, 1));
}

TEST_CASE("safetensors: other members of an entry are skipped, nested up to the depth limit") {
  BadFile f;
  const std::string data("\x00\x00\x80\x3f\x00\x00\x40\x40", 8);  // 1.0f, 3.0f
  write_bytes(f.path, file_bytes(R"({"w":{"note":{"a":[1,{"b":null}],"a":"repeated keys are not kept"},"dtype":"F32",)"
                                 R"("shape":[2],"extra":[[["x"]]],"data_offsets":[0,8],"last":7}})",
                                 data));
  SafetensorsFile file(f.path);
  CHECK(file.names() == std::vector<std::string>{"w"});
  CHECK(file.info("w").shape == Shape{2});
  CHECK(file.load("w").to_vector<float>() == std::vector<float>{1.0f, 3.0f});

  // The header and the entry take 2 levels; 510 more reach the limit of 512.
  auto deep = [&](size_t levels) {
    return file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"deep":)" + std::string(levels, '[') +
                          std::string(levels, ']') + "}}",
                      data);
  };
  write_bytes(f.path, deep(510));
  CHECK(SafetensorsFile(f.path).names().size() == 1);
  CHECK(f.open_error(deep(511)) == f.prefix() + "invalid JSON header at line 1, column 571: nesting deeper than 512 levels");
}

TEST_CASE("safetensors errors: bad values are quoted as JSON, long ones cut") {
  BadFile f;
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":["F32", 1],"shape":[2],"data_offsets":[0,8]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has dtype [\"F32\",1], not a string");
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":{"a": 1, "b": [2, 3]},"data_offsets":[0,8]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has shape {\"a\":1,\"b\":[2,3]}, not a list of dimensions");
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[[0, 1], 8.0, null]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has data_offsets [[0,1], 8.0, null], not [begin, end] with non-negative integers");
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,16]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has data_offsets [0, 8, 16], not [begin, end] with non-negative integers");
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,9223372036854775808]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has data_offsets [0, 9223372036854775808], not [begin, end] with non-negative integers");
  // A bad shape of a million dimensions: its first 200 characters, then "...".
  std::string dims = "-1";
  for (int i = 0; i < 1'000'000; ++i) dims += ",1";
  std::string quoted = "[-1";
  while (quoted.size() + 3 <= 200) quoted += ", 1";
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":[)" + dims + "]}}", "")) ==
        f.prefix() + "tensor 'w' has shape " + quoted + "...: dimensions must be non-negative integers");
  const std::string long_dtype(1000, 'F');
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":")" + long_dtype + R"("}})", "")) ==
        f.prefix() + "tensor 'w' has unknown dtype '" + long_dtype.substr(0, 200) +
            "...' (supported: F64, F32, BF16, F16, I32, I64, U8, BOOL)");
}

TEST_CASE("safetensors errors: negative or non-integer shape entries") {
  BadFile f;
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,8]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has shape [2, -1]: dimensions must be non-negative integers");
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has shape [2.5]: dimensions must be non-negative integers");
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has shape [\"2\"]: dimensions must be non-negative integers");
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", kEightBytes)) ==
        f.prefix() + "tensor 'w' has shape 2, not a list of dimensions");
}

TEST_CASE("safetensors errors: duplicate tensor names") {
  BadFile f;
  CHECK(f.open_error(file_bytes("{" + kGoodEntry + "," + kGoodEntry + "}", kEightBytes)) ==
        f.prefix() + "tensor 'w' appears twice in the header");
  CHECK(f.open_error(file_bytes(R"({"__metadata__":{},"__metadata__":{}})", "")) ==
        f.prefix() + "'__metadata__' appears twice in the header");
  CHECK(f.open_error(file_bytes(R"({"__metadata__":{"format":"pt","format":"np"}})", "")) ==
        f.prefix() + "__metadata__ key 'format' appears twice");
  // A key repeated inside one tensor's entry.
  CHECK(f.open_error(file_bytes(R"({"w":{"dtype":"F32","dtype":"F64","shape":[2],"data_offsets":[0,8]}})", kEightBytes)) ==
        f.prefix() + "invalid JSON header at line 1, column 21: duplicate key 'dtype'");
}

TEST_CASE("safetensors errors: malformed __metadata__") {
  BadFile f;
  CHECK(f.open_error(file_bytes(R"({"__metadata__":{"step":3}})", "")) ==
        f.prefix() + "__metadata__ value for 'step' is an integer, not a string");
  CHECK(f.open_error(file_bytes(R"({"__metadata__":"x"})", "")) ==
        f.prefix() + "__metadata__ is a string, not an object of strings");
}

TEST_CASE("safetensors errors: a missing tensor name lists some that exist") {
  TempDir dir;
  std::map<std::string, Tensor> tensors;
  for (int i = 0; i < 7; ++i) tensors[cat("layer.", i)] = zeros({1});
  save_safetensors(dir / "m.safetensors", tensors);
  SafetensorsFile file(dir / "m.safetensors");
  CHECK(error_of([&] { file.load("lm_head.weight"); }) ==
        "[safetensors] " + (dir / "m.safetensors") +
            ": no tensor 'lm_head.weight'; it holds 7 tensors: 'layer.0', 'layer.1', 'layer.2', 'layer.3', 'layer.4', ...");
  CHECK_FALSE(file.contains("lm_head.weight"));
  save_safetensors(dir / "one.safetensors", {{"w", zeros({1})}});
  CHECK(error_of([&] { SafetensorsFile(dir / "one.safetensors").info("x"); }) ==
        "[safetensors] " + (dir / "one.safetensors") + ": no tensor 'x'; it holds 1 tensor: 'w'");
  CHECK(error_of([&] { SafetensorsFile(dir / "absent.safetensors"); }) ==
        "[safetensors] " + (dir / "absent.safetensors") + ": cannot open: No such file or directory");
}

TEST_CASE("safetensors errors: sharded checkpoints") {
  TempDir dir;
  save_sharded(dir.path.string(), {{"a", zeros({4})}, {"b", zeros({4})}}, 16);
  const std::string index = dir / "model.safetensors.index.json";
  const std::string prefix = "[safetensors] " + index + ": ";

  SUBCASE("index naming a missing shard") {
    fs::remove(dir / "model-00002-of-00002.safetensors");
    CHECK(error_of([&] { load_sharded(dir.path.string()); }) ==
          prefix + "weight_map maps 'b' to 'model-00002-of-00002.safetensors', which does not exist");
  }
  SUBCASE("index naming a tensor its shard lacks") {
    write_bytes(index, R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                          "z": "model-00002-of-00002.safetensors"}})");
    CHECK(error_of([&] { load_sharded(index); }) ==
          prefix + "weight_map maps 'z' to 'model-00002-of-00002.safetensors', which has no such tensor");
  }
  SUBCASE("invalid index JSON") {
    write_bytes(index, "{\"weight_map\": {\"a\": }}");
    CHECK(error_of([&] { load_sharded(index); }) ==
          prefix + "invalid JSON at line 1, column 22: syntax error while parsing value - unexpected '}'; expected '[', "
                   "'{', or a literal");
    write_bytes(index, R"({"metadata": {}})");
    CHECK(error_of([&] { load_sharded(index); }) == prefix + "index has no 'weight_map'");
  }
  SUBCASE("shard names that leave the checkpoint directory") {
    for (const std::string file : {"../x.safetensors", "a/../../b.safetensors", "./../x.safetensors", "a/.."}) {
      INFO(file);
      write_bytes(index, R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "w": ")" + file + R"("}})");
      CHECK(error_of([&] { load_sharded(index); }) ==
            prefix + "weight_map maps 'w' to '" + file + "', outside the checkpoint directory");
    }
    write_bytes(index, R"({"weight_map": {"w": "/etc/x.safetensors"}})");
    CHECK(error_of([&] { load_sharded(index); }) == prefix + "weight_map maps 'w' to absolute path '/etc/x.safetensors'");
    write_bytes(index, R"({"weight_map": {"w": ""}})");
    CHECK(error_of([&] { load_sharded(index); }) == prefix + "weight_map maps 'w' to an empty file name");
    write_bytes(index, R"({"weight_map": {"w": "model-00001-of-00002.safetensors\u0000../x"}})");
    CHECK(error_of([&] { load_sharded(index); }) == prefix + "weight_map maps 'w' to a file name holding a NUL byte");
    // Names that stay inside are fine, in a subdirectory too.
    fs::create_directory(dir / "sub");
    fs::rename(dir / "model-00002-of-00002.safetensors", dir / "sub/b.safetensors");
    write_bytes(index, R"({"weight_map": {"a": "./model-00001-of-00002.safetensors", "b": "sub/b.safetensors"}})");
    CHECK(load_sharded(index).size() == 2);
  }
  SUBCASE("missing tensor in a checkpoint") {
    CHECK(error_of([&] { SafetensorsCheckpoint(dir.path.string()).load("c"); }) ==
          prefix + "no tensor 'c'; it holds 2 tensors: 'a', 'b'");
  }
  SUBCASE("a directory without a checkpoint") {
    TempDir empty;
    CHECK(error_of([&] { load_sharded(empty.path.string()); }) ==
          "[safetensors] " + empty.path.string() +
              ": directory holds neither model.safetensors.index.json nor model.safetensors");
  }
}
