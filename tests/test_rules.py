"""The finding rules on plain numbers: one step's conditions, and how they hold over steps."""

from __future__ import annotations

from graphviz_autograd.checks.rules import (
    Condition,
    StepEvidence,
    gradient_outlier,
    gradient_span,
    gradient_trend,
    judge,
    over_steps,
    update_ratio,
)


def zero(subject: str) -> Condition:
    return Condition("grad_zero", "warning", subject, "", f"{subject} is zero", "")


def test_a_condition_holding_at_the_last_steps_is_held_since_its_run_began():
    judged = [(0, []), (10, [zero("a")]), (20, []), (30, [zero("a"), zero("b")]), (40, [zero("a"), zero("b")])]
    held = {h.condition.subject: h for h in over_steps(judged)}
    assert (held["a"].since, held["a"].before, held["a"].times) == (30, 20, 3)
    assert (held["b"].since, held["b"].before) == (30, 20)
    from_the_start = over_steps([(0, [zero("a")]), (5, [zero("a")])])
    assert [(h.since, h.before, h.first, h.last) for h in from_the_start] == [(0, None, 0, 5)]


def test_a_condition_gone_by_the_last_step_is_no_finding():
    assert over_steps([(0, [zero("a")]), (10, [zero("a")]), (20, [])]) == []


def test_an_update_ratio_counts_at_most_steps_not_the_last():
    low = Condition("update_ratio", "warning", "w", "", "", "")
    held = over_steps([(0, [low]), (1, [low]), (2, [])])
    assert [(h.condition.code, h.since, h.times) for h in held] == [("update_ratio", 0, 2)]
    assert over_steps([(0, [low]), (1, []), (2, [low]), (3, [])]) == []  # half is not most


def test_the_span_names_a_run_of_layers_from_the_input_and_not_a_block_behind_a_layer_scale():
    layers = [(f"l{i}", [f"l{i}.weight"]) for i in range(6)]
    vanishing = StepEvidence(grad_norms={f"l{i}.weight": 10.0 ** (2 * i - 10) for i in range(6)}, layers=layers)
    (span,) = gradient_span(vanishing)
    assert span.subject == "l0 to l3" and "shrinks toward the input" in span.text
    scaled = StepEvidence(grad_norms={"l0.weight": 1.0, "l1.weight": 1e-6, "l2.weight": 1e-6, "l3.weight": 1e-6,
                                      "l4.weight": 1e-6, "l5.weight": 1.0}, layers=layers)
    assert gradient_span(scaled) == []
    exploding = StepEvidence(grad_norms={f"l{i}.weight": 10.0 ** (10 - 2 * i) for i in range(6)}, layers=layers)
    (span,) = gradient_span(exploding)
    assert span.subject == "l2 to l5" and "grows toward the input" in span.text


def test_the_span_compares_layers_per_element_so_one_wide_layer_is_no_explosion():
    # An audio model's subsampling linear of 2 million weights: norm 6,000, 4 per element;
    # the small layers after it, 4,096 weights of norm 1: 0.016 per element. Raw norms are
    # 3.8 decades apart; per element 2.4, no span.
    layers = [("sub", ["sub.weight"])] + [(f"l{i}", [f"l{i}.weight"]) for i in range(4)]
    norms = {"sub.weight": 6000.0} | {f"l{i}.weight": 1.0 for i in range(4)}
    sizes = {"sub.weight": 2_000_000} | {f"l{i}.weight": 4096 for i in range(4)}
    assert gradient_span(StepEvidence(grad_norms=norms, layers=layers, sizes=sizes)) == []
    assert gradient_span(StepEvidence(grad_norms=norms, layers=layers))  # by raw norms it was one
    # The same sizes with gradients that do fall away toward the output: still named.
    shrunk = norms | {f"l{i}.weight": 1e-4 for i in range(4)}
    (span,) = gradient_span(StepEvidence(grad_norms=shrunk, layers=layers, sizes=sizes))
    assert span.subject == "l0 to l3" and "grows toward the input" in span.text


def test_outliers_are_judged_among_their_peers():
    roles = {f"b{i}.w": "b.*.w" for i in range(4)}
    norms = {"stem.w": 1.0, "head.w": 2.0, "norm.w": 0.5, **{f"b{i}.w": 1e-6 for i in range(4)}}
    assert gradient_outlier(StepEvidence(grad_norms=norms, peers=roles)) == []
    # Without roles, one pool: more than half of it behind the layer scale, the stem is no
    # outlier all the same, judged against the upper quartile of the others.
    assert gradient_outlier(StepEvidence(grad_norms=norms)) == []
    norms["b2.w"] = 1.0  # one block far from the others of its role
    assert [c.subject for c in gradient_outlier(StepEvidence(grad_norms=norms, peers=roles))] == ["b2.w"]
    assert gradient_outlier(StepEvidence(grad_norms=norms)) == []  # among all, it looks like the stem


def test_a_small_update_is_the_learning_rates_finding_only_for_a_small_step_per_gradient():
    def conditions(ratio: float, grad: float) -> list[str]:
        evidence = StepEvidence(grad_norms={"w": grad}, update_ratios={"w": ratio}, param_norms={"w": 2.0})
        return [c.code for c in update_ratio(evidence)]

    assert conditions(0.0, 0.5) == ["update_ratio"]  # a learning rate of zero
    assert conditions(1e-9, 0.5) == ["update_ratio"]  # 4e-9 per unit of gradient
    assert conditions(1e-7, 1e-5) == []  # SGD's 0.02 on a gradient that vanished
    assert conditions(0.0, 1e-9) == []  # too small to move a float32 weight
    assert conditions(0.5, 0.5) == ["update_ratio"]  # too fast
    assert conditions(1e-3, 0.5) == []


def test_a_gradient_that_grows_is_a_trend_and_one_that_shrinks_is_not():
    grows = {"a.w": [(0, 1e-3), (10, 1.0), (20, 10.0)], "a.b": [(0, 1.0), (20, 2.0)]}
    (trend,) = gradient_trend(grows)
    assert trend.subject == "a.w" and "grew by 4.0 powers of ten" in trend.text
    assert gradient_trend({"a.w": [(0, 1.0), (20, 1e-5)]}) == []


def test_one_step_judged_by_every_rule():
    evidence = StepEvidence(
        grad_norms={"a.weight": 0.0, "b.weight": float("nan"), "c.weight": 0.3},
        nonfinite={"gradient": ["b.weight"]},
        outputs={"relu": {"activation_zero_fraction": 1.0, "activation_abs_max": 0.0},
                 "broken": {"activation_zero_fraction": 1.0, "activation_abs_max": float("nan")}},
    )
    assert sorted((c.code, c.subject) for c in judge(evidence)) == [
        ("dead_units", "relu"), ("grad_nonfinite", "b.weight"), ("grad_zero", "a.weight"),
    ]  # an output holding NaN is not dead
