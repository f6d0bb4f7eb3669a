#!/usr/bin/env bash
# Math with a length budget (DeepScaleR, DeepSeek-R1-Distill-Qwen-1.5B): train with GDPO or the GRPO baseline on one node (recipes/deepscaler_<method>.yaml).
# Usage (from any directory): recipes/deepscaler.sh gdpo|grpo [Hydra overrides...]
#   recipes/deepscaler.sh gdpo
#   recipes/deepscaler.sh grpo trainer.total_epochs=1
#   recipes/deepscaler.sh gdpo -m algorithm.adv_estimator=grpo,gdpo seed=0,1,2
# Needs the data first: python -m data_prep.deepscaler
set -euo pipefail
task=deepscaler
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
  echo "$data/train.parquet is missing; prepare the data first: python -m data_prep.deepscaler" >&2
  exit 1
fi
exec "${PYTHON:-python}" -m gdpo_verl.main --config-name "${task}_${method}" "$@"
