"""Framework-free pieces (torch and numpy only): the GDPO advantage math and the per-step reward statistics.

Nothing here imports verl, Ray or Hydra. ``advantage`` holds the group step, the weighted sum, the final step and
the GRPO-on-the-sum baseline; ``metrics`` the per-reward statistics logged at every step; ``choices`` the one
"value must be one of ..." check every option of the project uses.
"""
