// The frozen teacher's outputs on batches already seen, for runs that see the same batches: a
// study's students of one seed draw the same windows in the same order (and evaluate on the same
// validation batches), so the teacher's forward pass on each batch need run only once for all of
// them. train::teacher_output looks a batch up by its input ids before running the teacher, and
// keeps what it computes while the cache is under its byte budget (first come, never evicted: the
// next run asks for the batches in the order the first one kept them).
//
// One cache serves one teacher (model, weights, state) in one compute dtype on one device; the
// key is the ids (compared bit for bit, found by their XXH3 hash) and the kind of output (final
// hidden states for the heads fused into the loss, else logits). A cached output is shared, never
// written: the losses only read the teacher's side. Safe to use from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "tensor/tensor.hpp"

namespace cotan::train {

class TeacherCache {
 public:
  explicit TeacherCache(size_t budget_bytes) : budget_(budget_bytes) {}

  // The output kept for these ids and kind, or an undefined tensor.
  Tensor find(const Tensor& ids, bool fused_head) const;
  // Keeps `output` for these ids and kind unless it is there already or the budget is spent.
  void keep(const Tensor& ids, bool fused_head, const Tensor& output);

  size_t bytes() const;    // of the outputs kept
  int64_t hits() const;    // lookups answered
  int64_t misses() const;  // lookups not answered

 private:
  struct Entry {
    Tensor ids;  // a contiguous copy on the CPU
    bool fused_head;
    Tensor output;
  };
  const Entry* entry(const Tensor& host_ids, uint64_t hash, bool fused_head) const;

  mutable std::mutex mutex_;
  std::unordered_multimap<uint64_t, Entry> entries_;
  size_t budget_, bytes_ = 0;
  mutable int64_t hits_ = 0, misses_ = 0;
};

}  // namespace cotan::train
