"""zh/en text of the Evaluate & predict tab (studio/tabs/evaluate.py)."""

TEXT = {
    "evaluate.tab": {"en": "Evaluate & predict", "zh": "评估与预测"},
    "evaluate.about": {
        "en": "Evaluate any model of the workspace (base, trained, merged, quantized, static export, or an adapter "
              "with its base) on any dataset — its dev or train split — or on a JSON/JSONL file you upload. Every "
              "record's answer is kept: page through them below and download them as `predictions.jsonl`.",
        "zh": "在任意数据集（其验证集或训练集）或你上传的 JSON/JSONL 文件上评估工作区中的任意模型（基座、训练所得、合并、量化、"
              "静态导出，或适配器连同其基座）。每条记录的回答都会保留：可在下方逐页查看，并下载为 `predictions.jsonl`。"},
    "evaluate.model": {"en": "Model", "zh": "模型"},
    "evaluate.dataset": {"en": "Dataset", "zh": "数据集"},
    "evaluate.split": {"en": "Split", "zh": "数据划分"},
    "evaluate.split_dev": {"en": "dev", "zh": "验证集"},
    "evaluate.split_train": {"en": "train", "zh": "训练集"},
    "evaluate.upload": {"en": "…or a JSON/JSONL file (used instead of the dataset)",
                        "zh": "……或一个 JSON/JSONL 文件（代替数据集使用）"},
    "evaluate.limit": {"en": "Records (0: all)", "zh": "记录数（0 表示全部）"},
    "evaluate.max_tokens": {"en": "Max new tokens", "zh": "最大新生成 token 数"},
    "evaluate.run": {"en": "Start", "zh": "开始"},
    "evaluate.pick_model": {"en": "Pick a model first.", "zh": "请先选择模型。"},
    "evaluate.pick_data": {"en": "Pick a dataset or upload a file first.", "zh": "请先选择数据集或上传文件。"},
    "evaluate.started": {"en": "Started job {job}.", "zh": "已启动任务 {job}。"},
    "evaluate.job": {"en": "Evaluation job", "zh": "评估任务"},
    "evaluate.running": {"en": "Evaluating `{model}` on {data}…", "zh": "正在用 {data} 评估 `{model}`……"},
    "evaluate.metrics": {"en": "Metrics", "zh": "指标"},
    "evaluate.col_metric": {"en": "metric", "zh": "指标"},
    "evaluate.col_value": {"en": "value", "zh": "数值"},
    "evaluate.m_eval_loss": {"en": "eval loss", "zh": "评估损失"},
    "evaluate.m_perplexity": {"en": "perplexity", "zh": "困惑度"},
    "evaluate.m_token_accuracy": {"en": "token accuracy", "zh": "token 准确率"},
    "evaluate.m_exact_match": {"en": "exact match", "zh": "完全匹配率"},
    "evaluate.m_bleu4": {"en": "BLEU-4", "zh": "BLEU-4"},
    "evaluate.m_rouge_l": {"en": "ROUGE-L", "zh": "ROUGE-L"},
    "evaluate.m_records": {"en": "records", "zh": "记录数"},
    "evaluate.m_seconds": {"en": "seconds", "zh": "用时（秒）"},
    "evaluate.done": {"en": "Evaluated `{model}` on {n} records of `{data}`.",
                      "zh": "已在 `{data}` 的 {n} 条记录上评估 `{model}`。"},
    "evaluate.note": {"en": "Note: {text}", "zh": "注意：{text}"},
    "evaluate.note_bleu4_short_answers": {
        "en": "BLEU-4 is not meaningful here: {short} of {records} references have fewer than 4 tokens, so they hold "
              "no 4-gram to match. Judge by exact match and ROUGE-L.",
        "zh": "BLEU-4 在这里没有意义：{records} 条参考答案中有 {short} 条少于 4 个 token，没有可匹配的 4-gram。"
              "请以完全匹配率和 ROUGE-L 为准。"},
    "evaluate.note_bleu4_short_records": {
        "en": "Per-record BLEU-4 is left empty (—) for {short} of {records} records whose answer or reference has "
              "fewer than 4 tokens (it would be 0 whatever the answer).",
        "zh": "{records} 条记录中有 {short} 条的回答或参考答案少于 4 个 token，其单条 BLEU-4 留空（—）"
              "（无论回答如何都会是 0）。"},
    "evaluate.note_static_no_loss": {
        "en": "A static export runs only its generation loop: loss, perplexity and token accuracy need the model's "
              "logits (evaluate the model it was exported from for those).",
        "zh": "静态导出模型只运行其生成循环：损失、困惑度和 token 准确率需要模型的 logits（请评估导出它的原模型来获得这些指标）。"},
    "evaluate.note_text_no_answers": {
        "en": "Raw text has no questions to answer: only loss, perplexity and token accuracy.",
        "zh": "纯文本数据没有可回答的问题：只有损失、困惑度和 token 准确率。"},
    "evaluate.predictions": {"en": "Predictions", "zh": "预测结果"},
    "evaluate.col_index": {"en": "#", "zh": "序号"},
    "evaluate.col_prompt": {"en": "prompt", "zh": "提示"},
    "evaluate.col_reference": {"en": "reference", "zh": "参考答案"},
    "evaluate.col_output": {"en": "answer", "zh": "模型回答"},
    "evaluate.col_exact": {"en": "exact", "zh": "完全匹配"},
    "evaluate.col_rouge_l": {"en": "ROUGE-L", "zh": "ROUGE-L"},
    "evaluate.col_bleu4": {"en": "BLEU-4", "zh": "BLEU-4"},
    "evaluate.yes": {"en": "yes", "zh": "是"},
    "evaluate.no": {"en": "no", "zh": "否"},
    "evaluate.history": {"en": "(turn {n} of a conversation)", "zh": "（多轮对话的第 {n} 轮）"},
    "evaluate.no_predictions": {"en": "No predictions yet: start an evaluation above.",
                                "zh": "还没有预测结果：请在上方开始评估。"},
    "evaluate.page": {"en": "Page {page} of {pages} · {total} records", "zh": "第 {page} / {pages} 页 · 共 {total} 条记录"},
    "evaluate.prev": {"en": "◀ Previous", "zh": "◀ 上一页"},
    "evaluate.next": {"en": "Next ▶", "zh": "下一页 ▶"},
    "evaluate.download": {"en": "predictions.jsonl", "zh": "predictions.jsonl（预测结果下载）"},
    "evaluate.refused_no_model": {"en": "{path} is not a model folder.", "zh": "{path} 不是模型文件夹。"},
    "evaluate.refused_no_base": {"en": "{path} holds an adapter that records no base model.",
                                 "zh": "{path} 中的适配器没有记录其基座模型。"},
    "evaluate.refused_no_data": {"en": "{path}: no such dataset or file.", "zh": "{path}：数据集或文件不存在。"},
    "evaluate.refused_no_split": {"en": "{path} has no {split} split.", "zh": "{path} 没有 {split} 划分。"},
    "evaluate.refused_no_records": {"en": "{path} holds no record to evaluate.", "zh": "{path} 中没有可评估的记录。"},
    "evaluate.refused_text_data": {"en": "{path} is raw text: there are no questions to answer.",
                                   "zh": "{path} 是纯文本数据：没有可回答的问题。"},
    "evaluate.refused_bad_data": {"en": "The data cannot be read: {why}", "zh": "无法读取数据：{why}"},
}
