#!/usr/bin/env bash
# Math with a length budget (DeepScaleR, DeepSeek-R1-Distill-Qwen-1.5B): train with GDPO or a baseline (GRPO, GRPO without std) on one node (recipes/deepscaler.yaml with method=<method>).
# Usage (from any directory): recipes/deepscaler.sh gdpo|grpo|grpo_nostd|gd2po|saw|rvpo [Hydra overrides...]
#   recipes/deepscaler.sh gdpo
#   recipes/deepscaler.sh grpo trainer.total_epochs=1
#   recipes/deepscaler.sh gdpo -m seed=0,1,2   (every method: python -m gdpo_verl.main --config-name deepscaler -m method=gdpo,grpo,grpo_nostd,gd2po,saw,rvpo seed=0,1,2)
# Needs the data first: python -m gdpo_verl.data_prep.deepscaler
exec "$(dirname "$0")/launch.sh" deepscaler "$@"
