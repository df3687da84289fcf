#!/usr/bin/env bash
# Where a training step's time goes: runs build/bench_train on one thread under `perf record` for
# each architecture and width, and sorts the samples by the function they fell in:
#   matmul      OpenBLAS, mechlab's own products (gemm.c), the matmul/einsum wrappers (the head's included)
#   mixer       the mixers' kernels: attention scores/softmax, convolutions, scans, the delta rule, ...
#   norm+ew     LayerNorm, RMSNorm, elementwise ops and reductions (GELU, SiLU, adds, ...)
#   emb+loss    the embedding and its backward, cross-entropy at the supervised rows
#   optimizer   AdamW over the flat parameter buffer
#   bookkeeping allocation, zeroing and copies, autograd's graph and gradient accumulation, the kernel
# Samples of set-up (model init, dataset) are left out. Each category's ms is its share of the
# process CPU time per step that bench_train printed in the same run.
#
# usage: bench/step_breakdown.sh [--task ar_32] [--d 16,32,64] [--steps 200] [arch ...]
#        (run from the repository root after building; needs perf)
set -euo pipefail
task=ar_32 ds=16,32,64 steps=200
while [ $# -gt 0 ]; do
  case "$1" in
    --task) task=$2; shift 2 ;;
    --d) ds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    --*) echo "step_breakdown: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- attention base_conv based h3 hyena mamba delta_net
command -v perf >/dev/null || { echo "step_breakdown: perf is not installed" >&2; exit 1; }
bench=build/bench_train objs=build/CMakeFiles/mechcore.dir/src
[ -x "$bench" ] && [ -d "$objs" ] || { echo "step_breakdown: build first (no $bench or $objs)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# symbol -> source file (src/<dir>/<file>) of every function of the core library
for o in "$objs"/*/*.o; do
  f=${o#"$objs"/}
  nm "$o" | awk -v f="${f%.o}" '$2 ~ /^[tT]$/ {print $3, f}'
done > "$tmp/files"

printf '%-10s %4s %8s  %-7s %-7s %-7s %-8s %-9s %-11s\n' arch D "cpu ms" matmul mixer norm+ew emb+loss optimizer bookkeeping
IFS=, read -ra dlist <<< "$ds"
for arch in "$@"; do
  for d in "${dlist[@]}"; do
    perf record -q -e cpu-clock -F 2000 -o "$tmp/perf.data" \
      "$bench" --task "$task" --d "$d" --threads 1 --steps "$steps" --rate 1 "$arch" > "$tmp/out" 2> /dev/null
    cpu=$(awk -v a="$arch" '$1 == a {print $5}' "$tmp/out")
    perf report -q -i "$tmp/perf.data" --no-children --sort dso,sym --stdio 2> /dev/null |
      awk -v cpu="$cpu" -v arch="$arch" -v d="$d" '
        FNR == NR { file[$1] = $2; next }
        {
          pct = $1; sub(/%/, "", pct); dso = $2; sym = $NF
          base = sym; sub(/\..*/, "", base)              # function clones: name.arch_x86_64_v4
          f = (sym in file) ? file[sym] : (base in file ? file[base] : "")
          if (dso ~ /openblas/ || f ~ /ops\/(matmul|einsum|gemm)\.c/) c = "matmul"
          else if (base ~ /cross_entropy|logsumexp|kl_div|row_max|embedding/) c = "emb+loss"
          else if (base ~ /attention|causal_softmax|scores_backward|apply_backward|shifted_exp|weighted_gap/) c = "mixer"
          else if (base ~ /layer_norm|rms_norm|dot8/) c = "norm+ew"
          else if (f ~ /^(optim)\// || base ~ /adamw/) c = "optimizer"
          else if (f ~ /^(tasks|io|plot)\// || base ~ /rng|init/) c = "setup"
          else if (f ~ /ops\/(conv1d|cumsum|delta_rule|h3|linear_attention|longconv|selective_scan|softmax|sort)\.c/ || f ~ /^nn\/mixer_/) c = "mixer"
          else if (f ~ /ops\// || dso ~ /libm[.-]/) c = "norm+ew"
          else c = "bookkeeping"                        # autograd, core, nn glue, libc, the kernel
          share[c] += pct
        }
        END {
          total = 0
          for (c in share) if (c != "setup") total += share[c]
          printf "%-10s %4d %8.2f ", arch, d, cpu
          n = split("matmul mixer norm+ew emb+loss optimizer bookkeeping", cs, " ")
          for (i = 1; i <= n; i++) printf " %5.2f/%2.0f%%", cpu * share[cs[i]] / total, 100 * share[cs[i]] / total
          printf "\n"
        }' "$tmp/files" -
  done
done
echo "(each cell: ms per step / share of the step; perf samples at 2 kHz over $steps steps after 20 of warm-up)"
