// The frozen teacher's outputs on batches already seen, for runs that see the same batches: a
// study's students of one seed draw the same windows in the same order (and evaluate on the same
// validation batches), so the teacher's forward pass on each batch need run only once for all of
// them. train::teacher_output looks a batch up by its input ids before running the teacher, and
// keeps what it computes while the cache is under its byte budget (first come, never evicted: the
// next run asks for the batches in the order the first one kept them).
//
// One cache serves one teacher (model, weights, state) in one compute dtype on one device: the
// first teacher that uses it owns it, and another is an error. The key is the ids (compared bit
// for bit, found by their XXH3 hash) and the kind of output (final hidden states for the heads
// fused into the loss, else logits). A cached output is shared, never written: the losses only
// read the teacher's side. The budget counts the outputs' bytes (the ids kept as keys add about a
// hundredth more at the tiny study's shapes). Safe to use from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "tensor/tensor.hpp"
#include "train/trainer.hpp"

namespace cotan::study {

class TeacherCache final : public train::TeacherOutputs {
 public:
  explicit TeacherCache(size_t budget_bytes) : budget_(budget_bytes) {}

  // The output kept for these ids and kind, or an undefined tensor. `teacher` identifies the
  // teacher asking (its parameters): one other than the cache's first is an error.
  Tensor find(const void* teacher, const Tensor& ids, bool fused_head) override;
  // Keeps `output` for these ids and kind unless it is there already or the budget is spent.
  void keep(const void* teacher, const Tensor& ids, bool fused_head, const Tensor& output) override;

  size_t bytes() const;    // of the outputs kept
  int64_t hits() const;    // lookups answered
  int64_t misses() const;  // lookups not answered

 private:
  struct Entry {
    Tensor ids;  // a copy on the CPU that owns its storage
    bool fused_head;
    Tensor output;
  };
  const Entry* entry(const Tensor& host_ids, uint64_t hash, bool fused_head) const;
  void check_teacher(const void* teacher);  // under mutex_

  mutable std::mutex mutex_;
  const void* teacher_ = nullptr;
  std::unordered_multimap<uint64_t, Entry> entries_;
  size_t budget_, bytes_ = 0;
  int64_t hits_ = 0, misses_ = 0;
};

}  // namespace cotan::study
