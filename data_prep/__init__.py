"""Data preparation: raw task data -> verl parquet (``train.parquet``, ``test.parquet``), one module per task.

Shipped in the package as ``gdpo_verl.data_prep`` (see pyproject.toml): run from any directory, e.g.
``python -m gdpo_verl.data_prep.toolcall /path/to/rlla_rl.json``; each module's
docstring gives its command. Shared behaviour lives in ``common``.
"""
