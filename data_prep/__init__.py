"""Data preparation: raw task data -> verl parquet (``train.parquet``, ``test.parquet``), one module per task.

Run from the repository root, e.g. ``python -m data_prep.toolcall /path/to/rlla_rl.json``; each module's
docstring gives its command. Shared behaviour lives in ``data_prep.common``.
"""
