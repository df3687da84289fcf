#!/usr/bin/env bash
# mechlab set-up on a fresh Debian machine (run as root):
#   scripts/setup.sh run    install what is missing, build (Release, -O2), run the default job
#   scripts/setup.sh test   install (SLURM and chromium too), start a throw-away SLURM cluster,
#                           build Release and ASan+UBSan, run the whole test suite in both, stop the cluster
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-run}
packages=(build-essential cmake pkg-config liblua5.4-dev lua-argparse libopenblas-dev libpng-dev libcairo2-dev libfreetype-dev fonts-urw-base35 check libreadline-dev python3
    libzmq3-dev libssl-dev) # the Jupyter kernel: ZeroMQ and libcrypto's HMAC (docs/notebook.md)
# for the tests only: the cluster the sweep tests submit to (scripts/slurm/up.sh; iproute2 for its
# port check) and the browser the attention viewer's test loads its page in (tests/lua/test_viz.lua)
test_packages=(slurmctld slurmd slurm-client munge iproute2 chromium
    # the kernel's client tests (tests/kernel/) and the notebook itself (docs/notebook.md)
    python3-zmq python3-jupyter-client python3-nbclient python3-nbformat jupyter-notebook)

install_deps() { # install_deps [package...]: the build's packages and these
    local missing=()
    for p in "${packages[@]}" "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if ((${#missing[@]})); then
        echo "== installing: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
}

jobs=$(nproc 2>/dev/null || echo 2)

build() { # build <dir> [cmake options...]
    local dir=$1
    shift
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
    cmake --build "$dir" -j "$jobs"
}

case "$mode" in
run)
    install_deps
    build build
    ./build/mechlab experiments/default.lua
    ;;
test)
    install_deps "${test_packages[@]}"
    export MECHLAB_SLURM_DIR=${MECHLAB_SLURM_DIR:-/tmp/mechlab-slurm-$$}
    trap 'scripts/slurm/down.sh' EXIT # also cleans up a half-started cluster
    scripts/slurm/up.sh
    export SLURM_CONF=$MECHLAB_SLURM_DIR/slurm.conf
    build build
    echo "== tests (Release)"
    (cd build && ctest --output-on-failure -j "$jobs")
    build build-asan -DMECHLAB_SANITIZE=ON
    echo "== tests (AddressSanitizer + UndefinedBehaviorSanitizer)"
    (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        ctest --output-on-failure -j "$jobs")
    ;;
*)
    echo "usage: $0 run|test" >&2
    exit 2
    ;;
esac
