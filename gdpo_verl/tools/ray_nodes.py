"""Wait until a running Ray cluster has the nodes and GPU slots a multi-node run needs, then exit.

verl checks the cluster's GPU total once, when it builds its resource pools, so a run started before every node has
joined fails ("Total available GPUs ... is less than total desired GPUs ..."). Run this between ``ray start`` on
the nodes and ``python -m gdpo_verl.main trainer.nnodes=N``:

    RAY_ADDRESS=10.0.0.1:6379 python -m gdpo_verl.tools.ray_nodes --nodes 2 --gpus 16 --timeout 300

It connects as a driver (``RAY_ADDRESS`` or ``--address``), polls the alive nodes and the cluster's ``GPU`` total
(logical GPU slots on CPU, see ``gdpo_verl.cpu.platform``) every second, prints one line when both are reached
and exits 0; exits 1 naming what is missing when ``--timeout`` seconds pass first.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def alive() -> tuple[int, float]:
    """(alive nodes, GPU total) of the cluster this driver is connected to (``ray.init`` must have run)."""
    import ray

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return len(nodes), sum(n.get("Resources", {}).get("GPU", 0.0) for n in nodes)


def wait_for_nodes(address: str | None, nodes: int, gpus: float, timeout: float) -> tuple[int, float]:
    """Poll until ``nodes`` nodes and ``gpus`` GPU slots are alive; raise ``TimeoutError`` after ``timeout`` s."""
    import ray

    ray.init(address=address or os.environ.get("RAY_ADDRESS") or "auto", log_to_driver=False, logging_level="ERROR")
    try:
        deadline = time.monotonic() + timeout
        while True:
            have = alive()
            if have[0] >= nodes and have[1] >= gpus:
                return have
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"after {timeout:g} s the Ray cluster has {have[0]} alive nodes and {have[1]:g} GPU slots; "
                    f"waited for {nodes} nodes and {gpus:g} GPU slots. Start the missing nodes with `ray start "
                    "--address=<head>:<port> --num-gpus=<trainer.n_gpus_per_node>` (logs: <temp-dir>/session_latest)"
                )
            time.sleep(1.0)
    finally:
        ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default=None, help="the cluster (default: RAY_ADDRESS, else auto)")
    parser.add_argument("--nodes", type=int, required=True, help="alive nodes to wait for (trainer.nnodes)")
    parser.add_argument("--gpus", type=float, default=0, help="GPU slots to wait for (nnodes x n_gpus_per_node)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before giving up (exit 1)")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.gpus < 0 or not args.timeout > 0:
        parser.error(f"--nodes={args.nodes} must be >= 1, --gpus={args.gpus} >= 0, --timeout={args.timeout} > 0")
    try:
        nodes, gpus = wait_for_nodes(args.address, args.nodes, args.gpus, args.timeout)
    except TimeoutError as e:
        print(f"[gdpo-verl] {e}", file=sys.stderr, flush=True)
        return 1
    print(f"[gdpo-verl] Ray cluster ready: {nodes} nodes, {gpus:g} GPU slots", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
