"""Child process of `zoo.site.recipes`: run a recipe as `python RECIPE ARGS...` would, and
record what each of its sections printed.

Every write to stdout is also passed through to the real stdout, and attributed to the
section that is running: the innermost line of the recipe file on the stack that lies
inside a `# --8<-- [start:NAME]` ... `[end:NAME]` pair (so a function defined outside the
sections prints into the section that calls it).
"""

from __future__ import annotations

import json
import runpy
import sys
import time
import traceback
from pathlib import Path

from zoo.site.recipes import read_sections


class SectionStdout:
    def __init__(self, recipe: str, sections: dict[str, tuple[int, int]], real) -> None:
        self.recipe, self.real = recipe, real
        # innermost first: a section nested in another wins
        self.sections = sorted(sections.items(), key=lambda item: item[1][1] - item[1][0])
        self.printed: dict[str, list[str]] = {name: [] for name in sections}

    def _section(self) -> str | None:
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_filename == self.recipe:
                line = frame.f_lineno
                for name, (start, end) in self.sections:
                    if start < line < end:
                        return name
            frame = frame.f_back
        return None

    def write(self, text: str) -> int:
        name = self._section()
        if name is not None:
            self.printed[name].append(text)
        return self.real.write(text)

    def flush(self) -> None:
        self.real.flush()

    def __getattr__(self, name):  # isatty, encoding, fileno ...: the real stream's
        return getattr(self.real, name)


def main(recipe: str, result_path: str, *arguments: str) -> int:
    recipe = str(Path(recipe).resolve())
    sections = read_sections(Path(recipe))
    stdout = SectionStdout(recipe, sections, sys.stdout)
    report: dict = {"ok": False, "error": None, "seconds": None}
    started = time.perf_counter()
    sys.argv = [recipe, *arguments]
    sys.stdout = stdout
    try:
        runpy.run_path(recipe, run_name="__main__")
        report["ok"] = True
    except SystemExit as exc:  # a recipe may end with sys.exit(0)
        report["ok"] = exc.code in (None, 0)
        if not report["ok"]:
            report["error"] = f"SystemExit: {exc.code}"
    except BaseException as exc:  # noqa: BLE001 - every failure is reported
        report["error"] = f"{type(exc).__name__}: {exc}"
        # Drop runpy's frames: the traceback starts in the recipe.
        frames = exc.__traceback__
        while frames is not None and frames.tb_frame.f_code.co_filename != recipe:
            frames = frames.tb_next
        report["traceback"] = "".join(
            traceback.format_exception(type(exc), exc, frames or exc.__traceback__)
        )
        in_recipe = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == recipe]
        report["failed_line"] = in_recipe[-1].lineno if in_recipe else None
    finally:
        sys.stdout = stdout.real
    report["seconds"] = round(time.perf_counter() - started, 2)
    report["sections"] = {name: "".join(parts) for name, parts in stdout.printed.items()}
    Path(result_path).write_text(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
