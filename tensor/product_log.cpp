#include "tensor/product_log.hpp"

#include <atomic>
#include <mutex>

#include "tensor/error.hpp"
#include "tensor/tensor.hpp"

namespace cotan {

namespace {

// The open log, if any. Noting a product reads it once without the lock (the common case: none
// open), then again under the lock, which the log's destructor also takes: a product noted on
// another thread while the log closes is either recorded before it closes or not at all.
std::atomic<ProductLog*> open_log{nullptr};
std::mutex log_mutex;

}  // namespace

ProductLog::ProductLog() {
  std::lock_guard lock(log_mutex);
  if (open_log.load() != nullptr) fail("product log", "another log is already recording; one at a time");
  open_log.store(this);
}

ProductLog::~ProductLog() {
  std::lock_guard lock(log_mutex);
  open_log.store(nullptr);
}

std::vector<ProductShape> ProductLog::products() const {
  std::lock_guard lock(log_mutex);
  return products_;
}

void ProductLog::note(const Tensor& a, const Tensor& b, bool accumulate) {
  if (open_log.load(std::memory_order_relaxed) == nullptr) return;
  const size_t nd = size_t(a.dim());
  ProductShape p;
  for (size_t d = 0; d + 2 < nd; ++d) p.batch *= a.shape()[d];
  p.m = a.shape()[nd - 2];
  p.k = a.shape()[nd - 1];
  p.n = b.shape()[nd - 1];
  p.a_layout = operand_layout(p.m, p.k, a.strides()[nd - 2], a.strides()[nd - 1]);
  p.b_layout = operand_layout(p.k, p.n, b.strides()[nd - 2], b.strides()[nd - 1]);
  p.accumulate = accumulate;
  p.dtype = a.dtype();
  p.device = a.device();
  std::lock_guard lock(log_mutex);
  if (ProductLog* log = open_log.load()) log->products_.push_back(p);
}

}  // namespace cotan
