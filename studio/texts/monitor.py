"""What a run costs the machine (core.train.monitor): the Runs tab's chart and the header's load line."""

TEXT = {
    "runs.res_chart": {"en": "Resources (this run)", "zh": "资源占用（本次训练）"},
    "runs.res_time": {"en": "minutes since start", "zh": "开始后的分钟数"},
    "runs.res_mem": {"en": "memory PSS (MiB)", "zh": "内存 PSS（MiB）"},
    "runs.res_cpu": {"en": "CPU %", "zh": "CPU %"},
    "runs.res_machine_mem": {"en": "machine memory used (MiB)", "zh": "整机已用内存（MiB）"},
    "runs.res_gpu_mem": {"en": "GPU {i} memory (MiB)", "zh": "GPU {i} 显存（MiB）"},
    "app.load": {
        "en": "machine: CPU {cpu} % of {cores} cores · memory {used} of {total} GiB · {disk} GiB free disk",
        "zh": "本机：CPU {cpu} %（{cores} 核）· 内存 {used} / {total} GiB · 磁盘可用 {disk} GiB",
    },
    "app.load_gpu": {"en": " · GPU {i}: {used} of {total} GiB, {util} % busy",
                     "zh": " · GPU {i}：{used} / {total} GiB，占用 {util} %"},
}
