"""`python -m zoo.bench.compressed_decode [--record DIR]`: why compressed weights decode
slowly on this runtime, and which encoding of the same 4-bit weights does not.

One 4096 x 1024 projection, each way in a process of its own: coreai-opt's presets
(`zoo.lab.compression.projection_profile`: fp32, int8, int4-block32) and the same
int4-block32 codes, scales and minimums encoded with ordinary graph operations
(`zoo.lab.encodings`). Per row: asset bytes, the warm call's median ms, the runtime
profiler's most expensive op. A number of this machine's Linux CPU runtime, not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

from zoo.core.isolate import run_isolated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", default=None, help="write bench-compressed-decode.json here")
    args = parser.parse_args(argv)
    from zoo.lab.compression import projection_profile
    from zoo.lab.encodings import ENCODINGS, encoding_row

    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for preset in ("fp32", "int8", "int4-block32"):
            got = run_isolated(projection_profile, preset, workdir, timeout=600)
            row = got.result if got.ok else {"outcome": got.summary()}
            rows.append(
                {
                    "encoding": f"coreai-opt {preset}",
                    "asset bytes": row.get("asset bytes"),
                    "warm ms (median)": row.get("warm ms (median of 20)"),
                    # coreai-opt's own codes: what its eager module computes (quality records)
                    "max abs vs dequantized": None,
                    "most expensive op": row.get("most expensive op", row.get("outcome")),
                    "its share": row.get("its share"),
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        for name in ENCODINGS:
            got = run_isolated(encoding_row, name, workdir, timeout=600)
            rows.append(got.result if got.ok else {"encoding": name, "outcome": got.summary()})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    results = {"projection": "4096 x 1024, one token", "rows": rows}
    if args.record:
        from zoo.core.io.records import write_record

        print(f"wrote {write_record(args.record, 'bench-compressed-decode', results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
