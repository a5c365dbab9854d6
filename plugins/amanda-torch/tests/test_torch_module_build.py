"""``build_module`` makes the same GraphModule whichever way it builds it: with its graph (few tensors: the
GraphModule copies them and the copies are replaced) or around an empty graph given its own after (many tensors:
nothing copied)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import amanda_torch.module as module_mod  # noqa: E402
from amanda_torch.program import Attr, Call, Program, Ref  # noqa: E402


def program(n: int) -> Program:
    """``x`` plus ``n`` tensors in turn: parameters in nested modules, a buffer kept out of the state dict, a
    persistent buffer and a top-level constant among them."""
    p = Program("amanda/pytorch/2.13.0")
    rng = np.random.default_rng(0)
    for i in range(n):
        kind, target, persistent = "parameter", f"block{i % 3}.layer{i}.weight", True
        if i == 1:
            kind, target = "buffer", "stats.running_mean"
        elif i == 2:
            kind, target, persistent = "buffer", "stats.scratch", False
        elif i == 3:
            kind, target = "constant", "_const_shift"
        p.attrs.append(Attr(target, rng.standard_normal(4).astype(np.float32), kind, Ref(f"w{i}"),
                            persistent=persistent, op=f"w{i}"))
    p.inputs.append(("x", Ref("x"), None))
    prev = Ref("x")
    for i in range(n):
        p.calls.append(Call(torch.ops.aten.add.Tensor, "aten::add.Tensor", (prev, Ref(f"w{i}")), {}, Ref(f"a{i}")))
        prev = Ref(f"a{i}")
    p.outputs.append(("y", prev, None))
    return p


def described(m: Any) -> tuple[Any, ...]:
    return (m.code, list(m.state_dict()), [n for n, _ in m.named_parameters()], [n for n, _ in m.named_buffers()],
            [n for n, _ in m.named_modules()], sorted(m._non_persistent_buffers_set),
            sorted(k for k in m.__dict__ if not k.startswith("_") or k.startswith("_const")), m.meta)


@pytest.mark.parametrize("n", [4, 12])
def test_both_ways_build_the_same_module(monkeypatch: Any, n: int) -> None:
    p = program(n)
    monkeypatch.setattr(module_mod, "COPY_LIMIT", 10**6)
    with_graph = module_mod.build_module(p)
    monkeypatch.setattr(module_mod, "COPY_LIMIT", -1)
    empty_first = module_mod.build_module(p)
    assert described(with_graph) == described(empty_first)
    assert "stats.scratch" not in with_graph.state_dict() and "stats.running_mean" in with_graph.state_dict()
    x = torch.arange(4, dtype=torch.float32)
    want = x + sum(torch.from_numpy(a.value) for a in p.attrs)
    for m in (with_graph, empty_first):
        torch.testing.assert_close(m(x), want)
        assert all(t.data_ptr() == torch.from_numpy(a.value).data_ptr()  # the graph's arrays, not copies
                   for a, t in zip(p.attrs, [m.get_parameter(a.target) if a.kind == "parameter" else
                                              m.get_buffer(a.target) if a.kind == "buffer" else
                                              getattr(m, a.target) for a in p.attrs]))


def test_registering_without_the_public_calls_builds_what_they_build() -> None:
    """Submodules, parameters and buffers of a plain Module are stored directly when the public calls' checks are
    known to pass; with a global registration hook set, the public calls run (and report each registration)."""
    import copy

    from torch.nn.modules import module as nn_module

    p = program(12)
    direct = module_mod.build_module(p)
    seen: list[tuple[str, str]] = []
    handles = [nn_module.register_module_module_registration_hook(lambda m, n, s: seen.append(("module", n))),
               nn_module.register_module_parameter_registration_hook(lambda m, n, t: seen.append(("param", n))),
               nn_module.register_module_buffer_registration_hook(lambda m, n, t: seen.append(("buffer", n)))]
    try:
        public = module_mod.build_module(p)
    finally:
        for h in handles:
            h.remove()
    assert ("param", "weight") in seen and ("buffer", "running_mean") in seen and ("module", "block0") in seen
    assert described(direct) == described(public)
    fresh = set(vars(torch.nn.Module()))
    for m in (direct, public):
        for name, sub in m.named_modules():
            if name:
                assert set(vars(sub)) == fresh, name  # every attribute Module.__init__ sets, nothing else
        m.eval()
        assert not any(s.training for s in m.modules())
        clone = copy.deepcopy(m)
        assert [n for n, _ in clone.named_parameters()] == [n for n, _ in m.named_parameters()]
        torch.testing.assert_close(clone(torch.zeros(4)), m(torch.zeros(4)))
        clone.to(torch.float64)  # reaches every submodule's parameters and buffers
        assert {t.dtype for t in clone.state_dict().values()} == {torch.float64}


@pytest.mark.parametrize("targets, error", [
    (["mro.weight", "__name__.bias", "training_.w"], None),  # names a plain Module's class or metaclass has
    (["w", "w.x"], "w is already a tensor"),
    (["a.b.c", "a.b"], "it is already a submodule"),
    (["training.w"], "training is already a tensor"),
])
def test_tensor_names_and_their_clashes(targets: list[str], error: str | None) -> None:
    root = torch.nn.Module()
    run = []
    for i, target in enumerate(targets):
        run.append(lambda t=target, i=i: module_mod.install_tensor(
            root, Attr(t, np.zeros(2, np.float32), "parameter", Ref(f"r{i}"), op=f"op{i}"),
            torch.zeros(2), {}))
    if error is None:
        for f in run:
            f()
        assert [n for n, _ in root.named_parameters()] == targets
    else:
        for f in run[:-1]:
            f()
        with pytest.raises(Exception, match=error):
            run[-1]()
