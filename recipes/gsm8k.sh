#!/usr/bin/env bash
# Math with three rewards (GSM8K, Qwen2.5-1.5B-Instruct): train with GDPO or the GRPO baseline on one node (recipes/gsm8k_<method>.yaml).
# Usage (from any directory): recipes/gsm8k.sh gdpo|grpo [Hydra overrides...]
#   recipes/gsm8k.sh gdpo
#   recipes/gsm8k.sh grpo trainer.total_epochs=1
#   recipes/gsm8k.sh gdpo -m algorithm.adv_estimator=grpo,gdpo seed=0,1,2
# Needs the data first: python -m data_prep.gsm8k
set -euo pipefail
task=gsm8k
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
  echo "$data/train.parquet is missing; prepare the data first: python -m data_prep.gsm8k" >&2
  exit 1
fi
exec "${PYTHON:-python}" -m gdpo_verl.main --config-name "${task}_${method}" "$@"
