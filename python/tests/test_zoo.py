"""A fast subset of the zoo (latch/zoo.py) at small sizes: each compiles whole, as one latch
graph, and matches eager within latch's accuracy rule (the whole list at 224: `make
check-torch-zoo`)."""
import pytest

from latch import zoo

FAST = [("mobilenet_v3_small", 32), ("efficientnet_b0", 32), ("shufflenet_v2_x0_5", 32), ("resnet18", 32),
        ("swin_t", 32)] + [(name, 6) for name in zoo.SEQUENCE]


@pytest.mark.parametrize("name,size", FAST)
def test_compiles_whole_and_matches_eager(name, size):
    r = zoo.check(name, size)
    assert r["whole"] and r["parts"] == 0 and r["reason"] is None, r
    assert r["shapes_match"] and r["diff"] <= 1e-3, r
