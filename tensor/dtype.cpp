#include "tensor/dtype.hpp"

namespace cotan {

DType parse_dtype(std::string_view name) {
  if (name == "f64" || name == "float64" || name == "double") return DType::f64;
  if (name == "f32" || name == "float32" || name == "float") return DType::f32;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "i32" || name == "int32") return DType::i32;
  if (name == "i64" || name == "int64") return DType::i64;
  if (name == "bool") return DType::boolean;
  fail("dtype", "unknown dtype '", name, "' (known: f64, f32, bf16, i32, i64, bool)");
}

}  // namespace cotan
