// Command-line parsing shared by every command: --threads, and range checks whose errors are one
// line naming the option and its valid range, e.g.
//   [option] --clip nan: expected a number in [0, inf) (0: off)
//   [option] --seed -1: expected an integer in [0, 18446744073709551615]
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

#include "app/commands.hpp"
#include "nn/config.hpp"

namespace cotan::app {

namespace po = boost::program_options;

// Adds --threads (CPU threads, 0: all cores) to opts, parses args (with `positional` when given),
// checks --threads and applies it for the rest of the process (oneTBB's global control).
po::variables_map parse_options(const Args& args, po::options_description& opts,
                                const po::positional_options_description* positional = nullptr);
// The two halves of parse_options, for a command that parses by itself.
void add_threads_option(po::options_description& opts);
void apply_threads_option(const po::variables_map& vm);

inline constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

// Throws unless lo <= value <= hi; `note` follows the range in parentheses ("0: off").
void check_integer(std::string_view option, int64_t value, int64_t lo, int64_t hi = kNoLimit, std::string_view note = "");
// Doubles must also be finite; lo_open excludes lo itself.
void check_number(std::string_view option, double value, double lo, double hi, bool lo_open = false,
                 std::string_view note = "");

// Several integer options at once (int or int64_t in vm), each against its range:
//   check_integers(vm, {{"repeat", 1, 1000}, {"kv-heads", 0, 4096, "0: as many as query heads"}});
struct IntegerRange {
  const char* option;
  int64_t lo, hi;
  const char* note = "";
};
void check_integers(const po::variables_map& vm, std::initializer_list<IntegerRange> ranges);

// A double as a person writes it (%g: 0.003, 1e-08), for default_value's text: Boost would show
// 0.0030000000000000001.
std::string shown(double value);

// --phi and --affine-n, the options of the affine kinds (nn::AttentionConfig's phi and affine_n,
// named as in config.json), on every command that chooses a kind. Empty: not given.
struct AffineOptions {
  std::string phi, affine_n;
};
// The help shows the config's defaults; the values stay empty unless given.
void add_affine_options(po::options_description& opts, AffineOptions& affine);
// Sets attention.phi and attention.affine_n from the given options; a name not known is one line:
//   [option] --phi tanh: expected linear_clip or sigmoid
void apply_affine_options(const AffineOptions& affine, nn::AttentionConfig& attention);
// Refuses --phi or --affine-n given for a kind without an affine core ("--phi applies to the
// affine kinds (affine, affine_gated), not softmax").
void check_affine_options_apply(const AffineOptions& affine, nn::AttentionKind kind);
// The same for a choice of several kinds, named `chosen` ("softmax, sink"), `affine_chosen` when
// one of them has an affine core.
void check_affine_options_apply(const AffineOptions& affine, bool affine_chosen, std::string_view chosen);

// An unsigned 64-bit integer written in decimal digits (no sign).
uint64_t parse_u64_option(std::string_view option, const std::string& text);

// An option naming an output directory (`option` with its dashes, e.g. "--out"). check_output_dir
// refuses a path where something other than a directory is in the way, before any work:
//   [teacher-logits] --out topk.bin: a file of that name is in the way (--out names a directory)
//   [distill] --cache-dir notes.txt/cache: a file is in the way on its path (--cache-dir names a directory)
// create_output_dir creates it (and its parents), naming the option and the reason on failure:
//   [teacher-logits] --out /proc/x: cannot create the directory: No such file or directory
void check_output_dir(std::string_view op, std::string_view option, const std::string& dir);
void create_output_dir(std::string_view op, std::string_view option, const std::string& dir);

}  // namespace cotan::app
