"""zh/en text for every label and message, keyed by fully qualified ids ("dataset.validate").

Engine problems and errors arrive as codes with params (see core.data.datasets.MESSAGES); they are
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
    "dataset.hist_src": {"en": "prompt tokens (masked)", "zh": "提示 token 数（不计损失）"},
    "dataset.hist_total": {"en": "example tokens (prompt + answer)", "zh": "样本 token 数（提示 + 回答）"},
    "dataset.token_summary": {
        "en": "{n} records as training tokenizes them (system prompt, chat template, every round, EOS) · prompt mean "
              "{src_mean}, p95 {src_p95}, max {src_max} · whole example mean {tot_mean}, p95 {tot_p95}, max {tot_max} · "
              "cut at src_length={src_length} / max_length={max_length}: **{trunc_total}** (prompt cut: {trunc_src}, "
              "dropped entirely: {dropped})",
        "zh": "{n} 条记录（按训练时的分词：系统提示、对话模板、全部轮次、EOS）· 提示 平均 {src_mean}，p95 {src_p95}，最大 "
              "{src_max} · 完整样本 平均 {tot_mean}，p95 {tot_p95}，最大 {tot_max} · 在 src_length={src_length} / "
              "max_length={max_length} 下被截断：**{trunc_total}** 条（其中提示被截断 {trunc_src} 条，整条丢弃 {dropped} 条）",
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
        "en": "Run **{run}** is {state}. It is shown in the Runs tab; its files are in `{dir}`.",
        "zh": "运行 **{run}** {state}。可在“运行”页查看；文件位于 `{dir}`。",
    },
    "state.queued": {"en": "queued", "zh": "排队中"},
    "state.running": {"en": "running", "zh": "运行中"},
    "state.succeeded": {"en": "succeeded", "zh": "已成功"},
    "state.failed": {"en": "failed", "zh": "已失败"},
    "state.stopped": {"en": "stopped", "zh": "已停止"},
    # runs tab
    "runs.tab": {"en": "Runs", "zh": "运行"},
    "runs.list": {"en": "All runs", "zh": "全部运行"},
    "runs.col_run": {"en": "run", "zh": "运行"},
    "runs.col_state": {"en": "state", "zh": "状态"},
    "runs.col_method": {"en": "method", "zh": "方法"},
    "runs.col_step": {"en": "step", "zh": "步数"},
    "runs.col_loss": {"en": "loss", "zh": "损失"},
    "runs.col_eval_loss": {"en": "eval loss", "zh": "验证损失"},
    "runs.col_created": {"en": "created", "zh": "创建时间"},
    "runs.col_key": {"en": "key", "zh": "参数"},
    "runs.pick": {"en": "Run", "zh": "运行"},
    "runs.compare": {"en": "Compare with", "zh": "对比运行"},
    "runs.refresh": {"en": "Refresh", "zh": "刷新"},
    "runs.stop": {"en": "Stop", "zh": "停止"},
    "runs.resume": {"en": "Resume", "zh": "恢复"},
    "runs.more": {"en": "More epochs", "zh": "追加轮数"},
    "runs.resume_nproc": {"en": "Processes for Resume (0: as before)", "zh": "恢复时的进程数（0：与之前相同）"},
    "runs.continue": {"en": "Continue", "zh": "继续训练"},
    "runs.curve": {"en": "Loss and eval loss", "zh": "训练损失与验证损失"},
    "runs.log": {"en": "Log (rank 0)", "zh": "日志（0 号进程）"},
    "runs.config": {"en": "Config and command", "zh": "配置与命令"},
    "runs.diff": {"en": "Config differences", "zh": "配置差异"},
    "runs.eta": {"en": "· about {s} s left", "zh": "· 约剩 {s} 秒"},
    "runs.progress": {"en": "step {step} / {max} ({pct}%)", "zh": "第 {step} / {max} 步（{pct}%）"},
    "runs.last_loss": {"en": "loss {loss}", "zh": "损失 {loss}"},
    "runs.last_eval": {"en": "eval loss {loss}", "zh": "验证损失 {loss}"},
    "runs.startup.process": {"en": "starting: the training process is starting", "zh": "启动中：训练进程正在启动"},
    "runs.startup.imports": {"en": "starting: importing paddle and paddlenlp", "zh": "启动中：正在导入 paddle 与 paddlenlp"},
    "runs.startup.tokenizer": {"en": "starting: loading the tokenizer", "zh": "启动中：正在加载分词器"},
    "runs.startup.data": {"en": "starting: reading and tokenizing the dataset", "zh": "启动中：正在读取并切分数据集"},
    "runs.startup.model": {"en": "starting: loading the model", "zh": "启动中：正在加载模型"},
    "runs.startup.trainer": {"en": "starting: preparing the trainer", "zh": "启动中：正在准备训练器"},
    "runs.startup.first_step": {"en": "training: waiting for the first loss point", "zh": "训练中：等待第一个损失值"},
    "runs.reason": {"en": "reason: {reason}", "zh": "原因：{reason}"},
    "runs.exit_code": {"en": "exit code {code}", "zh": "退出码 {code}"},
    "verify.warn_failed": {
        "en": "⚠ This output failed its run's round-trip check: {reason}. Merging or quantizing it would carry that on.",
        "zh": "⚠ 该输出未通过所属运行的往返校验：{reason}。合并或量化会把这个问题带下去。"},
    "verify.warn_unverified": {
        "en": "⚠ This output has not passed its run's round-trip check ({state}): `paddle-studio runs verify RUN` checks it.",
        "zh": "⚠ 该输出尚未通过所属运行的往返校验（{state}）：可用 `paddle-studio runs verify RUN` 校验。"},
    "merge.against_training": {
        "en": "Against training: the merged model's eval loss on training's own sample is {got}, training recorded {want} "
              "(step {step}).",
        "zh": "与训练对照：合并后模型在训练所用样本上的验证损失为 {got}，训练时记录为 {want}（第 {step} 步）。"},
    "runs.verify.verified": {
        "en": "✔ verified: reloaded in a fresh process, eval loss {got} vs {want} in training (step {step}, {target})",
        "zh": "✔ 已验证：在新进程中重新加载，验证损失 {got}，训练中为 {want}（第 {step} 步，{target}）"},
    "runs.verify.failed": {
        "en": "✘ the saved model does not reproduce training: reloaded eval loss {got} vs {want} in training "
              "(step {step}, {target})",
        "zh": "✘ 保存的模型无法复现训练结果：重新加载后验证损失 {got}，训练中为 {want}（第 {step} 步，{target}）"},
    "runs.verify.failed_reason": {"en": "✘ the saved model does not reproduce training: {reason}",
                                  "zh": "✘ 保存的模型无法复现训练结果：{reason}"},
    "runs.verify.running": {"en": "verifying: reloading what the run saved in a fresh process…",
                            "zh": "校验中：正在新进程中重新加载本次运行保存的模型…"},
    "runs.verify.error": {"en": "✘ the saved model could not be reloaded: {reason}",
                          "zh": "✘ 无法重新加载保存的模型：{reason}"},
    "runs.verify.no_reference": {"en": "not verified: {reason}", "zh": "未验证：{reason}"},
    "runs.none": {"en": "No runs yet: start one in the Train tab.", "zh": "还没有运行：请在“训练”页开始一次。"},
    "runs.no_diff": {"en": "The two configs are the same.", "zh": "两个配置相同。"},
    "runs.pick_first": {"en": "Pick a run first.", "zh": "请先选择一个运行。"},
    "runs.action_done": {"en": "Run **{run}** is now {state}.", "zh": "运行 **{run}** 现在{state}。"},
    # merge tab
    "merge.tab": {"en": "Merge & evaluate", "zh": "合并与评估"},
    "merge.adapter": {"en": "Adapter (finished run)", "zh": "适配器（已完成的运行）"},
    "merge.name": {"en": "Merged model name", "zh": "合并后模型名称"},
    "merge.merge": {"en": "Merge", "zh": "合并"},
    "merge.limit": {"en": "Dev records to evaluate", "zh": "评估的验证记录数"},
    "merge.evaluate": {"en": "Evaluate base / adapter / merged", "zh": "评估基座 / 适配器 / 合并模型"},
    "merge.pick_first": {"en": "Pick an adapter first.", "zh": "请先选择适配器。"},
    "merge.exists": {"en": "{path} already exists; choose another name", "zh": "{path} 已存在，请换一个名称"},
    "merge.done": {
        "en": "Merged into `{path}`. Check on {n} prompts: max |merged − (base+adapter)| logits = {diff} — {verdict}",
        "zh": "已合并到 `{path}`。在 {n} 个提示上检查：合并模型与基座+适配器 logits 的最大差 = {diff} — {verdict}",
    },
    "merge.check_ok": {"en": "equal (< 1e-4)", "zh": "一致（< 1e-4）"},
    "merge.check_bad": {"en": "NOT equal", "zh": "不一致"},
    "merge.none": {"en": "No finished run with an adapter yet.", "zh": "还没有带适配器的已完成运行。"},
    "merge.col_model": {"en": "model", "zh": "模型"},
    "merge.eval_done": {"en": "Evaluated on {n} dev records.", "zh": "已在 {n} 条验证记录上评估。"},
    # chat tab
    "chat.pref_dataset": {"en": "Preference dataset", "zh": "偏好数据集"},
    "chat.a_better": {"en": "A is better", "zh": "A 更好"},
    "chat.b_better": {"en": "B is better", "zh": "B 更好"},
    "chat.train_dpo": {"en": "Train DPO on these", "zh": "用这些数据训练 DPO"},
    "chat.pref_saved": {"en": "Kept: {side} is better. `{name}` now holds {n} preference pairs (Dataset tab).",
                        "zh": "已记录：{side} 更好。`{name}` 现有 {n} 条偏好数据（见数据集页）。"},
    "chat.pref_none": {"en": "No preference dataset `{name}` yet: mark a better answer first.",
                       "zh": "还没有偏好数据集 `{name}`：请先标记更好的回答。"},
    "chat.pref_filled": {"en": "The Train form is filled in for DPO on `{name}`: check it and press Start.",
                         "zh": "已为 `{name}` 填好 DPO 训练表单：请检查后点击开始。"},
    "chat.pref_no_answers": {"en": "Both sides need an answer to the last message: load two models (compare) and send one first.",
                             "zh": "两侧都需要对最后一条消息的回答：请先加载两个模型（对比）并发送消息。"},
    "chat.pref_empty_answer": {"en": "One of the two answers is empty: there is nothing to prefer. Regenerate it or ask again.",
                               "zh": "两个回答之一为空：无从比较。请重新生成或换个问题。"},
    "chat.pref_different_prompts": {"en": "The two sides answer different messages.", "zh": "两侧回答的不是同一条消息。"},
    "chat.pref_not_preference": {"en": "Dataset `{name}` exists and holds other records, not preference pairs: choose another name.",
                                 "zh": "数据集 `{name}` 已存在且不是偏好数据：请换一个名称。"},
    "chat.pref_name_empty": {"en": "Name the preference dataset first.", "zh": "请先填写偏好数据集名称。"},
    "chat.pref_name_unsafe": {"en": "`{name}` is not a usable dataset name (letters, digits, - _ .).",
                              "zh": "`{name}` 不能用作数据集名称（可用字母、数字、- _ .）。"},
    "chat.tab": {"en": "Chat", "zh": "对话"},
    "chat.model": {"en": "Model", "zh": "模型"},
    "chat.compare": {"en": "Compare with (optional)", "zh": "对比模型（可选）"},
    "chat.load": {"en": "Load", "zh": "加载"},
    "chat.unload": {"en": "Unload", "zh": "卸载"},
    "chat.settings": {"en": "System prompt and sampling", "zh": "系统提示与采样参数"},
    "chat.system": {"en": "System prompt", "zh": "系统提示"},
    "chat.temperature": {"en": "temperature (0 = greedy)", "zh": "temperature（0 为贪心解码）"},
    "chat.top_p": {"en": "top_p", "zh": "top_p"},
    "chat.top_k": {"en": "top_k (0 = off)", "zh": "top_k（0 为不限）"},
    "chat.repetition_penalty": {"en": "repetition penalty", "zh": "重复惩罚"},
    "chat.max_tokens": {"en": "max new tokens", "zh": "最多生成的 token 数"},
    "chat.seed": {"en": "seed (-1 = random)", "zh": "随机种子（-1 为随机）"},
    "chat.ignore_eos": {"en": "keep generating past the end-of-text token (ignore_eos: for length and speed tests)",
                        "zh": "遇到结束符也继续生成（ignore_eos：用于长度和速度测试）"},
    "chat.message": {"en": "Message", "zh": "消息"},
    "chat.send": {"en": "Send", "zh": "发送"},
    "chat.stop": {"en": "Stop", "zh": "停止"},
    "chat.regenerate": {"en": "Regenerate", "zh": "重新生成"},
    "chat.clear": {"en": "Clear", "zh": "清空"},
    "chat.api": {"en": "Copy as API call (curl / Python)", "zh": "复制为 API 调用（curl / Python）"},
    "chat.loaded": {"en": "`{model}` is served at {url} (worker pid {pid}).", "zh": "`{model}` 已在 {url} 提供服务（进程 {pid}）。"},
    "chat.not_loaded": {"en": "`{model}` is not loaded: press Load.", "zh": "`{model}` 尚未加载：请点击“加载”。"},
    "chat.pick_first": {"en": "Pick a model, then Load.", "zh": "请选择模型，然后点击“加载”。"},
    "chat.load_first": {"en": "Load the model first.", "zh": "请先加载模型。"},
    "chat.empty": {"en": "Type a message first.", "zh": "请先输入消息。"},
    "chat.stopped": {"en": "Stopped.", "zh": "已停止。"},
    "chat.length": {"en": "The answer reached max new tokens.", "zh": "回答达到了最大生成长度。"},
    # quantize tab
    "quant.tab": {"en": "Quantize", "zh": "量化"},
    "quant.model": {"en": "Model (merged or base)", "zh": "模型（合并后或基座）"},
    "quant.preset": {"en": "Preset", "zh": "预设"},
    "quant.data": {"en": "Calibration data", "zh": "校准数据"},
    "quant.data_auto": {"en": "the model's training data", "zh": "模型的训练数据"},
    "quant.calib_steps": {"en": "Calibration batches (0 = preset's)", "zh": "校准批次数（0 为预设值）"},
    "quant.eval_limit": {"en": "Dev records to score", "zh": "评估的验证记录数"},
    "quant.name": {"en": "Output model name", "zh": "输出模型名称"},
    "quant.run": {"en": "Quantize", "zh": "开始量化"},
    "quant.open_chat": {"en": "Open in Chat", "zh": "在对话页打开"},
    "quant.log": {"en": "Log", "zh": "日志"},
    "quant.from_config": {"en": "Or start from a PaddleNLP quantization config (llm/run_quantization.py JSON)",
                          "zh": "或从 PaddleNLP 量化配置开始（llm/run_quantization.py 的 JSON）"},
    "quant.config_file": {"en": "Argument file", "zh": "参数文件"},
    "quant.config_start": {"en": "Quantize as this config says", "zh": "按此配置量化"},
    "quant.config_plan": {"en": "**Runs as:** {what}, {steps} calibration batches of {batch}; output model `{name}`.",
                          "zh": "**将运行：**{what}，{steps} 个校准批次、每批 {batch} 条；输出模型 `{name}`。"},
    "quant.config_note": {"en": "Note", "zh": "说明"},
    "quant.config_problem": {"en": "Cannot start", "zh": "无法开始"},
    "quant.pick_first": {"en": "Pick a model and a preset first.", "zh": "请先选择模型和预设。"},
    "quant.col_metric": {"en": "metric", "zh": "指标"},
    "quant.col_before": {"en": "before", "zh": "量化前"},
    "quant.col_after": {"en": "after", "zh": "量化后"},
    "quant.weights_mb": {"en": "weights (MiB)", "zh": "权重（MiB）"},
    "quant.chart_size": {"en": "Size", "zh": "大小"},
    "quant.chart_quality": {"en": "Quality on dev", "zh": "验证集质量"},
    "quant.done": {
        "en": "Wrote <code>{out}</code> with preset <b>{preset}</b>: weights {before} → {after}, {ratio}× smaller, in {s}.",
        "zh": "已用预设 <b>{preset}</b> 写出 <code>{out}</code>：权重 {before} → {after}，缩小为原来的 1/{ratio}，用时 {s}。",
    },
    # config check codes (core.train.config.MESSAGES)
    "check.required": {"en": "{field} is required", "zh": "{field} 为必填项"},
    "check.path_missing": {"en": "{field}: no such folder {path}", "zh": "{field}：目录 {path} 不存在"},
    "check.no_train_file": {"en": "{field}: {path} has no train.json", "zh": "{field}：{path} 中没有 train.json"},
    "check.no_dev_file": {"en": "evaluation is on but {path} has no dev.json", "zh": "已开启评估，但 {path} 中没有 dev.json"},
    "check.hub_id": {"en": "{field}: {path} is a model hub id, not a folder here: the studio trains from a local "
                            "folder (nothing is downloaded at run time). Download it on a machine with internet "
                            "(e.g. `huggingface-cli download {path} --local-dir DIR`), copy DIR here and pick it.",
                     "zh": "{field}：{path} 是模型仓库 ID，不是本机目录：工作室只从本地目录训练（运行时不下载）。"
                           "请在联网机器上下载（如 `huggingface-cli download {path} --local-dir DIR`），拷贝到本机后选择该目录。"},
    "check.not_a_model": {"en": "{field}: {path} has no config.json", "zh": "{field}：{path} 中没有 config.json"},
    "check.no_family": {"en": "{field}: model_type {model_type!r} has no family preset (presets/models); supported: {known}",
                        "zh": "{field}：model_type {model_type!r} 没有对应的模型系列预设（presets/models）；支持：{known}"},
    "check.text_needs_pretrain": {"en": "{path} holds raw text (no questions and answers): train it with the pretrain method",
                                  "zh": "{path} 是纯文本（没有问答）：请用 pretrain（继续预训练）方法训练"},
    "check.prefix_unsupported": {"en": "prefix tuning does not work with {family} models: {why}",
                                 "zh": "{family} 系列模型不支持前缀微调：{why}"},
    "check.layout_unsupported": {
        "en": "{what} does not work with {family} models: it builds 2-D padding masks, and they need a 4-D blank-infilling "
              "mask with 2-D positions",
        "zh": "{family} 系列模型不支持{what_zh}：它只生成二维填充掩码，而这类模型需要四维的填空式注意力掩码和二维位置编号"},
    "check.early_stopping_needs_eval": {
        "en": "early stopping watches the eval loss: turn evaluation on (evaluation_strategy steps or epoch)",
        "zh": "早停依据评估损失：请开启评估（evaluation_strategy 设为 steps 或 epoch）"},
    "check.preference_needs_dpo": {"en": "{path} holds preference pairs (two answers, one preferred): train it with the dpo method",
                                   "zh": "{path} 是偏好数据（两个回答，其一更好）：请用 dpo 方法训练"},
    "check.dpo_needs_preference": {
        "en": "DPO trains on preference pairs ({{src, tgt, response: [better, worse], sort}} or {{prompt, chosen, rejected}}); "
              "{path} holds none",
        "zh": "DPO 需要偏好数据（{{src, tgt, response: [更好, 更差], sort}} 或 {{prompt, chosen, rejected}}）；{path} 中没有"},
    "check.dpo_one_process": {"en": "DPO trains in one process in the studio ({world} asked): set nproc to 1",
                              "zh": "DPO 在本工作室中只用一个进程训练（当前 {world} 个）：请把 nproc 设为 1"},
    "check.kto_records_need_kto": {
        "en": "{path} holds KTO records (one answer each, marked desirable or undesirable by sort): train it with the "
              "kto method",
        "zh": "{path} 是 KTO 数据（每条一个回答，由 sort 标注好坏）：请用 kto 方法训练"},
    "check.kto_needs_records": {
        "en": "KTO trains on records of one answer marked desirable or not ({{src, tgt, response: [answer], sort: "
              "[1 or 0]}}); {path} holds none",
        "zh": "KTO 需要每条一个回答并标注好坏的数据（{{src, tgt, response: [回答], sort: [1 或 0]}}）；{path} 中没有"},
    "check.kto_one_process": {
        "en": "KTO trains in one process in the studio ({world} asked; upstream's KTO loss gathers its KL term over a "
              "hybrid-parallel group): set nproc to 1",
        "zh": "KTO 在本工作室中只用一个进程训练（当前 {world} 个；上游 KTO 损失要在混合并行组上汇总 KL 项）：请把 nproc 设为 1"},
    "check.kto_ignored_key": {"en": "{key} changes nothing in run_kto.py ({why}): leave it out",
                              "zh": "{key} 在 run_kto.py 中不起作用（{why_zh}）：请删去"},
    "check.unapplied_key": {
        "en": "{key} = {value}: upstream's {script} applies it, the studio's {method} does not yet (it would train "
              "without it): leave it out, or train with upstream's script",
        "zh": "{key} = {value}：上游的 {script} 会使用它，而工作室的 {method} 尚未支持（会在不使用它的情况下训练）："
              "请删去，或用上游脚本训练"},
    "check.kto_bad_records": {
        "en": "{path}: {bad} of {total} records are not KTO records; line {line}, {where}: {detail}; "
              "`paddle-studio data validate {path}` lists every one",
        "zh": "{path}：{total} 条记录中有 {bad} 条不是有效的 KTO 记录；第 {line} 行，{where}：{detail}；"
              "`paddle-studio data validate {path}` 会列出全部"},
    "check.reft_unsupported": {"en": "ReFT does not work with {family} models: {why}",
                               "zh": "{family} 系列模型不支持 ReFT：{why}"},
    "check.reft_with_packing": {"en": "ReFT edits each prompt's own first and last tokens: turn zero_padding (packing) off",
                                "zh": "ReFT 作用于每条提示自己的首尾 token：请关闭 zero_padding（拼接）"},
    "check.reft_one_process": {
        "en": "ReFT trains in one process here ({world} asked): its interventions are not sublayers of the model, "
              "so data-parallel gradient sync would miss them; set nproc to 1",
        "zh": "ReFT 在此只用一个进程训练（当前 {world} 个）：其干预模块不是模型的子层，数据并行的梯度同步会漏掉它们；请把 nproc 设为 1"},
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
    "check.needs_gpu": {"en": "{feature} needs a GPU; none is present{why}", "zh": "{feature} 需要 GPU，但当前没有 GPU{why_zh}"},
    "check.sharding_shards_nothing": {
        "en": "sharding {sharding} over one rank shards nothing (PaddleNLP: \"sharding_parallel_degree=1 means no "
              "sharding\"): set sharding_parallel_degree to the processes that share the optimizer state (here up to "
              "{world}), or -1 for all of them",
        "zh": "只在一个进程上做 {sharding} 分组切分等于没有切分（PaddleNLP：“sharding_parallel_degree=1 means no sharding”）："
              "请把 sharding_parallel_degree 设为共享优化器状态的进程数（这里最多 {world}），或 -1 表示全部"},
    "check.sharding_degree_without_stage": {
        "en": "sharding_parallel_degree does nothing without a sharding stage (PaddleNLP: \"useful only when --sharding is "
              "specified\"): choose stage1, or set the degree to 1",
        "zh": "没有设置分组切分阶段时 sharding_parallel_degree 不起作用（PaddleNLP：“useful only when --sharding is "
              "specified”）：请选择 stage1，或把并行度设为 1"},
    "check.pipeline_needs_pipe_model": {
        "en": "pipeline parallel ({pp} stages) needs PaddleNLP's pipeline model class (AutoModelForCausalLMPipe), which "
              "the studio's training entry does not build: paddle stops with \"Only support pipeline parallel mode when "
              "model is PipelineLayer\"",
        "zh": "流水线并行（{pp} 段）需要 PaddleNLP 的流水线模型类（AutoModelForCausalLMPipe），本工作室的训练入口尚未构建它："
              "paddle 会报错 “Only support pipeline parallel mode when model is PipelineLayer”"},
    "check.tp_with_vera_lokr": {"en": "tensor parallel does not work with {method}", "zh": "张量并行不支持 {method}"},
    "check.mora_with_mixer": {"en": "MoRA and MoSLoRA's mixer are two different LoRA variants: choose one",
                              "zh": "MoRA 与 MoSLoRA 混合矩阵是两种不同的 LoRA 变体：只能选一种"},
    "check.tp_with_mora_mixer": {"en": "tensor parallel does not work with MoRA or MoSLoRA (PaddleNLP refuses it)",
                                 "zh": "张量并行不支持 MoRA 或 MoSLoRA（PaddleNLP 不允许）"},
    "check.lora_variant_needs_lora": {"en": "MoRA and MoSLoRA are variants of LoRA: set the method to lora",
                                      "zh": "MoRA 与 MoSLoRA 是 LoRA 的变体：请把训练方法设为 lora"},
    "check.devices_on_cpu": {
        "en": "--devices needs GPUs; on CPU use nproc (processes) instead",
        "zh": "--devices 需要 GPU；在 CPU 上请改用 nproc（进程数）",
    },
    "check.degrees_do_not_divide": {
        "en": "tensor x pipeline x sharding degrees ({product}) must divide the number of processes ({world})",
        "zh": "张量×流水线×分组切分并行度（{product}）须整除进程总数（{world}）",
    },
    "check.multinode_needs_master": {"en": "more than one node needs master host:port", "zh": "多机训练需要填写 master 的 host:port"},
    "check.nodes_vs_nnodes": {"en": "nnodes is {nnodes} but this machine and the nodes named make {n}: leave nnodes at 1 (it follows the nodes)",
                              "zh": "nnodes 为 {nnodes}，但本机加所选节点共 {n} 台：nnodes 保持 1 即可（随节点自动设置）"},
    "check.nodes_on_head": {"en": "a run with nodes starts on its head, node rank 0: leave rank at 0",
                            "zh": "带节点的训练从主节点（node rank 0）启动：rank 保持 0"},
    "check.node_twice": {"en": "a node is named twice: each machine takes one node rank", "zh": "同一节点出现了两次：每台机器只占一个节点序号"},
    "check.bad_port_range": {"en": "port_range {value!r}: FIRST-LAST with 1024 <= FIRST and at least 9 ports, e.g. 36000-36199",
                             "zh": "port_range {value!r}：格式为 起始-结束，起始 ≥ 1024，且至少 9 个端口，例如 36000-36199"},
    "check.qlora_needs_algo": {"en": "QLoRA needs weight_quantize_algo (nf4 or fp4)", "zh": "QLoRA 需要设置 weight_quantize_algo（nf4 或 fp4）"},
    "check.cpu_refused": {"en": "{key} does not work on this machine (no GPU): {why}",
                          "zh": "{key} 在本机（没有 GPU）上无法生效：{why_zh}"},
    "check.device_not_here": {
        "en": "device {device!r}: this machine has no GPU; write \"cpu\" (the run would train on the CPU while its "
              "config says {device})",
        "zh": "device {device!r}：本机没有 GPU；请写 \"cpu\"（否则配置写着 {device}，实际却在 CPU 上训练）"},
    "check.fused_layout_with_adapter": {
        "en": "{key} fuses layers ({targets}) into one: the {method} adapter would be trained on the fused layer, "
              "while chat, merge and evaluation load the base model unfused, so it would not load back as trained; "
              "turn {key} off or train sft",
        "zh": "{key} 会把多个层（{targets}）融合成一层：{method} 适配器将在融合层上训练，而对话、合并和评估按未融合的方式"
              "加载基座模型，训练出的适配器无法原样加载；请关闭 {key} 或改用全量微调 sft"},
    "check.warmup_ignored": {
        "en": "warmup_steps ({warmup}) is ignored by the constant schedule: choose constant_with_warmup, or set "
              "warmup_steps to 0",
        "zh": "constant 学习率调度会忽略 warmup_steps（{warmup}）：请选择 constant_with_warmup，或把 warmup_steps 设为 0"},
    "check.unknown_method": {"en": "unknown method {method!r}; expected one of {expected}", "zh": "未知方法 {method!r}；应为 {expected} 之一"},
    # ---- cluster (multi-node)
    "cluster.tab": {"en": "Cluster", "zh": "集群"},
    "cluster.list": {"en": "Nodes: other machines for multi-node runs", "zh": "节点：多机训练用的其他机器"},
    "cluster.intro": {
        "en": ("This machine is the head (node 0): it holds rank 0, the run's folder, metrics and checkpoints. A node is a "
               "machine the studio reaches over SSH (key login, no password prompt), with the studio installed (same "
               "paddle, paddlenlp and studio version) and a workspace of its own. Pick nodes in Train → Other machines; "
               "Check nodes tests them all before Start. Open the port range (default 36000-36199) on every machine."),
        "zh": ("本机是主节点（节点 0）：持有 rank 0、运行目录、指标和检查点。节点是工作室可通过 SSH（密钥登录，无密码提示）"
               "连接的机器，装有工作室（paddle、paddlenlp 和工作室版本相同）并有自己的工作区。在 训练 → 其他机器 中选择节点；"
               "「检查节点」会在开始前逐一检查。请在每台机器上放行端口范围（默认 36000-36199）。")},
    "cluster.edit": {"en": "Add or edit a node", "zh": "添加或编辑节点"},
    "cluster.pick": {"en": "Edit node (empty: a new one)", "zh": "编辑节点（留空：新建）"},
    "cluster.kind": {"en": "Reached by", "zh": "连接方式"},
    "cluster.kind_ssh": {"en": "SSH", "zh": "SSH"},
    "cluster.kind_manual": {"en": "manual (paste a command there)", "zh": "手动（在该机器上粘贴命令）"},
    "cluster.name": {"en": "Name", "zh": "名称"},
    "cluster.host": {"en": "Host", "zh": "主机"},
    "cluster.port": {"en": "SSH port", "zh": "SSH 端口"},
    "cluster.user": {"en": "User", "zh": "用户"},
    "cluster.key": {"en": "Key file (on this machine)", "zh": "密钥文件（本机路径）"},
    "cluster.head_address": {"en": "How it reaches this machine (empty: the run's master address)",
                             "zh": "它访问本机的地址（留空：使用 master 地址）"},
    "cluster.python": {"en": "Studio's python there", "zh": "该机器上工作室的 python"},
    "cluster.studio_dir": {"en": "Studio folder there", "zh": "该机器上的工作室目录"},
    "cluster.home": {"en": "Its workspace", "zh": "它的工作区"},
    "cluster.env": {"en": "Environment (NAME=value per line)", "zh": "环境变量（每行 NAME=value）"},
    "cluster.save": {"en": "Save node", "zh": "保存节点"},
    "cluster.test": {"en": "Test", "zh": "测试"},
    "cluster.remove": {"en": "Remove", "zh": "删除"},
    "cluster.saved": {"en": "Saved {node}.", "zh": "已保存 {node}。"},
    "cluster.removed": {"en": "Removed {node}.", "zh": "已删除 {node}。"},
    "cluster.pick_first": {"en": "Pick a node first.", "zh": "请先选择一个节点。"},
    "cluster.empty": {"en": "No nodes yet: runs use this machine only.", "zh": "尚无节点：训练只用本机。"},
    "cluster.tested": {
        "en": "**{node}** reachable · paddle {paddle} · paddlenlp {nlp} · studio {studio} · {cpus} CPU core(s), {gpus} GPU(s) · {free} GiB free in {home}",
        "zh": "**{node}** 可连接 · paddle {paddle} · paddlenlp {nlp} · 工作室 {studio} · {cpus} 个 CPU 核、{gpus} 块 GPU · {home} 剩余 {free} GiB"},
    "cluster.differs": {"en": "differs: {what} {theirs} there, {mine} here", "zh": "不一致：{what} 该机器为 {theirs}，本机为 {mine}"},
    "cluster.col_name": {"en": "name", "zh": "名称"},
    "cluster.col_kind": {"en": "reached by", "zh": "连接方式"},
    "cluster.col_address": {"en": "address", "zh": "地址"},
    "cluster.col_home": {"en": "workspace", "zh": "工作区"},
    "cluster.col_python": {"en": "python", "zh": "python"},
    "cluster.col_env": {"en": "environment", "zh": "环境变量"},
    "cluster.col_head": {"en": "reaches head by", "zh": "访问主节点地址"},
    "train.preflight": {"en": "Check nodes", "zh": "检查节点"},
    "train.copy": {"en": "Copy inputs to nodes", "zh": "复制输入到节点"},
    "train.no_nodes": {"en": "No other machines chosen (Parallel → Other machines): this run uses this machine only.",
                       "zh": "未选择其他机器（并行 → 其他机器）：本次训练只用本机。"},
    "train.preflight_ok": {"en": "✔ All {n} node(s) ready: same versions, inputs readable, the head reachable at {master}.",
                           "zh": "✔ {n} 个节点均就绪：版本一致、输入可读、可连接主节点 {master}。"},
    "train.preflight_problems": {"en": "✘ {n} problem(s) on the nodes; nothing was started:",
                                 "zh": "✘ 节点上有 {n} 个问题；未启动任何进程："},
    "train.copy_none": {"en": "Every node has the run's model and dataset already.", "zh": "所有节点都已有该训练的模型和数据集。"},
    "train.copied": {"en": "Copied {what} to {node}:{dest} ({mb} MB).", "zh": "已复制{what}到 {node}:{dest}（{mb} MB）。"},
    "runs.doctor": {"en": "Why is it stuck?", "zh": "为什么卡住了？"},
    "runs.doctor_head": {"en": "Where each of the {n} rank(s) is now:", "zh": "{n} 个 rank 当前所在位置："},
    "runs.node_pick": {"en": "Node", "zh": "节点"},
    "runs.node_log": {"en": "Show its log", "zh": "查看其日志"},
    "runs.node_first": {"en": "Pick a machine of the run first (a run over several machines lists them here).",
                        "zh": "请先选择该训练的一台机器（多机训练会在此列出）。"},
    "runs.node_paste": {"en": "Run this on {node} (a manual node):", "zh": "请在 {node}（手动节点）上运行："},
    "runs.node_col_node": {"en": "machine", "zh": "机器"},
    "runs.node_col_ranks": {"en": "ranks", "zh": "rank"},
    "runs.node_col_state": {"en": "state", "zh": "状态"},
    "runs.node_col_step": {"en": "step", "zh": "步数"},
    "runs.node_col_memory": {"en": "memory", "zh": "内存"},
    "runs.node_col_line": {"en": "last log line", "zh": "最后一行日志"},
    "runs.node_state_starting": {"en": "starting", "zh": "启动中"},
    "runs.node_state_lost": {"en": "lost", "zh": "失联"},
    "runs.node_state_manual": {"en": "manual", "zh": "手动"},
    "runs.node_state_-": {"en": "-", "zh": "-"},
    "error.prefix": {"en": "**Error:** ", "zh": "**错误**："},
    "error.unexpected": {"en": "Unexpected error: {detail}", "zh": "意外错误：{detail}"},
    # engine problem and error codes (core.data.datasets.MESSAGES)
    "problem.mixed_shapes": {
        "en": "{strings} records have src/tgt strings and {lists} have lists: PaddleNLP's JSON loader needs one shape "
              "per file, so import writes every record with lists (a one-turn list means the same as a string)",
        "zh": "{strings} 条记录的 src/tgt 是字符串，{lists} 条是列表：PaddleNLP 的 JSON 读取要求同一文件形状一致，"
              "因此导入时全部写成列表（单轮列表与字符串含义相同）",
    },
    "problem.bom": {
        "en": "file starts with a UTF-8 byte order mark (BOM); it is skipped when reading",
        "zh": "文件以 UTF-8 BOM 开头；读取时会跳过它",
    },
    "problem.crlf": {"en": "line ends with CRLF (\\r\\n); Windows line ends", "zh": "行尾为 CRLF（\\r\\n），即 Windows 换行符"},
    "problem.blank_line": {"en": "blank line", "zh": "空行"},
    "problem.response_count": {"en": "expected a list of 2 answers (the two compared), got {got}",
                               "zh": "应为含 2 个回答（被比较的两个）的列表，实际为 {got}"},
    "problem.sort_tie": {"en": "sort ranks both answers the same ({value}); one of them must be preferred",
                         "zh": "sort 给两个回答相同的排名（{value}）；必须有一个更好"},
    "problem.kto_response_count": {
        "en": "expected a list of 1 answer (a KTO record holds one answer, marked by sort), got {got}",
        "zh": "应为只含 1 个回答的列表（KTO 记录只有一个回答，由 sort 标注好坏），实际为 {got}"},
    "problem.kto_sort_value": {
        "en": "expected [1] (desirable) or [0] (undesirable), got {value}: upstream's KTO loss counts only 1 and 0, "
              "and would skip this answer without a word",
        "zh": "应为 [1]（好的回答）或 [0]（不好的回答），实际为 {value}：上游 KTO 损失只认 1 和 0，会不声不响地跳过这条回答"},
    "problem.history_mismatch": {
        "en": "src has {src} turns, so tgt (the answers before the last turn) must have {expected}, got {tgt}",
        "zh": "src 有 {src} 轮，tgt（最后一轮之前的回答）应有 {expected} 个，实际为 {tgt}"},
    "problem.no_prompt": {"en": "missing field: the prompt (one of prompt, question, instruction)",
                          "zh": "缺少提示字段（prompt、question、instruction 之一）"},
    "problem.line_too_long": {
        "en": "line is {length} bytes, longer than the limit of {limit} bytes; skipped",
        "zh": "该行有 {length} 字节，超过上限 {limit} 字节；已跳过",
    },
    "problem.not_utf8": {"en": "bytes that are not UTF-8 at byte {position}", "zh": "第 {position} 字节处不是 UTF-8 编码"},
    "problem.invalid_json": {"en": "invalid JSON: {detail} (column {column})", "zh": "JSON 无效：{detail}（第 {column} 列）"},
    "problem.not_object": {"en": "expected a JSON object, got {got}", "zh": "应为 JSON 对象，实际为 {got}"},
    "problem.missing_field": {"en": "missing field", "zh": "缺少字段"},
    "problem.wrong_type": {"en": "expected {expected}, got {got}", "zh": "类型应为{expected}，实际为{got}"},
    "problem.turns_mismatch": {"en": "src has {src} turns but tgt has {tgt}", "zh": "src 有 {src} 轮，但 tgt 有 {tgt} 轮"},
    "problem.mixed_types": {"en": "src and tgt must both be strings or both be lists", "zh": "src 与 tgt 须同为字符串或同为列表"},
    "problem.empty_text": {"en": "empty text", "zh": "文本为空"},
    "problem.bad_role": {"en": "unknown role {role!r}; expected one of {expected}", "zh": "未知角色 {role!r}；应为 {expected} 之一"},
    "problem.bad_order": {
        "en": "turns must alternate user then assistant; found {role!r} at position {index}",
        "zh": "对话须按“用户、助手”交替；第 {index} 条出现了 {role!r}",
    },
    "problem.no_assistant_reply": {"en": "conversation does not end with an assistant reply", "zh": "对话没有以助手回复结尾"},
    "problem.too_deep": {"en": "JSON nested too deeply to read (more than about {limit} levels)",
                         "zh": "JSON 嵌套过深，无法读取（超过约 {limit} 层）"},
    "problem.lone_surrogate": {
        "en": "text holds an unpaired UTF-16 surrogate escape (\\ud800-\\udfff) that cannot be written as UTF-8",
        "zh": "文本含有不成对的 UTF-16 代理转义（\\ud800-\\udfff），无法写成 UTF-8",
    },
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


def _merge_feature_texts() -> None:
    """Add each studio/texts/<feature>.py TEXT (a key defined twice is an error, not an overwrite)."""
    import importlib
    import pkgutil

    import studio.texts as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        mod = importlib.import_module(f"studio.texts.{info.name}")
        twice = set(TEXT) & set(mod.TEXT)
        if twice:
            raise KeyError(f"studio/texts/{info.name}.py defines keys studio.locales already has: {sorted(twice)}")
        TEXT.update(mod.TEXT)


_merge_feature_texts()


def t(key: str, lang: str = "en", /, **params) -> str:
    """The text for ``key`` in ``lang`` with ``params`` filled in; the key itself if unknown. Both
    positional only: a check's own ``key`` parameter (cpu_refused, kto_ignored_key) is a param."""
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


# English lines a job or run records without a code (status.json "reason", a progress line of a
# caller that sends no code): (pattern, key); the pattern's named groups are the key's params, and a
# "rest" group (what follows a known start) is kept as it is. An unknown line is shown as recorded.
REASON_PATTERNS = [
    (r"stopped by the user", "reason.stopped_by_user"),
    (r"cancelled before it started", "reason.cancelled"),
    (r"the command printed no JSON result", "reason.no_json"),
    (r"the job's supervisor vanished \(killed or machine restarted\)", "reason.job_vanished"),
    (r"the run's supervisor vanished \(killed or machine restarted\)(?P<rest>.*)", "reason.run_vanished"),
    (r"exit code (?P<code>-?\d+) \(killed\)", "reason.exit_killed"),
    (r"exit code (?P<code>-?\d+)", "reason.exit_code"),
    (r"stopped and saved at step (?P<step>\d+) \(Resume continues from checkpoint-\d+\)", "reason.stopped_at"),
    (r"no progress for (?P<secs>\d+) s \(nothing new in the training log or metrics; stall_timeout is (?P<limit>[\d.]+) s\): "
     r"the run was stopped(?P<rest>.*)", "reason.stalled"),
    (r"a node failed", "reason.a_node_failed"),
    (r"idle", "reason.idle"),
    (r"owner_gone", "reason.owner_gone"),
    (r"stopped by a signal", "reason.a_signal"),
    (r"stopped by (?P<signal>SIG[A-Z]+)", "reason.signal"),
    # the round-trip check's details (core.train.verify)
    (r"not checked: (?P<why>.*)", "reason.verify_skipped"),
    (r"(?P<folder>.+) has no readable (?P<file>\S+) \(saved by a studio older than this check, or not by the studio\)",
     "reason.verify_no_reference"),
    (r"the saved tokenizer and chat template tokenize (?P<bad>\d+) of (?P<n>\d+) sample records differently from "
     r"training", "reason.verify_tokenize"),
    (r"the saved model does not reproduce training: reloaded eval loss (?P<got>\S+) vs (?P<want>\S+) in training "
     r"\(allowed difference (?P<tol>\S+)\)", "reason.verify_loss"),
    (r"the check ended with exit code (?P<code>-?\d+) before its verdict(?P<rest>.*)", "reason.verify_exit"),
    (r"the check's process ended before its verdict \(killed\?\)", "reason.verify_killed"),
]
PROGRESS_PATTERNS = [
    (r"copying (?P<file>.+) \((?P<mib>[\d,.]+) MiB\)", "progress.import_copying"),
    (r"checking the folder", "progress.import_checking"),
    (r"converting PyTorch weights to Paddle", "progress.import_converting"),
    (r"saving in PaddleNLP's layout", "progress.import_saving"),
    (r"loading the weights to check them", "progress.import_loading"),
    (r"publishing", "progress.publishing"),
    (r"step (?P<step>\d+|\?|None)/(?P<steps>\d+|\?|None)", "progress.step"),
]


def _by_pattern(text: str, patterns, lang: str) -> str:
    import re

    for pat, key in patterns:
        m = re.fullmatch(pat, text, re.S)
        if m:
            return t(key, lang, **m.groupdict())
    return text


def reason_text(reason: str | None, lang: str) -> str:
    """Why a run or job ended (its status.json ``reason``, recorded in English) in ``lang``."""
    if not reason or lang == "en":
        return reason or ""
    return _by_pattern(str(reason).strip(), REASON_PATTERNS, lang)


def progress_text(progress: dict | None, lang: str) -> str:
    """A job's progress line (progress.json: ``code`` + ``params`` when its caller sent them) in ``lang``."""
    pr = progress or {}
    code = pr.get("code")
    if code and f"progress.{code}" in TEXT:
        params = dict(pr.get("params") or {})
        if code == "evaluating_target" and f"merge.label_{params.get('label')}" in TEXT:
            params["label"] = t(f"merge.label_{params['label']}", lang)
        return t(f"progress.{code}", lang, **params)
    text = pr.get("text") or ""
    return text if lang == "en" else _by_pattern(text.strip(), PROGRESS_PATTERNS, lang)


# Chinese help for every RunConfig field (English comes from the dataclass metadata).
FIELD_HELP_ZH = {
    "model_name_or_path": "基座模型目录（PaddleNLP save_pretrained 格式）。",
    "tokenizer_name_or_path": "分词器目录（不同于模型自带时填写）。",
    "dataset_name_or_path": "数据集目录，含 train.json（评估还需 dev.json）。",
    "src_length": "输入最多保留的 token 数；过长的输入从开头截断。",
    "max_length": "输入加回答最多的 token 数；过长的回答从结尾截断。",
    "zero_padding": "把多条样本拼成一条序列，而不是补齐。",
    "greedy_zero_padding": "按长度贪心拼接（配合 zero_padding）。",
    "chat_template": "对话模板文件或文件夹；\"none\"：不用模板；默认使用分词器自带模板。",
    "method": "训练方法。",
    "lora_rank": "LoRA 的秩 r。",
    "rslora": "rsLoRA：按 alpha/sqrt(r) 而非 alpha/r 缩放。",
    "lora_plus_scale": "LoRA+：B 矩阵的学习率倍数。",
    "pissa": "PiSSA：用主奇异向量初始化 LoRA。",
    "use_mora": "MoRA：用一个方形高秩矩阵（输入经旋转压缩）代替低秩的 A 与 B。",
    "lora_use_mixer": "MoSLoRA：在 LoRA 的 A 与 B 之间加一个可训练的 r×r 混合矩阵。",
    "num_prefix_tokens": "前缀微调：每层的虚拟 token 数。",
    "vera_rank": "VeRA 的秩。",
    "lokr_dim": "LoKr 的维度。",
    "reft_layers": "ReFT：要修改其输出的层：all，或用分号分隔的层号，如 0;2;3。",
    "reft_position": "ReFT：修改的提示 token：fN（前 N 个）、lN（后 N 个）或 fN+lN。",
    "reft_rank": "ReFT：每个干预模块的秩。",
    "reft_intervention_type": "ReFT：干预模块的类型。",
    "reft_dropout": "ReFT：训练时作用在被修改表示上的 dropout。",
    "dpo_beta": "DPO：beta，微调后的模型可偏离参考模型的程度（越大越保守）。",
    "dpo_loss_type": "DPO：偏好损失（sigmoid 即 DPO；simpo 与 or 不需要参考模型）。",
    "dpo_lora": "DPO：训练 LoRA 适配器（关闭适配器即参考模型）；关闭此项则全参 DPO，以冻结副本为参考。",
    "dpo_sft_loss_ratio": "DPO：在更好的回答上附加 SFT 损失的权重。",
    "kto_beta": "KTO：beta，微调后的模型可偏离参考模型的程度（越大越保守）。",
    "kto_desirable_weight": "KTO：标为好的回答（sort [1]）上损失的权重。",
    "kto_undesirable_weight": "KTO：标为不好的回答（sort [0]）上损失的权重。",
    "kto_lora": "KTO：训练 LoRA 适配器（关闭适配器即参考模型）；关闭此项则全参 KTO，以冻结副本为参考。",
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
    "lr_scheduler_type": "学习率调度方式（constant 会忽略预热步数：需要预热请用 constant_with_warmup）。",
    "logging_steps": "每隔多少步写一条指标。",
    "report_to": ("同时接收训练指标的实验跟踪工具，日志写入该运行的 output/vdl（工作室自己的指标照常记录）：none、visualdl、"
                  "tensorboard（需要 tensorboardX）或 wandb（需要 wandb 且 WANDB_MODE=offline）。"),
    "evaluation_strategy": "何时在验证集上评估。",
    "eval_steps": "每隔多少步评估一次（evaluation_strategy=steps）。",
    "save_strategy": "何时保存检查点。",
    "save_steps": "每隔多少步保存一次（save_strategy=steps）。",
    "save_total_limit": "最多保留的检查点数。",
    "fp16": "fp16 混合精度（GPU）。",
    "bf16": "bf16 混合精度（GPU）。",
    "fp16_opt_level": "AMP 级别；O2 需要开启 fp16 或 bf16。",
    "recompute": "反向时重算激活以节省显存。",
    "unified_checkpoint": "用 PaddleNLP 的统一检查点格式（safetensors 分片）保存，换一个数据并行进程数也能加载。",
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
    "stall_timeout": "训练日志和指标这么多秒没有变化时判定运行失败（0：从不；多机训练未设置时为 300）。",
    "early_stopping_patience": "评估损失连续这么多次没有改善时结束训练（并保存模型；0：关闭；需要开启评估）。",
    "early_stopping_threshold": "早停：评估损失比此前最好值低出超过此值才算改善。",
    "nodes": "参与训练的其他机器（集群页中的名称），逗号分隔：依次为节点 1、2……；本机为节点 0，持有 rank 0（指标、检查点、输出）。",
    "port_range": "各机器上启动器可用的端口，起始-结束（有节点时默认 36000-36199）：请在防火墙放行；master 端口取本机第一个空闲端口。",
}


# Plain-word names of every RunConfig field (the PaddleNLP key is shown under each one).
FIELD_LABELS = {
    "model_name_or_path": ("Base model", "基座模型"),
    "tokenizer_name_or_path": ("Tokenizer", "分词器"),
    "dataset_name_or_path": ("Dataset", "数据集"),
    "src_length": ("Prompt length limit (tokens)", "输入长度上限（token）"),
    "max_length": ("Total length limit (tokens)", "总长度上限（token）"),
    "zero_padding": ("Pack examples (no padding)", "样本拼接（不补齐）"),
    "greedy_zero_padding": ("Pack greedily by length", "按长度贪心拼接"),
    "chat_template": ("Chat template file", "对话模板文件"),
    "method": ("Training method", "训练方法"),
    "lora_rank": ("LoRA rank", "LoRA 秩"),
    "rslora": ("rsLoRA scaling", "rsLoRA 缩放"),
    "lora_plus_scale": ("LoRA+ learning-rate ratio", "LoRA+ 学习率倍数"),
    "pissa": ("PiSSA initialisation", "PiSSA 初始化"),
    "use_mora": ("MoRA (high-rank update)", "MoRA（高秩更新）"),
    "lora_use_mixer": ("MoSLoRA mixer", "MoSLoRA 混合矩阵"),
    "num_prefix_tokens": ("Prefix tokens", "前缀 token 数"),
    "vera_rank": ("VeRA rank", "VeRA 秩"),
    "lokr_dim": ("LoKr dimension", "LoKr 维度"),
    "reft_layers": ("ReFT layers", "ReFT 干预层"),
    "reft_position": ("ReFT positions", "ReFT 干预位置"),
    "reft_rank": ("ReFT rank", "ReFT 秩"),
    "reft_intervention_type": ("ReFT intervention", "ReFT 干预类型"),
    "reft_dropout": ("ReFT dropout", "ReFT dropout"),
    "dpo_beta": ("DPO beta", "DPO beta"),
    "dpo_loss_type": ("DPO loss", "DPO 损失类型"),
    "dpo_lora": ("DPO with LoRA", "DPO 使用 LoRA"),
    "dpo_sft_loss_ratio": ("DPO SFT loss weight", "DPO 附加 SFT 损失权重"),
    "kto_beta": ("KTO beta", "KTO beta"),
    "kto_desirable_weight": ("KTO weight of desirable answers", "KTO 好回答的权重"),
    "kto_undesirable_weight": ("KTO weight of undesirable answers", "KTO 差回答的权重"),
    "kto_lora": ("KTO with LoRA", "KTO 使用 LoRA"),
    "neftune": ("NEFTune noise", "NEFTune 噪声"),
    "neftune_noise_alpha": ("NEFTune noise scale", "NEFTune 噪声系数"),
    "weight_quantize_algo": ("QLoRA base quantization", "QLoRA 基座量化"),
    "per_device_train_batch_size": ("Batch size per process", "每进程批大小"),
    "per_device_eval_batch_size": ("Eval batch size per process", "每进程评估批大小"),
    "gradient_accumulation_steps": ("Gradient accumulation steps", "梯度累积步数"),
    "learning_rate": ("Learning rate", "学习率"),
    "num_train_epochs": ("Epochs", "训练轮数"),
    "max_steps": ("Max steps (-1: by epochs)", "最大步数（-1：按轮数）"),
    "warmup_steps": ("Warm-up steps", "预热步数"),
    "lr_scheduler_type": ("Learning-rate schedule", "学习率调度"),
    "logging_steps": ("Log every N steps", "每 N 步记录"),
    "report_to": ("Experiment tracker", "实验跟踪"),
    "evaluation_strategy": ("When to evaluate", "评估时机"),
    "eval_steps": ("Evaluate every N steps", "每 N 步评估"),
    "save_strategy": ("When to save checkpoints", "保存时机"),
    "save_steps": ("Save every N steps", "每 N 步保存"),
    "save_total_limit": ("Checkpoints kept", "保留检查点数"),
    "fp16": ("fp16 mixed precision", "fp16 混合精度"),
    "bf16": ("bf16 mixed precision", "bf16 混合精度"),
    "fp16_opt_level": ("Mixed-precision level", "混合精度级别"),
    "recompute": ("Recompute activations", "重算激活"),
    "unified_checkpoint": ("Unified checkpoint", "统一检查点"),
    "use_flash_attention": ("FlashAttention", "FlashAttention"),
    "flash_mask": ("FlashMask", "FlashMask"),
    "seed": ("Random seed", "随机种子"),
    "nproc": ("Processes on this machine", "本机进程数"),
    "devices": ("GPU ids", "GPU 编号"),
    "nnodes": ("Machines", "机器数"),
    "master": ("Rank-0 address (host:port)", "0 号机器地址（host:port）"),
    "rank": ("This machine's rank", "本机序号"),
    "tensor_parallel_degree": ("Tensor parallel degree", "张量并行度"),
    "pipeline_parallel_degree": ("Pipeline parallel degree", "流水线并行度"),
    "sharding": ("Sharding stage", "分组切分阶段"),
    "sharding_parallel_degree": ("Sharding degree", "分组切分并行度"),
    "stall_timeout": ("Fail after no progress for (s)", "无进展多久后判定失败（秒）"),
    "early_stopping_patience": ("Early stopping: patience (evaluations)", "早停：耐心（评估次数）"),
    "early_stopping_threshold": ("Early stopping: minimum improvement", "早停：最小改善量"),
    "nodes": ("Other machines (nodes)", "其他机器（节点）"),
    "port_range": ("Port range", "端口范围"),
}


def field_label(name: str, lang: str) -> str:
    en, zh = FIELD_LABELS.get(name, (name, name))
    return zh if lang == "zh" else en


def refusal(err, lang: str) -> str:
    """A core.jobs.Refused in the user's language (its English message when no text is kept for its code)."""
    code = getattr(err, "code", None)
    params = getattr(err, "params", {}) or {}
    for key in (f"refused.{code}", f"problem.{code}"):
        if key in TEXT:
            return t(key, lang, **params)
    return str(err)


TEXT.update({
    "refused.exists": {"en": "{path} already exists; choose another name", "zh": "{path} 已存在，请换一个名称"},
    "refused.not_mergeable_prefix": {
        "en": "A prefix-tuning adapter cannot be merged: it adds trained key/value states in front of every layer's "
              "attention, nothing to fold into weights. Chat, Evaluate and the API load it with its base.",
        "zh": "前缀微调适配器无法合并：它在每层注意力前加入训练得到的键值状态，没有可并入权重的部分。对话、评估和 API 会连同基座一起加载它。"},
    "refused.not_mergeable_reft": {
        "en": "A ReFT adapter cannot be merged: it edits hidden states at the prompt's first and last tokens while the "
              "model runs and changes no weight. Chat, Evaluate and the API load it with its base.",
        "zh": "ReFT 适配器无法合并：它在模型运行时修改提示首尾 token 的隐藏状态，不改动任何权重。对话、评估和 API 会连同基座一起加载它。"},
    "refused.claimed": {"en": "{path} is being written by job {job}; wait for it or stop it in Jobs",
                        "zh": "{path} 正由任务 {job} 写入；请等待它结束，或在“任务”页停止它"},
    "jobs.tab": {"en": "Jobs", "zh": "任务"},
    "jobs.list": {"en": "Every run and job, newest first", "zh": "所有训练与任务（最新在前）"},
    "jobs.pick": {"en": "Show", "zh": "查看"},
    "jobs.stop": {"en": "Stop", "zh": "停止"},
    "jobs.log": {"en": "Log", "zh": "日志"},
    "jobs.command": {"en": "Command", "zh": "命令"},
    "jobs.result": {"en": "Result (JSON)", "zh": "结果（JSON）"},
    "jobs.none": {"en": "Nothing has run in this workspace yet.", "zh": "此工作区还没有运行过任何任务。"},
    "jobs.gone": {"en": "{id} is no longer in the workspace.", "zh": "{id} 已不在工作区中。"},
    "jobs.col_id": {"en": "id", "zh": "编号"},
    "jobs.col_kind": {"en": "kind", "zh": "类型"},
    "jobs.col_state": {"en": "state", "zh": "状态"},
    "jobs.col_progress": {"en": "progress", "zh": "进度"},
    "jobs.col_created": {"en": "created", "zh": "创建时间"},
    "jobs.kind_train": {"en": "training", "zh": "训练"},
    "jobs.kind_merge": {"en": "merge", "zh": "合并"},
    "jobs.kind_quantize": {"en": "quantize", "zh": "量化"},
    "jobs.kind_eval": {"en": "evaluate", "zh": "评估"},
    "jobs.kind_export": {"en": "export", "zh": "导出"},
    "jobs.kind_serve": {"en": "chat worker", "zh": "对话服务"},
    "jobs.kind_demo": {"en": "demo build", "zh": "构建示例"},
    "jobs.kind_import": {"en": "model import", "zh": "导入模型"},
    "jobs.kind_data": {"en": "data", "zh": "数据"},
    "jobs.build_demo": {"en": "Build the demo workspace", "zh": "构建示例工作区"},
    "demo.building": {"en": "**Building the demo workspace** (job `{id}`, {pct}): {what}. The Train, Merge, Chat and Quantize tabs offer the demo dataset and `demo-base` as soon as they are ready; nothing needs a reload.",
                      "zh": "**正在构建示例工作区**（任务 `{id}`，{pct}）：{what}。示例数据集和 `demo-base` 一就绪，训练、合并、对话和量化页签即可选用，无需刷新页面。"},
    "demo.queued": {"en": "waiting to start", "zh": "等待开始"},
    "demo.failed": {"en": "**The demo workspace could not be built** (job `{id}`): {why}. See its log in the Jobs tab; *Build the demo workspace* there tries again.",
                    "zh": "**示例工作区构建失败**（任务 `{id}`）：{why}。日志见“任务”页签；在那里点“构建示例工作区”可重试。"},
    "demo.ready_now": {"en": "The demo workspace is ready: dataset `demo` and model `demo-base` are offered in every tab.",
                       "zh": "示例工作区已就绪：各页签均可选用数据集 `demo` 和模型 `demo-base`。"},
    "jobs.demo_started": {"en": "Building the demo workspace: job {id}", "zh": "正在构建示例工作区：任务 {id}"},
    "merge.running": {"en": "Merging into `{out}`…", "zh": "正在合并到 `{out}`……"},
    "merge.merge_job": {"en": "Merge job", "zh": "合并任务"},
    "merge.eval_job": {"en": "Evaluation job", "zh": "评估任务"},
    "merge.col_records": {"en": "records", "zh": "记录数"},
    "merge.chart": {"en": "Scores on dev (higher is better)", "zh": "验证集得分（越高越好）"},
    "merge.score": {"en": "score", "zh": "得分"},
    "runs.rewards": {"en": "Rewards (chosen, rejected, margin), DPO's accuracy and KTO's KL",
                     "zh": "奖励（更好、更差、差值）、DPO 准确率与 KTO 的 KL"},
    "runs.speed": {"en": "Tokens/s and learning rate", "zh": "吞吐（token/秒）与学习率"},
    "runs.log_scale": {"en": "Log scale", "zh": "对数坐标"},
    "runs.curve_caption": {"en": "{n} loss points, {e} evaluations", "zh": "{n} 个损失点，{e} 次评估"},
})

TEXT.update({
    "models.tab": {"en": "Models", "zh": "模型"},
    "models.list": {"en": "Models in the workspace", "zh": "工作区中的模型"},
    "models.import": {"en": "Import a model folder you have", "zh": "导入已有的模型文件夹"},
    "models.folder": {"en": "Folder on this machine (PaddleNLP or Hugging Face layout)",
                      "zh": "本机上的文件夹（PaddleNLP 或 Hugging Face 格式）"},
    "models.name": {"en": "Name in the workspace", "zh": "在工作区中的名称"},
    "models.link": {"en": "Link instead of copying (PaddleNLP layout only)", "zh": "链接而不复制（仅 PaddleNLP 格式）"},
    "models.inspect": {"en": "Check folder", "zh": "检查文件夹"},
    "models.import_btn": {"en": "Import", "zh": "导入"},
    "models.folder_first": {"en": "Type the folder's path first.", "zh": "请先填写文件夹路径。"},
    "models.empty": {"en": "No models yet: import one below, or build the demo (paddle-studio demo init).",
                     "zh": "还没有模型：在下方导入，或构建演示模型（paddle-studio demo init）。"},
    "models.col_name": {"en": "name", "zh": "名称"},
    "models.col_kind": {"en": "kind", "zh": "类型"},
    "models.col_family": {"en": "family", "zh": "系列"},
    "models.col_params": {"en": "parameters", "zh": "参数量"},
    "models.col_size": {"en": "on disk", "zh": "磁盘占用"},
    "models.col_template": {"en": "chat template", "zh": "对话模板"},
    "models.col_origin": {"en": "origin", "zh": "来源"},
    "models.kind_base": {"en": "base", "zh": "基座"},
    "models.kind_trained": {"en": "trained", "zh": "全量训练"},
    "models.kind_merged": {"en": "merged", "zh": "已合并"},
    "models.kind_quantized": {"en": "quantized", "zh": "已量化"},
    "models.kind_adapter": {"en": "adapter", "zh": "适配器"},
    "models.yes": {"en": "yes", "zh": "有"},
    "models.no": {"en": "no", "zh": "无"},
    "models.format_paddle": {"en": "PaddleNLP weights", "zh": "PaddleNLP 权重"},
    "models.format_torch": {"en": "PyTorch (Hugging Face) weights, converted on import",
                            "zh": "PyTorch（Hugging Face）权重，导入时转换"},
    "models.report": {"en": "**{path}** — {family} ({arch}), {fmt} ({files}); {params} parameters, {dtype}, {size} on disk; "
                            "tokenizer {tok}; chat template: {template}",
                      "zh": "**{path}** — {family}（{arch}），{fmt}（{files}）；参数量 {params}，{dtype}，磁盘占用 {size}；"
                            "分词器 {tok}；对话模板：{template}"},
    "models.imported": {"en": "Imported **{name}**: {params} parameters in {secs} s {how}. Train, Chat and Quantize offer it now.",
                        "zh": "已导入 **{name}**：参数量 {params}，用时 {secs} 秒 {how}。训练、对话与量化页现已可选它。"},
    "models.converted": {"en": "(converted from PyTorch)", "zh": "（已从 PyTorch 转换）"},
})

# issue 30 (hostile pass): what a bad path, file or number really is, said before anything starts
TEXT.update({
    # dataset problems (core.data.datasets.MESSAGES)
    "problem.cr_line_ends": {
        "en": "the file ends lines with a bare CR (\\r, classic Mac line ends); each CR is read as a line break",
        "zh": "文件用单独的 CR（\\r，旧式 Mac 换行）结束各行；每个 CR 都按换行读取"},
    "problem.number_too_long": {
        "en": "a number of {digits} digits at column {column}: Python's JSON reader refuses integers of more than "
              "{limit} digits; write it as a string",
        "zh": "第 {column} 列有一个 {digits} 位的数字：Python 的 JSON 读取器不接受超过 {limit} 位的整数；请写成字符串"},
    "problem.empty_file": {"en": "no records: the file is empty (0 bytes)", "zh": "没有记录：文件为空（0 字节）"},
    "problem.only_blank_lines": {"en": "no records: the file holds only blank lines ({lines})",
                                 "zh": "没有记录：文件只有空行（{lines} 行）"},
    "problem.empty_array": {"en": "no records: the file is an empty JSON array", "zh": "没有记录：文件是空的 JSON 数组"},
    "problem.symlink_loop": {
        "en": "{path} is a loop of symbolic links (following them leads back to a link already seen), not a file or "
              "folder",
        "zh": "{path} 是循环的符号链接（沿链接走会回到已经过的链接），不是文件或目录"},
    "problem.dangling_link": {"en": "{path} is a symbolic link to {target}, which does not exist",
                              "zh": "{path} 是指向 {target} 的符号链接，而该目标不存在"},
    "problem.is_fifo": {
        "en": "{path} is a FIFO (named pipe), not a regular file: it is not read (reading would wait for a writer); "
              "give a file or a folder",
        "zh": "{path} 是 FIFO（命名管道），不是普通文件：不会读取它（读取会一直等待写入方）；请给出文件或目录"},
    "problem.is_device": {
        "en": "{path} is a device ({target}), not a regular file: it is not read (a device such as /dev/zero never "
              "ends); give a file or a folder",
        "zh": "{path} 是设备文件（{target}），不是普通文件：不会读取它（如 /dev/zero 这样的设备永无尽头）；请给出文件或目录"},
    "problem.is_socket": {"en": "{path} is a socket, not a regular file: give a file or a folder",
                          "zh": "{path} 是套接字，不是普通文件：请给出文件或目录"},
    # config check codes (core.train.config.MESSAGES)
    "check.not_a_folder": {"en": "{field}: {path} is {kind}, not a folder", "zh": "{field}：{path} 是{kind_zh}，不是目录"},
    "check.model_config_not_json": {
        "en": "{field}: {path} is not valid JSON: line {line}, column {column}: {detail}",
        "zh": "{field}：{path} 不是有效的 JSON：第 {line} 行第 {column} 列：{detail}"},
    "check.model_config_unreadable": {"en": "{field}: {path} cannot be read as JSON text: {detail}",
                                      "zh": "{field}：{path} 无法作为 JSON 文本读取：{detail}"},
    "check.no_train_records": {
        "en": "{field}: {path} holds no training record ({why}): the run would stop at its start (\"num_samples=0\"); "
              "`paddle-studio data validate {path}` lists every line's problem",
        "zh": "{field}：{path} 中没有训练记录（{why_zh}）：训练会在开始时停止（“num_samples=0”）；"
              "`paddle-studio data validate {path}` 会列出每一行的问题"},
    "check.too_many_steps": {
        "en": "{field}: this run would take about {steps} optimizer steps ({epochs} epochs x {per_epoch} per epoch"
              "{records}); more than {limit} is refused ({why}): lower num_train_epochs or set max_steps",
        "zh": "{field}：这次训练约需 {steps} 个优化步（{epochs} 轮 × 每轮 {per_epoch} 步{records_zh}）；超过 {limit} 步"
              "会被拒绝（{why_zh}）：请减小 num_train_epochs，或设置 max_steps"},
    "check.nproc_over_cores": {
        "en": "{field}: {nproc} processes on a machine with {cores} CPU cores: every rank of CPU data parallel needs a "
              "core of its own (64 ranks on 2 cores made no step in 45 s); set nproc to at most {cores}",
        "zh": "{field}：在只有 {cores} 个 CPU 核的机器上启动 {nproc} 个进程：CPU 数据并行的每个进程都需要独占一个核"
              "（2 核上 64 个进程 45 秒没走一步）；请把 nproc 设为不超过 {cores}"},
    "check.ranks_over_gpus": {
        "en": "{field}: {ranks} processes on a machine with {gpus} GPU(s): each process takes a GPU of its own; use at "
              "most {gpus}",
        "zh": "{field}：在只有 {gpus} 块 GPU 的机器上启动 {ranks} 个进程：每个进程独占一块 GPU；最多用 {gpus} 个"},
    # refusals of a job before it starts (core.jobs.Refused): the names are output names there
    "refused.name_empty": {"en": "The output name is empty: type a name for the new model.",
                           "zh": "输出名称为空：请为新模型填写名称。"},
    "refused.name_unsafe": {
        "en": "output name {name!r} is not allowed: use letters, digits, '-', '_' or '.', no path separators or '..'",
        "zh": "输出名称 {name!r} 不合法：只能使用字母、数字、“-”“_”“.”，不能含路径分隔符或“..”"},
    "refused.no_calibration_data": {
        "en": "Preset {preset} needs calibration data: {need}. None was given or found: {why}. Pick a dataset under "
              "Calibration data.",
        "zh": "预设 {preset} 需要校准数据：{need_zh}。未指定也未找到：{why}。请在“校准数据”中选择一个数据集。"},
})

# the Export tab (core.models.export) and its refusals
_MERGE_FIRST = ("{path} is an unmerged {kind} adapter: merge it first (Merge tab), then export the merged model.",
                "{path} 是未合并的 {kind} 适配器：请先合并（“合并”页），再导出合并后的模型。")
TEXT.update({
    "export.tab": {"en": "Export", "zh": "导出"},
    "export.about": {
        "en": "A base, trained or merged model becomes a static graph run by Paddle Inference (what PaddleNLP's "
              "export_model.py and predictor.py --mode static do): the generation loop traced once, greedy and "
              "sampling from the same graph. Chat, evaluation and the API take the folder like any model. The job "
              "checks the exported graph against the model before it publishes the folder.",
        "zh": "把基座、训练或合并后的模型导出为静态图，由 Paddle Inference 运行（相当于 PaddleNLP 的 export_model.py 与 "
              "predictor.py --mode static）：生成循环只追踪一次，贪心解码和采样共用同一张图。对话、评估和 API "
              "可像普通模型一样使用导出的目录。任务会先把导出的图与原模型逐 token 对比，一致后才发布目录。"},
    "export.model": {"en": "Model to export", "zh": "要导出的模型"},
    "export.name": {"en": "Output model name", "zh": "输出模型名称"},
    "export.run": {"en": "Export", "zh": "导出"},
    "export.open_chat": {"en": "Open in Chat", "zh": "在对话页打开"},
    "export.pick_first": {"en": "Pick a model first.", "zh": "请先选择模型。"},
    "export.running": {"en": "Exporting to {out} …", "zh": "正在导出到 {out} …"},
    "export.done": {
        "en": "Exported to {out}. The static graph gave the model's own greedy answers on {matched}/{prompts} prompts "
              "({tokens} tokens each). Took {s} (tracing {trace}).",
        "zh": "已导出到 {out}。静态图在 {matched}/{prompts} 个提示上给出与原模型相同的贪心回答（各 {tokens} 个 token）。"
              "用时 {s}（其中追踪 {trace}）。"},
    "refused.export_adapter_lora": {"en": _MERGE_FIRST[0], "zh": _MERGE_FIRST[1]},
    "refused.export_adapter_lokr": {"en": _MERGE_FIRST[0], "zh": _MERGE_FIRST[1]},
    "refused.export_adapter_vera": {"en": _MERGE_FIRST[0], "zh": _MERGE_FIRST[1]},
    "refused.export_adapter_prefix": {
        "en": "A prefix-tuning adapter cannot be exported: its trained key/value states go in front of every layer's "
              "attention, so there are no weights to fold them into, and the exported generation graph has no input "
              "for them (PaddleNLP exports prefix models only as its GPU fused inference models). Chat, Evaluate and "
              "the API run it with its base.",
        "zh": "前缀微调适配器无法导出：它训练得到的键值状态放在每层注意力之前，没有可并入的权重，导出的生成图也没有接收它们的输入"
              "（PaddleNLP 只把前缀模型导出为 GPU 专用的融合推理模型）。对话、评估和 API 会连同基座一起运行它。"},
    "refused.export_adapter_reft": {
        "en": "A ReFT adapter cannot be exported: it edits hidden states while the model runs and changes no weight, and "
              "the exported graph has no place for that. Chat, Evaluate and the API run it with its base.",
        "zh": "ReFT 适配器无法导出：它在模型运行时修改隐藏状态，不改动任何权重，导出的图中没有它的位置。对话、评估和 API "
              "会连同基座一起运行它。"},
    "refused.export_quantized": {
        "en": "{path} is quantized ({algorithm}); it is not exported: on CPU paddle runs quantized weights by "
              "dequantizing them, so the graph would hold float weights again. Export the merged model it came from.",
        "zh": "{path} 是量化模型（{algorithm}），不导出：CPU 上 paddle 需先反量化才能运行，导出的图又会是浮点权重。"
              "请导出它所来自的合并模型。"},
    "refused.export_already_static": {"en": "{path} is already a static export; export the model folder it came from.",
                                      "zh": "{path} 已经是静态导出；请导出它所来自的模型目录。"},
    "refused.export_not_a_model": {"en": "{path} holds no model (no config.json).", "zh": "{path} 中没有模型（缺少 config.json）。"},
    "refused.export_needs_4d_mask": {
        "en": "{path}: {model_type} models read the prompt both ways (a 4-D mask and two position rows); PaddleNLP's "
              "exported generation loop takes a 2-D padding mask, so they are not exported. Chat runs them in dygraph.",
        "zh": "{path}：{model_type} 模型双向读取提示（四维掩码和两行位置编号），而 PaddleNLP 导出的生成循环只接收二维填充掩码，"
              "因此不导出。对话页以动态图运行它们。"},
    "refused.export_dtype_needs_gpu": {"en": "dtype {dtype} needs a GPU: paddle's CPU build has no {dtype} matmul. "
                                             "Export float32 on CPU.",
                                       "zh": "dtype {dtype} 需要 GPU：paddle 的 CPU 版没有 {dtype} 矩阵乘。CPU 上请导出 float32。"},
    "refused.export_bad_dtype": {"en": "dtype must be float32, float16 or bfloat16, not {dtype}.",
                                 "zh": "dtype 必须是 float32、float16 或 bfloat16，而不是 {dtype}。"},
})

# steering a running run (Runs tab; core.train.control)
TEXT.update({
    "runs.ctl_save": {"en": "Save checkpoint now", "zh": "立即保存检查点"},
    "runs.ctl_eval": {"en": "Evaluate now", "zh": "立即评估"},
    "runs.ctl_stop_after_eval": {"en": "Stop after next evaluation", "zh": "下次评估后停止"},
    "runs.ctl_stop_and_save": {"en": "Stop and save", "zh": "停止并保存"},
    "runs.ctl_lr": {"en": "New learning rate", "zh": "新学习率"},
    "runs.ctl_lr_set": {"en": "Set learning rate", "zh": "设置学习率"},
    "runs.ctl_sent": {"en": "Requested **{what}**: every process acts on it at the same step boundary, within 2 steps.",
                      "zh": "已请求 **{what}**：所有进程将在同一步结束时执行（2 步之内）。"},
    "runs.ctl_applied": {"en": "{what}: at step {step} — {effect}", "zh": "{what}：第 {step} 步 — {effect}"},
    "runs.ctl_accepted": {"en": "{what}: accepted for step {step}", "zh": "{what}：已受理，将在第 {step} 步执行"},
    "runs.ctl_waiting": {"en": "{what}: waiting for the next step", "zh": "{what}：等待下一步"},
    "runs.ctl_not_running": {"en": "the run is {state}: only a running run takes {action}",
                             "zh": "该运行当前{state}：只有运行中的训练才能执行 {action}"},
    "runs.ctl_multi_node": {"en": "run {run} spans several machines: steering reaches only this machine's ranks, so it "
                                  "is refused (stop it, or wait for its own checkpoints)",
                            "zh": "运行 {run} 跨多台机器：控制请求只能到达本机的进程，因此不予执行（可停止它，或等待它自己的检查点）"},
    "runs.ctl_bad_lr": {"en": "learning rate {value!r}: expected a number above 0 and below 10",
                        "zh": "学习率 {value!r}：应为大于 0、小于 10 的数"},
    "runs.ctl_unknown_action": {"en": "{action!r}: expected save, eval, stop-after-eval, stop-and-save or lr=X",
                                "zh": "{action!r}：应为 save、eval、stop-after-eval、stop-and-save 或 lr=X"},
})

# the Chat tab's plain failures (never a Python error in the answer bubble)
TEXT.update({
    "chat.worker_unreachable": {"en": "The chat worker does not answer. Load the model again (the Jobs tab has its log).",
                                "zh": "对话服务没有响应。请重新加载模型（任务页有它的日志）。"},
    "chat.connection_lost": {"en": "The chat worker stopped answering mid-way. Load the model again (the Jobs tab has its log).",
                             "zh": "对话服务在回答中途停止了响应。请重新加载模型（任务页有它的日志）。"},
    "chat.answer_failed": {"en": "The answer failed. The Jobs tab has the chat worker's log.",
                           "zh": "回答失败。任务页有对话服务的日志。"},
})

# what a run costs the machine (Runs tab; core.train.monitor)
TEXT.update({
    "runs.res_line": {
        "en": "**Resources** — run ({procs} processes): memory {pss} MiB PSS now, peak {peak} MiB (RSS sum {rss} MiB "
              "counts shared pages once per process), CPU {cpu} % · machine: CPU {mcpu} %, memory {used} of {total} GiB, "
              "{disk} GiB free disk",
        "zh": "**资源** — 本次训练（{procs} 个进程）：内存 PSS 当前 {pss} MiB，峰值 {peak} MiB（RSS 合计 {rss} MiB，"
              "共享页按进程重复计算），CPU {cpu} % · 本机：CPU {mcpu} %，内存 {used} / {total} GiB，磁盘剩余 {disk} GiB"},
    "runs.res_gpu": {"en": " · GPU {i}: {used} of {total} GiB, {util} % busy", "zh": " · GPU {i}：{used} / {total} GiB，占用 {util} %"},
})

# will it fit? (Train tab; core.train.estimate)
TEXT.update({
    "train.estimate": {
        "en": "**Estimate:** about {per} per process ({total} in all, {free} free now), {time} for {steps} "
              "steps, checkpoints about {disk} on disk — calibrated by {runs} earlier run(s) on this machine.",
        "zh": "**预估：** 每个进程约 {per}（共 {total}，当前可用 {free}），{steps} 步约需 {time}，"
              "检查点约占磁盘 {disk} — 已用本机 {runs} 次历史运行校准。"},
    "train.estimate_no_memory": {
        "en": "**Warning:** the estimate ({total}) exceeds the free memory ({free}): lower the batch size or "
              "lengths, use LoRA, or fewer processes.",
        "zh": "**警告：** 预估内存（{total}）超过当前可用内存（{free}）：请减小批大小或长度、改用 LoRA，或减少进程数。"},
    "train.estimate_no_disk": {
        "en": "**Warning:** checkpoints need about {disk} and only {free} of disk is free.",
        "zh": "**警告：** 检查点约需 {disk} 磁盘，而剩余空间只有 {free}。"},
})

# evaluate while its merge is still being written (Merge & evaluate tab)
TEXT.update({
    "refused.merge_running": {"en": "The merge into {path} is still running (job {job}); evaluate when it has finished.",
                              "zh": "合并到 {path} 的任务（{job}）仍在运行；请在它完成后再评估。"},
})


def description(preset: dict, lang: str) -> str:
    """A preset's description in ``lang`` (a preset file's ``description_zh`` beside its English one)."""
    return (preset.get(f"description_{lang}") if lang != "en" else None) or preset.get("description", "")
