// WindowLoader (shuffled training windows, resumable) and validation_batches (windows in order).
#include <algorithm>
#include <charconv>
#include <numeric>

#include "tensor/ops.hpp"
#include "tensor/random.hpp"
#include "train/data.hpp"
#include "train/teacher_topk.hpp"
#include "util/json.hpp"

namespace cotan::train {

namespace {

constexpr uint64_t kLoaderStream = 0x4C4F4144ull << 32;  // "LOAD": Philox stream of epoch e is this + e

uint64_t random_u64(uint64_t counter, uint64_t seed, uint64_t stream) {
  const std::array<uint32_t, 4> w = Philox::block(counter, seed, stream);
  return (uint64_t(w[0]) << 32) | w[1];
}

// rows * (seq_len + 1) tokens, one window per row -> inputs and targets [rows, seq_len].
Batch make_batch(const std::vector<int64_t>& windows, int64_t rows, int64_t seq_len) {
  std::vector<int64_t> inputs(size_t(rows * seq_len)), targets(size_t(rows * seq_len));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* w = windows.data() + r * (seq_len + 1);
    std::copy(w, w + seq_len, inputs.begin() + r * seq_len);
    std::copy(w + 1, w + seq_len + 1, targets.begin() + r * seq_len);
  }
  return {from_vector(inputs, {rows, seq_len}), from_vector(targets, {rows, seq_len}), {}};
}

// The top-k of `rows` windows of seq_len positions starting at `starts`: [rows, seq_len, K].
TopkTargets topk_batch(const TopkSequence& topk, const std::vector<uint64_t>& starts, int64_t seq_len) {
  const int64_t rows = int64_t(starts.size()), k = topk.k();
  std::vector<int32_t> ids(size_t(rows * seq_len * k));
  std::vector<float> logp(ids.size()), tail(size_t(rows * seq_len));
  for (int64_t r = 0; r < rows; ++r)
    topk.copy_to(starts[size_t(r)], uint64_t(seq_len), ids.data() + r * seq_len * k, logp.data() + r * seq_len * k,
                 tail.data() + r * seq_len);
  return {from_vector(ids, {rows, seq_len, k}), from_vector(logp, {rows, seq_len, k}), from_vector(tail, {rows, seq_len})};
}

void check_shape(int64_t seq_len, int64_t batch_size) {
  if (seq_len < 1) fail("data", "seq_len must be at least 1, got ", seq_len);
  if (batch_size < 1) fail("data", "batch_size must be at least 1, got ", batch_size);
}

// Seeds may use all 64 bits. Checkpoints written before JSON held uint64 wrote values past
// INT64_MAX as strings of digits; those still read.
uint64_t u64_field(const Json& json, std::string_view key) {
  const Json& v = member(json, key);
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) return v.get<uint64_t>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return value;
  }
  fail("data", "loader state: '", key, "' must be a non-negative integer, got ", v.dump());
}

}  // namespace

// ---- LoaderState ----

Json LoaderState::to_json() const {
  Json j = Json::object();
  j["seed"] = seed;
  j["epoch"] = epoch;
  j["position"] = position;
  j["seq_len"] = seq_len;
  j["tokens"] = tokens;
  return j;
}

LoaderState LoaderState::from_json(const Json& json) {
  if (!json.is_object()) fail("data", "loader state: expected an object, got ", kind_name(json));
  LoaderState s;
  s.seed = u64_field(json, "seed");
  s.epoch = u64_field(json, "epoch");
  s.position = u64_field(json, "position");
  s.seq_len = int64_t(u64_field(json, "seq_len"));
  s.tokens = u64_field(json, "tokens");
  return s;
}

// ---- WindowLoader ----

WindowLoader::WindowLoader(TokenSequence tokens, int64_t seq_len, int64_t batch_size, uint64_t seed, bool aligned)
    : tokens_(std::move(tokens)), seq_len_(seq_len), batch_size_(batch_size), seed_(seed), aligned_(aligned) {
  check_shape(seq_len, batch_size);
  if (tokens_.size() < uint64_t(seq_len) + 1)
    fail("data", "seq_len ", seq_len, " needs at least ", seq_len + 1, " tokens, but the training split has ",
         tokens_.size());
  start_epoch(0);
}

// Windows of epoch e start at offset + k * seq_len, k < n, with the offset drawn from
// [0, min(seq_len - 1, N - seq_len - 1)] so that there is at least one window; then
// n = (N - 1 - offset) / seq_len is the largest count whose last window ends by N. The order is
// a Fisher-Yates shuffle: step i swaps i with a draw from [0, i] (Philox counter i; counter 0
// gives the offset).
void WindowLoader::start_epoch(uint64_t epoch) {
  const uint64_t n_tokens = tokens_.size(), t = uint64_t(seq_len_);
  const uint64_t stream = kLoaderStream + epoch;
  const uint64_t max_offset = std::min(t - 1, n_tokens - t - 1);
  offset_ = aligned_ ? 0 : random_u64(0, seed_, stream) % (max_offset + 1);
  order_.resize((n_tokens - 1 - offset_) / t);
  std::iota(order_.begin(), order_.end(), uint64_t(0));
  for (uint64_t i = order_.size(); i-- > 1;) std::swap(order_[i], order_[random_u64(i, seed_, stream) % (i + 1)]);
  epoch_ = epoch;
  position_ = 0;
}

Batch WindowLoader::next() {
  const uint64_t window = uint64_t(seq_len_) + 1;
  std::vector<int64_t> windows(size_t(batch_size_) * window);
  std::vector<uint64_t> starts(static_cast<size_t>(batch_size_));
  for (int64_t r = 0; r < batch_size_; ++r) {
    const uint64_t start = offset_ + order_[position_++] * uint64_t(seq_len_);
    starts[size_t(r)] = start;
    tokens_.copy_to(start, window, windows.data() + size_t(r) * window);
    if (position_ == order_.size()) start_epoch(epoch_ + 1);  // epoch() names the next window's epoch
  }
  Batch b = make_batch(windows, batch_size_, seq_len_);
  if (topk_) b.topk = topk_batch(*topk_, starts, seq_len_);
  return b;
}

void WindowLoader::attach_topk(const TopkSequence* topk) {
  if (topk && topk->size() != tokens_.size())
    fail("data", "the teacher's top-k holds ", topk->size(), " positions but the training split has ", tokens_.size(),
         " tokens");
  topk_ = topk;
}

LoaderState WindowLoader::state() const { return {seed_, epoch_, position_, seq_len_, tokens_.size()}; }

void WindowLoader::restore(const LoaderState& s) {
  if (s.seq_len != seq_len_ || s.tokens != tokens_.size())
    fail("data", "cannot restore the loader: the state is for seq_len ", s.seq_len, " over ", s.tokens,
         " tokens, this loader has seq_len ", seq_len_, " over ", tokens_.size(), " tokens");
  seed_ = s.seed;
  start_epoch(s.epoch);
  if (s.position >= order_.size())
    fail("data", "cannot restore the loader: position ", s.position, " is past the end of epoch ", s.epoch,
         " (", order_.size(), " windows)");
  position_ = s.position;
}

// ---- validation ----

std::vector<Batch> validation_batches(const TokenSequence& tokens, int64_t seq_len, int64_t batch_size,
                                      int64_t max_batches, const TopkSequence* topk) {
  check_shape(seq_len, batch_size);
  if (max_batches < 0) fail("data", "max_batches must be at least 0, got ", max_batches);
  const uint64_t t = uint64_t(seq_len), window = t + 1;
  uint64_t n = tokens.size() < window ? 0 : (tokens.size() - 1) / t;
  if (max_batches > 0) n = std::min(n, uint64_t(max_batches) * uint64_t(batch_size));

  std::vector<Batch> batches;
  std::vector<int64_t> windows;
  for (uint64_t first = 0; first < n; first += uint64_t(batch_size)) {
    const int64_t rows = int64_t(std::min(uint64_t(batch_size), n - first));
    windows.resize(size_t(rows) * window);
    for (int64_t r = 0; r < rows; ++r)
      tokens.copy_to((first + uint64_t(r)) * t, window, windows.data() + size_t(r) * window);
    batches.push_back(make_batch(windows, rows, seq_len));
    if (topk) {
      std::vector<uint64_t> starts(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) starts[size_t(r)] = (first + uint64_t(r)) * t;
      batches.back().topk = topk_batch(*topk, starts, seq_len);
    }
  }
  return batches;
}

Batch to(const Batch& batch, Device device) {
  if (batch.inputs.device() == device && batch.targets.device() == device) return batch;
  Batch out{cotan::to(batch.inputs, device), cotan::to(batch.targets, device), {}};
  if (batch.topk.defined())
    out.topk = {cotan::to(batch.topk.ids, device), cotan::to(batch.topk.logp, device), cotan::to(batch.topk.tail, device)};
  return out;
}

}  // namespace cotan::train
