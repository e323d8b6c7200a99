"""latch.torch.compile's guards on what a graph depends on besides its tensors: each case
changes one thing after a warm call and compares with eager PyTorch on the same module (a
graph that kept running would give the old answer), then checks that the change traced
again, or that an equal value in another object did not."""
import pytest
import torch
from torch import nn

import latch.torch as lt
from conftest import close

SCALE = 2.0  # a global the traced function reads


class Branchy(nn.Module):
    """Reads its training flag and plain attributes of every kind in forward."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale, self.shift, self.mode, self.flip, self.pads = 2.0, 1, "add", False, (1, 2)

    def forward(self, x):
        y = self.lin(x) * self.scale
        y = y + self.shift if self.mode == "add" else y - self.shift
        if self.flip:
            y = -y
        y = y + sum(self.pads)
        return y * 3 if self.training else y


def run_twice(c, x):
    c(x)
    return c(x)


def x4():
    torch.manual_seed(1)
    return torch.randn(3, 4)


def compiled_branchy():
    torch.manual_seed(0)
    m = Branchy().eval()
    c = lt.compile(m)
    x = x4()
    with torch.no_grad():
        close(run_twice(c, x), m(x))
    return m, c, x


@pytest.mark.parametrize("change", [
    lambda m: m.train(),
    lambda m: setattr(m, "scale", 0.5),
    lambda m: setattr(m, "shift", 7),
    lambda m: setattr(m, "mode", "sub"),
    lambda m: setattr(m, "flip", True),
    lambda m: setattr(m, "pads", (3, 4)),
], ids=["training", "float", "int", "str", "bool", "tuple"])
def test_module_attribute_change_retraces(change):
    m, c, x = compiled_branchy()
    change(m)
    with torch.no_grad():
        close(run_twice(c, x), m(x))
    assert c.stats()["traces"] == 2, c.stats()


def test_submodule_training_flag():
    """Only a nested module switched to training: the outer graph must not keep its eval
    branch."""
    torch.manual_seed(0)
    inner = Branchy().eval()
    m = nn.Sequential(nn.Linear(4, 4), inner).eval()
    c = lt.compile(m)
    x = x4()
    with torch.no_grad():
        run_twice(c, x)
        inner.train()
        close(c(x), m(x))


def test_equal_value_in_another_object_keeps_the_graph():
    m, c, x = compiled_branchy()
    m.scale = float("2.0")  # another float object, the same value
    m.pads = tuple([1, 2])
    with torch.no_grad():
        close(run_twice(c, x), m(x))
    assert c.stats()["traces"] == 1, c.stats()


def test_back_to_an_earlier_state_takes_its_graph():
    m, c, x = compiled_branchy()
    with torch.no_grad():
        m.train()
        close(run_twice(c, x), m(x))
        m.eval()
        close(run_twice(c, x), m(x))
    assert c.stats()["traces"] == 2, c.stats()


def test_submodule_replaced():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    c = lt.compile(m)
    x = x4()
    with torch.no_grad():
        run_twice(c, x)
        m[0] = nn.Linear(4, 8)  # the same shapes, another object
        close(c(x), m(x))
        m[2] = nn.Linear(8, 5)  # another output size
        close(c(x), m(x))
        m[1] = nn.Tanh()  # another kind of layer, no parameters
        close(c(x), m(x))


def test_parameter_resized_and_buffer_replaced():
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(4))
            self.register_buffer("offset", torch.zeros(4))

        def forward(self, x):
            return x * self.w + self.offset

    m = Scaled()
    c = lt.compile(m)
    x = x4()
    with torch.no_grad():
        run_twice(c, x)
        m.offset = torch.full((4,), 3.0)
        close(c(x), m(x))
        m.w = nn.Parameter(torch.full((1,), 2.0))  # broadcast from one element now
        close(c(x), m(x))
        m.w = None  # no parameter: forward fails as in eager
        with pytest.raises(TypeError):
            m(x)
        with pytest.raises(TypeError):
            c(x)


def test_parameter_added():
    class Maybe(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            y = self.lin(x)
            return y * self.gain if hasattr(self, "gain") else y

    m = Maybe()
    c = lt.compile(m)
    x = x4()
    with torch.no_grad():
        run_twice(c, x)
        m.gain = nn.Parameter(torch.full((4,), 5.0))
        close(c(x), m(x))


def test_forward_hook_registered():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4)).eval()
    c = lt.compile(m)
    x = x4()
    with torch.no_grad():
        run_twice(c, x)
        handle = m[0].register_forward_hook(lambda mod, inp, out: out * 10)
        close(c(x), m(x))
        handle.remove()
        close(c(x), m(x))


def test_requires_grad_of_an_input():
    def f(x):
        return x * 2 if x.requires_grad else x + 3

    c = lt.compile(f)
    x = torch.ones(3)
    with torch.no_grad():
        assert run_twice(c, x).tolist() == [4.0] * 3
        assert run_twice(c, x.requires_grad_()).tolist() == [2.0] * 3


def test_requires_grad_of_a_parameter():
    class Frozen(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))

        def forward(self, x):
            return x * 2 if self.w.requires_grad else x + 3

    m = Frozen()
    c = lt.compile(m)
    x = torch.ones(3)
    with torch.no_grad():
        assert run_twice(c, x).tolist() == [2.0] * 3
        m.w.requires_grad_(False)
        assert run_twice(c, x).tolist() == [4.0] * 3


def test_grad_mode():
    def f(x):
        return x * 2 if torch.is_grad_enabled() else x + 3

    c = lt.compile(f)
    x = torch.ones(3)
    with torch.no_grad():
        assert run_twice(c, x).tolist() == [4.0] * 3
    assert run_twice(c, x).tolist() == [2.0] * 3
    with torch.no_grad():
        assert run_twice(c, x).tolist() == [4.0] * 3
    assert c.stats()["traces"] == 2


def test_closure_cell():
    k = 2.0

    def f(x):
        return x * k

    c = lt.compile(f)
    x = torch.ones(3)
    assert run_twice(c, x).tolist() == [2.0] * 3
    k = 5.0
    assert run_twice(c, x).tolist() == [5.0] * 3


def test_closure_tensor_updated_in_place():
    w = torch.ones(3)

    def f(x):
        return x * w

    c = lt.compile(f)
    x = torch.arange(3.0)
    assert run_twice(c, x).tolist() == [0.0, 1.0, 2.0]
    w.mul_(4)
    assert run_twice(c, x).tolist() == [0.0, 4.0, 8.0]


def test_global():
    global SCALE

    def f(x):
        return x * SCALE

    c = lt.compile(f)
    x = torch.ones(3)
    try:
        assert run_twice(c, x).tolist() == [2.0] * 3
        SCALE = 3.0
        assert run_twice(c, x).tolist() == [3.0] * 3
    finally:
        SCALE = 2.0
