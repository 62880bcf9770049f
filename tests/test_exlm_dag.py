"""ExLM's DAG loss: the dynamic programme equals a brute-force sum over every path; Viterbi finds
the best one; gradients match finite differences."""
import itertools
import math

import pytest
import torch

from polymask.objectives.dag import NEG, dag_best_alignment, dag_log_likelihood
from polymask.objectives.transitions import TransitionScorer, allowed_edges


def random_dag(seed: int, k: int, targets: list[int], dense: bool, dtype=torch.float64):
    """Random emissions and transitions for rows with the given target lengths (k states per target)."""
    generator = torch.Generator().manual_seed(seed)
    batch, width = len(targets), max(targets)
    lengths = torch.tensor(targets)
    state_mask = torch.arange(width * k) < (lengths * k)[:, None]
    allowed = allowed_edges(state_mask, k, dense)
    scores = torch.randn(batch, width * k, width * k, generator=generator, dtype=dtype).masked_fill(~allowed, NEG)
    links = scores.log_softmax(dim=-1).masked_fill(~allowed, NEG)
    emissions = torch.randn(batch, width, width * k, generator=generator, dtype=dtype).log_softmax(dim=-1)
    return emissions, links, state_mask.sum(dim=1), lengths


def all_paths(states: int, targets: int, k: int, dense: bool):
    """Every monotone path from state 0 to state ``states - 1`` visiting ``targets`` states."""
    for middle in itertools.combinations(range(1, states - 1), targets - 2):
        path = (0, *middle, states - 1)
        if dense or all(b // k == a // k + 1 for a, b in zip(path, path[1:])):
            yield path


def path_log_prob(emissions, links, path):
    total = emissions[0, path[0]]
    for t in range(1, len(path)):
        total = total + links[path[t - 1], path[t]] + emissions[t, path[t]]
    return total


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("k,targets", [(1, [3, 2]), (2, [4, 2, 3]), (3, [3, 4]), (4, [2, 5, 3])])
def test_dynamic_programme_equals_brute_force_sum_over_paths(k, targets, dense):
    emissions, links, counts, lengths = random_dag(k * 10 + len(targets), k, targets, dense)
    result = dag_log_likelihood(emissions, links, counts, lengths)
    for row in range(len(targets)):
        n, t = int(counts[row]), int(lengths[row])
        paths = list(all_paths(n, t, k, dense))
        assert paths, "every row has at least one path"
        expected = torch.logsumexp(torch.stack([path_log_prob(emissions[row], links[row], p) for p in paths]), 0)
        assert math.isclose(result[row].item(), expected.item(), rel_tol=1e-9, abs_tol=1e-9), (row, paths)


@pytest.mark.parametrize("dense", [True, False])
def test_viterbi_finds_the_most_probable_path(dense):
    k, targets = 3, [4, 2, 5]
    emissions, links, counts, lengths = random_dag(7, k, targets, dense)
    alignment = dag_best_alignment(emissions, links, counts, lengths)
    for row, t in enumerate(targets):
        n = int(counts[row])
        best = max(all_paths(n, t, k, dense), key=lambda p: path_log_prob(emissions[row], links[row], p).item())
        assert alignment[row, :t].tolist() == list(best)
        assert (alignment[row, t:] == -1).all()


def test_gradients_of_the_dag_loss_match_finite_differences():
    emissions, links, counts, lengths = random_dag(3, 2, [3, 2], dense=True)
    emissions.requires_grad_(True)
    links.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda e, l: dag_log_likelihood(e, l, counts, lengths), (emissions, links))


def test_gradients_through_transition_scores_match_finite_differences():
    torch.manual_seed(0)
    k, d_model = 2, 8
    scorer = TransitionScorer(d_model, heads=2, max_slots=32).double()
    emissions, _, counts, lengths = random_dag(5, k, [3, 2], dense=True)
    state_mask = torch.arange(6) < counts[:, None]
    allowed = allowed_edges(state_mask, k, dense=True)
    slots = torch.arange(6).expand(2, 6) * 2
    hidden = torch.randn(2, 6, d_model, dtype=torch.float64, requires_grad=True)

    def loss(states):
        return dag_log_likelihood(emissions, scorer(states, slots, allowed), counts, lengths)

    assert torch.autograd.gradcheck(loss, (hidden,))
    loss(hidden).sum().backward()
    assert scorer.query.weight.grad.abs().sum() > 0 and scorer.gate.weight.grad.abs().sum() > 0


def test_transitions_are_distributions_over_allowed_later_states():
    torch.manual_seed(0)
    scorer = TransitionScorer(16, heads=4, max_slots=64)
    state_mask = torch.tensor([[True] * 8, [True] * 6 + [False] * 2])
    for dense in (True, False):
        allowed = allowed_edges(state_mask, 2, dense)
        links = scorer(torch.randn(2, 8, 16), torch.arange(8).expand(2, 8), allowed)
        has_edges = allowed.any(dim=-1)
        sums = links.exp().sum(dim=-1)
        assert torch.allclose(sums[has_edges], torch.ones(int(has_edges.sum())), atol=1e-5)
        assert (links[~allowed] < NEG / 2).all()
        assert not has_edges[0, 7] and not has_edges[1, 5]  # the exit states have no way out
