#include "study/teacher_cache.hpp"

#include <cstring>

#include <xxhash.h>

#include "util/error.hpp"
#include "tensor/ops.hpp"

namespace cotan::study {

// The trainer's names, which this file uses throughout.
using namespace cotan::train;

namespace {

// The ids as a contiguous CPU tensor (the caller's own when it is one), and the hash of their
// dtype, shape and bytes.
std::pair<Tensor, uint64_t> host_key(const Tensor& ids) {
  Tensor host = contiguous(to(ids.detach(), Device::cpu()));
  uint64_t hash = XXH3_64bits(host.data_ptr(), host.nbytes());
  const int64_t meta[] = {int64_t(host.dtype()), host.dim()};
  hash = XXH3_64bits_withSeed(meta, sizeof meta, hash);
  hash = XXH3_64bits_withSeed(host.shape().data(), host.shape().size() * sizeof(int64_t), hash);
  return {std::move(host), hash};
}

bool same_ids(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

}  // namespace

const TeacherCache::Entry* TeacherCache::entry(const Tensor& host_ids, uint64_t hash, bool fused_head) const {
  auto [first, last] = entries_.equal_range(hash);
  for (auto it = first; it != last; ++it)
    if (it->second.fused_head == fused_head && same_ids(it->second.ids, host_ids)) return &it->second;
  return nullptr;
}

void TeacherCache::check_teacher(const void* teacher) {
  if (!teacher_) teacher_ = teacher;
  if (teacher != teacher_) fail("train", "a teacher cache holds another teacher's outputs");
}

Tensor TeacherCache::find(const void* teacher, const Tensor& ids, bool fused_head) {
  const auto [host, hash] = host_key(ids);
  std::lock_guard lock(mutex_);
  check_teacher(teacher);
  const Entry* e = entry(host, hash, fused_head);
  ++(e ? hits_ : misses_);
  return e ? e->output : Tensor();
}

void TeacherCache::keep(const void* teacher, const Tensor& ids, bool fused_head, const Tensor& output) {
  if (!output.defined()) return;
  const auto [host, hash] = host_key(ids);
  std::lock_guard lock(mutex_);
  check_teacher(teacher);
  if (bytes_ + output.nbytes() > budget_ || entry(host, hash, fused_head)) return;
  bytes_ += output.nbytes();
  entries_.emplace(hash, Entry{clone(host), fused_head, output.detach()});
}

size_t TeacherCache::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

int64_t TeacherCache::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}

int64_t TeacherCache::misses() const {
  std::lock_guard lock(mutex_);
  return misses_;
}

}  // namespace cotan::study
