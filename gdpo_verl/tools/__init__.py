"""Command-line tools around training runs, apart from the library: each module is a ``python -m`` entry point.

``analysis`` (distinct advantage groups, paper Fig. 3; the same count on a saved batch), ``plot`` (per-reward
curves of runs, GDPO vs GRPO), and ``runs`` (what they share: reading a run's ``metrics.jsonl``).
"""
