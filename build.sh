#!/usr/bin/env bash
# Builds cotan into build/: installs the missing Debian packages, configures with meson (release)
# on the first run, then compiles with ninja. Extra arguments go to meson, for example
#   ./build.sh -Dcuda=disabled -Dnative=false
# A run with nothing to do takes about a second.
set -euo pipefail

cd "$(dirname "$(readlink -f "$0")")"
BUILD_DIR=build

say() { printf '[build.sh] %s\n' "$*"; }

# ---- packages ----
# clang and libclang-rt-14-dev (libFuzzer) build the fuzz harnesses of tests/fuzz. python3-matplotlib
# draws the study's figures (study/plot_figures.py, `cotan plot`).
packages=(meson ninja-build g++ pkg-config libeigen3-dev libtbb-dev doctest-dev
          libboost-program-options-dev libboost-context-dev nlohmann-json3-dev libxxhash-dev libonig-dev libutf8proc-dev libicu-dev zlib1g-dev libzstd-dev zstd libtomlplusplus-dev fortunes ccache
          clang libclang-rt-14-dev python3-matplotlib)
missing=()
while read -r name status; do
  [[ "$status" == installed ]] || missing+=("$name")
done < <(for p in "${packages[@]}"; do
           printf '%s %s\n' "$p" "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)"
         done)
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null || { say "error: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ---- CUDA: meson looks for nvcc on PATH at setup time ----
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

# ---- configure ----
# build/.build-args remembers the arguments of the last configuration, so that repeating them
# does not make meson regenerate the build files.
args_file="$BUILD_DIR/.build-args"
if [[ ! -f "$BUILD_DIR/meson-private/coredata.dat" ]]; then
  say "configuring $BUILD_DIR/ $*"
  release=(--buildtype=release)
  [[ "$*" == *buildtype* ]] && release=()
  # nvcc through cuda/nvcc-depfile, which writes the dependency files meson 1.0 does not ask nvcc
  # for: without it an edited .cuh would not recompile the .cu files that include it.
  native=()
  if command -v nvcc >/dev/null; then
    mkdir -p "$BUILD_DIR"
    printf "[binaries]\ncuda = '%s'\n" "$PWD/cuda/nvcc-depfile" > "$BUILD_DIR/nvcc-depfile.ini"
    native=(--native-file "$BUILD_DIR/nvcc-depfile.ini")
  fi
  meson setup "$BUILD_DIR" "${native[@]}" "${release[@]}" "$@"
  printf '%s\n' "$*" > "$args_file"
elif (($#)) && [[ "$*" != "$(cat "$args_file" 2>/dev/null)" ]]; then
  say "reconfiguring $BUILD_DIR/ $*"
  meson configure "$BUILD_DIR" "$@"
  printf '%s\n' "$*" > "$args_file"
fi

# ---- compile ----
say "compiling"
ninja -C "$BUILD_DIR"
say "done: $BUILD_DIR/cotan"
