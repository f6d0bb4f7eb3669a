#!/usr/bin/env bash
# Math with three rewards (GSM8K, Qwen2.5-1.5B-Instruct): train with GDPO or a baseline (GRPO, GRPO without std) on one node (recipes/gsm8k.yaml with method=<method>).
# Usage (from any directory): recipes/gsm8k.sh gdpo|grpo|grpo_nostd|gd2po|saw|rvpo [Hydra overrides...]
#   recipes/gsm8k.sh gdpo
#   recipes/gsm8k.sh grpo trainer.total_epochs=1
#   recipes/gsm8k.sh gdpo -m seed=0,1,2   (every method: python -m gdpo_verl.main --config-name gsm8k -m method=gdpo,grpo,grpo_nostd,gd2po,saw,rvpo seed=0,1,2)
# Needs the data first: python -m gdpo_verl.data_prep.gsm8k
exec "$(dirname "$0")/launch.sh" gsm8k "$@"
