// cotan eval's scoring (eval/evaluate.hpp) and task readers (eval/tasks.hpp) on the sample
// files of tests/eval/, written for these tests. The expected log-likelihoods and perplexities are
// computed here from the plain forward pass (CausalLM::apply) and a log-softmax written out in
// f64, not through the eval code.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <string>
#include <vector>

#include "autograd/autograd.hpp"
#include "nn/model.hpp"
#include "tensor/ops.hpp"
#include "tests/support.hpp"
#include "train/data.hpp"
#include "eval/evaluate.hpp"

using namespace cotan;
using namespace cotan::train;
using namespace cotan::eval;

namespace {

const std::string kSamples = std::string(COTAN_SOURCE_DIR) + "/tests/eval/";

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
std::vector<double> plain_logprobs(const Fixture& f, const std::vector<int32_t>& ids) {
  NoGrad no_grad;
  const int64_t t = int64_t(ids.size()) - 1, v = f.lm.config().vocab_size;
  const std::vector<int32_t> in(ids.begin(), ids.end() - 1);
  const std::vector<double> logits = f.lm.apply(from_vector(in, {1, t}), f.ps, f.st).first.to_vector<double>();
  std::vector<double> out;
  for (int64_t j = 0; j < t; ++j) {
    double top = -INFINITY, sum = 0;
    for (int64_t k = 0; k < v; ++k) top = std::max(top, logits[size_t(j * v + k)]);
    for (int64_t k = 0; k < v; ++k) sum += std::exp(logits[size_t(j * v + k)] - top);
    out.push_back(logits[size_t(j * v + ids[size_t(j + 1)])] - top - std::log(sum));
  }
  return out;
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
