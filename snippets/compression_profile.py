"""Why compressed weights are slow on the Linux CPU runtime: one 4096 x 1024
projection per preset, exported alone, timed warm and profiled.

Run: python snippets/compression_profile.py [--record DIR]
"""

# --8<-- [start:profile]
import tempfile

from zoo import run_isolated
from zoo.lab.compression import projection_profile

rows = []
for preset in ("fp32", "int8", "int4-block32", "palettize4"):
    with tempfile.TemporaryDirectory() as workdir:  # the assets go when timed
        outcome = run_isolated(
            projection_profile, preset, workdir, timeout=600
        )
    assert outcome.ok, f"{preset}: {outcome.summary()}\n{outcome.detail}"
    row = outcome.result
    rows.append(row)
    warm, top = row["warm ms (median of 20)"], row["most expensive op"]
    print(f"{preset:13} warm {warm:>7} ms  top op {top} ({row['its share']})")
# --8<-- [end:profile]

import sys

if __name__ == "__main__" and "--record" in sys.argv:
    from zoo import write_record

    directory = sys.argv[sys.argv.index("--record") + 1]
    record = write_record(directory, "compression-profile", {"rows": rows})
    print(f"wrote {record}")
