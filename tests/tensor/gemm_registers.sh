#!/bin/sh
# The CPU GEMM's main micro-kernels keep their accumulators in registers. Counts the ymm and zmm
# loads and stores at %rsp or %rbp (the stack, addressed from its pointer or, in a function that
# realigns it, from its frame pointer; the accumulators' width: a scalar tail's xmm are not
# spills) in this build's micro_kernel of the most rows (14 with AVX-512, 6 with AVX2; f32, f64
# and, built for AVX512_BF16, the bf16 pairs), in micro_kernel_rows_a, in the f32 (and bf16
# pairs) micro_kernel_wide of one and two rows and in micro_kernel_lines of every row count (1 to
# 6 with AVX2, to 7 with AVX-512); more than a few means the compiler spilled the accumulators
# (GCC 13.3 did, without the flatten in tensor/cpu/matmul.cpp: 21 stores per K step, the GEMM at
# a third of its speed). Fails when one of these kernels is not found. Skips (77) a build without
# the packed GEMM (Eigen).
#   gemm_registers.sh LIBCOTAN_A            (or an object file of tensor/cpu/matmul.cpp)
set -u
input=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
command -v objdump >/dev/null || { echo "objdump not found"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
case "$input" in
  *.a) object=$(ar t "$input" | grep 'tensor_cpu_matmul\.cpp\.o$' | head -n 1)
       [ -n "$object" ] || { echo "no tensor_cpu_matmul.cpp.o in $input"; exit 1; }
       (cd "$tmp" && ar x "$input" "$object") || exit 1
       input=$tmp/$object ;;
esac
objdump -d --no-show-raw-insn -C "$input" > "$tmp/asm" || exit 1
awk '
  /^[0-9a-f]+ <.*>:$/ {
    name = ""
    if ($0 ~ /packed_gemm</) packed = 1
    if ($0 ~ /micro_kernel_rows_a\(/) { name = "rows_a"; rows = 0 }
    else if (match($0, /micro_kernel_wide<(float|[a-z:]*\(anonymous namespace\)::Bf16Pairs), [0-9]+l/)) {
      name = substr($0, RSTART, RLENGTH) ">"; rows = 0
    }
    else if (match($0, /micro_kernel_lines<(float|cotan::bf16), [0-9]+l/)) { name = substr($0, RSTART, RLENGTH) ">"; rows = 0 }
    else if (match($0, /micro_kernel<(float|double|[a-z:]*\(anonymous namespace\)::Bf16Pairs), [0-9]+l/)) {
      split(substr($0, RSTART, RLENGTH), part, ", "); rows = part[2] + 0
      name = substr($0, RSTART, RLENGTH) ">"
    }
    if (name != "") { count[name] += 0; rows_of[name] = rows; if (rows > most) most = rows }
    next
  }
  name != "" && /[yz]mm/ && /\(%r[sb]p\)/ { count[name]++ }
  END {
    if (most == 0 && packed) { print "the packed GEMM is there, but none of its micro-kernels"; exit 1 }
    if (most == 0) { print "no packed GEMM (Eigen build)"; exit 77 }
    bad = 0
    # Every kernel named above must be there: a renamed or vanished one would go unchecked.
    need["micro_kernel<float, " most "l>"]; need["micro_kernel<double, " most "l>"]
    need["micro_kernel_wide<float, 1l>"]; need["micro_kernel_wide<float, 2l>"]
    need["micro_kernel_lines<float, 1l>"]; need["micro_kernel_lines<float, 6l>"]
    need["micro_kernel_lines<cotan::bf16, 1l>"]; need["micro_kernel_lines<cotan::bf16, 6l>"]
    if (most == 14) { need["rows_a"]; need["micro_kernel_lines<float, 7l>"]; need["micro_kernel_lines<cotan::bf16, 7l>"] }
    for (k in need) if (!(k in count)) { printf "%s not found\n", k; bad = 1 }
    for (k in count) {
      if (rows_of[k] != 0 && rows_of[k] != most) continue
      printf "%-28s %d vector accesses to the stack\n", k, count[k]
      # The lines kernels hold one accumulator per row. With AVX2 their only vector access to
      # the stack is the column of W they build for the last steps of K. With AVX-512 the 16 x 16
      # transpose can also park a few of its temporaries there (GCC 12 on a Sapphire Rapids
      # Xeon, SLP vectorizer off: 4 to 11 a kernel, once per 16 steps of K); accumulators or the
      # 16 transposed vectors in memory would take 32 or more.
      if (k ~ /^micro_kernel_lines/) { if (count[k] > (most == 14 ? 12 : 1)) bad = 1 }
      else if (count[k] > 8) bad = 1
    }
    exit bad
  }' "$tmp/asm"
