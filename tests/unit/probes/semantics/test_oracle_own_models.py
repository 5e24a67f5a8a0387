"""The oracle on what a team's model carries and the caliber's MLP does not: a frozen parameter, a bias whose gradient a
BatchNorm after it cancels, tied weights. Each replayed here from one real float32 torch.optim.AdamW step, as a job
records it (parameters before and after), against the float64 oracle's rule."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from evalkit.probes.semantics.oracle import ObservedStep, rounding_level
from evalkit.probes.semantics.update_rule import Group, UpdateRule


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(6, 8)
        self.lin = nn.Linear(8, 8)               # its bias: cancelled by the BatchNorm after it
        self.norm = nn.BatchNorm1d(8)
        self.out = nn.Linear(8, 6, bias=False)
        self.out.weight = self.embed.weight     # tied
        self.scale = nn.Parameter(torch.ones(()), requires_grad=False)   # frozen

    def forward(self, x):
        return self.out(torch.relu(self.norm(self.lin(self.embed(x))))) * self.scale


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double().numpy()


def one_adamw_step():
    torch.manual_seed(0)
    model = Net()
    x, y = torch.randint(6, (16,)), torch.randint(6, (16,))
    oracle = copy.deepcopy(model).double()
    nn.functional.cross_entropy(oracle(x), y).backward()
    grad = torch.cat([(torch.zeros_like(p) if p.grad is None else p.grad).reshape(-1)
                      for p in oracle.parameters()]).numpy()
    before = flat(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
    nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
    layout, start = {}, 0
    for name, p in model.named_parameters():
        layout[name] = slice(start, start + p.numel())
        start += p.numel()
    step = ObservedStep(1, 0.01, before, flat(model), {0: [grad]})
    return step, layout


def rule(size):
    return UpdateRule("adamw", [Group(np.ones(size, dtype=bool), "adam", 0.1, decoupled=True)])


def test_tied_weights_are_one_parameter_and_the_bias_before_batchnorm_is_at_rounding_level():
    step, layout = one_adamw_step()
    assert "out.weight" not in layout                                     # the tie: one tensor, one name
    mask, names = rounding_level([step], layout)
    assert sorted(names) == ["lin.bias", "scale"]                         # cancelled, and frozen (zero)
    assert mask.sum() == 9 and mask[layout["lin.bias"]].all()


def test_set_aside_frozen_and_rounding_level_coordinates_the_rest_of_the_update_matches():
    step, layout = one_adamw_step()
    naive = rule(step.theta.size).delta(1, step.window_grad, step.theta_prev, [0.01])
    assert not step.matches(naive)           # the float32 step moved lin.bias by its rounding noise; scale never moved
    aside = np.zeros(step.theta.size, dtype=bool)
    for name in ("lin.bias", "scale"):
        aside[layout[name]] = True
    kept = ObservedStep(1, 0.01, step.theta_prev, np.where(aside, step.theta_prev, step.theta), step.grads)
    predicted = rule(step.theta.size).without(aside).delta(1, step.window_grad, step.theta_prev, [0.01])
    assert kept.matches(predicted)
    assert np.all(predicted[layout["scale"]] == 0)     # a frozen parameter: no decay either, as torch skips it


def test_a_wrong_update_elsewhere_is_still_caught_with_those_set_aside():
    step, layout = one_adamw_step()
    aside = np.zeros(step.theta.size, dtype=bool)
    for name in ("lin.bias", "scale"):
        aside[layout[name]] = True
    wrong = step.theta_prev + 0.9 * (step.theta - step.theta_prev)       # every update scaled by 0.9
    kept = ObservedStep(1, 0.01, step.theta_prev, np.where(aside, step.theta_prev, wrong), step.grads)
    assert not kept.matches(rule(step.theta.size).without(aside).delta(1, step.window_grad, step.theta_prev, [0.01]))


# ---------------------------------------------------------------- a kink float32 and float64 see on different sides
class Kink(nn.Module):
    """relu(x0 * w + x1 - x0), three elementwise ops (no fused multiply-add): with x = (2**24, 1) and w = 1, float32
    rounds 2**24 + 1 to 2**24 and gets 0 (ReLU's gradient 0), float64 gets 1 (gradient x0): a ReLU input within
    rounding of zero, as a real network meets one now and then."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return torch.relu((x[:, :1] * self.w + x[:, 1:]) - x[:, :1])


def kink_task(seed: int):
    from torch.utils.data import TensorDataset

    from evalkit.tasks.catalog import Metric, Task

    x = torch.tensor([[2.0**24, 1.0], [1.0, 2.0]], dtype=torch.float32)
    data = TensorDataset(x, torch.full((2, 1), -1.0))
    return Task("kink", Kink(), data, data, nn.MSELoss(), Metric("mse", False, lambda o, y: (0.0, 1)))


def test_where_float32_takes_the_other_side_of_a_kink_the_allowance_widens_by_what_float32_moved():
    from evalkit.probes.semantics.oracle import GradientOracle, float32_rounding

    oracle = GradientOracle({"seed": 0, "task": {"_target_": f"{__name__}.kink_task", "name": "kink", "extra": {}}})
    theta = oracle.theta0
    kinked, smooth = [0], [1]
    loop = oracle.float32().micro_grad(theta, kinked)      # what a float32 loop computes: ReLU's gradient 0
    assert np.allclose(loop, 0) and not np.allclose(oracle.micro_grad(theta, kinked), 0)
    for ids, rounding in ((kinked, 1.0), (smooth, 0.0)):
        seen = ObservedStep(1, 0.1, theta, theta - 0.1 * oracle.float32().micro_grad(theta, ids),
                            {0: [oracle.micro_grad(theta, ids)]})
        assert float32_rounding(seen, oracle, {0: [ids]}) == pytest.approx(rounding, abs=1e-6)
        seen.rounding = float32_rounding(seen, oracle, {0: [ids]})
        assert seen.matches(-0.1 * seen.window_grad)                    # the float32 loop's step: matched
        assert not seen.matches(-0.1 * 0.5 * seen.window_grad) or ids == kinked   # a halved step: still caught
