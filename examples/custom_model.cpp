// A user-defined layer and model trained through the nn API: a two-layer MLP language model with
// a custom "ScaledResidual" layer, trained with AdamW on byte tokens of a small text.
#include <iostream>

#include "nn/layers.hpp"
#include "nn/params.hpp"
#include "tensor/ops.hpp"
#include "train/data.hpp"
#include "train/losses.hpp"
#include "train/optim.hpp"

using namespace cotan;

// y = x + gamma * silu(x W^T): a layer of our own, declared like the built-in ones.
struct ScaledResidual {
  int64_t dim;
  void specs(std::vector<nn::ParamSpec>& out, const std::string& prefix) const {
    nn::Linear{dim, dim}.specs(out, nn::join(prefix, "proj"));
    out.push_back({nn::join(prefix, "gamma"), {dim}, nn::Init::ones, false});
  }
  Tensor apply(const Tensor& x, const nn::ParamView& ps) const {
    return x + ps["gamma"] * silu(nn::Linear{dim, dim}.apply(x, ps.sub("proj")));
  }
};

// Embedding -> 2 x ScaledResidual -> RMSNorm -> output head. Each position predicts the next byte
// from its own byte only (a bigram model): small, and enough to show the API.
struct BigramModel {
  int64_t vocab = train::kByteVocab, dim = 32;
  std::vector<nn::ParamSpec> specs() const {
    std::vector<nn::ParamSpec> s;
    nn::Embedding{vocab, dim}.specs(s, "embed");
    ScaledResidual{dim}.specs(s, "block0");
    ScaledResidual{dim}.specs(s, "block1");
    nn::RMSNorm{dim, 1e-6}.specs(s, "norm");
    nn::Linear{dim, vocab}.specs(s, "head");
    return s;
  }
  Tensor apply(const Tensor& ids, const nn::Params& params) const {
    nn::ParamView ps(params);
    Tensor x = nn::Embedding{vocab, dim}.apply(ids, ps.sub("embed"));
    x = ScaledResidual{dim}.apply(x, ps.sub("block0"));
    x = ScaledResidual{dim}.apply(x, ps.sub("block1"));
    x = nn::RMSNorm{dim, 1e-6}.apply(x, ps.sub("norm"));
    return nn::Linear{dim, vocab}.apply(x, ps.sub("head"));
  }
};

int main() {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "the cat sat on the mat. the dog sat on the log. ";
  train::WindowLoader loader(train::TokenSequence(train::encode(text)), 32, 8, 1);

  BigramModel model;
  Generator gen(0);
  nn::Params ps = nn::init_params(model.specs(), gen, DType::f32, 0.1);
  train::AdamW opt({}, model.specs());
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    train::Batch batch = loader.next();
    auto [loss, grads] = nn::value_and_grad(
        [&](const nn::Params& p) { return train::cross_entropy(model.apply(batch.inputs, p), batch.targets); }, ps);
    train::clip_grad_norm(grads, 1.0);
    opt.step(ps, grads, 1e-2);
    (step == 0 ? first : last) = loss.item<double>();
  }
  std::cout << "cross-entropy " << first << " -> " << last << " (" << nn::count_params(model.specs()) << " parameters)\n";
  return last < first * 0.6 ? 0 : 1;
}
