#!/usr/bin/env bash
# Tool calling (ToolRL rlla, Qwen2.5-1.5B-Instruct): train with GDPO or the GRPO baseline on one node (recipes/toolcall.yaml with method=<method>).
# Usage (from any directory): recipes/toolcall.sh gdpo|grpo [Hydra overrides...]
#   recipes/toolcall.sh gdpo
#   recipes/toolcall.sh grpo trainer.total_epochs=1
#   recipes/toolcall.sh gdpo -m seed=0,1,2   (both methods: python -m gdpo_verl.main --config-name toolcall -m method=gdpo,grpo seed=0,1,2)
# Needs the data first: python -m gdpo_verl.data_prep.toolcall /path/to/rlla_rl.json
exec "$(dirname "$0")/launch.sh" toolcall "$@"
