// Checking the gradient of your own function: a softplus-weighted attention pooling.
#include <iostream>

#include "autograd/gradcheck.hpp"
#include "tensor/ops.hpp"

using namespace cotan;

int main() {
  Generator gen(7);
  Tensor x = randn({5, 4}, gen, DType::f64);  // 5 vectors of size 4
  Tensor w = randn({4}, gen, DType::f64);

  // pool(x, w) = sum_i softmax(x w)_i * softplus(x_i), softplus(x) = log(1 + exp(x))
  Function pool = [](const std::vector<Tensor>& in) {
    Tensor scores = softmax(matmul(in[0], in[1]), 0);  // [5]
    Tensor smooth = softplus(in[0]);                   // [5, 4], cotan's op (no overflow for large x)
    return sum(unsqueeze(scores, -1) * smooth, {0});   // [4]
  };
  GradcheckResult result = gradcheck(pool, {x, w});
  std::cout << (result.pass ? "PASS " : "FAIL ") << result.describe() << "\n";
  return result.pass ? 0 : 1;
}
