"""latch as a torch.compile backend: backend(gm, example_inputs) takes the fx.GraphModule
TorchDynamo hands a backend and returns the callable Dynamo calls instead of it. The
pyproject's torch_dynamo_backends entry point registers it under the name "latch", so
PyTorch 2 users write torch.compile(model, backend="latch"); under PyTorch 1.13 it takes the
GraphModules of make_fx and torch.fx.symbolic_trace the same way.

The GraphModule is compiled as any module is (latch.torch.compile: traced again with make_fx
at the first call, so its ops reach latch as aten ops); an op latch does not lower makes that
graph run as the GraphModule itself, which is what Dynamo expects of a backend that declines."""
import torch

from .api import compile


def backend(gm, example_inputs, **options):
    """The callable to run in place of gm. example_inputs (the tensors Dynamo traced with)
    are not needed: latch traces at the first call and guards every call after. options are
    compile()'s keywords (fullgraph, dynamic, mode, options)."""
    if not isinstance(gm, torch.nn.Module):
        raise TypeError(f"latch.torch.backend: expected an fx.GraphModule, not {type(gm).__name__}")
    del example_inputs
    return compile(gm, **options)
