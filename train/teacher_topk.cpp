// Offline teacher targets: top-k selection, the sparse KL with its hand-written gradient, and the
// top-k files. The math is in train/teacher_topk.hpp, the format in docs/formats.md.
#include "train/teacher_topk.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>

#include "autograd/autograd.hpp"
#include "tensor/cpu/parallel.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"
#include "util/atomic_file.hpp"
#include "util/checksum.hpp"

namespace cotan::train {

namespace fs = std::filesystem;

static_assert(std::endian::native == std::endian::little, "top-k files assume a little-endian host");

namespace {

constexpr const char* kOp = "teacher-logits";
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kSparseChunkRows = 16;  // rows per task of the sparse KL and of the top-k selection

Shape leading(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 1); }

// log sum_i exp(x_i) over the given values; -inf when there are none.
double log_sum_exp(const double* x, const std::vector<int64_t>& index, size_t begin, size_t end) {
  if (begin == end) return -kInf;
  double m = -kInf;
  for (size_t j = begin; j < end; ++j) m = std::max(m, x[index[j]]);
  if (m == -kInf) return -kInf;
  double sum = 0;
  for (size_t j = begin; j < end; ++j) sum += std::exp(x[index[j]] - m);
  return m + std::log(sum);
}

}  // namespace

// ---- selection ----

TopkTargets teacher_topk(const Tensor& teacher_logits, int64_t k, double temperature, DType dtype) {
  check(teacher_logits.defined() && teacher_logits.dim() >= 2, kOp, "teacher logits must be [N, V] or [B, T, V]");
  check(std::isfinite(temperature) && temperature > 0, kOp, "temperature must be positive, got ", temperature);
  const int64_t vocab = teacher_logits.size(-1), rows = teacher_logits.numel() / vocab;
  check(k >= 1 && k <= vocab, kOp, "top-k ", k, " must be in [1, ", vocab, "] (the teacher's vocabulary)");
  const std::vector<double> u = teacher_logits.detach().to_vector<double>();
  std::vector<int32_t> ids(static_cast<size_t>(rows * k));
  std::vector<double> logp(static_cast<size_t>(rows * k)), tail(static_cast<size_t>(rows));
  cpu::parallel_for(rows, kSparseChunkRows, [&](int64_t r0, int64_t r1) {
    std::vector<double> x(static_cast<size_t>(vocab));
    std::vector<int64_t> index(static_cast<size_t>(vocab));
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t v = 0; v < vocab; ++v) x[size_t(v)] = u[size_t(r * vocab + v)] / temperature;
      std::iota(index.begin(), index.end(), int64_t(0));
      const auto larger = [&](int64_t a, int64_t b) {
        return x[size_t(a)] > x[size_t(b)] || (x[size_t(a)] == x[size_t(b)] && a < b);
      };
      if (k < vocab) std::nth_element(index.begin(), index.begin() + k, index.end(), larger);
      std::sort(index.begin(), index.begin() + k, larger);
      const double lse = log_sum_exp(x.data(), index, 0, size_t(vocab));
      for (int64_t j = 0; j < k; ++j) {
        ids[size_t(r * k + j)] = int32_t(index[size_t(j)]);
        logp[size_t(r * k + j)] = x[size_t(index[size_t(j)])] - lse;
      }
      tail[size_t(r)] = log_sum_exp(x.data(), index, size_t(k), size_t(vocab)) - lse;
    }
  });
  Shape ks = leading(teacher_logits), ts = leading(teacher_logits);
  ks.push_back(k);
  return {from_vector(ids, ks), cast(from_vector(logp, ks), dtype), cast(from_vector(tail, ts), dtype)};
}

// ---- the sparse KL ----

namespace {

// The sparse loss's inputs other than the student's logits, checked and read to the host.
struct SparseInputs {
  int64_t rows = 0, vocab = 0, k = 0, count = 0;
  double tau = 1, ratio = 1, per_token = 0;
  bool want_kd = false, want_ce = false;
  std::vector<int32_t> ids;
  std::vector<double> logp, tail;
  std::vector<int64_t> target_ids;
  std::vector<char> counted;
};

// `rows` x `vocab` student logits of leading shape `lead` (named `what` in errors).
SparseInputs read_sparse_inputs(const Shape& lead, int64_t vocab, const std::string& what, const TopkTargets& teacher,
                                const Tensor& targets, const LossConfig& config) {
  constexpr const char* op = "loss";
  SparseInputs in;
  in.tau = config.temperature, in.ratio = config.kd_ratio;
  check(std::isfinite(in.tau) && in.tau > 0, op, "temperature must be positive, got ", in.tau);
  check(in.ratio >= 0 && in.ratio <= 1, op, "kd_ratio must be in [0, 1], got ", in.ratio);
  check(config.kind == KdLoss::fkl, op, "offline teacher top-k supports only the fkl loss, got ", kd_loss_spec(config));
  in.vocab = vocab;
  in.rows = numel(lead);
  in.want_kd = in.ratio > 0, in.want_ce = in.ratio < 1;
  if (in.want_kd) {
    check(teacher.defined(), op, "the sparse KL needs the teacher's top-k (kd_ratio is ", in.ratio, ")");
    in.k = teacher.ids.size(-1);
    Shape want = lead;
    want.push_back(in.k);
    if (teacher.ids.shape() != want || teacher.logp.shape() != want || teacher.tail.shape() != lead)
      fail(op, "teacher top-k ids ", to_string(teacher.ids.shape()), ", log-probabilities ",
           to_string(teacher.logp.shape()), " and tail ", to_string(teacher.tail.shape()), " do not match the ", what);
    check(in.k >= 1 && in.k <= vocab, op, "teacher top-k ", in.k, " is larger than the student's vocabulary ", vocab);
    in.ids = teacher.ids.to_vector<int32_t>();
    in.logp = teacher.logp.to_vector<double>();
    in.tail = teacher.tail.to_vector<double>();
  }
  if (targets.defined()) {
    check(targets.shape() == lead, op, "targets ", to_string(targets.shape()), " do not match the ", what);
    in.target_ids = targets.to_vector<int64_t>();
  } else {
    check(!in.want_ce, op, "cross-entropy needs targets (kd_ratio is ", in.ratio, ")");
  }
  in.counted.assign(size_t(in.rows), 1);
  for (int64_t r = 0; r < in.rows; ++r) {
    if (!in.target_ids.empty()) {
      const int64_t t = in.target_ids[size_t(r)];
      if (t == kIgnoreIndex) {
        in.counted[size_t(r)] = 0;
        continue;
      }
      if (t < 0 || t >= vocab)
        fail(op, "target ", t, " at token ", r, " is outside the student's vocabulary of ", vocab, " (ignored tokens are ",
             kIgnoreIndex, ")");
    }
    ++in.count;
  }
  for (size_t j = 0; j < in.ids.size(); ++j)
    if (in.ids[j] < 0 || in.ids[j] >= vocab)
      fail(op, "teacher top-k id ", in.ids[j], " at token ", int64_t(j) / in.k, " is outside the student's vocabulary of ",
           vocab);
  in.per_token = in.count ? 1.0 / double(in.count) : 0;
  return in;
}

struct SparseSums {
  std::vector<double> kd, ce, h;  // per row
  explicit SparseSums(int64_t rows) : kd(size_t(rows), 0), ce(size_t(rows), 0), h(size_t(rows), 0) {}
};

// Rows [r0, r1) of the loss, their logits at s (row r at s + (r - r0) vocab): the per-row values
// into `sums`, and (grad not null) each row's gradient, weighted by 1 / count, at
// grad + (r - r0) vocab (zero for rows not counted). Each row is computed in f64 in its task's
// scratch and written once in Out. Rows run in tasks on the CPU's threads; every row writes only
// its own values (the same bits on any thread count).
template <class In, class Out>
void sparse_rows(const SparseInputs& in, const In* s, int64_t r0, int64_t r1, Out* grad, SparseSums& sums) {
  const int64_t vocab = in.vocab, k = in.k;
  const double tau = in.tau, ratio = in.ratio;
  std::vector<int64_t> all(static_cast<size_t>(vocab));
  std::iota(all.begin(), all.end(), int64_t(0));
  cpu::parallel_for(r1 - r0, kSparseChunkRows, [&](int64_t i0, int64_t i1) {
    std::vector<double> sr(static_cast<size_t>(vocab)), gr(grad ? static_cast<size_t>(vocab) : 0);
    std::vector<double> x(static_cast<size_t>(vocab)), q(static_cast<size_t>(vocab));
    std::vector<char> in_top(static_cast<size_t>(vocab), 0);
    std::vector<int64_t> rest;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t r = r0 + i;
      Out* out = grad ? grad + i * vocab : nullptr;
      if (!in.counted[size_t(r)]) {
        if (out) std::fill(out, out + vocab, Out(0));
        continue;
      }
      for (int64_t v = 0; v < vocab; ++v) sr[size_t(v)] = double(s[i * vocab + v]);
      if (out) std::fill(gr.begin(), gr.end(), 0.0);
      if (in.want_ce) {
        const int64_t t = in.target_ids[size_t(r)];
        double m = -kInf, sum = 0;
        for (int64_t v = 0; v < vocab; ++v) m = std::max(m, sr[size_t(v)]);
        for (int64_t v = 0; v < vocab; ++v) sum += std::exp(sr[size_t(v)] - m);
        const double lse = m + std::log(sum);
        sums.ce[size_t(r)] = lse - sr[size_t(t)];
        if (out) {
          const double w = (1 - ratio) * in.per_token;
          for (int64_t v = 0; v < vocab; ++v) gr[size_t(v)] += w * (std::exp(sr[size_t(v)] - lse) - (v == t ? 1.0 : 0.0));
        }
      }
      if (in.want_kd) {
        const int32_t* ir = in.ids.data() + r * k;
        const double* lr = in.logp.data() + r * k;
        for (int64_t v = 0; v < vocab; ++v) x[size_t(v)] = sr[size_t(v)] / tau;
        const double lse = log_sum_exp(x.data(), all, 0, size_t(vocab));
        rest.clear();
        for (int64_t j = 0; j < k; ++j) in_top[size_t(ir[j])] = 1;
        for (int64_t v = 0; v < vocab; ++v)
          if (!in_top[size_t(v)]) rest.push_back(v);
        const double log_qt = log_sum_exp(x.data(), rest, 0, rest.size()) - lse;
        const double log_pt = in.tail[size_t(r)], p_t = std::exp(log_pt);
        double kd = 0, h = 0, mass = p_t;
        for (int64_t j = 0; j < k; ++j) {
          const double p = std::exp(lr[j]);
          if (p > 0) kd += p * (lr[j] - (x[size_t(ir[j])] - lse)), h -= p * lr[j];
          mass += p;
        }
        if (p_t > 0) kd += p_t * (log_pt - log_qt), h -= p_t * log_pt;
        sums.kd[size_t(r)] = tau * tau * kd;
        sums.h[size_t(r)] = h;
        if (out) {
          // dL/ds_v = tau (P q_v - p_v) on the top-k, tau q_v (P - p_T / q_T) on the tail.
          const double w = ratio * in.per_token * tau;
          const double tail_factor = p_t > 0 ? mass - std::exp(log_pt - log_qt) : mass;
          for (int64_t v = 0; v < vocab; ++v) q[size_t(v)] = std::exp(x[size_t(v)] - lse);
          for (int64_t v : rest) gr[size_t(v)] += w * q[size_t(v)] * tail_factor;
          for (int64_t j = 0; j < k; ++j) gr[size_t(ir[j])] += w * (mass * q[size_t(ir[j])] - std::exp(lr[j]));
        }
        for (int64_t j = 0; j < k; ++j) in_top[size_t(ir[j])] = 0;
      }
      if (out)
        for (int64_t v = 0; v < vocab; ++v) out[v] = Out(gr[size_t(v)]);
    }
  });
}

// The loss's parts from the per-row values, summed in row order.
LossParts sparse_parts(const SparseInputs& in, const SparseSums& sums, DType dtype, Device device) {
  double kd = 0, ce = 0, h = 0;
  for (int64_t r = 0; r < in.rows; ++r) kd += sums.kd[size_t(r)], ce += sums.ce[size_t(r)], h += sums.h[size_t(r)];
  kd *= in.per_token, ce *= in.per_token, h *= in.per_token;
  double total = 0;
  if (in.want_kd) total += in.ratio * kd;
  if (in.want_ce) total += (1 - in.ratio) * ce;
  return {scalar(total, dtype, device), scalar(kd, dtype, device), scalar(ce, dtype, device), scalar(h, dtype, device),
          in.count};
}

// The pullback of a loss whose gradients were computed with it: scaled by the cotangent.
std::vector<Tensor> scaled(const std::vector<Tensor>& grads, const Tensor& c) {
  if (c.item<double>() == 1.0) return grads;
  std::vector<Tensor> out;
  for (const Tensor& g : grads) out.push_back(cast(cast(g, c.dtype()) * c, g.dtype()));
  return out;
}

}  // namespace

LossParts sparse_distill_loss(const Tensor& student_logits, const TopkTargets& teacher, const Tensor& targets,
                              const LossConfig& config) {
  check(student_logits.defined() && (student_logits.dim() == 2 || student_logits.dim() == 3), "loss",
        "student logits must be [N, V] or [B, T, V]");
  check(is_floating(student_logits.dtype()), "loss", "student logits must be floating, got ", student_logits.dtype());
  const SparseInputs in = read_sparse_inputs(leading(student_logits), student_logits.size(-1),
                                             cat("student logits ", to_string(student_logits.shape())), teacher,
                                             targets, config);
  const std::vector<double> s = student_logits.detach().to_vector<double>();
  const bool differentiate = grad_enabled() && student_logits.tracked();
  std::vector<double> grad(differentiate ? s.size() : 0);
  SparseSums sums(in.rows);
  sparse_rows<double, double>(in, s.data(), 0, in.rows, differentiate ? grad.data() : nullptr, sums);
  const DType dtype = student_logits.dtype() == DType::f64 ? DType::f64 : DType::f32;
  LossParts parts = sparse_parts(in, sums, dtype, student_logits.device());
  if (differentiate) {
    const Tensor g = cast(from_vector(grad, student_logits.shape(), student_logits.device()), student_logits.dtype());
    parts.total = record("sparse_distill_loss", parts.total, {student_logits},
                         [g](const Tensor& c) { return scaled({g}, c); });
  }
  return parts;
}

LossParts sparse_head_loss(const Tensor& hidden, const Tensor& head, const TopkTargets& teacher, const Tensor& targets,
                           const LossConfig& config, int64_t chunk_rows) {
  check(hidden.defined() && head.defined() && (hidden.dim() == 2 || hidden.dim() == 3) && head.dim() == 2 &&
            hidden.size(-1) == head.size(1),
        "loss", "the sparse head loss needs hidden states [N, D] or [B, T, D] and a head [V, D], got ",
        hidden.defined() ? to_string(hidden.shape()) : "none", " and ", head.defined() ? to_string(head.shape()) : "none");
  check(is_floating(hidden.dtype()) && hidden.dtype() == head.dtype() && hidden.device() == head.device(), "loss",
        "student head is ", head.dtype(), " on ", head.device(), ", student hidden states is ", hidden.dtype(), " on ",
        hidden.device());
  check(chunk_rows >= 1, "loss", "chunk_rows must be positive, got ", chunk_rows);
  const Shape lead = leading(hidden);
  const int64_t vocab = head.size(0), dim = head.size(1);
  const SparseInputs in = read_sparse_inputs(lead, vocab, cat("student hidden states ", to_string(hidden.shape())),
                                             teacher, targets, config);
  const bool differentiate = grad_enabled() && (hidden.tracked() || head.tracked());
  const Tensor h2 = reshape(hidden.detach(), {in.rows, dim}), w = head.detach();
  SparseSums sums(in.rows);
  Tensor d_hidden, d_head;
  if (differentiate) {
    d_hidden = zeros({in.rows, dim}, hidden.dtype(), hidden.device());
    d_head = zeros({vocab, dim}, head.dtype(), head.device());
  }
  {
    NoGrad no_grad;
    const Tensor head_t = transpose(w, 0, 1);
    // The rows read the chunk's logits where they lie and write its gradient into a tensor, in
    // f64 for f64 models and f32 otherwise (bf16 is widened once per chunk).
    const DType wide = hidden.dtype() == DType::f64 ? DType::f64 : DType::f32;
    for (int64_t r0 = 0; r0 < in.rows; r0 += chunk_rows) {
      const int64_t r1 = std::min(in.rows, r0 + chunk_rows);
      const Tensor h = slice(h2, 0, r0, r1);
      const Tensor logits = to(cast(matmul(h, head_t), wide), Device::cpu());  // [C, V], contiguous
      Tensor g;
      if (differentiate) g = Tensor::empty({r1 - r0, vocab}, wide);
      if (wide == DType::f64)
        sparse_rows<double, double>(in, logits.data<double>(), r0, r1, differentiate ? g.data<double>() : nullptr, sums);
      else
        sparse_rows<float, float>(in, logits.data<float>(), r0, r1, differentiate ? g.data<float>() : nullptr, sums);
      if (!differentiate) continue;
      g = to(cast(g, hidden.dtype()), hidden.device());
      Backend& b = backend(head.device());
      b.assign(slice(d_hidden, 0, r0, r1), matmul(g, w));        // dH = G W
      b.matmul_accumulate(transpose(g, 0, 1), h, d_head);       // dW += G^T H, in row order
    }
  }
  const DType dtype = hidden.dtype() == DType::f64 ? DType::f64 : DType::f32;
  LossParts parts = sparse_parts(in, sums, dtype, hidden.device());
  if (differentiate) {
    const Tensor dh = reshape(d_hidden, hidden.shape());
    parts.total = record("sparse_head_loss", parts.total, {hidden, head},
                         [dh, d_head](const Tensor& c) { return scaled({dh, d_head}, c); });
  }
  return parts;
}

// ---- files ----

namespace {

template <class T>
void put(unsigned char* bytes, size_t offset, T value) {
  std::memcpy(bytes + offset, &value, sizeof value);
}
template <class T>
T get(const unsigned char* bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes + offset, sizeof value);
  return value;
}

// Header layout (docs/formats.md): offsets of each field.
constexpr size_t kOffVersion = 8, kOffK = 12, kOffPositions = 16, kOffTemperature = 24, kOffVocab = 32,
                 kOffSeqLen = 36, kOffTeacher = 40, kOffTokHash = 48, kOffTokVocab = 56, kOffSourceBytes = 64,
                 kOffSourceXxh3 = 72, kOffChecksum = 80, kOffName = 88;
static_assert(kOffName + kTopkNameBytes <= kTopkHeaderBytes);

uint64_t payload_bytes(uint64_t positions, uint64_t k) { return positions * k * 8 + positions * 4; }

// XXH3-64 of the file with its checksum field read as zero.
uint64_t file_checksum(const unsigned char* bytes, size_t size) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(state.get());
  const uint64_t zero = 0;
  XXH3_64bits_update(state.get(), bytes, kOffChecksum);
  XXH3_64bits_update(state.get(), &zero, sizeof zero);
  XXH3_64bits_update(state.get(), bytes + kOffChecksum + 8, size - kOffChecksum - 8);
  return XXH3_64bits_digest(state.get());
}

std::string hex(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

TopkHeader parse_header(const std::string& path, const unsigned char* b, uint64_t size) {
  if (size < kTopkHeaderBytes) fail(kOp, path, ": ", size, " bytes is too short for the ", kTopkHeaderBytes, "-byte header");
  if (std::memcmp(b, kTopkMagic, 8) != 0) fail(kOp, path, ": bad magic (not a cotan top-k file)");
  const uint32_t version = get<uint32_t>(b, kOffVersion);
  if (version != kTopkVersion) fail(kOp, path, ": unsupported version ", version, " (this build reads ", kTopkVersion, ")");
  TopkHeader h;
  h.k = get<uint32_t>(b, kOffK);
  h.positions = get<uint64_t>(b, kOffPositions);
  h.temperature = get<double>(b, kOffTemperature);
  h.vocab_size = get<uint32_t>(b, kOffVocab);
  h.seq_len = get<uint32_t>(b, kOffSeqLen);
  h.teacher_id = get<uint64_t>(b, kOffTeacher);
  h.tokenizer.hash = get<uint64_t>(b, kOffTokHash);
  h.tokenizer.vocab_size = get<uint32_t>(b, kOffTokVocab);
  h.source_bytes = get<uint64_t>(b, kOffSourceBytes);
  h.source_xxh3 = get<uint64_t>(b, kOffSourceXxh3);
  const char* name = reinterpret_cast<const char*>(b + kOffName);
  h.source_name.assign(name, strnlen(name, kTopkNameBytes));
  if (h.k == 0 || h.k > h.vocab_size) fail(kOp, path, ": field k is ", h.k, " for a vocabulary of ", h.vocab_size);
  if (!(h.temperature > 0) || !std::isfinite(h.temperature))
    fail(kOp, path, ": field temperature is ", h.temperature);
  return h;
}

std::shared_ptr<const void> map_file(const std::string& path, uint64_t& size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(kOp, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(kOp, path, ": cannot stat: ", std::strerror(errno));
  }
  size = uint64_t(st.st_size);
  void* addr = size ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  ::close(fd);
  if (addr == MAP_FAILED) fail(kOp, path, ": cannot map: ", std::strerror(errno));
  const uint64_t length = size;
  return std::shared_ptr<const void>(addr, [length](const void* p) {
    if (p) ::munmap(const_cast<void*>(p), length);
  });
}

}  // namespace

uint64_t teacher_identity(const std::string& model_dir) {
  std::vector<std::string> names{"config.json"};
  std::error_code ec;
  for (fs::directory_iterator it(model_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 12 && name.ends_with(".safetensors")) names.push_back(name);
  }
  if (ec) fail(kOp, model_dir, ": cannot list: ", ec.message());
  std::sort(names.begin() + 1, names.end());
  std::vector<uint64_t> sums;
  for (const std::string& name : names) {
    const FileChecksum c = checksum_file((fs::path(model_dir) / name).string(), kOp);
    sums.push_back(c.bytes);
    sums.push_back(c.xxh3);
  }
  return XXH3_64bits(sums.data(), sums.size() * sizeof(uint64_t));
}

void write_topk_file(const std::string& path, const TopkHeader& h, const std::vector<int32_t>& ids,
                     const std::vector<float>& logp, const std::vector<float>& tail) {
  const uint64_t n = h.positions, k = h.k;
  check(ids.size() == n * k && logp.size() == n * k && tail.size() == n, kOp, path, ": ", ids.size(), " ids, ",
        logp.size(), " log-probabilities and ", tail.size(), " tails for ", n, " positions of top-", k);
  check(h.source_name.size() < kTopkNameBytes, kOp, path, ": source name '", h.source_name, "' is longer than ",
        kTopkNameBytes - 1, " bytes");
  std::vector<unsigned char> bytes(kTopkHeaderBytes + payload_bytes(n, k), 0);
  unsigned char* b = bytes.data();
  std::memcpy(b, kTopkMagic, 8);
  put(b, kOffVersion, kTopkVersion);
  put(b, kOffK, h.k);
  put(b, kOffPositions, h.positions);
  put(b, kOffTemperature, h.temperature);
  put(b, kOffVocab, h.vocab_size);
  put(b, kOffSeqLen, h.seq_len);
  put(b, kOffTeacher, h.teacher_id);
  put(b, kOffTokHash, h.tokenizer.hash);
  put(b, kOffTokVocab, h.tokenizer.vocab_size);
  put(b, kOffSourceBytes, h.source_bytes);
  put(b, kOffSourceXxh3, h.source_xxh3);
  std::memcpy(b + kOffName, h.source_name.data(), h.source_name.size());
  unsigned char* p = b + kTopkHeaderBytes;
  std::memcpy(p, ids.data(), n * k * 4);
  std::memcpy(p + n * k * 4, logp.data(), n * k * 4);
  std::memcpy(p + n * k * 8, tail.data(), n * 4);
  put(b, kOffChecksum, file_checksum(b, bytes.size()));
  AtomicFile out(path, kOp);
  out.write(bytes.data(), bytes.size());
  out.commit();
}

TopkHeader TopkFile::read_header(const std::string& path) {
  uint64_t size = 0;
  const std::shared_ptr<const void> map = map_file(path, size);
  return parse_header(path, static_cast<const unsigned char*>(map.get()), size);
}

TopkFile TopkFile::open(const std::string& path) {
  TopkFile f;
  f.path_ = path;
  uint64_t size = 0;
  f.mapping_ = map_file(path, size);
  const auto* b = static_cast<const unsigned char*>(f.mapping_.get());
  f.header_ = parse_header(path, b, size);
  const uint64_t want = kTopkHeaderBytes + payload_bytes(f.header_.positions, f.header_.k);
  if (size != want)
    fail(kOp, path, ": ", size, " bytes, but the header's positions ", f.header_.positions, " and k ", f.header_.k,
         " need ", want);
  const uint64_t recorded = get<uint64_t>(b, kOffChecksum), actual = file_checksum(b, size);
  if (recorded != actual)
    fail(kOp, path, ": checksum mismatch (XXH3-64 is ", hex(actual), ", the header recorded ", hex(recorded),
         "): the file is corrupted");
  const unsigned char* p = b + kTopkHeaderBytes;
  const uint64_t nk = f.header_.positions * f.header_.k;
  f.ids_ = reinterpret_cast<const int32_t*>(p);
  f.logp_ = reinterpret_cast<const float*>(p + nk * 4);
  f.tail_ = reinterpret_cast<const float*>(p + nk * 8);
  check_values(f);
  return f;
}

// The values a teacher's top-k can hold, position by position (a checksum proves only that the
// bytes are the writer's): ids inside the vocabulary and distinct, log-probabilities at most 0 and
// non-increasing, a tail log-mass at most 0, and the k probabilities with the tail summing to 1.
void TopkFile::check_values(const TopkFile& f) {
  const uint64_t k = f.header_.k;
  // f32 log-probabilities of K ids and the tail: their masses sum to 1 within far less than this.
  constexpr double kMassTolerance = 1e-3;
  std::vector<int32_t> sorted(k);
  for (uint64_t r = 0; r < f.header_.positions; ++r) {
    const int32_t* ids = f.ids_ + r * k;
    const float* logp = f.logp_ + r * k;
    auto bad = [&](const auto&... what) { fail(kOp, f.path_, ": position ", r, ": ", what...); };
    double mass = 0;
    for (uint64_t i = 0; i < k; ++i) {
      if (ids[i] < 0 || uint32_t(ids[i]) >= f.header_.vocab_size)
        bad("id ", ids[i], " is outside the vocabulary of ", f.header_.vocab_size);
      if (!(logp[i] <= 0)) bad("log p ", logp[i], " of id ", ids[i], " is not a log-probability (above 0, or NaN)");
      if (i > 0 && logp[i] > logp[i - 1])
        bad("log p ", logp[i], " of id ", ids[i], " follows ", logp[i - 1], ": the top-k is not sorted by probability");
      mass += std::exp(double(logp[i]));
    }
    const float tail = f.tail_[r];
    if (!(tail <= 0)) bad("the tail's log-mass ", tail, " is not a log-probability (above 0, or NaN)");
    mass += std::exp(double(tail));
    if (std::abs(mass - 1) > kMassTolerance)
      bad("the top-", k, " probabilities and the tail sum to ", mass, ", not 1");
    std::copy(ids, ids + k, sorted.begin());
    std::sort(sorted.begin(), sorted.end());
    if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end())
      bad("id ", *twice, " appears twice in the top-", k);
  }
}

void TopkSequence::append(const TopkFile& file) {
  if (files_.empty()) k_ = file.header().k;
  check(int64_t(file.header().k) == k_, kOp, file.path(), " has top-", file.header().k, " but ", files_.front().path(),
        " top-", k_);
  files_.push_back(file);
  starts_.push_back(size_);
  size_ += file.header().positions;
}

void TopkSequence::copy_to(uint64_t start, uint64_t count, int32_t* ids, float* logp, float* tail) const {
  if (start > size_ || count > size_ - start)
    fail(kOp, "positions [", start, ", ", start + count, ") are out of range for ", size_, " top-k positions");
  const uint64_t k = uint64_t(k_);
  size_t f = size_t(std::upper_bound(starts_.begin(), starts_.end(), start) - starts_.begin()) - 1;
  for (; count > 0; ++f) {
    const TopkFile& file = files_[f];
    const uint64_t local = start - starts_[f], n = std::min(count, file.header().positions - local);
    std::copy(file.ids() + local * k, file.ids() + (local + n) * k, ids);
    std::copy(file.logp() + local * k, file.logp() + (local + n) * k, logp);
    std::copy(file.tail() + local, file.tail() + local + n, tail);
    ids += n * k, logp += n * k, tail += n, start += n, count -= n;
  }
}

std::string topk_file_name(const std::string& shard_name) {
  const std::string stem = shard_name.ends_with(".tok") ? shard_name.substr(0, shard_name.size() - 4) : shard_name;
  return stem + ".topk";
}

namespace {

// Opens dir/<shard>.topk for each shard, checked against it and against `first`.
TopkSequence load_split(const std::string& dir, const std::vector<std::string>& shards, std::optional<TopkFile>& first,
                        double temperature) {
  TopkSequence seq;
  for (const std::string& shard_path : shards) {
    const std::string name = fs::path(shard_path).filename().string();
    const std::string path = (fs::path(dir) / topk_file_name(name)).string();
    if (!fs::exists(path))
      fail(kOp, path, ": missing: no teacher top-k for the shard ", shard_path, " (run cotan teacher-logits on it)");
    const TopkFile file = TopkFile::open(path);
    const TopkHeader& h = file.header();
    const TokenShard shard = TokenShard::open(shard_path);
    if (h.source_name != name)
      fail(kOp, path, " was made from the shard '", h.source_name, "' but pairs with ", shard_path);
    if (h.tokenizer != shard.tokenizer())
      fail(kOp, path, " was made with ", describe(h.tokenizer), " but ", shard_path, " with ", describe(shard.tokenizer()));
    if (h.positions != shard.size())
      fail(kOp, path, " holds ", h.positions, " positions but ", shard_path, " has ", shard.size(), " tokens");
    const FileChecksum c = checksum_file(shard_path, kOp);
    if (c.bytes != h.source_bytes || c.xxh3 != h.source_xxh3)
      fail(kOp, path, " was made from a shard of ", h.source_bytes, " bytes with XXH3-64 ", hex(h.source_xxh3), " but ",
           shard_path, " has ", c.bytes, " bytes with XXH3-64 ", hex(c.xxh3), ": different shards");
    if (h.temperature != temperature)
      fail(kOp, path, " was made with temperature ", h.temperature, " but the run uses ", temperature);
    if (!first) {
      first = file;
    } else {
      const TopkHeader& f = first->header();
      if (h.k != f.k) fail(kOp, path, " has top-", h.k, " but ", first->path(), " top-", f.k);
      if (h.seq_len != f.seq_len)
        fail(kOp, path, " has seq_len ", h.seq_len, " but ", first->path(), " seq_len ", f.seq_len);
      if (h.vocab_size != f.vocab_size)
        fail(kOp, path, " has vocabulary ", h.vocab_size, " but ", first->path(), " ", f.vocab_size);
      if (h.teacher_id != f.teacher_id)
        fail(kOp, path, " comes from teacher ", hex(h.teacher_id), " but ", first->path(), " from ", hex(f.teacher_id));
    }
    seq.append(file);
  }
  return seq;
}

}  // namespace

TopkData load_topk(const std::string& dir, const std::string& data_path, double temperature) {
  check(fs::is_directory(dir), kOp, dir, ": not a directory of top-k files");
  const ShardFiles shards = shard_files(data_path);
  std::optional<TopkFile> first;
  TopkData data;
  data.train = load_split(dir, shards.train, first, temperature);
  data.val = load_split(dir, shards.val, first, temperature);
  check(first.has_value(), kOp, data_path, ": no training shards");
  data.first = first->header();
  return data;
}

}  // namespace cotan::train
