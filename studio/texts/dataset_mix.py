"""zh/en text of the Dataset tab's paged browser and dataset mixing (issue 35)."""

TEXT = {
    # browsing a dataset page by page
    "dataset.browse": {"en": "5. Browse a dataset", "zh": "5. 浏览数据集"},
    "dataset.browse_pick": {"en": "Dataset", "zh": "数据集"},
    "dataset.browse_split": {"en": "Split", "zh": "划分"},
    "dataset.browse_page": {"en": "Page", "zh": "页码"},
    "dataset.browse_prev": {"en": "‹ Previous", "zh": "‹ 上一页"},
    "dataset.browse_next": {"en": "Next ›", "zh": "下一页 ›"},
    "dataset.browse_none": {"en": "Pick a dataset to browse its records.", "zh": "选择一个数据集以浏览其记录。"},
    "dataset.browse_info": {
        "en": "Page {page} of {pages} · {total} rows in {split} · format {fmt} ({kind})",
        "zh": "第 {page} 页，共 {pages} 页 · {split} 中共 {total} 行 · 格式 {fmt}（{kind}）",
    },
    "dataset.col_turns": {"en": "turns", "zh": "轮数"},
    "dataset.col_system": {"en": "system", "zh": "系统提示"},
    "dataset.col_src": {"en": "prompt (src)", "zh": "提问（src）"},
    "dataset.col_tgt": {"en": "answer (tgt)", "zh": "回答（tgt）"},
    "dataset.col_chosen": {"en": "chosen", "zh": "较优回答"},
    "dataset.col_rejected": {"en": "rejected", "zh": "较差回答"},
    "dataset.col_answer": {"en": "answer", "zh": "回答"},
    "dataset.col_label": {"en": "label", "zh": "标注"},
    "dataset.col_text": {"en": "text", "zh": "文本"},
    "dataset.kto_desirable": {"en": "desirable", "zh": "期望的"},
    "dataset.kto_undesirable": {"en": "undesirable", "zh": "不期望的"},
    "dataset.row_problem": {"en": "⚠ {field}: {reason}", "zh": "⚠ {field}：{reason}"},
    # mixing datasets
    "dataset.mix": {"en": "6. Mix datasets", "zh": "6. 混合数据集"},
    "dataset.mix_help": {
        "en": ("Pick 2 to 4 datasets of one kind and a ratio for each: the share of its training records that "
               "goes in (0.5 = a random half, 1 = all, 2 = each record twice). Each part gives the same share of "
               "its dev records (at most all). Records are shuffled together with the seed; the new dataset "
               "records its parts, ratios and seed, and a run trained on it records them too."),
        "zh": ("选择 2 到 4 个同类数据集，并为每个设置比例：取其训练记录的多少（0.5 = 随机取一半，1 = 全部，"
               "2 = 每条记录取两次）。每个数据集的验证记录按同样比例抽取（最多全部）。记录按随机种子打乱混合；"
               "新数据集记下来源、比例和种子，用它训练的运行也会记下这些信息。"),
    },
    "dataset.mix_part": {"en": "Dataset", "zh": "数据集"},
    "dataset.mix_ratio": {"en": "Ratio", "zh": "比例"},
    "dataset.mix_name": {"en": "Name of the new dataset", "zh": "新数据集的名称"},
    "dataset.mix_seed": {"en": "Seed", "zh": "随机种子"},
    "dataset.mix_btn": {"en": "Mix", "zh": "混合"},
    "dataset.mixed": {
        "en": "Mixed **{name}**: {train} training and {dev} dev records from {parts}.",
        "zh": "已混合生成 **{name}**：训练记录 {train} 条，验证记录 {dev} 条，来自 {parts}。",
    },
    "dataset.mixed_part": {"en": "{dataset}: {taken} records ({available} available)",
                           "zh": "{dataset}：{taken} 条（共有 {available} 条）"},
    # engine codes (core.data.datasets.MESSAGES)
    "problem.no_split": {"en": "{path} has no {split} split (it has: {splits})",
                         "zh": "{path} 没有 {split} 划分（现有：{splits}）"},
    "problem.mix_too_few": {"en": "a mix needs at least 2 datasets, got {n}", "zh": "混合至少需要 2 个数据集，当前为 {n} 个"},
    "problem.mix_same_part": {"en": "dataset {dataset!r} is named twice in the mix",
                              "zh": "数据集 {dataset!r} 在混合中出现了两次"},
    "problem.mix_bad_ratio": {"en": "ratio of {dataset!r} must be a number above 0 and at most {limit}, got {value}",
                              "zh": "{dataset!r} 的比例须大于 0 且不超过 {limit}，实际为 {value}"},
    "problem.mix_bad_count": {"en": "record count of {dataset!r} must be a whole number of at least 1, got {value}",
                              "zh": "{dataset!r} 的记录数须为不小于 1 的整数，实际为 {value}"},
    "problem.mix_incompatible": {
        "en": ("cannot mix {a!r} ({a_kind}) with {b!r} ({b_kind}): a training set holds one kind of record (chat "
               "src/tgt, preference pairs, KTO answers or raw text)"),
        "zh": ("无法将 {a!r}（{a_kind}）与 {b!r}（{b_kind}）混合：一个训练集只能包含一类记录（对话 src/tgt、"
               "偏好对、KTO 回答或纯文本）"),
    },
    "problem.mix_empty_part": {"en": "dataset {dataset!r} has no usable training records",
                               "zh": "数据集 {dataset!r} 没有可用的训练记录"},
}
