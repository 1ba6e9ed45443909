"""The test session's export cache (zoo.core.export.session_cache): a key that tells apart whatever
changes the asset, and an identical export copied instead of converted again."""

from __future__ import annotations

import json
import tempfile

import numpy as np
import pytest
import torch
from torch import nn

from zoo.core.export.convert import EntryPoint, export
from zoo.core.export.session_cache import CACHE_ENV, LOG_NAME, _class_identity, export_key, summary
from zoo.core.host.runtime import Model

pytestmark = pytest.mark.export  # the suite's tiers: pyproject.toml's markers


class Norm(nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.arange(4.0)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class NormSquared(Norm):
    """The same weights and attributes, another graph (as the lab's KV-write cells are)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) ** 2


class Scaled(nn.Module):
    def __init__(self, scale) -> None:
        super().__init__()
        self.scale = scale  # a function the forward calls

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale(x)


def key_of(module: nn.Module, **entry) -> str:
    entry = {"input_names": ["x"], "output_names": ["y"], **entry}
    point = EntryPoint("main", module, (torch.ones(1, 4),), **entry)
    return export_key([point], None, None)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "exports"))
    (tmp_path / "exports").mkdir()
    return tmp_path / "exports"


def test_the_key_tells_apart_what_changes_the_asset(cache):
    same = key_of(Norm())
    assert key_of(Norm()) == same  # built again: the same key
    changed = Norm()
    with torch.no_grad():
        changed.weight[0] = 0.5
    different = [
        key_of(changed),  # one weight
        key_of(Norm(eps=1e-5)),  # an attribute the forward reads
        key_of(NormSquared()),  # another forward over the same weights
        key_of(Norm(), output_names=["z"]),  # a name
        key_of(Norm(), program_pass=lambda program: program),  # a rewrite of the program
        key_of(Scaled(lambda x: x * 2)),
        key_of(Scaled(lambda x: x * 3)),  # a constant in a function's code
    ]
    assert len({same, *different}) == 1 + len(different)
    factor = 2.0
    closure = key_of(Scaled(lambda x: x * factor))
    factor = 3.0
    assert key_of(Scaled(lambda x: x * factor)) != closure  # a value a closure holds


def test_classes_without_a_file_are_told_apart_by_their_code(cache):
    """A page's or a notebook's blocks define classes no file holds: the same name, another
    forward, another key."""

    def defined(body: str) -> nn.Module:
        namespace = {"nn": nn, "__name__": "__main__"}
        source = f"class Block(nn.Module):\n    def forward(self, x):\n        return {body}\n"
        exec(source, namespace)
        return namespace["Block"]()

    assert key_of(defined("x * 2")) == key_of(defined("x * 2"))
    assert key_of(defined("x * 2")) != key_of(defined("x * 3"))


def test_a_class_of_a_file_is_keyed_alike_whatever_patched_it(monkeypatch):
    """Libraries patch torch's classes as they run (transformers adds
    `nn.Module.smart_apply` when it builds a model): a class a file holds is its file,
    not its methods as patched."""
    identity = _class_identity.__wrapped__  # uncached: read again after the patch
    before = identity(nn.Linear)
    monkeypatch.setattr(nn.Module, "patched_by_a_library", lambda self: None, raising=False)
    assert identity(nn.Linear) == before


def test_no_key_outside_a_test_session_or_for_what_cannot_be_read_as_data(cache, monkeypatch):
    with tempfile.TemporaryDirectory() as held:
        module = Norm()
        module.store = tempfile.TemporaryDirectory(dir=held)  # a handle, not data
        assert key_of(module) is None
    logged = [json.loads(line) for line in (cache / LOG_NAME).read_text().splitlines()]
    assert "TemporaryDirectory" in logged[-1]["uncacheable"]
    monkeypatch.delenv(CACHE_ENV)
    assert key_of(Norm()) is None  # a user's export: never cached


def test_an_identical_export_is_copied_and_computes_the_same(cache, tmp_path):
    def export_norm(path, module):
        return export(module, (torch.ones(1, 4),), path, input_names=["x"], output_names=["y"])

    first = export_norm(tmp_path / "first.aimodel", Norm())
    second = export_norm(tmp_path / "second.aimodel", Norm())
    other = export_norm(tmp_path / "other.aimodel", Norm(eps=0.5))
    log = [json.loads(line) for line in (cache / LOG_NAME).read_text().splitlines()]
    assert [(line["asset"], line["hit"]) for line in log] == [
        ("first.aimodel", False),
        ("second.aimodel", True),
        ("other.aimodel", False),
    ]
    assert summary(cache).startswith("3 exports: 2 converted, 1 copied from an identical one")
    x = np.array([[1.0, -2.0, 3.0, 0.5]], np.float32)
    want = Norm()(torch.from_numpy(x)).detach().numpy()

    def run(asset):
        with Model.load(asset) as model:
            return model.function("main")({"x": x})["y"]

    for asset in (first, second):
        np.testing.assert_allclose(run(asset), want, rtol=1e-5)
    assert not np.allclose(run(other), want)
    with pytest.raises(FileExistsError, match="already exists"):  # a hit is refused alike
        export_norm(second, Norm())
