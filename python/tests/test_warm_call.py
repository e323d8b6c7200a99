"""latch.torch.compile's warm call in C (python/src/compiled.c) and results handed to torch
through DLPack (python/src/to_torch.c): the results own latch's memory (valid after the
compiled object and the inputs are gone) and give it back when freed, on any thread; every
dtype torch has comes back as itself; the Python paths the C call hands to (first call,
keywords, a fallback while retracing, outputs in a structure) and calls from several
threads at once. Expected values are worked by hand."""
import gc
import sys
import threading

import pytest
import torch

import latch
import latch.torch as lt
from latch import _latch
from conftest import close


def warm(c, *args):
    """Calls c twice (trace, then a hit) and returns the hit's result."""
    c(*args)
    before = c.stats()["hits"]
    out = c(*args)
    assert c.stats()["hits"] == before + 1
    return out


def test_result_outlives_compiled_and_inputs():
    c = lt.compile(lambda x: x * 2 + 1)
    x = torch.arange(6.0).reshape(2, 3)
    y = warm(c, x)
    del c, x
    gc.collect()
    junk = [torch.full((2, 3), 7.0) for _ in range(50)]  # memory freed by now would be reused
    assert y.tolist() == [[1.0, 3.0, 5.0], [7.0, 9.0, 11.0]]
    assert all(j.tolist() == [[7.0] * 3] * 2 for j in junk)


def test_result_releases_latch_memory_when_freed():
    """An output that is the input itself: the torch result views the lent tensor, so latch
    holds one reference to it while the result lives and none after (the DLPack deleter ran)."""
    c = lt.compile(lambda x: x)
    x = torch.tensor([1.0, 2.0, 3.0])
    c(x)
    base = sys.getrefcount(x)
    y = c(x)
    assert sys.getrefcount(x) == base + 1
    assert y.data_ptr() == x.data_ptr() and y.tolist() == [1.0, 2.0, 3.0]
    del y
    gc.collect()
    assert sys.getrefcount(x) == base


def test_result_freed_on_another_thread():
    c = lt.compile(lambda x: x)
    x = torch.tensor([5.0])
    c(x)
    base = sys.getrefcount(x)
    box = [c(x)]
    t = threading.Thread(target=box.clear)
    t.start()
    t.join()
    gc.collect()
    assert sys.getrefcount(x) == base


@pytest.mark.parametrize("dtype", [torch.bool, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
                                   torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_to_torch_keeps_dtype_shape_and_values(dtype):
    src = torch.tensor([[0, 1, 1], [1, 0, 1]], dtype=dtype)
    out = _latch.to_torch(_latch.from_torch(src))
    assert out.dtype == dtype and out.shape == (2, 3)
    assert out.tolist() == [[0, 1, 1], [1, 0, 1]]
    assert out.is_contiguous() and out.stride() == (3, 1)


@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (1, 1, 4)])
def test_to_torch_scalar_and_empty_shapes(shape):
    src = torch.full(shape, 2.5)
    out = _latch.to_torch(_latch.from_torch(src))
    assert out.shape == shape and out.tolist() == src.tolist()


def test_to_torch_of_a_dtype_torch_lacks():
    u16 = _latch.cast(_latch.from_torch(torch.ones(2)), 7)  # latch_dtype LATCH_U16
    with pytest.raises(latch.Unsupported, match="u16 has no torch dtype"):
        _latch.to_torch(u16)


def test_to_torch_needs_a_latch_tensor():
    with pytest.raises(TypeError, match="latch Tensor"):
        _latch.to_torch(torch.ones(1))


def test_structured_outputs_go_through_pack():
    c = lt.compile(lambda x: (x + 1, [x * 2, 3], {"neg": -x}))
    out = warm(c, torch.tensor([1.0, 2.0]))
    assert out[0].tolist() == [2.0, 3.0]
    assert out[1][0].tolist() == [2.0, 4.0] and out[1][1] == 3
    assert out[2]["neg"].tolist() == [-1.0, -2.0]


def test_keywords_are_guarded_constants():
    c = lt.compile(lambda x, scale=1.0: x * scale)
    assert c(torch.ones(2), scale=3.0).tolist() == [3.0, 3.0]
    assert c(torch.ones(2), scale=3.0).tolist() == [3.0, 3.0]
    assert c(torch.ones(2), scale=4.0).tolist() == [4.0, 4.0]  # another value: another trace
    assert c(torch.ones(2)).tolist() == [1.0, 1.0]
    assert c.eager_reason is None and len(c.variants) == 2


def test_non_tensor_on_the_warm_path_is_a_constant():
    c = lt.compile(lambda x: x + 1)
    c(torch.ones(1))
    assert c(3) == 4
    assert c(torch.ones(1)).tolist() == [2.0]


def test_retrace_with_an_op_latch_lacks_splits(capfd):
    """The first shape lowers; a new shape traces a graph with i0: the C call hands the
    Unsupported to _unsupported, which runs the graph as compiled parts around the op."""
    def f(x):
        return torch.special.i0(x) if x.shape[0] > 2 else x + 1

    c = lt.compile(f, dynamic=False)
    assert c(torch.ones(2)).tolist() == [2.0, 2.0]
    close(c(torch.zeros(3)), [1.0] * 3)
    close(c(torch.zeros(4)), [1.0] * 4)
    assert c(torch.ones(2)).tolist() == [2.0, 2.0]
    assert c.function is None and c.eager_reason is None
    assert capfd.readouterr().err.count("aten.i0.default is not lowered") == 1


def test_function_slot_takes_a_function_or_none():
    c = lt.compile(lambda x: x)
    with pytest.raises(TypeError, match="latch Function or None"):
        c.function = 3
    c.function = None
    assert c.function is None


def test_threads_calling_one_compiled_function():
    """Four threads, each its own batch sizes (a trace per size): traces in one thread wait
    for another's without holding the GIL, so none hangs; every value is right."""
    c = lt.compile(lambda x: x.sum(0) * 2, dynamic=False)
    errors = []

    def work(k):
        try:
            for n in range(1, 6):
                rows = 4 * n + k
                assert c(torch.ones(rows, 3)).tolist() == [2.0 * rows] * 3
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a call hung"
    assert errors == []


class _OnCpuInName(torch.Tensor):
    """A tensor type whose is_cpu says False: a lend must ask this type, not torch's getter."""

    @property
    def is_cpu(self):
        return False


class _ShapeByGetattribute(torch.Tensor):
    """A tensor type that answers shape through __getattribute__: read the generic way."""

    def __getattribute__(self, name):
        if name == "shape":
            return torch.Size([1])
        return super().__getattribute__(name)


def test_lending_reads_each_tensor_types_own_attributes():
    """The lend calls torch's attribute getters directly for a type it has seen (python/src/
    tensor.c, read_attr); a subclass's own descriptor, a __getattribute__ and a change to the
    class since are each seen, as plain attribute access would see them."""
    x = torch.tensor([1.0, 2.0])
    assert _latch.from_torch(x).shape == (2,)  # torch.Tensor learned
    with pytest.raises(ValueError, match="device"):
        _latch.from_torch(x.as_subclass(_OnCpuInName))
    assert _latch.from_torch(x).shape == (2,)  # and back
    assert _latch.from_torch(torch.ones(3).as_subclass(_ShapeByGetattribute)).shape == (1,)
    original = torch.Tensor.is_cpu
    try:
        torch.Tensor.is_cpu = property(lambda self: False)  # the class changed: looked up again
        with pytest.raises(ValueError, match="device"):
            _latch.from_torch(x)
    finally:
        torch.Tensor.is_cpu = original
    assert _latch.from_torch(x).shape == (2,)
    c = lt.compile(lambda x: x + 1)
    assert warm(c, x).tolist() == [2.0, 3.0]
