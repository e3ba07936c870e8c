#include "tensor/random.hpp"

namespace cotan {

std::array<uint32_t, 4> Philox::block(uint64_t counter, uint64_t key, uint64_t stream) {
  const PhiloxWords out = words(counter, key, stream);
  return {out.w[0], out.w[1], out.w[2], out.w[3]};
}

}  // namespace cotan
