"""Dropout in .train() outside autograd (under no_grad, or nothing requiring grad): torch's
dropout fills an empty tensor with bernoulli_ in place, lowered with latch's graph random
numbers. A run seeded with torch.manual_seed draws the same mask sequence every time, another
seed other masks, each call a new mask, and the fraction dropped is p; the kept values are
scaled by 1 / (1 - p). Lazy mode draws its masks in latch too."""
import torch

import latch.torch as lt


def masks(seed, calls=3, p=0.3):
    torch.manual_seed(seed)
    c = lt.compile(torch.nn.Sequential(torch.nn.Linear(100, 100), torch.nn.Dropout(p)).train())
    x = torch.randn(200, 100)
    with torch.no_grad():
        return [c(x) == 0 for _ in range(calls)], c


def test_seeded_runs_draw_the_same_mask_sequence():
    first, c = masks(0)
    again, _ = masks(0)
    other, _ = masks(1)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not any(torch.equal(a, b) for a, b in zip(first, other))
    assert not torch.equal(first[0], first[1])  # each call draws a new mask
    assert c._latch_compiled.eager_ops == [] and c.stats()["traces"] == 1


def test_fraction_dropped_and_scale():
    torch.manual_seed(0)
    c = lt.compile(torch.nn.Dropout(0.25).train())
    with torch.no_grad():
        out = c(torch.ones(400, 250))
    dropped = (out == 0).double().mean().item()
    # 100000 draws: the standard deviation of the fraction is sqrt(0.25 * 0.75 / 1e5) = 0.0014
    assert abs(dropped - 0.25) < 0.01
    kept = out[out != 0]
    assert torch.allclose(kept, torch.full_like(kept, 1 / 0.75))


def test_lazy_dropout_draws_in_latch():
    before = sum(lt.lazy.eager_ops.values())
    torch.manual_seed(0)
    out = torch.nn.functional.dropout(lt.lazy.tensor(torch.ones(300, 100)), 0.4, training=True).cpu()
    assert sum(lt.lazy.eager_ops.values()) == before  # nothing ran eagerly
    assert abs((out == 0).double().mean().item() - 0.4) < 0.02
