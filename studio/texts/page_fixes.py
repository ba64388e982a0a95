"""zh/en text of the Dataset and Chat tab fixes of issue 35 (items 7 and 11)."""

TEXT = {
    # Dataset: a file without one record says so, with no problems table under it
    "dataset.no_records": {
        "en": "**This file holds no records:** {why}. There is nothing to check or import: add records "
              "(one JSON object a line, or objects inside a JSON array).",
        "zh": "**该文件中没有任何记录：**{why}。没有可校验或导入的内容：请加入记录（每行一个 JSON 对象，"
              "或 JSON 数组中的对象）。",
    },
    "dataset.no_records_empty_array": {"en": "it is an empty JSON array `[]`", "zh": "它是一个空的 JSON 数组 `[]`"},
    "dataset.no_records_empty_file": {"en": "it is empty (0 bytes)", "zh": "它是空文件（0 字节）"},
    "dataset.no_records_only_blank_lines": {"en": "it holds only blank lines ({lines})",
                                            "zh": "它只有空行（{lines} 行）"},
    # Dataset: the problems table's field of a JSON-array item ("[61]", "[61].tgt")
    "dataset.field_record": {"en": "record {n}", "zh": "第 {n} 条记录"},
    "dataset.field_in_record": {"en": "{field} of record {n}", "zh": "第 {n} 条记录的 {field}"},
    # Dataset: token-length histograms
    "dataset.hist_x": {"en": "tokens", "zh": "token 数"},
    "dataset.hist_y": {"en": "records", "zh": "记录数"},
    "dataset.hist_hover": {"en": "{range} tokens: {count} records", "zh": "{range} 个 token：{count} 条记录"},
    # Chat: running workers after a reload
    "chat.running": {"en": "Running chat workers: {names}.", "zh": "正在运行的对话 worker：{names}。"},
    "chat.running_also": {"en": "Also running: {names}.", "zh": "另外正在运行：{names}。"},
    # Chat: max new tokens beyond what the model takes (refused before anything is sent or shown)
    "chat.max_tokens_over": {
        "en": "Not sent: max new tokens is {got}, but `{model}` has a context of {ctx} tokens, the prompt "
              "included, so at most {most} new tokens can fit. Lower max new tokens.",
        "zh": "未发送：最多生成的 token 数为 {got}，但 `{model}` 的上下文只有 {ctx} 个 token（含提示），"
              "最多只能生成 {most} 个。请调低“最多生成的 token 数”。",
    },
    "chat.max_tokens_room": {
        "en": "Not sent: max new tokens is {got}, but after this prompt ({prompt} tokens) `{model}` has room for "
              "at most {room} new tokens (its context is {ctx}). Lower max new tokens or shorten the conversation.",
        "zh": "未发送：最多生成的 token 数为 {got}，但该提示已占 {prompt} 个 token，`{model}` 最多还能生成 "
              "{room} 个（上下文共 {ctx} 个）。请调低“最多生成的 token 数”或缩短对话。",
    },
    "chat.prompt_too_long": {
        "en": "Not sent: the conversation is too long for `{model}`'s context. Clear it or shorten the message.",
        "zh": "未发送：对话超出了 `{model}` 的上下文长度。请清空对话或缩短消息。",
    },
    "chat.refused": {"en": "Not sent: `{model}` refused the request: {detail}",
                     "zh": "未发送：`{model}` 拒绝了该请求：{detail}"},
    # Dataset: what a wrong_type problem names ("expected {expected}, got {got}"), by the engine's words
    "dataset.expected.string": {"en": "string", "zh": "字符串"},
    "dataset.expected.a string": {"en": "a string", "zh": "字符串"},
    "dataset.expected.string or list of strings": {"en": "string or list of strings", "zh": "字符串或字符串列表"},
    "dataset.expected.a string or a non-empty list of strings": {"en": "a string or a non-empty list of strings",
                                                                 "zh": "字符串或非空的字符串列表"},
    "dataset.expected.a list of strings": {"en": "a list of strings", "zh": "字符串列表"},
    "dataset.expected.non-empty list": {"en": "non-empty list", "zh": "非空列表"},
    "dataset.expected.list of [question, answer]": {"en": "list of [question, answer]", "zh": "[问题, 回答] 的列表"},
    "dataset.expected.[question, answer]": {"en": "[question, answer]", "zh": "[问题, 回答]"},
    "dataset.expected.object with from/value": {"en": "object with from/value", "zh": "含 from/value 的对象"},
    "dataset.expected.object with role/content": {"en": "object with role/content", "zh": "含 role/content 的对象"},
    "dataset.expected.a list of 2 numbers (higher = better)": {"en": "a list of 2 numbers (higher = better)",
                                                               "zh": "2 个数字的列表（越大越好）"},
    "dataset.expected.the same conversation as chosen up to its last answer": {
        "en": "the same conversation as chosen up to its last answer", "zh": "与 chosen 相同的对话（最后一个回答除外）"},
    "dataset.got.int": {"en": "int", "zh": "整数"},
    "dataset.got.float": {"en": "float", "zh": "小数"},
    "dataset.got.bool": {"en": "bool", "zh": "布尔值"},
    "dataset.got.str": {"en": "str", "zh": "字符串"},
    "dataset.got.list": {"en": "list", "zh": "列表"},
    "dataset.got.dict": {"en": "dict", "zh": "对象"},
    "dataset.got.NoneType": {"en": "null", "zh": "null"},
    # Dataset: Python's JSON parser messages (an invalid_json problem's detail)
    "dataset.json.Expecting value": {"en": "Expecting value", "zh": "此处应为一个值"},
    "dataset.json.Expecting property name enclosed in double quotes": {
        "en": "Expecting property name enclosed in double quotes", "zh": "此处应为双引号括起的键名"},
    "dataset.json.Expecting ':' delimiter": {"en": "Expecting ':' delimiter", "zh": "此处应为冒号 :"},
    "dataset.json.Expecting ',' delimiter": {"en": "Expecting ',' delimiter", "zh": "此处应为逗号 ,"},
    "dataset.json.Extra data": {"en": "Extra data", "zh": "值之后还有多余内容"},
    "dataset.json.Unterminated string starting at": {"en": "Unterminated string starting at",
                                                     "zh": "字符串没有结束引号，开始于"},
    "dataset.json.Invalid control character at": {"en": "Invalid control character at", "zh": "无效的控制字符，位于"},
    "dataset.json.Invalid \\escape": {"en": "Invalid \\escape", "zh": "无效的 \\ 转义"},
    "dataset.json.Invalid \\uXXXX escape": {"en": "Invalid \\uXXXX escape", "zh": "无效的 \\uXXXX 转义"},
    "dataset.json.the array is not closed with ]": {"en": "the array is not closed with ]", "zh": "数组没有以 ] 结束"},
}
