// The tape and the backward pass.
#include <algorithm>
#include <atomic>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "autograd/autograd.hpp"
#include "autograd/rules/common.hpp"
#include "tensor/op_table.hpp"
#include "tensor/ops.hpp"

namespace cotan {

namespace {

thread_local bool grad_mode = true;
thread_local int recompute_depth = 0;
std::atomic<uint64_t> next_sequence{1};

std::shared_ptr<Node> make_node(const char* op, const Tensor& y) {
  auto node = std::make_shared<Node>();
  node->op = op;
  node->shape = y.shape();
  node->dtype = y.dtype();
  node->device = y.device();
  node->sequence = next_sequence.fetch_add(1, std::memory_order_relaxed);
  return node;
}

struct GradModeScope {
  bool previous = grad_mode;
  explicit GradModeScope(bool enabled) { grad_mode = enabled; }
  ~GradModeScope() { grad_mode = previous; }
};

struct RecomputeScope {
  RecomputeScope() { ++recompute_depth; }
  ~RecomputeScope() { --recompute_depth; }
};

// The values same_on_recompute() kept for one checkpoint(), as one run of its function sees them:
// the first run appends to `values`, the recomputation reads them back from `next` on.
struct KeptFrame {
  std::vector<Tensor>* values;
  bool replaying = false;
  size_t next = 0;
};
// The checkpointed functions running now on this thread, innermost last.
thread_local std::vector<KeptFrame*> kept_frames;

struct KeptScope {
  explicit KeptScope(KeptFrame& frame) { kept_frames.push_back(&frame); }
  ~KeptScope() { kept_frames.pop_back(); }
};

// The tape state of a thread that runs another thread's function (concurrently's b): that
// thread's recomputing() and no checkpoint frames, for the function's lifetime; the thread's own
// state (it may be inside a computation of its own) is put back after.
struct BorrowedThreadScope {
  int depth;
  std::vector<KeptFrame*> frames;
  explicit BorrowedThreadScope(int caller_depth)
      : depth(std::exchange(recompute_depth, caller_depth)), frames(std::exchange(kept_frames, {})) {}
  ~BorrowedThreadScope() {
    recompute_depth = depth;
    kept_frames = std::move(frames);
  }
};

// Every node reachable from `root`, in reverse creation order (outputs before their inputs).
std::vector<Node*> reverse_topological(Node* root) {
  std::vector<Node*> order, stack{root};
  std::unordered_map<Node*, bool> seen{{root, true}};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (const auto& in : n->inputs)
      if (in && !seen[in.get()]) {
        seen[in.get()] = true;
        stack.push_back(in.get());
      }
  }
  std::sort(order.begin(), order.end(), [](Node* a, Node* b) { return a->sequence > b->sequence; });
  return order;
}

// The cotangent of one value while the backward pass runs: the sum of the whole cotangents its
// users passed on, and the cotangents of its slices, in the order they arrived.
struct Cotangent {
  Tensor whole;
  std::vector<std::pair<SliceRegion, Tensor>> parts;
};

// Whether the parts are disjoint step-1 ranges of one axis that cover all of it.
bool parts_cover(const std::vector<std::pair<SliceRegion, Tensor>>& parts, const Node& value) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto& [region, g] : parts) {
    if (region.axis != parts[0].first.axis || region.step != 1) return false;
    if (region.stop > region.start) ranges.emplace_back(region.start, region.stop);
  }
  std::sort(ranges.begin(), ranges.end());
  int64_t at = 0;
  for (const auto& [start, stop] : ranges) {
    if (start != at) return false;
    at = stop;
  }
  return at == value.shape[size_t(parts[0].first.axis)];
}

// The cotangent of `value` as one tensor: the whole sum, with each part added into its place (or,
// when the parts alone cover the value, written there, unless they already lie there).
Tensor assemble(const Node& value, Cotangent& c) {
  if (c.parts.empty()) return c.whole;
  const bool covered = !c.whole.defined() && parts_cover(c.parts, value);
  // Parts a kernel returned side by side in one buffer (swiglu's, for the halves of the joint
  // gate/up projection) are that buffer: nothing to assemble.
  if (covered && c.parts[0].second.dtype() == value.dtype && c.parts[0].second.device() == value.device) {
    std::vector<std::pair<int64_t, Tensor>> starts;
    for (const auto& [region, g] : c.parts) starts.emplace_back(region.start, g);
    const Tensor whole = rules::whole_in_place(starts, c.parts[0].first.axis, value.shape);
    if (whole.defined()) return whole;
  }
  Tensor out = covered || c.whole.defined() ? Tensor::empty(value.shape, value.dtype, value.device)
                                            : zeros(value.shape, value.dtype, value.device);
  Backend& kernels = backend(value.device);
  if (c.whole.defined()) kernels.assign(out, c.whole);
  for (const auto& [r, g] : c.parts) {
    if (g.numel() == 0) continue;
    const Tensor place = slice(out, r.axis, r.start, r.stop, r.step);
    if (covered) kernels.assign(place, g);
    else kernels.assign(place, add(place, g));
  }
  return out;
}

}  // namespace

bool grad_enabled() { return grad_mode; }
NoGrad::NoGrad() : previous_(grad_mode) { grad_mode = false; }
NoGrad::~NoGrad() { grad_mode = previous_; }
bool recomputing() { return recompute_depth > 0; }

void concurrently(Device device, const std::function<void()>& a, const std::function<void()>& b) {
  // Inside a checkpointed function's runs, b runs after a on this thread, with its frames.
  const bool side_by_side = kept_frames.empty();
  const int depth = recompute_depth;
  run_concurrently(
      device, a,
      [&] {
        GradModeScope off(false);
        std::optional<BorrowedThreadScope> borrowed;
        if (side_by_side) borrowed.emplace(depth);
        b();
      },
      side_by_side);
}

Tensor same_on_recompute(const std::function<Tensor()>& compute) {
  // The innermost replaying checkpoint supplies the value. The checkpoints above it are first
  // runs (nested checkpoints started by that recomputation, or by no recomputation at all): they
  // keep the value too, so that their own recomputation replays it in turn.
  auto replaying = std::find_if(kept_frames.rbegin(), kept_frames.rend(), [](const KeptFrame* f) { return f->replaying; });
  Tensor value;
  if (replaying == kept_frames.rend()) {
    GradModeScope off(false);
    value = compute().detach();
  } else {
    KeptFrame& frame = **replaying;
    if (frame.next == frame.values->size())
      fail("checkpoint", "the recomputation asks for more kept values than the ", frame.values->size(),
           " of its first run: the checkpointed function must take the same path when it runs again");
    value = (*frame.values)[frame.next++];
  }
  for (auto it = kept_frames.rbegin(); it != replaying; ++it) (*it)->values->push_back(value);
  return value;
}

Tensor record(const char* op, Tensor y, const std::vector<Tensor>& inputs, Pullback pullback) {
  if (!grad_mode) return y;
  bool any = std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && t.tracked(); });
  if (!any) return y;
  auto node = make_node(op, y);
  node->inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) node->inputs.push_back(t.defined() ? t.node() : nullptr);
  node->pullback = std::move(pullback);
  // The node goes on a fresh handle of y's data. A pullback that captured y itself (exp reuses
  // its output, a fused op keeps it with its saved state) then holds a handle without this node,
  // so no reference cycle through the node can keep the tape alive after the last use.
  Tensor out = y.detach();
  out.set_node(std::move(node));
  return out;
}

Tensor record(const char* op, Tensor y, std::initializer_list<Tensor> inputs, Pullback pullback) {
  return record(op, std::move(y), std::vector<Tensor>(inputs), std::move(pullback));
}

Tensor track(const Tensor& x) {
  Tensor leaf = x.detach();
  leaf.set_node(make_node("leaf", leaf));
  return leaf;
}

std::vector<Tensor> gradients(const Tensor& output, const Tensor& cotangent, const std::vector<Tensor>& wrt) {
  if (cotangent.shape() != output.shape())
    fail("gradients", "cotangent of shape ", to_string(cotangent.shape()), " for an output of shape ",
         to_string(output.shape()));
  std::unordered_map<Node*, Cotangent> cotangents;
  std::unordered_set<Node*> wanted;
  for (const Tensor& w : wrt) {
    if (!w.tracked()) fail("gradients", "a requested input is not tracked (use track() or value_and_grad)");
    wanted.insert(w.node().get());
  }
  if (output.tracked()) {
    NoGrad no_grad;
    Node* root = output.node().get();
    cotangents[root].whole = cotangent;
    for (Node* node : reverse_topological(root)) {
      auto it = cotangents.find(node);
      if (it == cotangents.end() || !node->pullback) continue;
      const Tensor g = assemble(*node, it->second);
      if (node->region) {  // a slice: its cotangent goes into its place in its input's
        Node* in = node->inputs[0].get();
        if (in) cotangents[in].parts.emplace_back(*node->region, g);
        if (!wanted.count(node)) cotangents.erase(node);
        else cotangents[node] = Cotangent{g, {}};  // by key: the insertion above may rehash
        continue;
      }
      std::vector<Tensor> grads = node->pullback(g);
      if (grads.size() != node->inputs.size())
        fail(node->op, "pullback returned ", grads.size(), " cotangents for ", node->inputs.size(), " inputs");
      for (size_t i = 0; i < grads.size(); ++i) {
        Node* in = node->inputs[i].get();
        if (!in || !grads[i].defined()) continue;
        if (grads[i].shape() != in->shape || grads[i].dtype() != in->dtype)
          fail(node->op, "pullback gave input ", i, " a cotangent ", to_string(grads[i].shape()), " ",
               grads[i].dtype(), " for a value ", to_string(in->shape), " ", in->dtype);
        Tensor& whole = cotangents[in].whole;
        whole = whole.defined() ? add(whole, grads[i]) : grads[i];
      }
      // A cotangent is dead once passed on, unless it is one that was asked for.
      if (!wanted.count(node)) cotangents.erase(node);
      else cotangents[node] = Cotangent{g, {}};
    }
  }
  std::vector<Tensor> out;
  out.reserve(wrt.size());
  for (const Tensor& w : wrt) {
    auto it = cotangents.find(w.node().get());
    out.push_back(it != cotangents.end() ? assemble(*w.node(), it->second) : zeros(w.shape(), w.dtype(), w.device()));
  }
  return out;
}

std::pair<Tensor, std::vector<Tensor>> vjp(const Function& f, const std::vector<Tensor>& inputs,
                                           const Tensor& cotangent) {
  std::vector<Tensor> leaves;
  leaves.reserve(inputs.size());
  for (const Tensor& x : inputs) leaves.push_back(track(x));
  Tensor y;
  {
    GradModeScope on(true);  // recording is on inside f even in a caller's no_grad scope
    y = f(leaves);
  }
  std::vector<Tensor> grads = gradients(y, cotangent, leaves);
  for (size_t i = 0; i < grads.size(); ++i)
    if (grads[i].dtype() != inputs[i].dtype()) grads[i] = cast(grads[i], inputs[i].dtype());
  return {y.detach(), std::move(grads)};
}

std::pair<Tensor, std::vector<Tensor>> value_and_grad(const Function& f, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> leaves;
  leaves.reserve(inputs.size());
  for (const Tensor& x : inputs) leaves.push_back(track(x));
  Tensor y;
  {
    GradModeScope on(true);
    y = f(leaves);
  }
  if (y.numel() != 1) fail("value_and_grad", "f must return a single value, got shape ", to_string(y.shape()));
  if (!is_floating(y.dtype())) fail("value_and_grad", "f must return a floating value, got ", y.dtype());
  std::vector<Tensor> grads = gradients(y, ones(y.shape(), y.dtype(), y.device()), leaves);
  return {y.detach(), std::move(grads)};
}

Tensor checkpoint(const Function& f, const std::vector<Tensor>& inputs) {
  auto kept = std::make_shared<std::vector<Tensor>>();  // what same_on_recompute() keeps in f
  Tensor y;
  {
    NoGrad no_grad;
    KeptFrame first{kept.get()};
    KeptScope keep(first);
    std::vector<Tensor> detached;
    for (const Tensor& x : inputs) detached.push_back(x.detach());
    y = f(detached);
  }
  std::vector<Tensor> saved;
  for (const Tensor& x : inputs) saved.push_back(x.detach());
  return record("checkpoint", y, inputs, [f, saved, kept](const Tensor& g) {
    RecomputeScope scope;
    std::vector<Tensor> leaves;
    for (const Tensor& x : saved) leaves.push_back(is_floating(x.dtype()) ? track(x) : x);
    Tensor recomputed;
    {
      GradModeScope on(true);
      KeptFrame replay{kept.get(), true};
      KeptScope keep(replay);
      recomputed = f(leaves);
      if (replay.next != kept->size())
        fail("checkpoint", "the recomputation used ", replay.next, " of the ", kept->size(),
             " values kept by its first run: the checkpointed function must take the same path when it runs again");
    }
    std::vector<Tensor> tracked_leaves, grads(saved.size());
    for (const Tensor& l : leaves)
      if (l.tracked()) tracked_leaves.push_back(l);
    std::vector<Tensor> tracked_grads = gradients(recomputed, g, tracked_leaves);
    for (size_t i = 0, k = 0; i < leaves.size(); ++i)
      if (leaves[i].tracked()) grads[i] = tracked_grads[k++];
    return grads;
  });
}

}  // namespace cotan
