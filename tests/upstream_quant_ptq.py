"""An upstream-style PTQ entry built only from the paddlenlp and paddleslim wheels, to prove that the
activation scales the studio's Quantize engine writes are the ones PaddleNLP's own PTQ writes for the
same config: llm/run_quantization.py's ``do_ptq`` path and llm/utils/quant.py's ``prepare_qconfig`` /
``apply_ptq`` (paddlenlp 3.0.0b4, paddleslim 2.6.0), with nothing of the studio in it.
Usage: python tests/upstream_quant_ptq.py CONFIG.json [CONFIG.json ...] (each file run as upstream runs one,
one after the other in this process: the imports, most of the time, are paid once)

- arguments: PdArgumentParser over GenerateArgument (top_k, top_p: llm/utils/argument.py is not in
  the wheel, its two keys are declared here), the wheel's trl.QuantConfig, ModelConfig, DataConfig and
  SFTConfig, parse_json_file_and_cmd_lines as upstream (QuantConfig's ``act_quant_method`` default is
  "avg");
- model: AutoConfig + LlmMetaConfig.set_llm_config + the dropout / ignore_index / fusion / seq_length
  switches, AutoModelForCausalLM.from_pretrained, float32 unless fp16/bf16 with O2;
- tokenizer: AutoTokenizer + the wheel's init_chat_template, LLaMA tokenizers pad with EOS (on the
  tokenizer's own padding side: left for LlamaTokenizer);
- data: quant.json, else train.json, of dataset_name_or_path through load_dataset("json"), tokenized
  by the rules of llm/utils/data.py (tests/upstream_finetune.py's ``tokenize``);
- calibration: SFTTrainer with upstream's DataCollatorForSeq2Seq (padding=True, attention mask,
  return_tensors="np") and its ``get_ptq_dataloader`` (a *shuffled* BatchSampler of
  per_device_train_batch_size) and ``ptq_loop`` over ``ptq_step`` batches;
- PTQ: ``paddle.quantization.PTQ`` with one activation observer and one weight observer on every
  ``nn.Linear`` (skip_list_names honoured): act_quant_method abs_max -> PaddleSlim AbsmaxObserver,
  avg -> AVGObserver; weight_quant_method abs_max_channel_wise -> AbsMaxChannelWiseWeightObserver,
  groupwise -> GroupWiseWeightObserver; quant_type a8w8 (8 bits both). Observers on for the loop,
  off after; scales read as upstream reads them (``scales()`` of every observer layer not named
  ``_observer``), written to output_dir/act_scales.json and weight_scales.json.
Not here: Shift, Smooth, AWQ, GPTQ, QAT, cache-KV and FP8 (the script stops when asked for them).
Prints one JSON line {"config", "act_quant_method", "steps", "act_scales"} per file.
"""

import dataclasses
import json
import os
import sys


@dataclasses.dataclass
class GenerateArgument:
    """llm/utils/argument.py's GenerateArgument (repository-only): its keys and defaults."""

    top_k: int = dataclasses.field(default=1, metadata={"help": "top_k of sampling"})
    top_p: float = dataclasses.field(default=1.0, metadata={"help": "top_p of sampling"})


def qconfig(quant_args):
    """llm/utils/quant.py prepare_qconfig for quant_type a8w8: (activation, weight) observers."""
    from paddleslim.quant.observers import AbsMaxChannelWiseWeightObserver, GroupWiseWeightObserver
    from paddleslim.quant.observers.abs_max import AbsmaxObserver
    from paddleslim.quant.observers.avg import AVGObserver

    act = {"abs_max": AbsmaxObserver, "avg": AVGObserver}.get(quant_args.act_quant_method)
    weight = {"abs_max_channel_wise": AbsMaxChannelWiseWeightObserver,
              "groupwise": GroupWiseWeightObserver}.get(quant_args.weight_quant_method)
    if quant_args.quant_type.lower() not in ("a8w8", "w8a8"):
        sys.exit(f"this script runs a8w8 PTQ only, not {quant_args.quant_type!r}")
    if act is None or weight is None:
        sys.exit(f"no observer for act_quant_method {quant_args.act_quant_method!r} / weight_quant_method "
                 f"{quant_args.weight_quant_method!r} (upstream fails there too)")
    return act(quant_bits=8), weight(quant_bits=8)


def main(path: str) -> dict:
    import paddle
    from paddle.distributed.fleet.meta_parallel import ColumnParallelLinear, RowParallelLinear
    from paddle.quantization import PTQ, QuantConfig as PaddleQuantConfig
    from paddle.quantization.base_observer import BaseObserver
    from paddleslim.quant.observers.channel_wise import ChannelWiseObserver

    from paddlenlp.data import DataCollatorForSeq2Seq
    from paddlenlp.datasets import load_dataset
    from paddlenlp.trainer import PdArgumentParser
    from paddlenlp.transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, Llama3Tokenizer, LlamaTokenizer
    from paddlenlp.transformers.configuration_utils import LlmMetaConfig
    from paddlenlp.trl import DataConfig, ModelConfig, QuantConfig, SFTConfig, SFTTrainer
    from paddlenlp.trl.llm_utils import init_chat_template

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from upstream_finetune import tokenize

    sys.argv = [sys.argv[0], path]  # what upstream's parser reads: the file, no flags
    gen_args, quant_args, model_args, data_args, training_args = PdArgumentParser(
        (GenerateArgument, QuantConfig, ModelConfig, DataConfig, SFTConfig)).parse_json_file_and_cmd_lines()
    for key in ("do_qat", "do_gptq", "do_awq", "shift", "smooth", "auto_clip", "load_quant_model"):
        if getattr(quant_args, key, False):
            sys.exit(f"{key}: not in this script (it runs plain PTQ)")
    if not quant_args.do_ptq:
        sys.exit("do_ptq is not set")
    paddle.set_device(training_args.device)

    dtype = "float32"
    if training_args.fp16_opt_level == "O2":
        dtype = "float16" if training_args.fp16 else "bfloat16" if training_args.bf16 else sys.exit("--fp16 or --bf16")
    name = model_args.model_name_or_path
    config = AutoConfig.from_pretrained(name, dtype=dtype, quantization_config=dict(
        weight_quantize_algo=model_args.weight_quantize_algo, weight_blocksize=model_args.weight_blocksize,
        weight_double_quant=model_args.weight_double_quant,
        weight_double_quant_block_size=model_args.weight_double_quant_block_size))
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

    tok = AutoTokenizer.from_pretrained(name)
    init_chat_template(tok, name, data_args.chat_template)
    if isinstance(tok, (LlamaTokenizer, Llama3Tokenizer)):
        tok.pad_token_id = tok.eos_token_id
    root = data_args.dataset_name_or_path
    calib = os.path.join(root, "quant.json")
    calib = calib if os.path.exists(calib) else os.path.join(root, "train.json")
    ptq_ds = load_dataset("json", data_files=calib, lazy=False)[0]
    use_template = tok.chat_template is not None
    ptq_ds = ptq_ds.map(lambda r: tokenize(tok, r, data_args, use_template))

    padding, max_length = (True, None)
    if data_args.zero_padding or data_args.pad_to_max_length:
        padding, max_length = "max_length", data_args.max_length
    trainer = SFTTrainer(model=model, args=training_args, train_dataset=None, eval_dataset=None, tokenizer=tok,
                         data_collator=DataCollatorForSeq2Seq(
                             tokenizer=tok, max_length=max_length, padding=padding, max_label_length=max_length,
                             return_tensors="np", return_attention_mask=not model_args.flash_mask,
                             pad_to_multiple_of=data_args.pad_to_multiple_of),
                         gen_args=gen_args, data_args=data_args)
    trainer.model.eval()
    loader = trainer.get_ptq_dataloader(ptq_ds)

    # apply_ptq
    activation, weight = qconfig(quant_args)
    q_config = PaddleQuantConfig(activation=None, weight=None)
    skip = quant_args.skip_list_names or []
    for cur_name, layer in trainer.model.named_sublayers():
        if any(k in cur_name for k in skip):
            continue
        if type(layer) in (paddle.nn.Linear, ColumnParallelLinear, RowParallelLinear):
            q_config.add_name_config([layer.full_name()], activation=activation, weight=weight)
    trainer.model = PTQ(q_config).quantize(trainer.model, inplace=True)
    for m in trainer.model.sublayers():
        if hasattr(m, "observer_enabled"):
            m.observer_enabled = True
    trainer.ptq_loop(loader, description="PTQ", max_eval_iters=quant_args.ptq_step)
    for m in trainer.model.sublayers():
        if hasattr(m, "observer_enabled"):
            m.observer_enabled = False
    act_scales, weight_scales = {}, {}
    for cur_name, layer in trainer.model.named_sublayers():
        if isinstance(layer, (ChannelWiseObserver, BaseObserver)) and "_observer" not in cur_name:
            if "activation_quanter" in cur_name:
                act_scales[cur_name] = layer.scales().cast("float32").numpy().tolist()
            elif "weight_quanter" in cur_name:
                weight_scales[cur_name] = layer.scales().cast("float32").numpy().tolist()
    os.makedirs(training_args.output_dir, exist_ok=True)
    for fname, obj in (("act_scales.json", act_scales), ("weight_scales.json", weight_scales)):
        with open(os.path.join(training_args.output_dir, fname), "w") as f:
            json.dump(obj, f)
    steps = min(len(loader), quant_args.ptq_step) if quant_args.ptq_step > 0 else len(loader)
    return {"config": path, "act_quant_method": quant_args.act_quant_method, "steps": steps, "act_scales": act_scales}


if __name__ == "__main__":
    files = sys.argv[1:]
    if not files or not all(f.endswith(".json") for f in files):
        sys.exit("usage: python tests/upstream_quant_ptq.py CONFIG.json [CONFIG.json ...]")
    for f in files:
        print(json.dumps(main(f)), flush=True)
