"""The oracle's optimizer rules (update_rule.py) against torch.optim itself, in float64, on gradients with known truth:
the rule written from the documented algorithms must reproduce SGD (momentum, dampening, nesterov, coupled decay),
Adam (coupled decay, amsgrad) and AdamW (decoupled decay) step for step, per param group, with a schedule moving the
LR; and the record of the optimizer a wrapper stepped (observe/optimizer_groups.py) maps onto the rule."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from evalkit.observe.optimizer_groups import OptimizerGroups
from evalkit.probes.semantics.update_rule import asked_rule, observed_rule

OPTIMIZERS = {
    "sgd": lambda groups: torch.optim.SGD(groups, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
    "sgd_nesterov": lambda groups: torch.optim.SGD(groups, lr=0.1, momentum=0.8, nesterov=True),
    "sgd_maximize": lambda groups: torch.optim.SGD(groups, lr=0.1, maximize=True),
    "adam": lambda groups: torch.optim.Adam(groups, lr=0.01, weight_decay=0.1, betas=(0.8, 0.9)),
    "adam_amsgrad": lambda groups: torch.optim.Adam(groups, lr=0.01, amsgrad=True, eps=1e-6),
    "adamw": lambda groups: torch.optim.AdamW(groups, lr=0.01, weight_decay=0.1),
}


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_the_rule_replays_torchs_optimizer_step_for_step(name):
    model = _model()
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if n.endswith("weight")]},
              {"params": [p for n, p in named if n.endswith("bias")], "weight_decay": 0.0}]
    opt = OPTIMIZERS[name](groups)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / 3 if s < 3 else 1.0)
    record = OptimizerGroups(model, spool=None).describe(opt)
    flat = torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy().copy()
    layout, start = {}, 0
    for n, p in named:
        layout[n] = slice(start, start + p.numel())
        start += p.numel()
    rule = observed_rule(record, layout, flat.size)
    rng = np.random.default_rng(1)
    for t in range(1, 7):
        g = rng.normal(size=flat.size) * (10.0 ** rng.uniform(-3, 0))
        lrs = [group["lr"] for group in opt.param_groups]
        predicted = rule.delta(t, g, flat, lrs)
        for n, p in named:
            p.grad = torch.as_tensor(g[layout[n]]).reshape(p.shape).clone()
        opt.step()
        sched.step()
        after = torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy().copy()
        assert np.allclose(after - flat, predicted, rtol=1e-10, atol=1e-14), (name, t)
        flat = after


def test_a_rule_for_a_class_it_does_not_know_is_none_and_the_asked_rule_is_one_group():
    model = _model()
    record = OptimizerGroups(model, spool=None).describe(torch.optim.RMSprop(model.parameters()))
    assert record["class"] == "RMSprop" and observed_rule(record, {}, 26) is None
    rule = asked_rule({"train": {"optimizer": "adamw", "weight_decay": 0.1, "betas": [0.9, 0.999]}}, 26)
    assert len(rule.groups) == 1 and rule.groups[0].decoupled and rule.stateful
    assert asked_rule({"train": {"optimizer": "sgd", "momentum": 0.0}}, 26).plain_sgd
