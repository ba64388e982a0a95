"""zh/en text of experiment tracking (core.train.tracking): the check codes for training.report_to,
the VisualDL board's refusals and the Runs tab's tracker line (tracking_link's "text" keys)."""

TEXT = {
    # config check codes (core.train.config.MESSAGES, from core.train.tracking.problems)
    "check.tracker_unknown": {
        "en": "report_to {value!r}: PaddleNLP knows no such tracker; choose one of {expected}",
        "zh": "report_to {value!r}：PaddleNLP 没有这个实验跟踪工具；请从 {expected} 中选择"},
    "check.tracker_missing": {
        "en": "report_to {tracker}: its package {package} is not installed here (PaddleNLP would stop at the run's "
              "start): `pip install {package}`, or choose none (the studio's own metrics stay)",
        "zh": "report_to {tracker}：本机没有安装它所需的包 {package}（PaddleNLP 会在训练开始时停止）：请执行 "
              "`pip install {package}`，或选择 none（工作室自己的指标照常记录）"},
    "check.wandb_online": {
        "en": "report_to wandb: the studio sends no run over the network (wandb would need a login a training process "
              "cannot give); start the studio with WANDB_MODE=offline (now {mode!r}): logs go to the run's logging_dir, "
              "`wandb sync` them later",
        "zh": "report_to wandb：工作室不会把训练发送到网络上（wandb 需要登录，训练进程无法完成）；请以 "
              "WANDB_MODE=offline 启动工作室（当前为 {mode!r}）：日志写入该运行的 logging_dir，之后可用 `wandb sync` 上传"},
    # the VisualDL board (core.train.tracking.start_board) refusals, read by studio.locales.refusal
    "refused.board_no_run": {"en": "no run {run!r}", "zh": "没有运行 {run!r}"},
    "refused.board_not_visualdl": {
        "en": "run {run} does not report to VisualDL (report_to is {report_to!r})",
        "zh": "运行 {run} 没有记录到 VisualDL（report_to 为 {report_to!r}）"},
    "refused.board_tracker_missing": {
        "en": "VisualDL is not installed here: `pip install {package}`",
        "zh": "本机没有安装 VisualDL：请执行 `pip install {package}`"},
    "refused.board_failed": {
        "en": "VisualDL ended at its start (exit code {exit_code}): {log}",
        "zh": "VisualDL 启动时退出（退出码 {exit_code}）：{log}"},
    "refused.board_slow": {
        "en": "VisualDL did not answer on {url} within {seconds} s; it was stopped",
        "zh": "VisualDL 在 {seconds} 秒内没有在 {url} 上响应，已将其停止"},
    # the Runs tab's tracker line (core.train.tracking.tracking_link's "text", with its "params")
    "tracking.board_running": {
        "en": "VisualDL for this run: {url} (on this machine; from another one, forward the port with ssh -L)",
        "zh": "本运行的 VisualDL：{url}（在本机打开；从其他机器访问请用 ssh -L 转发端口）"},
    "tracking.board_start": {
        "en": "This run logs to VisualDL in {logdir}: start its board here, or run `{command}`",
        "zh": "本运行记录到 VisualDL（{logdir}）：可在此启动看板，或执行 `{command}`"},
    "tracking.tensorboard_command": {
        "en": "This run logs to TensorBoard in {logdir}: run `{command}`",
        "zh": "本运行记录到 TensorBoard（{logdir}）：请执行 `{command}`"},
    "tracking.wandb_command": {
        "en": "This run logs to wandb offline in {logdir}: upload it with `{command}`",
        "zh": "本运行以离线方式记录到 wandb（{logdir}）：可用 `{command}` 上传"},
    "tracking.start": {"en": "Open VisualDL", "zh": "打开 VisualDL"},
    "tracking.stop": {"en": "Stop VisualDL", "zh": "停止 VisualDL"},
}
