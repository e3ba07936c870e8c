// cotan eval's scoring (eval/evaluate.hpp) and task readers (eval/tasks.hpp) on the sample
// files of tests/eval/, written for these tests. The expected log-likelihoods and perplexities are
// computed here from the plain forward pass (CausalLM::apply) and a log-softmax written out in
// f64, not through the eval code.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <string>
#include <vector>

#include "autograd/autograd.hpp"
#include "nn/model.hpp"
#include "nn/model_dir.hpp"
#include "text/tokenizer.hpp"
#include "tensor/ops.hpp"
#include "tests/support.hpp"
#include "train/data.hpp"
#include "eval/evaluate.hpp"

using namespace cotan;
using namespace cotan::train;
using namespace cotan::eval;

namespace {

const std::string kSamples = std::string(COTAN_SOURCE_DIR) + "/tests/eval/";
const std::string kTokenizers = std::string(COTAN_SOURCE_DIR) + "/tests/tokenizer/fixtures/";
const std::string kLlamaWithTokenizer = std::string(COTAN_SOURCE_DIR) + "/tests/hf/fixtures/llama_with_tokenizer";

nn::ModelConfig byte_model() {
  nn::ModelConfig c;
  c.vocab_size = kByteVocab;
  c.hidden_size = 16;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.intermediate_size = 24;
  c.max_position_embeddings = 256;
  c.init_std = 0.3;
  return c;
}

struct Fixture {
  nn::CausalLM lm{byte_model()};
  nn::Params ps;
  nn::State st;
  Fixture() {
    Generator init(7);
    auto [p, s] = lm.init(init, DType::f64);
    ps = std::move(p);
    st = std::move(s);
  }
};

const Encode kBytes = [](std::string_view s) { return text::encode_bytes(s); };

// log p(ids[j + 1] | ids[..j]) for j in [0, n - 1), from one apply on ids[0, n - 1).
std::vector<double> plain_logprobs(const nn::CausalLM& lm, const nn::Params& ps, const nn::State& st,
                                   const std::vector<int32_t>& ids) {
  NoGrad no_grad;
  const int64_t t = int64_t(ids.size()) - 1, v = lm.config().vocab_size;
  const std::vector<int32_t> in(ids.begin(), ids.end() - 1);
  const std::vector<double> logits = lm.apply(from_vector(in, {1, t}), ps, st).first.to_vector<double>();
  std::vector<double> out;
  for (int64_t j = 0; j < t; ++j) {
    double top = -INFINITY, sum = 0;
    for (int64_t k = 0; k < v; ++k) top = std::max(top, logits[size_t(j * v + k)]);
    for (int64_t k = 0; k < v; ++k) sum += std::exp(logits[size_t(j * v + k)] - top);
    out.push_back(logits[size_t(j * v + ids[size_t(j + 1)])] - top - std::log(sum));
  }
  return out;
}

std::vector<double> plain_logprobs(const Fixture& f, const std::vector<int32_t>& ids) {
  return plain_logprobs(f.lm, f.ps, f.st, ids);
}

// The continuation's summed log-likelihood: the byte tokenizer's ids of context + continuation,
// the last `window + 1` of them kept, the continuation's positions summed.
double plain_loglik(const Fixture& f, const McRequest& r, size_t window) {
  std::vector<int32_t> ids = text::encode_bytes(r.context + r.continuation);
  const size_t continuation = r.continuation.size();
  if (ids.size() > window + 1) ids.erase(ids.begin(), ids.end() - ptrdiff_t(window + 1));
  const std::vector<double> lp = plain_logprobs(f, ids);
  double sum = 0;
  for (size_t j = lp.size() - std::min(continuation, lp.size()); j < lp.size(); ++j) sum += lp[j];
  return sum;
}

size_t argmax_over(const std::vector<double>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / ("cotan_eval_" + name)).string();
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("the readers build the harness's contexts and continuations") {
  const std::vector<McExample> piqa = read_task("piqa", kSamples + "piqa.jsonl");
  REQUIRE(piqa.size() == 3);
  CHECK(piqa[0].requests[0].context == "Question: Keep a door from squeaking\nAnswer:");
  CHECK(piqa[0].requests[1].continuation == " Paint the door a brighter colour.");
  CHECK(piqa[0].choice_texts[1] == "Paint the door a brighter colour.");
  CHECK(piqa[1].gold == 1);
  CHECK(piqa[2].line == 4);  // the blank line is skipped, not counted as an example

  const std::vector<McExample> hs = read_task("hellaswag", kSamples + "hellaswag.jsonl");
  REQUIRE(hs.size() == 2);
  CHECK(hs[0].requests[0].context == "Baking cookies: A man mixes flour and butter in a bowl. He");
  CHECK(hs[0].choice_texts == std::vector<std::string>{"rolls the dough into small balls. Bake them.",
                                                       "throws the bowl out of the window.", "sings to the oven.",
                                                       "is a cookie too."});
  CHECK(hs[1].requests[0].context == "Walking a dog: A woman clips a leash to her dog's collar. They");
  CHECK(hs[1].choice_texts[2] == " eat the leash.");  // the harness strips before it drops the tag

  const std::vector<McExample> wg = read_task("winogrande", kSamples + "winogrande.jsonl");
  REQUIRE(wg.size() == 3);
  CHECK(wg[0].requests[0].context == "The trophy did not fit in the case because the trophy");
  CHECK(wg[0].requests[1].context == "The trophy did not fit in the case because the case");
  CHECK(wg[0].requests[0].continuation == " was too big.");
  CHECK(wg[0].requests[1].continuation == " was too big.");
  CHECK(wg[2].gold == 1);

  const std::vector<McExample> arc = read_task("arc_easy", kSamples + "arc.jsonl");
  REQUIRE(arc.size() == 2);
  CHECK(arc[0].requests.size() == 4);
  CHECK(arc[1].requests[0].context == "Question: What does a plant need to make food?\nAnswer:");
  CHECK(arc[1].requests[0].continuation == " sunlight");
  CHECK(arc[1].gold == 0);

  const std::vector<McExample> boolq = read_task("boolq", kSamples + "boolq.jsonl");
  REQUIRE(boolq.size() == 2);
  CHECK(boolq[0].requests[1].context ==
        "Water is a liquid that makes things wet when they touch it.\nQuestion: is water wet?\nAnswer:");
  CHECK(boolq[0].requests[0].continuation == " no");
  CHECK(boolq[0].gold == 1);
  CHECK(boolq[1].gold == 0);

  CHECK(read_task("piqa", kSamples + "piqa.jsonl", 2).size() == 2);
}

TEST_CASE("the string helpers follow Python's") {
  CHECK(hellaswag_preprocess("  a [title]b [x] c  d ") == "a. b c d");
  CHECK(hellaswag_preprocess("keep [open\nline]") == "keep [open\nline]");
  CHECK(capitalize("hELLO World") == "Hello world");
  CHECK(code_points("café") == 4);
}

TEST_CASE("every task's scores equal the plain forward pass's summed log-likelihoods") {
  const Fixture f;
  const std::vector<std::pair<std::string, std::string>> tasks = {{"piqa", "piqa.jsonl"},
                                                                  {"hellaswag", "hellaswag.jsonl"},
                                                                  {"winogrande", "winogrande.jsonl"},
                                                                  {"arc_challenge", "arc.jsonl"},
                                                                  {"boolq", "boolq.jsonl"}};
  for (const auto& task : tasks) {
    CAPTURE(task.first);
    const std::vector<McExample> examples = read_task(task.first, kSamples + task.second);
    double acc = 0, acc_norm = 0;
    for (const McExample& ex : examples) {
      const std::vector<double> got = choice_logliks(f.lm, f.ps, f.st, ex.requests, kBytes, {.prefix_id = kEndOfDocument});
      std::vector<double> want, normed;
      for (size_t i = 0; i < ex.requests.size(); ++i) {
        want.push_back(plain_loglik(f, ex.requests[i], 256));
        normed.push_back(want.back() / double(ex.choice_texts[i].size()));  // the samples are ASCII
        CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
      }
      acc += argmax_over(want) == size_t(ex.gold);
      acc_norm += argmax_over(normed) == size_t(ex.gold);
    }
    const TaskScore s = score_task(f.lm, f.ps, f.st, examples, kBytes, {.prefix_id = kEndOfDocument});
    CHECK(s.examples == int64_t(examples.size()));
    CHECK(s.acc == doctest::Approx(acc / double(examples.size())));
    CHECK(s.acc_norm == doctest::Approx(acc_norm / double(examples.size())));
    CHECK(s.acc_bytes == doctest::Approx(acc_norm / double(examples.size())));  // ASCII: bytes are code points
  }
}

TEST_CASE("over-long inputs are truncated from the left to the window") {
  const Fixture f;
  const McRequest r{"A long context that does not fit in the window at all", " and its continuation"};
  const std::vector<double> got = choice_logliks(f.lm, f.ps, f.st, {r}, kBytes, {.prefix_id = kEndOfDocument, .window = 12});
  CHECK(got[0] == doctest::Approx(plain_loglik(f, r, 12)).epsilon(1e-12));
}

TEST_CASE("acc_norm divides by code points and acc_bytes by UTF-8 bytes") {
  // "éé" is 2 code points and 4 bytes, "abc" 3 of each.
  const Predictions p = predict({-2.4, -3.3}, {"éé", "abc"});
  CHECK(p.acc == 0);        // -2.4 > -3.3
  CHECK(p.acc_norm == 1);   // -2.4 / 2 = -1.2 < -3.3 / 3 = -1.1
  CHECK(p.acc_bytes == 0);  // -2.4 / 4 = -0.6 > -1.1
  CHECK(predict({-3.0, -3.0}, {"a", "b"}).acc == 0);  // ties: the first, as numpy's argmax
}

TEST_CASE("perplexity is exp(mean NLL) of the plain forward pass, with and without sliding windows") {
  const Fixture f;
  const std::string text = "the quick brown fox jumps over the lazy dog";
  std::vector<int32_t> ids = text::encode_bytes(text);
  ids.push_back(kEndOfDocument);
  const int64_t n = int64_t(ids.size());

  // window >= length: one pass scores tokens 1..n-1.
  const std::vector<double> lp = plain_logprobs(f, ids);
  double nll = 0;
  for (double v : lp) nll -= v;
  const PerplexityResult whole = perplexity(f.lm, f.ps, f.st, ids, int64_t(text.size()), {.window = 64, .stride = 32});
  CHECK(whole.tokens == n - 1);
  CHECK(whole.windows == 1);
  CHECK(whole.nll == doctest::Approx(nll).epsilon(1e-12));
  CHECK(whole.perplexity() == doctest::Approx(std::exp(nll / double(n - 1))).epsilon(1e-12));
  CHECK(whole.bits_per_byte() == doctest::Approx(nll / std::numbers::ln2 / double(text.size())).epsilon(1e-12));

  // window 8, stride 3: token i is scored by the first window [3k, 3k + 8) that reaches it, given
  // the tokens of that window before it.
  const int64_t window = 8, stride = 3;
  double sliding = 0;
  for (int64_t i = 1; i < n; ++i) {
    int64_t begin = 0;
    while (std::min(begin + window, n) <= i) begin += stride;
    const std::vector<int32_t> context(ids.begin() + begin, ids.begin() + i + 1);
    sliding -= plain_logprobs(f, context).back();
  }
  const PerplexityResult windowed = perplexity(f.lm, f.ps, f.st, ids, int64_t(text.size()), {.window = window, .stride = stride});
  CHECK(windowed.tokens == n - 1);
  CHECK(windowed.nll == doctest::Approx(sliding).epsilon(1e-12));
  CHECK(windowed.nll != doctest::Approx(nll).epsilon(1e-6));  // the short windows lose context
  CHECK(windowed.token_perplexity() == doctest::Approx(std::exp(sliding / double(n - 1))).epsilon(1e-12));

  // HF's guide, its loop written out: each window's mean loss over its labels, weighted by
  // trg_len - 1 (its num_valid_tokens - batch_size).
  double guide_sum = 0, guide_tokens = 0;
  int64_t previous_end = 0, windows = 0;
  for (int64_t begin = 0; begin < n; begin += stride) {
    const int64_t end = std::min(begin + window, n), trg_len = end - previous_end;
    const std::vector<double> lp = plain_logprobs(f, std::vector<int32_t>(ids.begin() + begin, ids.begin() + end));
    double loss = 0;
    int64_t labels = 0;
    for (int64_t j = std::max(begin + 1, end - trg_len); j < end; ++j, ++labels) loss -= lp[size_t(j - begin - 1)];
    guide_sum += loss / double(labels) * double(trg_len - 1);
    guide_tokens += double(trg_len - 1);
    previous_end = end;
    ++windows;
    if (end == n) break;
  }
  CHECK(windowed.windows == windows);
  CHECK(windowed.perplexity() == doctest::Approx(std::exp(guide_sum / guide_tokens)).epsilon(1e-12));
  CHECK(windowed.perplexity() != doctest::Approx(windowed.token_perplexity()).epsilon(1e-9));

  // stride = window: the windows do not overlap and each one's first token goes unscored, as in
  // the guide.
  const PerplexityResult apart = perplexity(f.lm, f.ps, f.st, ids, int64_t(text.size()), {.window = 8, .stride = 8});
  const int64_t pieces = (n + 7) / 8;
  CHECK(apart.windows == pieces - (n % 8 == 1 ? 1 : 0));
  CHECK(apart.tokens == n - pieces);
  double apart_nll = 0;
  for (int64_t begin = 0; begin < n; begin += 8) {
    const int64_t end = std::min(begin + 8, n);
    if (end - begin < 2) continue;
    for (double v : plain_logprobs(f, std::vector<int32_t>(ids.begin() + begin, ids.begin() + end))) apart_nll -= v;
  }
  CHECK(apart.nll == doctest::Approx(apart_nll).epsilon(1e-12));
  CHECK(apart.perplexity() == doctest::Approx(apart.token_perplexity()).epsilon(1e-12));

  CHECK_THROWS_WITH(perplexity(f.lm, f.ps, f.st, {1}, 1, {}), "[eval] perplexity needs at least 2 tokens, the text has 1");
  CHECK_THROWS_WITH(perplexity(f.lm, f.ps, f.st, ids, 1, {.window = 300, .stride = 1}),
                    "[eval] --ppl-window 300 must be in [2, 256] (the model's max_position_embeddings)");
  CHECK_THROWS_WITH(perplexity(f.lm, f.ps, f.st, ids, 1, {.window = 8, .stride = 9}), "[eval] --ppl-stride 9 must be in [1, 8]");
}

TEST_CASE("bad task files fail with one line naming the file and line") {
  const std::string missing = write_temp("missing.jsonl", "{\"goal\": \"g\", \"sol1\": \"a\", \"sol2\": \"b\", \"label\": 0}\n"
                                                          "{\"goal\": \"g\", \"sol1\": \"a\", \"label\": 0}\n");
  CHECK_THROWS_WITH(read_task("piqa", missing), ("[eval] " + missing + ":2: missing field 'sol2'").c_str());
  const std::string empty = write_temp("empty.jsonl", "{\"activity_label\": \"a\", \"ctx_a\": \"b\", \"ctx_b\": \"c\", \"endings\": [], \"label\": 0}\n");
  CHECK_THROWS_WITH(read_task("hellaswag", empty), ("[eval] " + empty + ":1: the choice list is empty").c_str());
  const std::string range = write_temp("range.jsonl", "{\"goal\": \"g\", \"sol1\": \"a\", \"sol2\": \"b\", \"label\": 2}\n");
  CHECK_THROWS_WITH(read_task("piqa", range),
                    ("[eval] " + range + ":1: label 2 (field 'label') is out of range for 2 choices").c_str());
  const std::string key = write_temp("key.jsonl", "{\"question\": \"q\", \"choices\": {\"text\": [\"a\"], \"label\": [\"A\"]}, \"answerKey\": \"B\"}\n");
  CHECK_THROWS_WITH(read_task("arc_easy", key), ("[eval] " + key + ":1: answerKey \"B\" is out of range: none of choices.label").c_str());
  const std::string blank = write_temp("blank.jsonl", "{\"sentence\": \"no blank\", \"option1\": \"a\", \"option2\": \"b\", \"answer\": \"1\"}\n");
  CHECK_THROWS_WITH(read_task("winogrande", blank), ("[eval] " + blank + ":1: the sentence has no blank \"_\"").c_str());
  CHECK_THROWS_WITH(read_task("squad", missing),
                    "[eval] unknown task 'squad' (known: winogrande, piqa, hellaswag, arc_challenge, arc_easy, boolq)");
  for (const std::string& p : {missing, empty, range, key, blank}) std::filesystem::remove(p);
}

// ---- the harness's conventions with HF tokenizers ----

namespace {

// A copy of an HF tokenizer fixture's tokenizer.json in a directory of its own, with a
// tokenizer_config.json naming its special tokens as the real model's does.
struct TokenizerDir {
  TempDir dir;
  TokenizerDir(const std::string& fixture, const std::string& config) {
    std::filesystem::copy_file(kTokenizers + fixture + "/tokenizer.json", dir / "tokenizer.json");
    write_file(dir / "tokenizer_config.json", config);
  }
};

// The continuation's summed log-likelihood given the ids of context and continuation, the last
// max_position_embeddings + 1 of them kept.
double loglik_of(const nn::CausalLM& lm, const nn::Params& ps, const nn::State& st, const std::vector<int32_t>& context,
                 const std::vector<int32_t>& continuation) {
  std::vector<int32_t> ids = context;
  ids.insert(ids.end(), continuation.begin(), continuation.end());
  const size_t window = size_t(lm.config().max_position_embeddings);
  if (ids.size() > window + 1) ids.erase(ids.begin(), ids.end() - ptrdiff_t(window + 1));
  const std::vector<double> lp = plain_logprobs(lm, ps, st, ids);
  double sum = 0;
  for (size_t j = lp.size() - std::min(continuation.size(), lp.size()); j < lp.size(); ++j) sum += lp[j];
  return sum;
}

}  // namespace

TEST_CASE("a Llama-style tokenizer's requests start with its BOS, as the harness's tok_encode gives them") {
  // Llama 3's tokenizer: the template puts <|begin_of_text|> in front; tokenizer_config.json names
  // it bos_token, so it is also the prefix of an empty context.
  const TokenizerDir llama3("llama3", R"({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"})");
  const text::Tokenizer tok = text::Tokenizer::load(llama3.dir.path.string());
  const int32_t bos = *tok.token_to_id("<|begin_of_text|>"), eos = *tok.token_to_id("<|end_of_text|>");
  const HarnessEncoding h = harness_encoding(&tok, eos);
  CHECK(h.prefix_id == bos);
  const std::string context = "Question: Which way is up?\nAnswer:", continuation = " the sky";
  CHECK(h.encode(context).front() == bos);
  CHECK(h.plain(context).front() != bos);
  const auto [ctx, cont] = encode_pair(context, continuation, h.encode, h.config());
  CHECK(ctx == tok.encode(context, true));
  const std::vector<int32_t> whole = tok.encode(context + continuation, true);
  CHECK(cont == std::vector<int32_t>(whole.begin() + ptrdiff_t(ctx.size()), whole.end()));
  CHECK(std::count(cont.begin(), cont.end(), bos) == 0);
  // A context that already starts with the BOS text gets no second one (the harness's
  // has_bos_prefix check).
  const std::vector<int32_t> prefixed = h.encode("<|begin_of_text|>Answer:");
  CHECK(prefixed == tok.encode("<|begin_of_text|>Answer:", false));
  CHECK(std::count(prefixed.begin(), prefixed.end(), bos) == 1);
  // An empty context: the BOS, then the continuation without special tokens.
  const auto [empty_ctx, empty_cont] = encode_pair("", " the sky", h.encode, h.config());
  CHECK(empty_ctx == std::vector<int32_t>{bos});
  CHECK(empty_cont == tok.encode(" the sky", false));
  // Trailing whitespace of the context moves to the continuation.
  const auto [moved_ctx, moved_cont] = encode_pair("Answer: ", "yes", h.encode, h.config());
  CHECK(moved_ctx == tok.encode("Answer:", true));
  const std::vector<int32_t> moved_whole = tok.encode("Answer: yes", true);
  CHECK(moved_cont == std::vector<int32_t>(moved_whole.begin() + ptrdiff_t(moved_ctx.size()), moved_whole.end()));
}

TEST_CASE("a Qwen2-style tokenizer adds nothing, and an empty context's prefix is its EOS") {
  // Qwen2's tokenizer_config.json has "bos_token": null; its template adds no special token.
  const TokenizerDir qwen2("qwen2", R"({"bos_token": null, "eos_token": "<|endoftext|>"})");
  const text::Tokenizer tok = text::Tokenizer::load(qwen2.dir.path.string());
  CHECK_FALSE(tok.bos_id().has_value());
  const int32_t eos = *tok.eos_id();
  const HarnessEncoding h = harness_encoding(&tok, eos);
  CHECK(h.prefix_id == eos);
  const std::string context = "Question: Which way is up?\nAnswer:";
  CHECK(h.encode(context) == tok.encode(context, false));
  const auto [ctx, cont] = encode_pair(context, " the sky", h.encode, h.config());
  CHECK(ctx == tok.encode(context, false));
  CHECK(encode_pair("", " the sky", h.encode, h.config()).first == std::vector<int32_t>{eos});
  // The byte tokenizer: nothing added, the end of a document as the prefix.
  const HarnessEncoding b = harness_encoding(nullptr, kEndOfDocument);
  CHECK(b.encode("ab") == std::vector<int32_t>{97, 98});
  CHECK(b.prefix_id == kEndOfDocument);
}

TEST_CASE("a tiny HF Llama with its tokenizer: every choice is scored after the BOS") {
  const nn::LoadedModel loaded = nn::load_model_dir(kLlamaWithTokenizer, DType::f64);
  const nn::CausalLM lm(loaded.config);
  const text::Tokenizer tok = text::Tokenizer::load(kLlamaWithTokenizer);
  REQUIRE(tok.bos_id() == std::optional<int32_t>(1));
  const HarnessEncoding h = harness_encoding(&tok, *tok.eos_id());
  const std::vector<McExample> examples = read_task("piqa", kSamples + "piqa.jsonl");
  size_t differs = 0;
  for (const McExample& ex : examples) {
    const std::vector<double> got = choice_logliks(lm, loaded.params, loaded.state, ex.requests, h.encode, h.config());
    for (size_t i = 0; i < ex.requests.size(); ++i) {
      const std::string& context = ex.requests[i].context;
      const std::vector<int32_t> ctx = tok.encode(context, true), whole = tok.encode(context + ex.requests[i].continuation, true);
      REQUIRE(ctx.front() == 1);
      const std::vector<int32_t> cont(whole.begin() + ptrdiff_t(ctx.size()), whole.end());
      CHECK(got[i] == doctest::Approx(loglik_of(lm, loaded.params, loaded.state, ctx, cont)).epsilon(1e-12));
      // Without the BOS (cotan's old encoding) the same continuation scores otherwise.
      const std::vector<int32_t> no_bos(ctx.begin() + 1, ctx.end());
      differs += std::abs(got[i] - loglik_of(lm, loaded.params, loaded.state, no_bos, cont)) > 1e-6;
    }
  }
  CHECK(differs > 0);
}

TEST_CASE("perplexity text: the file as one stream with the template, or documents each ending in EOS") {
  const TokenizerDir llama3("llama3", R"({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"})");
  const text::Tokenizer tok = text::Tokenizer::load(llama3.dir.path.string());
  const int32_t bos = *tok.bos_id(), eos = *tok.eos_id();
  const std::string fortunes = "First fortune.\n%\nSecond one,\ntwo lines.\n%\n";
  const std::string file = write_temp("fortunes", fortunes);
  const PerplexityText stream = perplexity_text(file, PerplexityMode::stream, "text", &tok, eos);
  CHECK(stream.ids == tok.encode(fortunes, true));  // the file verbatim, one BOS, no EOS
  CHECK(std::count(stream.ids.begin(), stream.ids.end(), bos) == 1);
  CHECK(std::count(stream.ids.begin(), stream.ids.end(), eos) == 0);
  CHECK(stream.bytes == int64_t(fortunes.size()));
  CHECK(stream.documents == 2);
  const PerplexityText docs = perplexity_text(file, PerplexityMode::documents, "text", &tok, eos);
  std::vector<int32_t> want = tok.encode("First fortune.\n", true);
  want.push_back(eos);
  const std::vector<int32_t> second = tok.encode("Second one,\ntwo lines.\n", true);
  want.insert(want.end(), second.begin(), second.end());
  want.push_back(eos);
  CHECK(docs.ids == want);
  CHECK(docs.documents == 2);
  // JSONL: the documents joined with a blank line, as the guide joins WikiText's.
  const std::string jsonl = write_temp("ppl.jsonl", "{\"text\": \"one\"}\n{\"text\": \"two\"}\n");
  CHECK(perplexity_text(jsonl, PerplexityMode::stream, "text", &tok, eos).ids == tok.encode("one\n\ntwo", true));
  CHECK(perplexity_text(jsonl, PerplexityMode::stream, "text", nullptr, kEndOfDocument).ids == text::encode_bytes("one\n\ntwo"));
  CHECK(parse_perplexity_mode("documents") == PerplexityMode::documents);
  CHECK_THROWS_WITH(parse_perplexity_mode("lines"), "[eval] --ppl-mode lines: expected stream or documents");
  std::filesystem::remove(file);
  std::filesystem::remove(jsonl);
}
