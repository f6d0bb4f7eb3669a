#!/usr/bin/env bash
# Shared launcher behind recipes/<task>.sh: checks the method and the prepared data, then runs the recipe.
# Usage (from any directory): recipes/launch.sh TASK gdpo|grpo|grpo_nostd|gd2po|saw|rvpo|gd2po|saw|rvpo [Hydra overrides...]
#   TASK is one of: toolcall gsm8k deepscaler code (recipes/TASK.yaml, with method=METHOD: recipes/method/METHOD.yaml)
set -euo pipefail
task="${1:-}"
case "$task" in
  toolcall) prep=toolcall ;;
  gsm8k) prep=gsm8k ;;
  deepscaler) prep=deepscaler ;;
  code) prep=eurus_code ;;
  *)
    echo "usage: $0 toolcall|gsm8k|deepscaler|code gdpo|grpo|grpo_nostd|gd2po|saw|rvpo|gd2po|saw|rvpo [overrides...]" >&2
    exit 2
    ;;
esac
shift
method="${1:-}"
case "$method" in
  gdpo | grpo | grpo_nostd | gd2po | saw | rvpo) shift ;;
  *)
    echo "usage: recipes/$task.sh gdpo|grpo|grpo_nostd|gd2po|saw|rvpo|gd2po|saw|rvpo [overrides...]" >&2
    exit 2
    ;;
esac
cd "$(dirname "$0")/.."
data="${GDPO_DATA:-$HOME/data/gdpo}/$task"
if [[ ! -f "$data/train.parquet" ]]; then
  echo "$data/train.parquet is missing; prepare the data first: python -m gdpo_verl.data_prep.$prep" >&2
  exit 1
fi
exec "${PYTHON:-python}" -m gdpo_verl.main --config-name "$task" "method=$method" "$@"
