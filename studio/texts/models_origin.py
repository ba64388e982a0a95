"""Where each model of the Models list came from (core.models.imports.ORIGINS), and the words in it."""

TEXT = {
    "models.origin.imported": {"en": "imported ({how}) from {path}", "zh": "导入（{how}）自 {path}"},
    "models.origin.static": {"en": "static export (Paddle Inference) of {path}", "zh": "{path} 的静态图导出（Paddle Inference）"},
    "models.origin.random": {"en": "tiny, random weights (demo init --family)", "zh": "微型模型，随机权重（demo init --family）"},
    "models.origin.demo": {"en": "demo model", "zh": "演示模型"},
    "models.origin.merged": {"en": "{kind} adapter {adapter} merged into {base}", "zh": "{kind} 适配器 {adapter} 合并进 {base}"},
    "models.origin.quantized": {"en": "quantized ({algorithm}, preset {preset}) from {path}",
                                "zh": "由 {path} 量化（{algorithm}，预设 {preset}）"},
    "models.origin.adapter": {"en": "{kind} adapter of {base}, run {run}, {steps} steps",
                              "zh": "{base} 的 {kind} 适配器，训练 {run}，{steps} 步"},
    "models.origin.trained": {"en": "{method} of {base}, run {run}, {steps} steps",
                              "zh": "{base} 的 {method} 训练结果，训练 {run}，{steps} 步"},
    "models.how.linked": {"en": "linked", "zh": "链接"},
    "models.how.copied": {"en": "copied", "zh": "复制"},
    "models.how.converted from PyTorch": {"en": "converted from PyTorch", "zh": "由 PyTorch 转换"},
    "models.method.sft": {"en": "full fine-tune", "zh": "全参数微调"},
    "models.method.pretrain": {"en": "pretraining", "zh": "预训练"},
    "models.method.dpo": {"en": "full DPO", "zh": "全参数 DPO"},
    "models.method.kto": {"en": "full KTO", "zh": "全参数 KTO"},
}
