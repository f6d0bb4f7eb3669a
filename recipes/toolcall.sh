#!/usr/bin/env bash
# Tool calling (ToolRL rlla, Qwen2.5-1.5B-Instruct): train with GDPO or the GRPO baseline on one node (recipes/toolcall_<method>.yaml).
# Usage (from any directory): recipes/toolcall.sh gdpo|grpo [Hydra overrides...]
#   recipes/toolcall.sh gdpo
#   recipes/toolcall.sh grpo trainer.total_epochs=1
#   recipes/toolcall.sh gdpo -m algorithm.adv_estimator=grpo,gdpo seed=0,1,2
# Needs the data first: python -m data_prep.toolcall /path/to/rlla_rl.json
set -euo pipefail
task=toolcall
method="${1:-}"
case "$method" in
  gdpo | grpo) shift ;;
  *)
    echo "usage: $0 gdpo|grpo [overrides...]" >&2
    exit 2
    ;;
esac
cd "$(dirname "$0")/.."
data="${GDPO_DATA:-$HOME/data/gdpo}/$task"
if [[ ! -f "$data/train.parquet" ]]; then
  echo "$data/train.parquet is missing; prepare the data first: python -m data_prep.toolcall /path/to/rlla_rl.json" >&2
  exit 1
fi
exec "${PYTHON:-python}" -m gdpo_verl.main --config-name "${task}_${method}" "$@"
