// Configure-time check (tests/fuzz/meson.build): clang++ links a libFuzzer target with ASan and UBSan.
#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }
