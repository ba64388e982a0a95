"""An upstream-style fine-tuning entry built only from the paddlenlp wheel, to prove that a config
the studio writes means the same to PaddleNLP: llm/run_finetune.py's steps (paddlenlp 3.0.0b4) with
nothing of the studio in it. Usage: python tests/upstream_finetune.py CONFIG.json

- arguments: PdArgumentParser over ModelConfig / DataConfig / SFTConfig, parse_json_file: an
  unknown key stops it ("Some specified arguments are not used by the PdArgumentParser");
- data: paddlenlp.datasets.load_dataset("json", data_files=DIR/train.json), as upstream reads it;
- tokenization: the rules of llm/utils/data.py (tokenize_rounds_example with the tokenizer's chat
  template through the wheel's encode_chat_inputs, else tokenize_example), labels shifted by one;
- model: AutoModelForCausalLM, LoRA through paddlenlp.peft when `lora` is set;
- training: paddlenlp.trl.SFTTrainer with DataCollatorForSeq2Seq.
Prints one JSON line {"steps", "losses"} at the end.
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


def main(path: str) -> int:
    from paddlenlp.data import DataCollatorForSeq2Seq
    from paddlenlp.datasets import load_dataset
    from paddlenlp.peft import LoRAConfig, LoRAModel
    from paddlenlp.trainer import PdArgumentParser, TrainerCallback
    from paddlenlp.transformers import AutoModelForCausalLM, AutoTokenizer
    from paddlenlp.trl import DataConfig, ModelConfig, SFTConfig, SFTTrainer

    model_args, data_args, training_args = PdArgumentParser((ModelConfig, DataConfig, SFTConfig)).parse_json_file(path)
    tok = AutoTokenizer.from_pretrained(model_args.tokenizer_name_or_path or model_args.model_name_or_path)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    train = load_dataset("json", data_files=os.path.join(data_args.dataset_name_or_path, "train.json"), lazy=False)[0]
    use_template = bool(getattr(tok, "chat_template", None))
    train = train.map(lambda r: tokenize(tok, r, data_args, use_template))
    model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path, dtype="float32")
    if model_args.lora:
        model = LoRAModel(model, LoRAConfig(target_modules=[".*q_proj.*", ".*v_proj.*"], r=model_args.lora_rank,
                                            lora_alpha=2 * model_args.lora_rank, merge_weights=False,
                                            base_model_name_or_path=model_args.model_name_or_path))
        model.mark_only_lora_as_trainable()
    losses = []

    class Record(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

    trainer = SFTTrainer(model=model, args=training_args, train_dataset=train, tokenizer=tok,
                         data_collator=DataCollatorForSeq2Seq(tokenizer=tok, padding=True, return_tensors="np"),
                         callbacks=[Record()])
    out = trainer.train()
    print(json.dumps({"steps": out.global_step, "losses": losses}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
