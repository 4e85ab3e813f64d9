"""The grammar tutor model: its size (the seed's ~500k), causality, determinism from a seed,
and that it learns within 50 steps on one CPU core."""

import torch

from ringtree.lab.grammar import VOCABULARY, batch, corpus
from ringtree.lab.tutor import GrammarTutor, TutorConfig, build_tutor, n_parameters, optimizer


def test_parameter_count_by_hand():
    c = TutorConfig()
    attention = 4 * c.width * (c.width + 1)  # q, k, v, out projections with biases
    feed_forward = c.width * c.ff + c.ff + c.ff * c.width + c.width
    layer = attention + feed_forward + 2 * 2 * c.width  # two layer norms
    expected = (c.layers * layer + c.vocab * c.width + c.context * c.width + 2 * c.width
                + c.width * c.vocab + c.vocab)
    assert n_parameters(build_tutor(0)) == expected == 479_024
    assert c.vocab == len(VOCABULARY)


def test_same_seed_same_weights():
    a, b, c = build_tutor(3), build_tutor(3), build_tutor(4)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert not all(
        torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters(), strict=True)
    )


def test_position_t_sees_only_tokens_up_to_t():
    model = build_tutor(0).eval()
    ids = torch.from_numpy(corpus(0, 64)[:32]).reshape(1, 32)
    changed = ids.clone()
    changed[0, 20:] = (changed[0, 20:] + 1) % len(VOCABULARY)
    with torch.no_grad():
        a, b = model(ids), model(changed)
    assert a.shape == (1, 32, len(VOCABULARY))
    torch.testing.assert_close(a[:, :20], b[:, :20])
    assert not torch.allclose(a[:, 20:], b[:, 20:])


def test_loss_goes_down_within_50_steps():
    torch.set_num_threads(1)
    config = TutorConfig()
    model = build_tutor(0, config)
    opt = optimizer(model, config)
    stream = corpus(0, 20_000)
    losses = []
    for step in range(50):
        x, y = batch(stream, 0, step, 0, config.batch_size, config.context)
        logits = model(torch.from_numpy(x))
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, config.vocab), torch.from_numpy(y).reshape(-1)
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # starts near log(48) = 3.87 (uniform guessing); the grammar is far more predictable
    assert 3.5 < losses[0] < 4.5
    assert sum(losses[-5:]) / 5 < 0.65 * losses[0]


def test_a_smaller_config_builds():
    model = GrammarTutor(TutorConfig(width=32, layers=1, heads=2, ff=64, context=8))
    out = model(torch.zeros(2, 8, dtype=torch.long))
    assert out.shape == (2, 8, len(VOCABULARY))
