// MetricsRecord: one line of metrics.jsonl, written by fit() and read back on resume and by the study.
#include <cmath>
#include <limits>

#include "train/trainer.hpp"
#include "util/json.hpp"

namespace cotan::train {

namespace {

// JSON has no NaN: dump writes a non-finite double as null, which reads back as NaN.
Json finite_or_null(double x) { return std::isfinite(x) ? Json(x) : Json(nullptr); }

double read_number(const JsonFields& f, std::string_view key) {
  if (!find_member(f.json(), key)) f.error("missing field '", f.name(key), "'");
  return f.optional(key, std::numeric_limits<double>::quiet_NaN());
}

// A loss part that was not computed is left out, never written as 0.
void put_optional(Json& j, const char* key, const std::optional<double>& x) {
  if (x) j[key] = finite_or_null(*x);
}

std::optional<double> read_optional(const JsonFields& f, std::string_view key) {
  if (!find_member(f.json(), key)) return std::nullopt;
  return read_number(f, key);
}

}  // namespace

Json MetricsRecord::to_json() const {
  Json j = Json::object();
  j["step"] = step.step;
  j["lr"] = finite_or_null(step.lr);
  j["loss"] = finite_or_null(step.loss);
  put_optional(j, "kd", step.kd);
  put_optional(j, "ce", step.ce);
  put_optional(j, "teacher_entropy", step.teacher_entropy);
  j["grad_norm"] = finite_or_null(step.grad_norm);
  Json layers = Json::array();
  for (const AlphaStat& a : alpha)
    layers.push_back({{"name", a.name}, {"mean", finite_or_null(a.mean)}, {"std", finite_or_null(a.std)}});
  j["alpha"] = std::move(layers);
  if (eval) {
    Json e = Json::object();
    put_optional(e, "kd", eval->kd);
    e["ce"] = finite_or_null(eval->ce);
    e["ppl"] = finite_or_null(eval->ppl);
    j["eval"] = std::move(e);
  }
  j["tokens_per_s"] = finite_or_null(step.tokens_per_s);
  j["elapsed_s"] = finite_or_null(step.elapsed_s);
  return j;
}

MetricsRecord MetricsRecord::from_json(const Json& json, std::string_view source) {
  const JsonFields f(json, "train", source);
  MetricsRecord r;
  r.step.step = f.required<int64_t>("step");
  r.step.lr = read_number(f, "lr");
  r.step.loss = read_number(f, "loss");
  r.step.kd = read_optional(f, "kd");
  r.step.ce = read_optional(f, "ce");
  r.step.teacher_entropy = read_optional(f, "teacher_entropy");
  r.step.grad_norm = read_number(f, "grad_norm");
  r.step.tokens_per_s = read_number(f, "tokens_per_s");
  r.step.elapsed_s = f.optional("elapsed_s", 0.0);
  if (const Json* layers = f.find("alpha")) {
    if (!layers->is_array()) f.error("field 'alpha' must be an array, got ", kind_name(*layers));
    for (size_t i = 0; i < layers->size(); ++i) {
      const JsonFields a((*layers)[i], "train", source, cat("alpha[", i, "]"));
      r.alpha.push_back({a.required<std::string>("name"), read_number(a, "mean"), read_number(a, "std")});
    }
  }
  if (const auto e = f.object("eval"))
    r.eval = EvalRecord{r.step.step, read_optional(*e, "kd"), read_number(*e, "ce"), read_number(*e, "ppl")};
  return r;
}

}  // namespace cotan::train
