// The fused head loss (Backend::head_loss: per chunk of rows, the heads' GEMMs and the fused KD
// row kernel) on the emulated kernel backend against the CPU backend on the same inputs, every
// loss spec, f32, chunks that do not divide the rows, ignored targets; the same bits under two
// emulator schedules.
#include "tests/cuda/kernel_check.hpp"

#include <vector>

#include "tensor/ops.hpp"
#include "train/losses.hpp"

using namespace cotan;
using namespace kernel_check;

TEST_CASE("head_loss on the kernel backend matches the CPU backend, under every schedule") {
  Generator gen(21);
  HeadLossSpec spec;
  spec.hidden = randn({10, 8}, gen);
  spec.head = randn({37, 8}, gen) * 0.5;
  spec.teacher_hidden = randn({10, 6}, gen);
  spec.teacher_head = randn({37, 6}, gen) * 0.5;
  std::vector<int64_t> targets = randint({10}, 0, 37, gen, DType::i64).to_vector<int64_t>();
  targets[3] = targets[7] = kIgnoreIndex;
  spec.targets = from_vector(targets, {10});
  spec.count = 8;
  spec.chunk_rows = 4;
  for (const char* loss : {"fkl", "rkl", "jsd:0.4"})
    for (double ratio : {1.0, 0.5, 0.0}) {
      KdLossConfig c;
      train::set_kd_loss(c, loss);
      c.kd_ratio = ratio;
      c.temperature = 1.5;
      CAPTURE(loss);
      CAPTURE(ratio);
      HeadLossSpec s = spec;
      if (ratio == 0) s.teacher_hidden = s.teacher_head = Tensor();
      const HeadLossResult want = cpu().head_loss(s, c, true);
      std::vector<HeadLossResult> seen;
      for_each_schedule([&] {
        const HeadLossResult got = emulated_backend().head_loss(s, c, true);
        CHECK(got.total == doctest::Approx(want.total).epsilon(1e-5));
        CHECK(got.kd == doctest::Approx(want.kd).epsilon(1e-5));
        CHECK(got.ce == doctest::Approx(want.ce).epsilon(1e-5));
        CHECK(got.teacher_entropy == doctest::Approx(want.teacher_entropy).epsilon(1e-5));
        expect_close(got.d_hidden, want.d_hidden, "d_hidden");
        expect_close(got.d_head, want.d_head, "d_head");
        if (!seen.empty()) {
          CHECK(got.total == seen[0].total);
          expect_same(got.d_head, seen[0].d_head, "the same under every schedule");
        }
        seen.push_back(got);
      });
    }
}
