#!/bin/sh
# cotan as an installed library: stages `meson install` (DESTDIR), then builds, out of the tree
# with `pkg-config --cflags --libs cotan`, every C++ block of the README and an example, and runs
# them. Usage: sh tests/install/check.sh BUILD_DIR SOURCE_DIR
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/cotan-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
DESTDIR="$work/stage" meson install -C "$build" --no-rebuild --quiet > "$work/install.log" 2>&1 ||
  { cat "$work/install.log"; exit 1; }
pc=$(find "$work/stage" -name cotan.pc)
[ -n "$pc" ] || { echo "no cotan.pc installed"; exit 1; }
prefix=$(sed -n 's/^prefix=//p' "$pc")
# Relocate the staged package: its prefix is where DESTDIR put it.
sed -i "s|^prefix=.*|prefix=$work/stage$prefix|" "$pc"
export PKG_CONFIG_PATH="$(dirname "$pc")"
flags=$(pkg-config --cflags --libs cotan)
# The README's C++ blocks, one file each.
awk -v dir="$work" '/^```cpp$/ { n++; file = dir "/readme" n ".cpp"; next } /^```$/ { file = ""; next }
  file != "" { print > file }' "$src/README.md"
cp "$src/examples/custom_model.cpp" "$work/example.cpp"
count=0
for program in "$work"/readme*.cpp "$work/example.cpp"; do
  name=$(basename "$program" .cpp)
  # shellcheck disable=SC2086
  c++ -O1 "$program" $flags -o "$work/$name" || { echo "FAIL $name: does not compile out of the tree"; exit 1; }
  # The example distills from the tiny HF Llama of the fixtures, with its tokenizer.json.
  args=""
  [ "$name" = example ] && args="$src/tests/hf/fixtures/llama_with_tokenizer"
  # shellcheck disable=SC2086
  (cd "$work" && "./$name" $args > "$work/$name.out" 2>&1) || { echo "FAIL $name: exit status $?"; cat "$work/$name.out"; exit 1; }
  echo "ok $name: $(head -n 1 "$work/$name.out")"
  count=$((count + 1))
done
[ "$count" -ge 4 ] || { echo "only $count programs found"; exit 1; }
