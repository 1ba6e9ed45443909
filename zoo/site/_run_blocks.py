"""Child process of the page harness: run a page's python blocks in order, one namespace."""

from __future__ import annotations

import ast
import json
import sys
import time
import traceback
from pathlib import Path


def main(plan_path: str, result_path: str) -> int:
    blocks = json.loads(Path(plan_path).read_text())
    result = Path(result_path)
    namespace: dict = {"__name__": "__main__"}
    report: dict = {"executed": 0, "failed": None, "last_started": None, "seconds": {}}
    for block in blocks:
        report["last_started"] = block["index"]
        result.write_text(json.dumps(report))  # survives a crash of this process
        started = time.perf_counter()
        try:
            tree = ast.parse(block["source"], filename=block["filename"])
            ast.increment_lineno(tree, block["first_lineno"] - 1)
            exec(compile(tree, block["filename"], "exec"), namespace)
        except BaseException as exc:  # noqa: BLE001 - report everything, SystemExit included
            report["failed"] = block["index"]
            report["error"] = f"{type(exc).__name__}: {exc}"
            # Drop this file's own frame: the traceback starts in the page or the snippet.
            report["traceback"] = "".join(
                traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next)
            )
            result.write_text(json.dumps(report))
            return 1
        report["seconds"][block["index"]] = round(time.perf_counter() - started, 3)
        report["executed"] += 1
    result.write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
