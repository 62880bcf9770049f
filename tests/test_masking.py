"""Mask statistics: ratio, 80/10/10, specials untouched, whole spans for overlapping k-mers."""
import torch

from polymask.data.masking import bert_corrupt, maskable_positions, sample_mask

SPECIALS = torch.tensor([0, 1, 2, 3, 4])


def batch(rows=64, length=50, pad_from=40):
    ids = torch.randint(5, 100, (rows, length), generator=torch.Generator().manual_seed(1))
    ids[:, 0] = 2
    ids[:, -1] = 3
    ids[: rows // 2, pad_from:] = 0
    ids[: rows // 2, pad_from - 1] = 3
    return ids


def test_exact_ratio_per_row_and_specials_never_selected():
    ids = batch()
    maskable = maskable_positions(ids, SPECIALS)
    mask = sample_mask(maskable, 0.15, torch.Generator().manual_seed(0))
    assert not (mask & ~maskable).any()
    expected = (maskable.sum(1).float() * 0.15).round().clamp(min=1)
    assert torch.equal(mask.sum(1).float(), expected)


def test_selection_is_uniform_over_positions():
    ids = batch(rows=4000, length=20, pad_from=20)
    maskable = maskable_positions(ids, SPECIALS)
    mask = sample_mask(maskable, 0.2, torch.Generator().manual_seed(0))
    per_position = mask[:, 1:-1].float().mean(0)
    expected = round(0.2 * 18) / 18  # 18 maskable positions per row, an exact count of them each time
    assert (per_position - expected).abs().max() < 0.03


def test_80_10_10_split():
    ids = batch(rows=2000)
    mask = sample_mask(maskable_positions(ids, SPECIALS), 0.15, torch.Generator().manual_seed(0))
    pool = torch.arange(5, 100)
    corrupted = bert_corrupt(ids, mask, 4, pool, torch.Generator().manual_seed(1))
    selected = mask.sum().item()
    as_mask = (corrupted[mask] == 4).sum().item() / selected
    unchanged = (corrupted[mask] == ids[mask]).sum().item() / selected
    assert abs(as_mask - 0.8) < 0.01
    assert abs(unchanged - (0.1 + 0.1 / 95)) < 0.01  # a random draw can equal the original
    assert torch.equal(corrupted[~mask], ids[~mask])
    assert not torch.isin(corrupted[mask & (corrupted != 4)], SPECIALS).any()


def test_span_masking_masks_whole_spans_at_the_target_rate():
    k = 6
    ids = batch(rows=500, length=130, pad_from=130)
    maskable = maskable_positions(ids, SPECIALS)
    mask = sample_mask(maskable, 0.15, torch.Generator().manual_seed(0), span=k)
    assert abs(mask.float().sum() / maskable.sum() - 0.15) < 0.02
    # every run of masked positions (away from the sequence ends) is at least k long
    for row in mask[:50]:
        runs, run = [], 0
        for value in row[1:-1].tolist() + [False]:
            if value:
                run += 1
            elif run:
                runs.append(run)
                run = 0
        assert all(r >= k for r in runs[:-1])


def test_masks_depend_only_on_the_generator_seed():
    maskable = maskable_positions(batch(), SPECIALS)
    a = sample_mask(maskable, 0.15, torch.Generator().manual_seed(7))
    b = sample_mask(maskable, 0.15, torch.Generator().manual_seed(7))
    assert torch.equal(a, b)
