#!/usr/bin/env bash
# The layering of the sources, as docs/architecture.md draws it:
#   util/ <- tensor/ <- autograd/ <- nn/ <- eval/, train/ <- study/ <- app/, and util/ <- text/ <- nn/ users
# (eval/ and train/ sit side by side above nn/: neither includes the other; study/, the paper's
# comparison, runs on both)
# with cuda/ beside tensor/ as a backend (it may include util/ and tensor/, never autograd/, nn/
# or train/). A file may include its own folder and the folders below it. The one exception is
# the backend registry (tensor/backend.cpp), which knows the CUDA and emulator backends by their
# headers. tests/, bench/ and examples/ may include anything.
#
#   tests/layering/check.sh SOURCE_ROOT
# prints each include that runs upward (file:line, the include, what the folder may include) and
# exits 1 if there is one.
set -u
root=${1:?usage: check.sh SOURCE_ROOT}
cd "$root" || exit 2

declare -A below=(
  [util]="util"
  [text]="util text"
  [tensor]="util tensor"
  [cuda]="util tensor cuda"
  [autograd]="util tensor autograd"
  [nn]="util tensor autograd nn"
  [eval]="util text tensor autograd nn eval"
  [train]="util text tensor autograd nn train"
  [study]="util text tensor autograd nn eval train study"
  [app]="util text tensor cuda autograd nn eval train study app"
)
# file: includes it may have beyond its layer.
declare -A exceptions=(
  [tensor/backend.cpp]="cuda/emulated/backend.hpp cuda/kernels/backend.hpp cuda/runtime.hpp"
)

bad=0
checked=0
for layer in "${!below[@]}"; do
  [[ -d "$layer" ]] || continue
  while IFS= read -r file; do
    checked=$((checked + 1))
    while IFS=: read -r line include; do
      target=${include#*\"}
      target=${target%%\"*}
      folder=${target%%/*}
      [[ "$target" == */* ]] || continue                 # cotan_config.h and other top-level headers
      [[ -n "${below[$folder]+x}" ]] || continue         # not a project folder (system headers)
      [[ " ${below[$layer]} " == *" $folder "* ]] && continue
      [[ " ${exceptions[$file]:-} " == *" $target "* ]] && continue
      echo "$file:$line: includes \"$target\": $layer/ may include only ${below[$layer]// /, }"
      bad=$((bad + 1))
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" | sed 's/^\([0-9]*\):/\1:/')
  done < <(find "$layer" -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.cuh' -o -name '*.cu' -o -name '*.h' \) | sort)
done

if ((checked == 0)); then
  echo "no source files under $root"
  exit 2
fi
if ((bad > 0)); then
  echo "$bad include(s) against the layering in $checked files"
  exit 1
fi
echo "layering: $checked files, no include runs upward"
