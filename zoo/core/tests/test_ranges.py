"""Layer ranges (zoo.core.export.ranges): how a decoder is cut, and which entries can be."""

from __future__ import annotations

import pytest
import torch

from zoo.core.export.ranges import check_splittable, split_layers
from zoo.core.model.entry import get_entry

pytestmark = pytest.mark.unit  # the suite's tiers: pyproject.toml's markers


def test_ranges_cover_every_layer_once_and_hold_at_most_n():
    for layers in (1, 2, 18, 30, 35):
        for per_function in (1, 2, 7, 8, 40):
            ranges = split_layers(layers, per_function)
            assert [start for start, _ in ranges] == [0] + [stop for _, stop in ranges[:-1]]
            assert ranges[-1][1] == layers
            assert all(0 < stop - start <= per_function for start, stop in ranges)
    assert split_layers(35, 8) == [[0, 7], [7, 14], [14, 21], [21, 28], [28, 35]]


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8"])
def test_a_range_size_that_is_not_a_whole_number_is_refused(bad):
    with pytest.raises(ValueError, match="whole number >= 1"):
        split_layers(30, bad)


def test_every_entry_can_be_cut_and_a_decoder_that_cannot_says_so_by_name():
    from zoo.core.model.entry import all_entries

    for name in all_entries():
        check_splittable(get_entry(name).model)

    class Opaque(torch.nn.Module):
        name = "opaque"

    with pytest.raises(ValueError, match="opaque: layer ranges are not exported"):
        check_splittable(Opaque)
