// cotan params: parameter counts of a config and the overhead of its attention kind, with the
// parameters the kind adds to every layer (from the table in nn/attention_kinds.hpp).
#include <boost/program_options.hpp>
#include <iostream>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "nn/config.hpp"
#include "nn/model.hpp"
#include "util/json.hpp"

namespace po = boost::program_options;

namespace cotan::app {

int cmd_params(const Args& args) {
  std::string config_name = "tiny-student", kind = "softmax";
  po::options_description opts("cotan params [options]");
  opts.add_options()("help,h", "show this help")(
      "config", po::value(&config_name)->default_value(config_name), "preset name, config.json or model directory")(
      "attention", po::value(&kind)->default_value(kind), ("attention kind: " + nn::attention_kind_names(" | ")).c_str())(
      "json", "print JSON");
  AffineOptions affine;
  add_affine_options(opts, affine);
  po::variables_map vm = parse_options(args, opts);
  if (vm.count("help")) {
    std::cout << opts << "\nattention kinds:\n" << nn::attention_kinds_help();
    return 0;
  }
  nn::ModelConfig base = nn::load_config(config_name);
  base.attention.kind = nn::AttentionKind::softmax;
  nn::ModelConfig with = base;
  try {
    with.attention.kind = nn::parse_attention_kind(kind);
  } catch (const Error& e) {
    fail("option", "--attention ", kind, ": ", std::string_view(e.what()).substr(std::string_view(e.what()).find("] ") + 2));
  }
  // phi and N_i change what the affine core computes, not its parameters: they are checked and shown.
  apply_affine_options(affine, with.attention);
  check_affine_options_apply(affine, with.attention.kind);
  const bool affine_kind = nn::is_affine(with.attention.kind);
  int64_t total = nn::CausalLM(with).num_params(), softmax = nn::CausalLM(base).num_params();
  const nn::AttentionKindInfo& info = nn::attention_kind(with.attention.kind);
  const nn::AttentionSizes sizes{with.hidden_size, with.num_heads, with.dim_per_head()};
  if (vm.count("json")) {
    Json j = Json::object();
    j["config"] = config_name;
    j["attention"] = kind;
    if (affine_kind) {
      j["phi"] = nn::name_of(with.attention.phi);
      j["affine_n"] = nn::name_of(with.attention.affine_n);
    }
    j["total"] = total;
    j["softmax_total"] = softmax;
    j["overhead"] = total - softmax;
    Json per_layer = Json::array();
    for (const nn::ExtraParam& p : info.params) {
      Json entry = Json::object(), shape = Json::array();
      for (int64_t n : nn::shape_of(p, sizes)) shape.push_back(n);
      entry["name"] = p.name;
      entry["shape"] = shape;
      per_layer.push_back(entry);
    }
    j["per_layer"] = per_layer;
    std::cout << dump_json(j) << "\n";
  } else {
    std::cout << "config     " << config_name << "\nattention  " << kind << " (" << info.help << ")";
    if (affine_kind)
      std::cout << "\nphi        " << nn::name_of(with.attention.phi) << "\naffine_n   " << nn::name_of(with.attention.affine_n);
    std::cout << "\ntotal      " << total
              << "\nsoftmax    " << softmax << "\noverhead   " << total - softmax << "\n";
    for (const nn::ExtraParam& p : info.params)
      std::cout << "per layer  " << nn::describe(p, sizes) << ": " << p.meaning << "\n";
  }
  return 0;
}

}  // namespace cotan::app
