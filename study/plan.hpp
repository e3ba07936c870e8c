// Memory and time of a training job before it runs (`cotan plan`, docs/recipes.md#planning):
// per device, the bytes of the tensors the trainer holds at its peak, from the configs and the
// batch shape alone, and the FLOPs of a step.
//
// The model follows what cotan's trainer keeps alive (measured against the CPU allocator's
// statistics, cpu::cpu_memory_stats, within 10% on the tiny and small recipes in
// tests/train/test_plan.cpp). With N = micro-batch x seq_len tokens on a device, c the compute
// dtype's bytes, a layer of width D, query width Q = heads x head_dim, key/value width K and MLP
// width I saves
//   N (4D + 3Q + 2K + 3I + heads + 2) c            (norm inputs and outputs, q, k, v, the core's
//                                                   output, gate, up and their product, statistics)
// plus Q + 3 heads (affine cores) and 2Q (output gates), and two [T, head_dim] RoPE tables; the
// model adds N (2D + 1) and, with the heads inside the loss, the head's gradient [V, D] (without
// them, the [N, V] logits). The peak is that plus the largest of three moments:
//   the teacher's forward pass        N (3 I_t + 4 D_t + heads_t) c   (on top of every saved
//                                     value: where the passes run in order, as on a GPU, after
//                                     the student's forward pass; on CPU threads, beside it)
//   the loss's chunk                  N D_t c + 2 x 256 x V x c + N D c   (fused heads)
//   the backward pass                 every gradient + N (3I + 2D) c (+ one layer's saved values,
//                                     recomputed, with activation checkpointing, which keeps only
//                                     each layer's input, N D c, through the forward pass)
// on top of the weights, their compute-dtype copy (mixed precision), the AdamW moments, the
// teacher's weights and, with gradient accumulation, the running sum of the gradients.
// On two CPU threads or more the teacher's pass on the next micro-batch runs beside the student's
// forward and backward passes (train_step's lookahead), so there it can add to the backward
// moment, and its output waits for its micro-batch (across the optimizer update at the end of a
// step): the plan is that of a device (the passes in order), and tests/train/test_plan.cpp
// measures on one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/config.hpp"
#include "tensor/dtype.hpp"

namespace cotan::study {

struct PlanInputs {
  nn::ModelConfig student;                 // with its attention kind
  std::optional<nn::ModelConfig> teacher;  // none: offline top-k targets, or pretraining
  int64_t top_k = 0;                       // offline targets: k ids and log-probabilities per position
  int64_t seq_len = 128;
  int64_t micro_batch = 8;                 // sequences per device per micro-batch
  int64_t grad_accum = 1;
  DType master = DType::f32;               // the parameters' dtype
  DType compute = DType::f32;
  bool fused_head = true;
  bool checkpoint_layers = false;
  int64_t devices = 1;
  int zero = 0;                            // 1: the AdamW moments sharded over the devices
};

// Bytes per device.
struct MemoryPlan {
  double weights = 0;          // the master parameters
  double compute_weights = 0;  // their compute-dtype copy during a step (mixed precision)
  double gradients = 0;        // one set, plus the running sum with gradient accumulation
  double optimizer = 0;        // AdamW's two moments (sharded with zero = 1)
  double teacher = 0;          // the teacher's weights (in the compute dtype)
  double targets = 0;          // offline top-k targets of a micro-batch
  double activations = 0;      // what the backward pass keeps, at the end of the forward pass
  double loss = 0;             // the loss's working set beyond that (chunks of logits)
  double transient = 0;        // the largest of the three moments above, beyond the activations
  std::string peak_moment;     // "teacher forward", "loss" or "backward"
  double peak = 0;             // everything at the peak moment
};

MemoryPlan plan_memory(const PlanInputs& in);

// Floating-point operations of one token through a model: forward only (2 per multiply-add of
// every matrix, the head included, plus causal attention's 2 T Q per layer).
double forward_flops_per_token(const nn::ModelConfig& config, int64_t seq_len);

struct StepPlan {
  int64_t global_batch = 0;   // sequences per optimizer step
  double tokens = 0;          // per optimizer step
  double flops = 0;           // per optimizer step: student 3x forward (4x with checkpointing), teacher 1x
};
StepPlan plan_step(const PlanInputs& in, int64_t global_batch);

}  // namespace cotan::study
