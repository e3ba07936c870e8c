// ProductLog (tensor/product_log.hpp): what it records of each product, which products it sees
// (those run while it is open, from any thread), and that one log records at a time.
#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"
#include "tensor/product_log.hpp"

using namespace cotan;

namespace {

Backend& cpu() { return backend(Device::cpu()); }

Tensor filled(const Shape& shape, DType dtype = DType::f32) {
  Generator gen(7);
  return randn(shape, gen, dtype);
}

// A [rows, cols] view of a fresh [cols, rows] tensor: its columns are contiguous.
Tensor transposed(int64_t rows, int64_t cols, DType dtype = DType::f32) {
  const Tensor t = filled({cols, rows}, dtype);
  return t.as_strided({rows, cols}, {1, rows}, 0);
}

ProductShape shape_of(int64_t batch, int64_t m, int64_t n, int64_t k, std::string layout, bool accumulate,
                      DType dtype = DType::f32) {
  return {batch, m, n, k, layout[0], layout[1], accumulate, dtype, Device::cpu()};
}

}  // namespace

TEST_CASE("operand_layout: row-major, transposed, general, and size-1 dims") {
  CHECK(operand_layout(4, 3, 3, 1) == 'n');
  CHECK(operand_layout(4, 3, 5, 1) == 'n');  // rows 5 apart: a slice of wider rows
  CHECK(operand_layout(4, 3, 1, 4) == 't');
  CHECK(operand_layout(4, 3, 1, 9) == 't');
  CHECK(operand_layout(4, 3, 6, 2) == 'g');  // every other column
  CHECK(operand_layout(4, 3, 2, 1) == 'g');  // rows overlap
  CHECK(operand_layout(1, 3, 100, 1) == 'n');
  CHECK(operand_layout(4, 1, 1, 100) == 'n');  // one column: contiguous either way, read as rows
  CHECK(operand_layout(4, 1, 7, 100) == 'n');
  CHECK(operand_layout(1, 3, 100, 7) == 't');
}

TEST_CASE("ProductLog records each product's shape, layouts, dtype and kind while it is open") {
  const Tensor a = filled({4, 3}), b = filled({3, 5});
  cpu().matmul(a, b);  // before the log: not recorded
  std::vector<ProductShape> seen;
  {
    ProductLog log;
    cpu().matmul(a, b);
    cpu().matmul(a, transposed(3, 5));                 // x W^T
    cpu().matmul(transposed(4, 3), b);                 // X^T G
    cpu().matmul(transposed(4, 3), transposed(3, 5));  // both
    cpu().matmul(filled({2, 3, 4, 3}, DType::f64), filled({2, 3, 3, 5}, DType::f64));
    cpu().matmul(filled({4, 6}).as_strided({4, 3}, {6, 2}, 0), b);  // every other column of A
    Tensor c = filled({4, 5});
    cpu().matmul_accumulate(transposed(4, 3), b, c);
    cpu().matmul_accumulate(filled({4, 0}), filled({0, 5}), c);  // an empty sum: nothing runs
    seen = log.products();
  }
  cpu().matmul(a, b);  // after: not recorded
  const std::vector<ProductShape> expected = {
      shape_of(1, 4, 5, 3, "nn", false), shape_of(1, 4, 5, 3, "nt", false), shape_of(1, 4, 5, 3, "tn", false),
      shape_of(1, 4, 5, 3, "tt", false), shape_of(6, 4, 5, 3, "nn", false, DType::f64),
      shape_of(1, 4, 5, 3, "gn", false), shape_of(1, 4, 5, 3, "tn", true),
  };
  REQUIRE(seen.size() == expected.size());
  for (size_t i = 0; i < seen.size(); ++i) {
    CAPTURE(i);
    CHECK(seen[i] == expected[i]);
  }
  CHECK(expected[4].flops() == 2.0 * 6 * 4 * 5 * 3);
}

TEST_CASE("ProductLog sees products from other threads, and only one log records at a time") {
  const Tensor a = filled({8, 16}), b = filled({16, 4});
  ProductLog log;
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w)
    workers.emplace_back([&] {
      for (int i = 0; i < 25; ++i) cpu().matmul(a, b);
    });
  for (std::thread& w : workers) w.join();
  const std::vector<ProductShape> seen = log.products();
  CHECK(seen.size() == 100);
  for (const ProductShape& p : seen) CHECK(p == shape_of(1, 8, 4, 16, "nn", false));

  std::string message;
  try {
    ProductLog second;
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message == "[product log] another log is already recording; one at a time");
  CHECK(log.products().size() == 100);  // the failed second log closed nothing
}

TEST_CASE("ProductLog: a log opened after another closed starts empty") {
  const Tensor a = filled({2, 2});
  {
    ProductLog first;
    cpu().matmul(a, a);
    CHECK(first.products().size() == 1);
  }
  ProductLog second;
  CHECK(second.products().empty());
  cpu().matmul(a, a);
  CHECK(second.products().size() == 1);
}
