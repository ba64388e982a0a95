"""An upstream-style fine-tuning entry built only from the paddlenlp wheel, to prove that a config
the studio writes means the same to PaddleNLP: llm/run_finetune.py's steps (paddlenlp 3.0.0b4) with
nothing of the studio in it. Usage: python tests/upstream_finetune.py CONFIG.json [--key value ...]

- arguments: PdArgumentParser over ModelConfig / DataConfig / SFTConfig, parse_json_file_and_cmd_lines
  as upstream: every JSON value goes through argparse as text (null becomes "None"), flags after the
  file override it, and an unknown key stops it ("Some specified arguments are not used by the
  PdArgumentParser");
- seed: paddlenlp.trainer.set_seed before the model, as upstream;
- model: AutoConfig + LlmMetaConfig.set_llm_config + the dropout / ignore_index / fusion / seq_length
  switches, then AutoModelForCausalLM.from_pretrained; NEFTune as upstream's forward post hook on the
  input embeddings (uniform noise of alpha / sqrt(batch * seq));
- tokenizer: AutoTokenizer of model_name_or_path, then the wheel's init_chat_template (upstream's own
  function: "none"/null drops the template, a folder means its chat_template.json), LLaMA tokenizers
  pad with EOS;
- data: paddlenlp.datasets.load_dataset("json", data_files=DIR/train.json), as upstream reads it;
- tokenization: the rules of llm/utils/data.py (tokenize_rounds_example with the tokenizer's chat
  template through the wheel's encode_chat_inputs, else tokenize_example), labels shifted by one;
- PEFT: LoRA (targets from the wheel's get_lora_target_modules, or LoRAModel.from_pretrained of
  lora_path), LoKr, VeRA (pissa_init=True) as upstream's create_peft_model builds them;
- training: paddlenlp.trl.SFTTrainer with DataCollatorForSeq2Seq and the trainable parameters as
  the optimizer's groups; resumes from the newest checkpoint-N in output_dir unless
  overwrite_output_dir, as upstream does.
Prints one JSON line {"steps", "losses", "targets"} at the end.
"""

import json
import os
import sys


def tokenize(tok, rec, data_args, use_template):
    src = rec["src"] if isinstance(rec["src"], list) else [rec["src"]]
    tgt = rec["tgt"] if isinstance(rec["tgt"], list) else [rec["tgt"]]
    if use_template:
        convs = tok.encode_chat_inputs([[q, a] for q, a in zip(src, tgt)])["conversations"]
        ids, labels = [], []
        for i in range(len(convs) - 1, -1, -1):
            user, bot = convs[i]
            if len(ids) + len(user) + len(bot) > data_args.max_length:
                if i == len(convs) - 1:
                    user = user[:data_args.src_length]
                    bot = bot[:data_args.max_length - len(user)]
                    ids, labels = user + bot, [-100] * len(user) + bot
                break
            ids, labels = user + bot + ids, [-100] * len(user) + bot + labels
    else:
        s = tok(src[0], max_length=data_args.src_length, truncation=True, add_special_tokens=True)["input_ids"]
        room = data_args.max_length - len(s)
        t = tok(tgt[0], max_length=room, truncation=True, add_special_tokens=False)["input_ids"]
        t = t + [tok.eos_token_id] if len(t) < room else t
        ids, labels = s + t, [-100] * len(s) + t
    return {"input_ids": ids[:-1], "labels": labels[1:]}


def neftune(model, alpha):
    import paddle

    def hook(layer, inputs, output):
        if layer.training:
            mag = alpha / paddle.sqrt(paddle.to_tensor(output.shape[0] * output.shape[1], dtype="float32"))
            output = output + paddle.uniform(shape=output.shape, dtype=output.dtype, min=-mag, max=mag)
        return output

    model.get_input_embeddings().register_forward_post_hook(hook)


def peft(model, model_args):
    from paddlenlp.peft import LoKrConfig, LoKrModel, LoRAConfig, LoRAModel, VeRAConfig, VeRAModel
    from paddlenlp.trl.llm_utils import get_lora_target_modules

    name = model_args.model_name_or_path
    if model_args.lora:
        if model_args.lora_path is None:
            model = LoRAModel(model, LoRAConfig(
                target_modules=get_lora_target_modules(model), r=model_args.lora_rank,
                lora_alpha=2 * model_args.lora_rank if not model_args.rslora else 4, rslora=model_args.rslora,
                lora_plus_scale=model_args.lora_plus_scale, pissa=model_args.pissa, merge_weights=False,
                dtype="float32", base_model_name_or_path=name, lora_use_mixer=model_args.lora_use_mixer,
                use_mora=model_args.use_mora))
        else:
            model = LoRAModel.from_pretrained(model=model, lora_path=model_args.lora_path)
    if model_args.lokr:
        if model_args.lokr_path is None:
            model = LoKrModel(model, LoKrConfig(target_modules=get_lora_target_modules(model),
                                                lokr_dim=model_args.lokr_dim, dtype="float32",
                                                base_model_name_or_path=name))
        else:
            model = LoKrModel.from_pretrained(model=model, lokr_path=model_args.lokr_path)
    if model_args.vera:
        model = VeRAModel(model, VeRAConfig(target_modules=get_lora_target_modules(model), r=model_args.vera_rank,
                                            vera_alpha=model_args.vera_rank, dtype="float32",
                                            base_model_name_or_path=name, pissa_init=True))
        model.mark_only_vera_as_trainable(notfreezeB=True)
    return model


def main() -> int:
    from paddlenlp.data import DataCollatorForSeq2Seq
    from paddlenlp.datasets import load_dataset
    from paddlenlp.trainer import PdArgumentParser, TrainerCallback, get_last_checkpoint, set_seed
    from paddlenlp.transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, Llama3Tokenizer, LlamaTokenizer
    from paddlenlp.transformers.configuration_utils import LlmMetaConfig
    from paddlenlp.trl import DataConfig, ModelConfig, SFTConfig, SFTTrainer
    from paddlenlp.trl.llm_utils import init_chat_template

    model_args, data_args, training_args = PdArgumentParser(
        (ModelConfig, DataConfig, SFTConfig)).parse_json_file_and_cmd_lines()
    set_seed(seed=training_args.seed)
    last = None
    if os.path.isdir(training_args.output_dir) and training_args.do_train and not training_args.overwrite_output_dir:
        last = get_last_checkpoint(training_args.output_dir)

    name = model_args.model_name_or_path
    config = AutoConfig.from_pretrained(name, dtype="float32")
    LlmMetaConfig.set_llm_config(config, training_args)
    config.use_fast_layer_norm = model_args.use_fast_layer_norm
    if hasattr(config, "hidden_dropout_prob"):
        config.hidden_dropout_prob = model_args.hidden_dropout_prob
    if hasattr(config, "attention_probs_dropout_prob"):
        config.attention_probs_dropout_prob = model_args.attention_probs_dropout_prob
    if hasattr(config, "ignore_index"):
        config.ignore_index = -100
    if model_args.fuse_attention_qkv is not None:
        config.fuse_attention_qkv = model_args.fuse_attention_qkv
    if model_args.fuse_attention_ffn is not None:
        config.fuse_attention_ffn = model_args.fuse_attention_ffn
    config.seq_length = data_args.max_length
    model = AutoModelForCausalLM.from_pretrained(name, config=config)
    if training_args.do_train and model_args.neftune:
        neftune(model, model_args.neftune_noise_alpha)

    tok = AutoTokenizer.from_pretrained(name)
    init_chat_template(tok, name, data_args.chat_template)
    if isinstance(tok, (LlamaTokenizer, Llama3Tokenizer)):
        tok.pad_token_id = tok.eos_token_id
    train = load_dataset("json", data_files=os.path.join(data_args.dataset_name_or_path, "train.json"), lazy=False)[0]
    use_template = tok.chat_template is not None
    train = train.map(lambda r: tokenize(tok, r, data_args, use_template))

    model = peft(model, model_args)
    targets = getattr(getattr(model, "lora_config", None) or getattr(model, "vera_config", None)
                      or getattr(model, "lokr_config", None), "target_modules", None)
    losses = []

    class Record(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

    trainer = SFTTrainer(model=model, args=training_args, train_dataset=train, tokenizer=tok,
                         data_collator=DataCollatorForSeq2Seq(tokenizer=tok, padding=True, return_tensors="np",
                                                              return_attention_mask=True),
                         callbacks=[Record()])
    trainer.set_optimizer_grouped_parameters([p for p in model.parameters() if not p.stop_gradient])
    out = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint or last)
    print(json.dumps({"steps": out.global_step, "losses": losses, "resumed_from": last, "targets": targets,
                      "template": use_template}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or not sys.argv[1].endswith(".json"):
        sys.exit("usage: python tests/upstream_finetune.py CONFIG.json [--key value ...]")
    sys.exit(main())
