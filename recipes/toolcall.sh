#!/usr/bin/env bash
# Tool calling (ToolRL rlla, Qwen2.5-1.5B-Instruct): train with GDPO or a baseline (GRPO, GRPO without std) on one node (recipes/toolcall.yaml with method=<method>).
# Usage (from any directory): recipes/toolcall.sh gdpo|grpo|grpo_nostd|gd2po|saw|rvpo [Hydra overrides...]
#   recipes/toolcall.sh gdpo
#   recipes/toolcall.sh grpo trainer.total_epochs=1
#   recipes/toolcall.sh gdpo -m seed=0,1,2   (every method: python -m gdpo_verl.main --config-name toolcall -m method=gdpo,grpo,grpo_nostd,gd2po,saw,rvpo seed=0,1,2)
# Needs the data first: python -m gdpo_verl.data_prep.toolcall /path/to/rlla_rl.json
exec "$(dirname "$0")/launch.sh" toolcall "$@"
