#!/usr/bin/env bash
# Code reasoning (Eurus-2-RL, DeepSeek-R1-Distill-Qwen-7B): train with GDPO or the GRPO baseline on one node (recipes/code_<method>.yaml).
# Usage (from any directory): recipes/code.sh gdpo|grpo [Hydra overrides...]
#   recipes/code.sh gdpo
#   recipes/code.sh grpo trainer.total_epochs=1
#   recipes/code.sh gdpo -m algorithm.adv_estimator=grpo,gdpo seed=0,1,2
# Needs the data first: python -m data_prep.eurus_code
set -euo pipefail
task=code
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
  echo "$data/train.parquet is missing; prepare the data first: python -m data_prep.eurus_code" >&2
  exit 1
fi
exec "${PYTHON:-python}" -m gdpo_verl.main --config-name "${task}_${method}" "$@"
