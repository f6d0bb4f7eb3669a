#!/usr/bin/env bash
# Code reasoning (Eurus-2-RL, DeepSeek-R1-Distill-Qwen-7B): train with GDPO or a baseline (GRPO, GRPO without std) on one node (recipes/code.yaml with method=<method>).
# Usage (from any directory): recipes/code.sh gdpo|grpo|grpo_nostd|gd2po|saw|rvpo [Hydra overrides...]
#   recipes/code.sh gdpo
#   recipes/code.sh grpo trainer.total_epochs=1
#   recipes/code.sh gdpo -m seed=0,1,2   (every method: python -m gdpo_verl.main --config-name code -m method=gdpo,grpo,grpo_nostd,gd2po,saw,rvpo seed=0,1,2)
# Needs the data first: python -m gdpo_verl.data_prep.eurus_code
exec "$(dirname "$0")/launch.sh" code "$@"
