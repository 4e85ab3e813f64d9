"""Model presets: Llama-2 parameter counts from the published shapes."""

import pytest

from ringtree.errors import RingtreeError
from ringtree.plan.model import Model, count_params
from ringtree.plan.presets import PRESETS, get_model


@pytest.mark.parametrize(
    ("name", "published"),
    # the parameter counts of the released Llama-2 checkpoints (Hugging Face model cards)
    [("7b", 6_738_415_616), ("13b", 13_015_864_320), ("70b", 68_976_648_192)],
)
def test_llama2_presets_match_the_released_checkpoints(name, published):
    assert get_model(name).params == published


def test_llama_params_counts_each_part():
    # 1 layer, h=2, ffn=3, vocab=5, full attention: 4h^2 + 3*h*ffn + 2h + 2*vocab*h + h
    m = Model("t", 0, 1, 2, 1, heads=1, ffn=3, vocab=5, gated=True)
    assert count_params(m) == 16 + 18 + 4 + 20 + 2


def test_grammar_tutor_is_the_seeds_500k():
    m = get_model("Grammar-Tutor")
    assert m.params == 500_000
    assert m.layers and m.hidden and m.seq_len


def test_unknown_preset_names_the_presets():
    with pytest.raises(RingtreeError, match="unknown model preset 'llama-9'.*7b"):
        get_model("llama-9")


def test_overrides_and_missing_shape():
    m = PRESETS["7b"].with_overrides(params=7_000_000_000, seq_len=2048)
    assert (m.params, m.layers, m.seq_len) == (7_000_000_000, 32, 2048)
    bare = Model("custom", 10**9)
    with pytest.raises(RingtreeError, match="--layers, --hidden, --seq-len"):
        bare.require_shape("tp=8")
    with pytest.raises(RingtreeError, match="layers must be >= 1"):
        bare.with_overrides(layers=0)


@pytest.mark.parametrize(
    ("name", "published"),
    [
        ("llama3-8b", 8_030_261_248),  # the released Llama 3 8B / 70B / 3.1 405B checkpoints
        ("llama3-70b", 70_553_706_496),
        ("llama3-405b", 405_853_388_800),
        ("mixtral-8x7b", 46_702_792_704),  # Mixtral 8x7B's released checkpoint
    ],
)
def test_presets_match_released_checkpoints(name, published):
    assert get_model(name).params == published


def test_gpt3_and_moe_shapes():
    assert get_model("gpt3-175b").params == pytest.approx(174.6e9, rel=1e-3)  # Narayanan's
    mixtral = get_model("mixtral")
    from ringtree.plan.model import active_params

    assert active_params(mixtral) == pytest.approx(12.9e9, rel=0.01)  # "13B active"
    ds = get_model("deepseek-v3")
    assert ds.moe_layers == 58 and ds.top_k == 8 and ds.experts == 256


def test_shape_overrides_recount_the_parameters():
    m = get_model("7b").with_overrides(layers=16)
    assert m.params < get_model("7b").params / 1.9
    with pytest.raises(RingtreeError, match="do not split into 3 key/value groups"):
        get_model("7b").with_overrides(kv_heads=3)
    custom = Model("c", 1).with_overrides(layers=2, hidden=64, heads=4, ffn=256, vocab=100,
                                          seq_len=32)
    assert custom.complete and custom.params == 2 * (4 * 64 * 64 + 2 * 64 * 256 + 2 * 64) + (
        2 * 100 * 64 + 64)
