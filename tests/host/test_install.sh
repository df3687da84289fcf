#!/bin/sh
# `cmake --install` into a temporary prefix, then the installed mechlab from an empty directory:
# it finds its library and the paper's sweep files and recipes from its own location, draws a
# smoke figure, and runs the examples of one's own mixer and task.
#   test_install.sh BUILD_DIR
set -eu
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
mkdir "$tmp/empty"
cd "$tmp/empty"
exe="$tmp/prefix/bin/mechlab"
home=$("$exe" -e 'io.write(mech.home)')
[ "$home" = "$tmp/prefix/share/mechlab" ] || { echo "FAIL: mech.home is '$home'"; exit 1; }
"$exe" -e 'assert(require("mech.sweep") and mech.find("experiments/paper/ar.lua"):find("^/"))'
"$exe" experiments/paper.lua --profile smoke --dir out fig3a >log.txt 2>&1 || { cat log.txt; echo "FAIL: fig3a"; exit 1; }
for f in out/figures/fig3a.png out/figures/fig3a.csv out/sweeps/ar/results.csv; do
  [ -s "$f" ] || { cat log.txt; echo "FAIL: no $f"; exit 1; }
done
# the examples of one's own mixer and task (issue 43), from here: their modules are found in
# mech.home, and the mixer's checkpoint reloads when its module is allowed
"$exe" experiments/own_mixer.lua --steps=2 --docs=8 --out=mix >log.txt 2>&1 || { cat log.txt; echo "FAIL: own_mixer"; exit 1; }
"$exe" -e 'local m = mech.load("mix/checkpoint.safetensors", {modules = {"experiments.own_mixer"}}); assert(m:config().arch == "gla")' \
    >log.txt 2>&1 || { cat log.txt; echo "FAIL: own_mixer's checkpoint"; exit 1; }
"$exe" experiments/own_task.lua smoke=true out=task >log.txt 2>&1 || { cat log.txt; echo "FAIL: own_task"; exit 1; }
[ -s task/checkpoint.safetensors ] || { cat log.txt; echo "FAIL: own_task wrote no checkpoint"; exit 1; }
# a file that is in neither place is an error naming both
if "$exe" experiments/nope.lua >log.txt 2>&1; then echo "FAIL: a missing script ran"; exit 1; fi
grep -q "cannot open experiments/nope.lua" log.txt || { cat log.txt; echo "FAIL: message"; exit 1; }
"$exe" -e 'local p, msg = mech.find("experiments/nope.lua"); assert(p == nil and msg:find("mechlab.s home", 1, false), msg)'
echo "1 passed, 0 failed"
