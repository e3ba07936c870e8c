// A block of memory on one device, shared by every view of it. The deleter is chosen by whoever
// made the block: a backend's allocator, or munmap for a memory-mapped file.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "tensor/device.hpp"

namespace cotan {

struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  std::function<void(void*, size_t)> release;

  Storage(void* data, size_t nbytes, Device device, std::function<void(void*, size_t)> release)
      : data(data), nbytes(nbytes), device(device), release(std::move(release)) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (release) release(data, nbytes);
  }
};

// Allocates through the device's backend (64-byte aligned on the CPU).
std::shared_ptr<Storage> allocate(size_t nbytes, Device device);

}  // namespace cotan
