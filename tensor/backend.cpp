#include "tensor/op_table.hpp"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "cuda/emulated/backend.hpp"
#include "cuda/kernels/backend.hpp"
#include "cuda/runtime.hpp"
#include "tensor/cpu/backend.hpp"
#include "tensor/ops.hpp"

namespace cotan {

namespace {
// The backend serving CUDA devices, once found: the emulator (kCudaEmulatorVariable) or the GPU's.
Backend* cuda_backend = nullptr;
}  // namespace

bool cuda_emulator_requested() {
  const char* value = std::getenv(kCudaEmulatorVariable);
  return value && *value && std::string_view(value) != "0";
}

Backend& cpu_backend() {
  static cpu::CpuBackend instance;
  return instance;
}

Backend& backend(Device device) {
  if (device.is_cpu()) return cpu_backend();
  if (cuda_backend) return *cuda_backend;
  if (cuda_emulator_requested()) {
    if (device.index != 0)
      fail("cuda", "cannot use ", to_string(device), ": the emulator (", kCudaEmulatorVariable, ") serves cuda:0 only");
    emu::serve_device(Device::cuda(0));
    cuda_backend = &emu::backend();
    return *cuda_backend;
  }
  if (Backend* found = cuda_device_backend()) return *found;
  if (!cuda_compiled_in()) fail("device", "cannot use ", to_string(device), ": this build has no CUDA backend");
  fail("cuda", cuda_status());  // "[cuda] no CUDA device: <the driver's reason>"
}

void Backend::set_tf32(bool enabled) {
  if (enabled) fail("tf32", "TF32 is a mode of the CUDA matmuls; the ", name(), " backend has none");
}

HeadLossResult Backend::head_loss(const HeadLossSpec& spec, const KdLossConfig& config, bool want_grad) {
  const int64_t n = spec.hidden.size(0), chunk = std::max<int64_t>(1, spec.chunk_rows);
  const bool want_kd = config.kd_ratio > 0;
  const DType dtype = spec.hidden.dtype();
  const Tensor head_t = transpose(spec.head);  // [Ds, V], a view
  const Tensor teacher_head_t = want_kd ? transpose(spec.teacher_head) : Tensor();
  HeadLossResult out;
  out.tokens = spec.count;
  std::vector<Tensor> d_hidden;
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t r1 = std::min(n, r0 + chunk);
    const Tensor h = slice(spec.hidden, 0, r0, r1);
    // The two heads' products side by side, and the two products of the gradients below: each
    // pair is independent, and too small to keep the threads busy to its end alone.
    Tensor logits, teacher;  // [C, V], fresh and contiguous: the gradient goes over logits
    run_concurrently(
        h.device(), [&] { logits = matmul(h, head_t); },
        [&] { if (want_kd) teacher = matmul(slice(spec.teacher_hidden, 0, r0, r1), teacher_head_t); }, want_kd);
    const Tensor targets = spec.targets.defined() ? slice(spec.targets, 0, r0, r1) : Tensor();
    const KdLossResult part = kd_loss(logits, teacher, targets, config, want_grad, logits);
    // The chunk's parts are means over its own counted tokens; weigh them into the mean over all.
    const double share = spec.count > 0 ? double(part.tokens) / double(spec.count) : 0.0;
    out.kd += part.kd * share;
    out.ce += part.ce * share;
    out.teacher_entropy += part.teacher_entropy * share;
    if (!want_grad) continue;
    if (part.tokens == 0) {  // every row ignored: a zero gradient, and nothing to add to d_head
      Tensor zero = Tensor::empty(h.shape(), dtype, h.device());
      fill(zero, 0);
      d_hidden.push_back(zero);
      continue;
    }
    // The chunk's gradient is scaled by 1 / its count; share turns that into 1 / count, folded
    // into the [C, Ds] operands rather than the [C, V] gradient.
    const Tensor one = arange(share, 0, 1, dtype);
    const Tensor scale = one.as_strided(h.shape(), {0, 0}, one.offset());
    run_concurrently(
        h.device(), [&] { d_hidden.push_back(binary(BinaryOp::mul, matmul(part.grad, spec.head), scale)); },  // [C, Ds]
        [&] {
          // d_head [V, Ds] += G^T (h * share), in place: no second [V, Ds] exists.
          const Tensor scaled_h = binary(BinaryOp::mul, h, scale);
          if (out.d_head.defined()) matmul_accumulate(transpose(part.grad), scaled_h, out.d_head);
          else out.d_head = matmul(transpose(part.grad), scaled_h);
        });
  }
  if (want_kd) out.total += config.kd_ratio * out.kd;
  if (config.kd_ratio < 1) out.total += (1 - config.kd_ratio) * out.ce;
  if (want_grad) {
    if (!out.d_head.defined()) {  // no counted token at all
      out.d_head = Tensor::empty(spec.head.shape(), dtype, spec.head.device());
      fill(out.d_head, 0);
    }
    out.d_hidden = Tensor::empty(spec.hidden.shape(), dtype, spec.hidden.device());
    for (size_t c = 0; c < d_hidden.size(); ++c) {
      const int64_t r0 = int64_t(c) * chunk;
      assign(slice(out.d_hidden, 0, r0, r0 + d_hidden[c].size(0)), d_hidden[c]);
    }
  }
  return out;
}

std::shared_ptr<Storage> allocate(size_t nbytes, Device device) {
  if (nbytes > kMaxTensorBytes)
    fail("allocate", "cannot allocate ", nbytes, " bytes on ", to_string(device), ": above the limit of ", kMaxTensorBytes,
         " bytes");
  return backend(device).allocate(nbytes);
}

}  // namespace cotan

// ---- threads ----
#include <exception>

#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

namespace cotan {

namespace {
std::unique_ptr<tbb::global_control> thread_limit;
}

void set_num_threads(int n) {
  if (n < 0) fail("set_num_threads", "thread count ", n, " is negative");
  thread_limit.reset();
  if (n > 0) thread_limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, size_t(n));
}

int num_threads() { return int(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism)); }

bool runs_side_by_side(Device device) {
  return device.is_cpu() && std::min(tbb::this_task_arena::max_concurrency(), num_threads()) >= 2;
}

void run_concurrently(Device device, const std::function<void()>& a, const std::function<void()>& b,
                      bool side_by_side) {
  std::exception_ptr failed_a, failed_b;
  auto guarded = [](const std::function<void()>& f, std::exception_ptr& failed) {
    try {
      f();
    } catch (...) {
      failed = std::current_exception();
    }
  };
  if (!side_by_side || !runs_side_by_side(device)) {
    guarded(a, failed_a);
    guarded(b, failed_b);
  } else {
    // Each function runs isolated: a thread waiting inside one of them (at the end of a parallel
    // loop) takes only that function's tasks, never the other function whole, so the two never
    // interleave on one thread, whose per-thread state (autograd's tape) would then mix them.
    auto isolated = [&](const std::function<void()>& f, std::exception_ptr& failed) {
      tbb::this_task_arena::isolate([&] { guarded(f, failed); });
    };
    // A context of its own: called from inside an algorithm that gets cancelled, b still runs.
    tbb::task_group_context context(tbb::task_group_context::isolated);
    tbb::task_group group(context);
    group.run([&] { isolated(b, failed_b); });
    isolated(a, failed_a);
    group.wait();
  }
  if (failed_a) std::rethrow_exception(failed_a);
  if (failed_b) std::rethrow_exception(failed_b);
}

}  // namespace cotan
