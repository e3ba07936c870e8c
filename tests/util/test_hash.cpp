// FNV-1a against the published test vectors of the 64-bit variant.
#include "util/hash.hpp"

#include <doctest/doctest.h>

#include <string>

using namespace cotan;

TEST_CASE("fnv1a: the 64-bit test vectors") {
  CHECK(fnv1a("") == 0xcbf29ce484222325ull);
  CHECK(fnv1a("a") == 0xaf63dc4c8601ec8cull);
  CHECK(fnv1a("foobar") == 0x85944171f73967e8ull);
  // Bytes above 0x7f hash as unsigned.
  CHECK(fnv1a("\xff") == ((0xcbf29ce484222325ull ^ 0xffull) * 0x100000001b3ull));
  static_assert(fnv1a("a") == 0xaf63dc4c8601ec8cull, "usable at compile time");
}

TEST_CASE("fnv1a: a hash continues over concatenated pieces") {
  CHECK(fnv1a("bar", fnv1a("foo")) == fnv1a("foobar"));
  CHECK(fnv1a(std::string("x\0y", 3)) != fnv1a("xy"));  // embedded NUL bytes count
}
