// The `cotan` subcommands. Each takes the arguments after its name, parses them with
// Boost.Program_options, prints to stdout and returns the exit code. Errors are thrown
// (cotan::Error or a program_options error); main() prints them as one line and exits 1.
#pragma once

#include <string>
#include <vector>

#include "tensor/device.hpp"
#include "tensor/dtype.hpp"

namespace cotan::app {

using Args = std::vector<std::string>;

int cmd_info(const Args& args);       // cotan info
int cmd_gradcheck(const Args& args);  // cotan gradcheck [--json]
int cmd_pretrain(const Args& args);   // cotan pretrain [options]
int cmd_distill(const Args& args);    // cotan distill [--quick] [options]: the attention-kind study
int cmd_plan(const Args& args);       // cotan plan --recipe FILE --gpus N --gpu-memory SIZE: memory and time
int cmd_generate(const Args& args);   // cotan generate --model DIR [--prompt TEXT] [options]
int cmd_eval(const Args& args);       // cotan eval --model DIR [--ppl-data FILE] [--tasks NAME=FILE,...]
int cmd_plot(const Args& args);       // cotan plot RUN_DIR: a study's figures drawn again from their CSVs
int cmd_params(const Args& args);     // cotan params --config NAME --attention KIND [--json]
int cmd_tokenize(const Args& args);   // cotan tokenize INPUT... --out DIR
int cmd_teacher_logits(const Args& args);  // cotan teacher-logits --teacher DIR --data SHARDS --top-k K --out DIR
int cmd_bench(const Args& args);      // cotan bench <name> ...: dispatches to the bench_* below
int bench_matmul(const Args& args);   // cotan bench matmul [--json] [--torch]
int bench_ops(const Args& args);      // cotan bench ops [--json]
int bench_attention(const Args& args);  // cotan bench attention [--json]
int bench_kd_loss(const Args& args);    // cotan bench kd-loss [--json]
int bench_train(const Args& args);      // cotan bench train [--json] [--torch]
int bench_tokenize(const Args& args);   // cotan bench tokenize [--json]
int bench_generate(const Args& args);   // cotan bench generate [--json] [--torch]
std::string bench_names();              // "matmul, ops, attention, kd-loss, train"

// The value of a --device option, parsed and checked to be usable, so that a bad name or a
// missing GPU is one line naming it before anything is written (cmd_train.cpp).
Device device_option(const std::string& value);
// The value of a --dtype option: f32, bf16 or f64, else "[COMMAND] --dtype x: ..." (cmd_train.cpp).
DType dtype_option(const std::string& value, const std::string& command = "train");
// --tf32 of the benches: TF32 for f32 matmuls from now on (cuBLAS), only on a CUDA device.
void tf32_option(bool enabled, Device device);

}  // namespace cotan::app
