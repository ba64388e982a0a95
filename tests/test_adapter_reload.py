"""A prefix adapter answers the same in a left-padded batch as one prompt at a time. Its trained
keys and values carry no position; without per-row position ids a padded row's queries sat at
other positions relative to them (an adapter trained by the studio answered 7 of 40 dev prompts
alike). A prefix encoder with random weights makes the effect large, so the test shows both
sides: identical answers with the row positions, different ones without."""

from core.data import datasets, templates
from core.models import evaluate, loading


def test_prefix_batched_answers_equal_one_at_a_time(demo_home, monkeypatch):
    import paddle
    from paddlenlp.peft import PrefixConfig, PrefixModelForCausalLM
    from paddlenlp.peft.prefix import utils as prefix_utils

    model, tok, tpl = loading.load(demo_home / "models" / "demo-base")
    c = model.config
    paddle.seed(3)
    cfg = PrefixConfig(num_prefix_tokens=8, num_attention_heads=c.num_attention_heads, num_hidden_layers=c.num_hidden_layers,
                       hidden_size=c.hidden_size, multi_query_group_num=c.num_key_value_heads, dtype="float32")
    prefix = PrefixModelForCausalLM(model, cfg, postprocess_past_key_value=prefix_utils.llama_postprocess_past_key_value)
    for w in prefix.prefix_encoder.parameters():  # keys and values that matter (its own init is near zero)
        w.set_value(paddle.randn(w.shape, dtype=w.dtype) * 2.0)
    prefix.eval()
    recs = list(datasets.iter_records(demo_home / "datasets" / "demo" / "dev.json", "paddlenlp"))[:24]
    convs = [templates.messages_of(r)[:-1] for r in recs]
    assert len({len(templates.prompt_ids(tok, tpl, cv)) for cv in convs}) > 1  # the batch is padded

    def both():
        return (evaluate.generate(prefix, tok, tpl, convs, 12),
                evaluate.generate(prefix, tok, tpl, convs, 12, batch_size=1))

    batched, single = both()
    assert batched == single
    monkeypatch.setattr(evaluate, "padded_positions_matter", lambda m: False)  # the old generation
    old_batched, old_single = both()
    assert old_single == single
    assert sum(a == b for a, b in zip(old_batched, old_single)) < len(single), "the test could not fail"


def _vera_adapter(demo_home, out, pissa_init: bool):
    import paddle
    from paddlenlp.peft import VeRAConfig, VeRAModel
    from paddlenlp.transformers import AutoModelForCausalLM

    base = str(demo_home / "models" / "demo-base")
    model = AutoModelForCausalLM.from_pretrained(base, dtype="float32")
    cfg = VeRAConfig(target_modules=[".*q_proj.*", ".*v_proj.*"], r=4, vera_alpha=4, pissa_init=pissa_init,
                     dtype="float32", base_model_name_or_path=base)
    vera = VeRAModel(model, cfg)
    vera.mark_only_vera_as_trainable(notfreezeB=True)  # as training does: vera_A frozen, so not saved
    for name, w in vera.named_parameters():  # a "trained" adapter: B, b and d away from their start
        if name.endswith(("vera_b", "vera_d")):
            w.set_value(paddle.rand(w.shape, dtype=w.dtype) + 0.5)
    vera.save_pretrained(str(out))
    return out


def test_a_vera_adapter_reloads_identically_and_an_unsaved_random_one_is_refused(demo_home, tmp_path):
    import numpy as np
    import paddle
    import pytest

    ids = paddle.to_tensor([[1, 25, 37, 90, 14, 8]])

    def logits(adapter):
        model, _, _ = loading.load(None, adapter)
        with paddle.no_grad():
            return loading.logits_of(model(input_ids=ids)).numpy()

    good = _vera_adapter(demo_home, tmp_path / "vera", pissa_init=True)  # as the studio trains it now
    first, second = logits(good), logits(good)
    assert np.abs(first - second).max() == 0.0
    base, _, _ = loading.load(demo_home / "models" / "demo-base")
    with paddle.no_grad():
        assert np.abs(loading.logits_of(base(input_ids=ids)).numpy() - first).max() > 1e-3  # the adapter does something
    old = _vera_adapter(demo_home, tmp_path / "vera-random", pissa_init=False)  # vera_A random and never saved
    with pytest.raises(ValueError, match="random frozen matrix vera_A"):
        loading.load(None, old)
