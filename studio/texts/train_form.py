"""zh/en text of the Train form's method-dependent fields and preference-dataset size check."""

TEXT = {
    "check.dpo_too_few_pairs": {
        "en": "{path} holds {n} preference pair(s); DPO is refused on fewer than {need}: the larger of {least} (fewer "
              "teach those answers, not a preference) and one optimizer step's worth (per_device_train_batch_size "
              "{batch} x {world} process(es) x gradient_accumulation_steps {accum}). Keep more pairs in the Chat tab's "
              "compare mode, or import a larger preference dataset",
        "zh": "{path} 只有 {n} 条偏好对；少于 {need} 条时不进行 DPO 训练：取 {least}（更少的偏好对只会让模型记住这几个回答，"
              "学不到偏好）与一个优化步所需数量（per_device_train_batch_size {batch} × {world} 个进程 × "
              "gradient_accumulation_steps {accum}）中的较大者。请在对话页的对比模式中保留更多偏好对，或导入更大的偏好数据集",
    },
}
