#!/usr/bin/env bash
# Downloads (does not install) the Debian packages the GPU machine lacks into .gpu-debs/ at the
# repository root, so that tests/gpu/run.sh can unpack them there without a network. Run it
# here, on the Debian 12 development machine, once before carrying .gpu-debs to the GPU machine;
# .gpu-debs/ is ignored by git (add it to .git/info/exclude).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."
packages=(libeigen3-dev libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 doctest-dev
          libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0
          libboost-context1.74-dev libboost-context1.74.0 libxxhash-dev libxxhash0 nlohmann-json3-dev
          libonig-dev libonig5 libutf8proc-dev libutf8proc2 libicu-dev libicu72 icu-devtools
          zlib1g-dev zlib1g libzstd-dev libzstd1 libtomlplusplus-dev libtomlplusplus3
          pkgconf pkgconf-bin libpkgconf3 fortunes fortunes-min)
mkdir -p .gpu-debs
cd .gpu-debs
apt-get download "${packages[@]}"
du -sh .
