"""zh/en text for every label and message, keyed by fully qualified ids ("dataset.validate").

Engine problems and errors arrive as codes with params (see core.datasets.MESSAGES); they are
translated here under ``problem.<code>``. tests/test_locales.py checks both languages exist for
every key and for every engine code.
"""

from __future__ import annotations

LANGS = ("en", "zh")

TEXT: dict[str, dict[str, str]] = {
    # app shell
    "app.title": {"en": "Paddle LLM Studio", "zh": "Paddle 大模型工作室"},
    "app.subtitle": {
        "en": "Data, training, merging, quantization, evaluation and chat for PaddleNLP models",
        "zh": "面向 PaddleNLP 大模型的数据、训练、合并、量化、评估与对话",
    },
    "app.versions": {
        "en": "paddle {paddle} · paddlenlp {paddlenlp} · device: {device}",
        "zh": "paddle {paddle} · paddlenlp {paddlenlp} · 设备：{device}",
    },
    "app.language": {"en": "Language / 语言", "zh": "语言 / Language"},
    "app.workspace": {"en": "workspace: {path}", "zh": "工作区：{path}"},
    "app.not_installed": {"en": "not installed", "zh": "未安装"},
    "device.cpu": {"en": "CPU", "zh": "CPU"},
    "device.gpu": {"en": "GPU ({names})", "zh": "GPU（{names}）"},
    # dataset tab
    "dataset.tab": {"en": "Dataset", "zh": "数据集"},
    "dataset.source": {"en": "1. Choose data", "zh": "1. 选择数据"},
    "dataset.upload": {"en": "Upload a JSON / JSON-lines file", "zh": "上传 JSON / JSON Lines 文件"},
    "dataset.pick": {"en": "…or pick a file in the workspace", "zh": "……或选择工作区中的文件"},
    "dataset.refresh": {"en": "Refresh", "zh": "刷新"},
    "dataset.format": {"en": "Format", "zh": "格式"},
    "dataset.format_auto": {"en": "auto-detect", "zh": "自动识别"},
    "dataset.validate": {"en": "Validate", "zh": "校验"},
    "dataset.result": {"en": "2. Validation", "zh": "2. 校验结果"},
    "dataset.problems": {"en": "Problems", "zh": "问题列表"},
    "dataset.col_file": {"en": "file", "zh": "文件"},
    "dataset.col_line": {"en": "line", "zh": "行号"},
    "dataset.col_field": {"en": "field", "zh": "字段"},
    "dataset.col_severity": {"en": "severity", "zh": "级别"},
    "dataset.col_reason": {"en": "reason", "zh": "原因"},
    "dataset.severity_error": {"en": "error", "zh": "错误"},
    "dataset.severity_warning": {"en": "warning", "zh": "警告"},
    "dataset.none_selected": {"en": "Upload or pick a file to validate it.", "zh": "上传或选择一个文件以进行校验。"},
    "dataset.detected": {"en": "Detected format: **{fmt}**", "zh": "识别出的格式：**{fmt}**"},
    "dataset.summary": {
        "en": "{records} records: **{good} good**, **{bad} bad**, {duplicates} duplicates, {multi} multi-turn, {system} with a system prompt, {warnings} warnings · {mb} MB in {sec} s",
        "zh": "共 {records} 条记录：**{good} 条有效**，**{bad} 条有误**，{duplicates} 条重复，{multi} 条多轮，{system} 条带系统提示，{warnings} 个警告 · {mb} MB，用时 {sec} 秒",
    },
    "dataset.ok": {"en": "**Ready to import.**", "zh": "**可以导入。**"},
    "dataset.not_ok": {
        "en": "**Not ready:** fix the errors below, or import with “skip bad records”.",
        "zh": "**尚不能导入**：请修正下列错误，或勾选“跳过错误记录”后导入。",
    },
    "dataset.needs_convert": {
        "en": "This file will be converted from {fmt} to PaddleNLP src/tgt on import.",
        "zh": "导入时会将该文件从 {fmt} 转换为 PaddleNLP 的 src/tgt 格式。",
    },
    "dataset.omitted": {"en": "…and {n} more problems not listed.", "zh": "……另有 {n} 个问题未列出。"},
    "dataset.dup_example": {"en": "line {line} repeats line {first}", "zh": "第 {line} 行与第 {first} 行重复"},
    "dataset.preview": {"en": "Preview", "zh": "预览"},
    "dataset.record": {"en": "Record", "zh": "记录"},
    "dataset.system_prompt": {"en": "System prompt: {text}", "zh": "系统提示：{text}"},
    "dataset.no_preview": {"en": "No good records to preview.", "zh": "没有可预览的有效记录。"},
    "dataset.tokens": {"en": "3. Token lengths", "zh": "3. Token 长度"},
    "dataset.tokenizer": {"en": "Tokenizer (workspace model)", "zh": "分词器（工作区模型）"},
    "dataset.src_length": {"en": "src_length", "zh": "src_length（输入最大长度）"},
    "dataset.max_length": {"en": "max_length", "zh": "max_length（总最大长度）"},
    "dataset.compute_tokens": {"en": "Compute token lengths", "zh": "统计 Token 长度"},
    "dataset.no_tokenizer": {"en": "Pick a tokenizer first.", "zh": "请先选择分词器。"},
    "dataset.hist_src": {"en": "src tokens", "zh": "src token 数"},
    "dataset.hist_total": {"en": "src+tgt tokens", "zh": "src+tgt token 数"},
    "dataset.token_summary": {
        "en": "{n} records · src mean {src_mean}, p95 {src_p95}, max {src_max} · src+tgt mean {tot_mean}, p95 {tot_p95}, max {tot_max} · truncated by src_length={src_length}: **{trunc_src}** · by max_length={max_length}: **{trunc_total}**",
        "zh": "{n} 条记录 · src 平均 {src_mean}，p95 {src_p95}，最大 {src_max} · src+tgt 平均 {tot_mean}，p95 {tot_p95}，最大 {tot_max} · 会被 src_length={src_length} 截断：**{trunc_src}** 条 · 会被 max_length={max_length} 截断：**{trunc_total}** 条",
    },
    "dataset.import": {"en": "4. Convert and import", "zh": "4. 转换并导入"},
    "dataset.name": {"en": "Dataset name", "zh": "数据集名称"},
    "dataset.dev_ratio": {"en": "Dev ratio", "zh": "验证集比例"},
    "dataset.skip_bad": {"en": "Skip bad records", "zh": "跳过错误记录"},
    "dataset.import_btn": {"en": "Import", "zh": "导入"},
    "dataset.imported": {
        "en": "Imported **{name}**: {train} train, {dev} dev records ({fmt}).",
        "zh": "已导入 **{name}**：训练集 {train} 条，验证集 {dev} 条（{fmt}）。",
    },
    "dataset.list": {"en": "Workspace datasets", "zh": "工作区数据集"},
    "dataset.col_name": {"en": "name", "zh": "名称"},
    "dataset.col_train": {"en": "train", "zh": "训练集"},
    "dataset.col_dev": {"en": "dev", "zh": "验证集"},
    "dataset.col_format": {"en": "format", "zh": "格式"},
    "dataset.col_source": {"en": "source", "zh": "来源"},
    "dataset.col_created": {"en": "created", "zh": "创建时间"},
    # train tab
    "train.tab": {"en": "Train", "zh": "训练"},
    "train.preset": {"en": "Preset", "zh": "预设"},
    "train.load_preset": {"en": "Load preset", "zh": "载入预设"},
    "train.run_name": {"en": "Run name", "zh": "运行名称"},
    "train.section_model": {"en": "Model", "zh": "模型"},
    "train.section_data": {"en": "Data", "zh": "数据"},
    "train.section_method": {"en": "Method", "zh": "训练方法"},
    "train.section_training": {"en": "Training", "zh": "训练参数"},
    "train.section_parallel": {"en": "Parallel and launch", "zh": "并行与启动"},
    "train.advanced": {"en": "Advanced", "zh": "高级"},
    "train.check": {"en": "Config check", "zh": "配置检查"},
    "train.check_ok": {"en": "No problems: ready to start.", "zh": "没有问题，可以开始。"},
    "train.check_problems": {"en": "**{n} problem(s)** to fix before starting:", "zh": "开始前需修正 **{n} 个问题**："},
    "train.command": {"en": "Command preview", "zh": "命令预览"},
    "train.saved": {"en": "Saved configs", "zh": "已保存的配置"},
    "train.load": {"en": "Load", "zh": "载入"},
    "train.save": {"en": "Save config", "zh": "保存配置"},
    "train.saved_as": {"en": "Saved as `{path}`.", "zh": "已保存为 `{path}`。"},
    "train.start": {"en": "Start", "zh": "开始训练"},
    "train.started": {
        "en": "Run **{run}** is {state}. Follow it with `paddle-studio runs show {run}`; its files are in `{dir}`.",
        "zh": "运行 **{run}** {state}。可用 `paddle-studio runs show {run}` 查看；文件位于 `{dir}`。",
    },
    "state.queued": {"en": "queued", "zh": "排队中"},
    "state.running": {"en": "running", "zh": "运行中"},
    "state.succeeded": {"en": "succeeded", "zh": "已成功"},
    "state.failed": {"en": "failed", "zh": "已失败"},
    "state.stopped": {"en": "stopped", "zh": "已停止"},
    # config check codes (core.config.MESSAGES)
    "check.required": {"en": "{field} is required", "zh": "{field} 为必填项"},
    "check.path_missing": {"en": "{field}: no such folder {path}", "zh": "{field}：目录 {path} 不存在"},
    "check.no_train_file": {"en": "{field}: {path} has no train.json", "zh": "{field}：{path} 中没有 train.json"},
    "check.no_dev_file": {"en": "evaluation is on but {path} has no dev.json", "zh": "已开启评估，但 {path} 中没有 dev.json"},
    "check.not_a_model": {"en": "{field}: {path} has no config.json", "zh": "{field}：{path} 中没有 config.json"},
    "check.bad_value": {"en": "{field} must be {expected}, got {value!r}", "zh": "{field} 须为{expected}，实际为 {value!r}"},
    "check.max_length_le_src": {
        "en": "max_length ({max_length}) must be greater than src_length ({src_length})",
        "zh": "max_length（{max_length}）须大于 src_length（{src_length}）",
    },
    "check.prefix_with_pipeline": {
        "en": "prefix tuning does not work with pipeline parallel (pipeline_parallel_degree={pp})",
        "zh": "前缀微调不支持流水线并行（pipeline_parallel_degree={pp}）",
    },
    "check.flash_mask_needs_zero_padding": {"en": "flash_mask needs zero_padding", "zh": "flash_mask 需要开启 zero_padding"},
    "check.opt_level_needs_amp": {"en": "fp16_opt_level O2 needs fp16 or bf16", "zh": "fp16_opt_level 为 O2 时须开启 fp16 或 bf16"},
    "check.fp16_and_bf16": {"en": "choose fp16 or bf16, not both", "zh": "fp16 与 bf16 只能选一个"},
    "check.needs_gpu": {"en": "{feature} needs a GPU; none is present", "zh": "{feature} 需要 GPU，但当前没有 GPU"},
    "check.tp_with_vera_lokr": {"en": "tensor parallel does not work with {method}", "zh": "张量并行不支持 {method}"},
    "check.devices_on_cpu": {
        "en": "--devices needs GPUs; on CPU use nproc (processes) instead",
        "zh": "--devices 需要 GPU；在 CPU 上请改用 nproc（进程数）",
    },
    "check.degrees_do_not_divide": {
        "en": "tensor x pipeline x sharding degrees ({product}) must divide the number of processes ({world})",
        "zh": "张量×流水线×分组切分并行度（{product}）须整除进程总数（{world}）",
    },
    "check.multinode_needs_master": {"en": "more than one node needs master host:port", "zh": "多机训练需要填写 master 的 host:port"},
    "check.qlora_needs_algo": {"en": "QLoRA needs weight_quantize_algo (nf4 or fp4)", "zh": "QLoRA 需要设置 weight_quantize_algo（nf4 或 fp4）"},
    "check.unknown_method": {"en": "unknown method {method!r}; expected one of {expected}", "zh": "未知方法 {method!r}；应为 {expected} 之一"},
    "error.prefix": {"en": "**Error:** ", "zh": "**错误**："},
    "error.unexpected": {"en": "Unexpected error: {detail}", "zh": "意外错误：{detail}"},
    # engine problem and error codes (core.datasets.MESSAGES)
    "problem.bom": {
        "en": "file starts with a UTF-8 byte order mark (BOM); save it as UTF-8 without BOM",
        "zh": "文件以 UTF-8 BOM 开头；请保存为不带 BOM 的 UTF-8",
    },
    "problem.crlf": {"en": "line ends with CRLF (\\r\\n); Windows line ends", "zh": "行尾为 CRLF（\\r\\n），即 Windows 换行符"},
    "problem.blank_line": {"en": "blank line", "zh": "空行"},
    "problem.line_too_long": {
        "en": "line is {length} bytes, longer than the limit of {limit} bytes; skipped",
        "zh": "该行有 {length} 字节，超过上限 {limit} 字节；已跳过",
    },
    "problem.not_utf8": {"en": "bytes that are not UTF-8 at byte {position}", "zh": "第 {position} 字节处不是 UTF-8 编码"},
    "problem.invalid_json": {"en": "invalid JSON: {detail} (column {column})", "zh": "JSON 无效：{detail}（第 {column} 列）"},
    "problem.not_object": {"en": "expected a JSON object, got {got}", "zh": "应为 JSON 对象，实际为 {got}"},
    "problem.missing_field": {"en": "missing field", "zh": "缺少字段"},
    "problem.wrong_type": {"en": "expected {expected}, got {got}", "zh": "类型应为 {expected}，实际为 {got}"},
    "problem.turns_mismatch": {"en": "src has {src} turns but tgt has {tgt}", "zh": "src 有 {src} 轮，但 tgt 有 {tgt} 轮"},
    "problem.mixed_types": {"en": "src and tgt must both be strings or both be lists", "zh": "src 与 tgt 须同为字符串或同为列表"},
    "problem.empty_text": {"en": "empty text", "zh": "文本为空"},
    "problem.bad_role": {"en": "unknown role {role!r}; expected one of {expected}", "zh": "未知角色 {role!r}；应为 {expected} 之一"},
    "problem.bad_order": {
        "en": "turns must alternate user then assistant; found {role!r} at position {index}",
        "zh": "对话须按“用户、助手”交替；第 {index} 条出现了 {role!r}",
    },
    "problem.no_assistant_reply": {"en": "conversation does not end with an assistant reply", "zh": "对话没有以助手回复结尾"},
    "problem.array_too_large": {
        "en": "a JSON array file of {size} bytes is too large to read at once; convert it to JSON lines",
        "zh": "JSON 数组文件有 {size} 字节，太大无法一次读取；请转换为 JSON Lines",
    },
    "problem.name_empty": {"en": "dataset name is empty", "zh": "数据集名称为空"},
    "problem.name_unsafe": {
        "en": "dataset name {name!r} is not allowed: use letters, digits, '-', '_' or '.', no path separators or '..'",
        "zh": "数据集名称 {name!r} 不合法：只能使用字母、数字、“-”“_”“.”，不能含路径分隔符或“..”",
    },
    "problem.dataset_exists": {"en": "a dataset named {name!r} already exists", "zh": "名为 {name!r} 的数据集已存在"},
    "problem.not_found": {"en": "no such file or folder: {path}", "zh": "文件或目录不存在：{path}"},
    "problem.no_data_files": {"en": "no train.json/dev.json or train/*.json in {path}", "zh": "{path} 中没有 train.json/dev.json 或 train/*.json"},
    "problem.has_bad_records": {
        "en": "{bad} of {total} records have errors; fix them or allow skipping bad records",
        "zh": "{total} 条记录中有 {bad} 条有误；请修正，或允许跳过错误记录",
    },
    "problem.no_records": {"en": "no usable records", "zh": "没有可用的记录"},
    "problem.bad_dev_ratio": {"en": "dev ratio must be between 0 and 0.5, got {ratio}", "zh": "验证集比例须在 0 到 0.5 之间，实际为 {ratio}"},
    "problem.unknown_format": {"en": "unknown format {fmt!r}; expected auto or one of {expected}", "zh": "未知格式 {fmt!r}；应为 auto 或 {expected} 之一"},
}


def t(key: str, lang: str = "en", **params) -> str:
    """The text for ``key`` in ``lang`` with ``params`` filled in; the key itself if unknown."""
    entry = TEXT.get(key)
    if entry is None:
        return key
    text = entry.get(lang) or entry["en"]
    if params:
        try:
            return text.format(**params)
        except (KeyError, IndexError, ValueError):
            return text
    return text


def problem(code: str, params: dict | None, lang: str) -> str:
    """An engine problem/error code in the user's language."""
    return t(f"problem.{code}", lang, **(params or {}))


# Chinese help for every RunConfig field (English comes from the dataclass metadata).
FIELD_HELP_ZH = {
    "model_name_or_path": "基座模型目录（PaddleNLP save_pretrained 格式）。",
    "tokenizer_name_or_path": "分词器目录（不同于模型自带时填写）。",
    "dataset_name_or_path": "数据集目录，含 train.json（评估还需 dev.json）。",
    "src_length": "输入最多保留的 token 数；过长的输入从开头截断。",
    "max_length": "输入加回答最多的 token 数；过长的回答从结尾截断。",
    "zero_padding": "把多条样本拼成一条序列，而不是补齐。",
    "greedy_zero_padding": "按长度贪心拼接（配合 zero_padding）。",
    "chat_template": "对话模板文件；默认使用分词器自带模板。",
    "method": "训练方法。",
    "lora_rank": "LoRA 的秩 r。",
    "rslora": "rsLoRA：按 alpha/sqrt(r) 而非 alpha/r 缩放。",
    "lora_plus_scale": "LoRA+：B 矩阵的学习率倍数。",
    "pissa": "PiSSA：用主奇异向量初始化 LoRA。",
    "num_prefix_tokens": "前缀微调：每层的虚拟 token 数。",
    "vera_rank": "VeRA 的秩。",
    "lokr_dim": "LoKr 的维度。",
    "neftune": "NEFTune：训练时给输入嵌入加均匀噪声。",
    "neftune_noise_alpha": "NEFTune 噪声系数 alpha。",
    "weight_quantize_algo": "QLoRA：量化基座权重（nf4、fp4、weight_only_int8 等），仅限 GPU。",
    "per_device_train_batch_size": "每个进程每步的样本数。",
    "per_device_eval_batch_size": "每个进程每个评估步的样本数。",
    "gradient_accumulation_steps": "累积多少步的梯度再更新一次。",
    "learning_rate": "峰值学习率。",
    "num_train_epochs": "训练轮数（max_steps > 0 时忽略）。",
    "max_steps": "总优化步数；-1 表示按轮数训练。",
    "warmup_steps": "线性预热步数。",
    "lr_scheduler_type": "学习率调度方式。",
    "logging_steps": "每隔多少步写一条指标。",
    "evaluation_strategy": "何时在验证集上评估。",
    "eval_steps": "每隔多少步评估一次（evaluation_strategy=steps）。",
    "save_strategy": "何时保存检查点。",
    "save_steps": "每隔多少步保存一次（save_strategy=steps）。",
    "save_total_limit": "最多保留的检查点数。",
    "fp16": "fp16 混合精度（GPU）。",
    "bf16": "bf16 混合精度（GPU）。",
    "fp16_opt_level": "AMP 级别；O2 需要开启 fp16 或 bf16。",
    "recompute": "反向时重算激活以节省显存。",
    "use_flash_attention": "FlashAttention（仅限 GPU）。",
    "flash_mask": "FlashMask 注意力（仅限 GPU，需要 zero_padding）。",
    "seed": "随机种子。",
    "nproc": "本机进程数（CPU 上经 gloo 数据并行）。",
    "devices": "GPU 编号，例如 0,1（仅限 GPU）。",
    "nnodes": "参与训练的机器数。",
    "master": "0 号机器的 host:port（多机）。",
    "rank": "本机的节点序号（多机）。",
    "tensor_parallel_degree": "张量并行度。",
    "pipeline_parallel_degree": "流水线并行度。",
    "sharding": "分组切分阶段：空、stage1、stage2 或 stage3。",
    "sharding_parallel_degree": "分组切分并行度。",
}
