"""Will it fit? The Train tab's dry run and the Start button's second click (core.train.estimate)."""

TEXT = {
    "train.dry_run": {"en": "Dry run (20 steps)", "zh": "试运行（20 步）"},
    "train.dry_started": {
        "en": "Dry run **{run}** is training {steps} steps (a run of its own, in the Runs tab: no evaluation, no "
              "checkpoint); the estimate is measured from it when it ends …",
        "zh": "试运行 **{run}** 正在训练 {steps} 步（一次独立的运行，可在“运行”页查看：不评估、不保存检查点）；"
              "结束后将用它实测的结果校准预估……"},
    "train.dry_progress": {"en": "Dry run **{run}**: step {step} of {steps} …", "zh": "试运行 **{run}**：第 {step} / {steps} 步……"},
    "train.dry_done": {"en": "Dry run **{run}** finished: the estimate below is now measured from it.",
                       "zh": "试运行 **{run}** 已结束：下方的预估现已按其实测结果校准。"},
    "train.dry_failed": {"en": "Dry run **{run}** {state}: {reason} (its log is in the Runs tab)",
                         "zh": "试运行 **{run}** {state}：{reason}（日志见“运行”页）"},
    "train.estimate_dry": {
        "en": " Measured by the dry run {run} of this very config.",
        "zh": " 已按本配置的试运行 {run} 实测校准。"},
    "train.estimate_lengths": {
        "en": " Batches pad to about {mean} tokens (at most {peak}), from the dataset's own lengths.",
        "zh": " 按数据集自身的长度，每批约填充到 {mean} 个 token（最多 {peak} 个）。"},
    "train.estimate_unmeasured": {
        "en": " Batches counted at max_length ({max} tokens): this dataset's own lengths are measured by its first "
              "run or a dry run.",
        "zh": " 按 max_length（{max} 个 token）估算每批长度：该数据集自身的长度会在其首次运行或试运行后测得。"},
    "train.start_anyway": {
        "en": "**Not started:** the estimate does not fit this machine (see the warning above). Click **Start** "
              "again to start it anyway.",
        "zh": "**尚未开始：** 预估超出本机的可用资源（见上方警告）。再次点击 **开始** 仍会启动。"},
}
