"""The KV-write isolation matrix on the platform it runs on.

The same attention block is exported once per write formulation; each one is
exported and decoded for 8 steps in a process of its own, and compared with
torch eager (every output, and the final caches). Run:

    python snippets/kv_write_matrix.py                # print the table
    python snippets/kv_write_matrix.py --record DIR   # and write a record
    python snippets/kv_write_matrix.py --latency DIR  # per-step latency
"""

import sys

# --8<-- [start:matrix]
from zoo.lab.kv_cells import CELLS
from zoo.lab.kv_matrix import run_matrix

cells = [name for name in CELLS if name != "ring-buffer"]
rows = run_matrix(cells, steps=8)
for row in rows:
    print(f"{row['formulation']:<66} {row['outcome']}")
# --8<-- [end:matrix]


def record_latency(directory: str) -> None:
    """Per-step latency vs context position at a real width, per strategy."""
    from zoo import run_isolated, write_record
    from zoo.lab.kv_matrix import REAL_WIDTH, measure_latency

    positions = [1, 16, 128, 512, 1024, 2046]
    latency = []
    for name, strategy in CELLS.items():
        if strategy.isolation_only or name == "runtime-index-dynamic":
            continue
        outcome = run_isolated(measure_latency, name, positions, timeout=900)
        if not outcome.ok:
            raise SystemExit(f"{name}: {outcome.summary()}\n{outcome.detail}")
        latency += outcome.result
        print(f"{name}: {outcome.result}", flush=True)
    shape = {
        "hidden": REAL_WIDTH.hidden,
        "heads": REAL_WIDTH.heads,
        "kv_heads": REAL_WIDTH.kv_heads,
        "head_dim": REAL_WIDTH.head_dim,
        "capacity": REAL_WIDTH.capacity,
    }
    results = {"shape": [shape], "latency": latency}
    print(f"wrote {write_record(directory, 'kv-latency', results)}")


if __name__ == "__main__":
    from zoo import write_record

    if "--record" in sys.argv:
        directory = sys.argv[sys.argv.index("--record") + 1]
        record = write_record(directory, "kv-write-matrix", {"outcomes": rows})
        print(f"wrote {record}")
    if "--latency" in sys.argv:
        record_latency(sys.argv[sys.argv.index("--latency") + 1])
