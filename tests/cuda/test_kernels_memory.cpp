// The memory kernels (cuda/kernels/memory.cuh) run by the SIMT emulator, against the CPU backend:
// allocate, assign (every dtype pair, strided both sides), fill, arange, and the random draws,
// which must be the CPU's numbers bit for bit (the Philox layout of tensor/random.hpp). Also what
// backend(Device::cuda()) says on a machine without a GPU.
#include "tests/cuda/kernel_check.hpp"

#include <limits>

#include "cuda/runtime.hpp"

using namespace cotan;
using namespace kernel_check;

namespace {

constexpr DType kAllTypes[] = {DType::f64, DType::f32, DType::bf16, DType::i32, DType::i64, DType::boolean};

// A [rows, cols] view with gaps on both axes into a storage pre-filled with `sentinel`, so that a
// kernel writing outside the view shows up when the whole storage is compared.
Tensor gapped_destination(Backend& be, int64_t rows, int64_t cols, DType dtype, double sentinel) {
  Tensor storage = Tensor(be.allocate(size_t(3 * rows * cols + 2) * dtype_size(dtype)), {3 * rows * cols + 2},
                          {1}, 0, dtype);
  be.fill(storage, sentinel);
  return storage.as_strided({rows, cols}, {3 * cols, 2}, 2);
}

// The whole storage of a view, as a flat tensor.
Tensor whole(const Tensor& view) {
  const int64_t n = int64_t(view.storage()->nbytes / dtype_size(view.dtype()));
  return Tensor(view.storage(), {n}, {1}, 0, view.dtype());
}

}  // namespace

TEST_CASE("allocate gives 64-byte aligned host memory that reports the CPU device") {
  for (size_t n : {size_t(0), size_t(1), size_t(1000), size_t(3) << 20}) {
    auto storage = emulated_backend().allocate(n);
    CHECK(storage->nbytes == n);
    CHECK(storage->device == Device::cpu());
    CHECK(reinterpret_cast<uintptr_t>(storage->data) % 64 == 0);
  }
  CHECK(emulated_backend().name() == "cuda-emulated");
}

TEST_CASE("assign converts between every pair of dtypes, strided on both sides") {
  for_each_schedule([&] {
    for (DType from : kAllTypes) {
      // In range for every destination: integers and bool take the truncated value.
      Tensor source = random_tensor({5, 9}, from, -100, 100, 3 + uint64_t(from));
      for (DType to : kAllTypes) {
        for (Layout l : kLayouts) {
          const std::string what = cat("assign ", from, " -> ", to, " from ", layout_name(l));
          Tensor src = in_layout(source, l);
          Tensor want = gapped_destination(cpu(), 5, 9, to, 3.5);
          Tensor got = gapped_destination(emulated_backend(), 5, 9, to, 3.5);
          cpu().assign(want, src);
          emulated_backend().assign(got, src);
          expect_same(whole(got), whole(want), what);
          // Contiguous on both sides: the fast kernel (a plain copy when the dtypes agree).
          Tensor packed_want = Tensor::empty({5, 9}, to), packed_got = Tensor::empty({5, 9}, to);
          cpu().assign(packed_want, src);
          emulated_backend().assign(packed_got, src);
          expect_same(packed_got, packed_want, what + " to contiguous");
        }
      }
    }
  });
  Tensor a = random_tensor({2, 3}, DType::f32, 0, 1, 1);
  CHECK_THROWS_WITH_AS(emulated_backend().assign(Tensor::empty({3, 2}), a),
                       "[assign] destination shape [3, 2] and source shape [2, 3] differ", Error);
}

TEST_CASE("fill writes converted values through any strides") {
  for_each_schedule([&] {
    for (DType t : kAllTypes) {
      for (double value : {2.75, -3.0, 0.1, 0.0}) {
        Tensor want = gapped_destination(cpu(), 7, 11, t, 9);
        Tensor got = gapped_destination(emulated_backend(), 7, 11, t, 9);
        cpu().fill(want, value);
        emulated_backend().fill(got, value);
        expect_same(whole(got), whole(want), cat("fill ", t, " ", value));
      }
    }
  });
}

TEST_CASE("arange computes start + i * step in f64 and converts, like the CPU") {
  for_each_schedule([&] {
    for (DType t : kAllTypes) {
      for (auto [start, step] : {std::pair{1.5, 0.25}, std::pair{-3.0, 2.0}, std::pair{0.1, 0.1}}) {
        for (int64_t n : {int64_t(0), int64_t(1), int64_t(1001)}) {
          expect_same(emulated_backend().arange(start, step, n, t), cpu().arange(start, step, n, t),
                      cat("arange ", t, " ", start, " ", step, " n=", n));
        }
      }
    }
  });
  CHECK_THROWS_WITH_AS(emulated_backend().arange(0, 1, -1, DType::f32), "[arange] negative length -1", Error);
}

TEST_CASE("random draws are the CPU's numbers bit for bit, and advance the generator alike") {
  struct Draw {
    RandomOp op;
    std::vector<DType> dtypes;
    double a, b;
  };
  const std::vector<Draw> draws = {
      {RandomOp::uniform, {DType::f64, DType::f32, DType::bf16}, 0.0, 1.0},
      {RandomOp::uniform, {DType::f64, DType::f32, DType::bf16}, -2.0, 3.0},
      {RandomOp::uniform, {DType::f32, DType::bf16}, 1.0, 1.01},  // draws that round up to the bound
      {RandomOp::normal, {DType::f64, DType::f32, DType::bf16}, 0.5, 2.0},
      {RandomOp::randint, {DType::i32, DType::i64, DType::f32, DType::bf16}, -5, 17},
      {RandomOp::randint, {DType::i64}, -3e12, 4e12},
      {RandomOp::bernoulli, {DType::boolean, DType::f32, DType::i32, DType::bf16}, 0.3, 0},
  };
  for_each_schedule([&] {
    for (const Draw& d : draws) {
      for (DType t : d.dtypes) {
        for (int64_t n : {int64_t(0), int64_t(1), int64_t(7), int64_t(1001)}) {
          for (uint64_t offset : {uint64_t(0), uint64_t(12345)}) {
            Generator cpu_gen(42, offset), emu_gen(42, offset);
            Tensor want = cpu().random(d.op, {n}, t, cpu_gen, d.a, d.b);
            Tensor got = emulated_backend().random(d.op, {n}, t, emu_gen, d.a, d.b);
            const std::string what = cat("random op ", int(d.op), " ", t, " [", d.a, ", ", d.b, ") n=", n);
            expect_same(got, want, what);
            CHECK(emu_gen == cpu_gen);
          }
        }
      }
    }
    // A multi-dimensional shape draws in row-major order.
    Generator cpu_gen(7), emu_gen(7);
    expect_same(emulated_backend().random(RandomOp::normal, {3, 4, 5}, DType::f32, emu_gen, 0, 1),
                cpu().random(RandomOp::normal, {3, 4, 5}, DType::f32, cpu_gen, 0, 1), "normal [3, 4, 5]");
  });
  Generator gen(1);
  Backend& be = emulated_backend();
  CHECK_THROWS_WITH_AS(be.random(RandomOp::uniform, {3}, DType::i32, gen, 0, 1),
                       "[rand] expects a floating dtype, got i32", Error);
  CHECK_THROWS_WITH_AS(be.random(RandomOp::normal, {3}, DType::i64, gen, 0, 1),
                       "[randn] expects a floating dtype, got i64", Error);
  CHECK_THROWS_WITH_AS(be.random(RandomOp::randint, {3}, DType::boolean, gen, 0, 2),
                       "[randint] expects an integer dtype, got bool", Error);
  CHECK_THROWS_WITH_AS(be.random(RandomOp::randint, {3}, DType::i32, gen, 4, 4), "[randint] empty range [4, 4)",
                       Error);
  CHECK(gen == Generator(1));
}

TEST_CASE("Philox::words is Philox::block") {
  for (uint64_t counter : {uint64_t(0), uint64_t(1), uint64_t(0xffffffffull), uint64_t(0x123456789abcdefull)}) {
    for (uint64_t key : {uint64_t(0), uint64_t(42), ~uint64_t(0)}) {
      const auto block = Philox::block(counter, key, 3);
      const PhiloxWords words = Philox::words(counter, key, 3);
      for (size_t j = 0; j < 4; ++j) CHECK(words.w[j] == block[j]);
    }
  }
  // The first block of (counter 0, key 0): the values every Philox4x32-10 implementation gives.
  const PhiloxWords zero = Philox::words(0, 0);
  CHECK(zero.w[0] == 0x6627e8d5u);
  CHECK(zero.w[1] == 0xe169c58du);
  CHECK(zero.w[2] == 0xbc57ac4cu);
  CHECK(zero.w[3] == 0x9b00dbd8u);
}

TEST_CASE("emulated kernels reject tensors from another device, and backend(cuda) explains itself") {
  // Host memory labelled as a GPU's: the kernels must not touch it.
  alignas(64) float buffer[2] = {};
  auto foreign = std::make_shared<Storage>(buffer, sizeof buffer, Device::cuda(0), nullptr);
  Tensor x(foreign, {2}, {1}, 0, DType::f32);
  CHECK_THROWS_WITH_AS(emulated_backend().fill(x, 1.0), "[fill] expects tensors on cpu, got cuda:0", Error);
  CHECK_THROWS_WITH_AS(emulated_backend().unary(UnaryOp::exp, x, 0, 0), "[exp] expects tensors on cpu, got cuda:0",
                       Error);

  if (!cuda_compiled_in()) {
    CHECK_THROWS_WITH_AS(backend(Device::cuda()), "[device] cannot use cuda:0: this build has no CUDA backend", Error);
  } else if (cuda_devices().empty()) {
    CHECK_THROWS_WITH_AS(backend(Device::cuda()), doctest::Contains("[cuda] no CUDA device: "), Error);
  } else {
    CHECK(backend(Device::cuda()).name() == "cuda");
  }
}
