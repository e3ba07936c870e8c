// The train/validation split of documents.
#include <algorithm>
#include <cmath>

#include "tensor/random.hpp"
#include "train/data.hpp"

namespace cotan::train {

namespace {

constexpr uint64_t kSplitStream = 0x53504C54ull << 32;  // "SPLT": Philox stream of the val split

}  // namespace

// ---- train/validation split ----

std::vector<bool> validation_mask(size_t n, double val_fraction, uint64_t seed) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0))
    fail("data", "the validation fraction must be in [0, 1), got ", val_fraction);
  size_t n_val = size_t(std::llround(val_fraction * double(n)));
  if (n >= 2 && val_fraction > 0.0) n_val = std::clamp<size_t>(n_val, 1, n - 1);
  if (n < 2) n_val = 0;

  // Rank documents by a Philox key (ties by index); the n_val smallest go to validation.
  std::vector<std::pair<uint64_t, size_t>> keys(n);
  for (size_t i = 0; i < n; ++i) {
    const std::array<uint32_t, 4> w = Philox::block(i, seed, kSplitStream);
    keys[i] = {(uint64_t(w[0]) << 32) | w[1], i};
  }
  std::vector<bool> in_val(n, false);
  if (n_val > 0) {
    std::nth_element(keys.begin(), keys.begin() + std::ptrdiff_t(n_val - 1), keys.end());
    for (size_t k = 0; k < n_val; ++k) in_val[keys[k].second] = true;
  }
  return in_val;
}

DocumentSplit split_train_val(std::vector<std::string> documents, double val_fraction, uint64_t seed) {
  const size_t n = documents.size();
  const std::vector<bool> in_val = validation_mask(n, val_fraction, seed);
  DocumentSplit split;
  for (size_t i = 0; i < n; ++i) (in_val[i] ? split.val : split.train).push_back(std::move(documents[i]));
  return split;
}

}  // namespace cotan::train
