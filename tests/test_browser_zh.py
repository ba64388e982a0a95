"""中文 is complete (issue 35, item 7): in a real chromium against a studio switched to 中文, with a
finished training run, a run cancelled before it started, a finished and a stopped evaluation job
and a base/adapter comparison in the workspace, every tab is visited and every text the page shows
(text nodes of visible elements, SVG chart text included, and the placeholder / aria-label / title
of inputs and buttons) is searched for English words. What may stay Latin is named in ALLOWED:
model and folder names, units and technical tokens (LoRA, DPO, JSON, CPU, MiB, ...), and whatever
the person's own data says (logs, commands and code blocks, the rows of a dataset or of predictions,
which are the records themselves). Switching back to English then shows a known English string, so
the walk sees text at all."""

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.browser import ROOT, Studio, launch_browser, wait_text
from tests.conftest import link_demo
from tests.test_browser_journey import pick

pytestmark = [pytest.mark.browser, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")

# (dropdown, option) picked on a tab after its first look; {names} are the workspace's (ws fixture)
PICKS = {
    "runs": [("runs-pick", "{run}")],
    "merge": [("merge-adapter", "runs/{run}/output (lora)")],
    "jobs": [("jobs-pick", "{stopped} · 评估"), ("jobs-pick", "{compared} · 评估"), ("jobs-pick", "{run} · 训练")],
}
TABS = ["dataset", "models", "train", "runs", "cluster", "merge", "evaluate", "chat", "quantize", "export", "jobs"]

# Latin words that are names, units or technical tokens in either language (compared lower-case)
ALLOWED = {
    # the product, libraries, formats, protocols and devices
    "paddle", "paddlenlp", "paddlepaddle", "paddleslim", "gradio", "llm", "studio", "python", "curl",
    "json", "jsonl", "csv", "yaml", "openai", "http", "https", "url", "api", "ssh", "id", "ids", "pid",
    "cpu", "gpu", "cuda", "nccl", "gloo", "pss", "rss", "ram", "vram", "mib", "gib", "kib", "mb", "gb", "kb", "tb",
    "utc", "nan", "inf", "logits", "gram",
    # training and model words kept as they are in Chinese ML writing
    "lora", "qlora", "rslora", "lokr", "vera", "reft", "loreft", "dpo", "kto", "sft", "ptq", "gptq", "smooth", "shift",
    "bf", "fp", "int", "nf", "wint", "bleu", "rouge", "ppl", "token", "tokens", "batch", "epoch", "rank",
    "llama", "qwen", "chatglm", "glm", "gpt", "bloom", "opt", "mlp", "adamw", "warmup", "sentencepiece", "bpe",
    "visualdl", "tensorboard", "tensorboardx", "wandb", "sharding", "stage", "master", "offline", "none", "auto",
    "src", "tgt", "dev", "train", "static", "dygraph", "alpha", "sqrt", "absmaxobserver", "fasterquant", "damp",
    "act-order", "abs-max", "avg", "rtn", "gguf", "safetensors", "pytorch", "hugging", "face", "inference",
    "en", "zh", "utf", "lines", "demo", "base",
}
# what a page shows that is a name (a product, a command line) more than a word
PHRASES = [r"Paddle Inference", r"Hugging Face", r"paddle-studio(?: [\w./=-]+)*", r"JSON Lines"]
# Gradio's own words that no locale reaches (its Number/Slider components write the aria-label
# "number input for <label>" in English whatever the language; "logo" is the footer image's alt):
# the studio's LOCALE_JS / GRADIO_WORDS_JS (studio/gradio_fixes.py) put the rest in the page's language
GRADIO_BUILTIN = {"logo"}
GRADIO_ARIA = re.compile(r"^(number input for|range slider for) ")
# data, not the studio's words: a dataset's recorded source (the command that made it)
KNOWN_ELSEWHERE: dict[str, set[str]] = {
    "dataset": {"paddle-studio demo init (seed 1234)"},
}

# elements whose text is the person's data or a machine's words, not the studio's: logs, commands,
# code and JSON, records of a dataset, predictions and sample answers; the language switch (bilingual)
# and Gradio's status tracker over an output while its event runs ("2.2s": a timer, gone once answered)
SKIP_JS = ("pre, code, textarea, .cm-editor, #lang-switch, [id$=-log], [id$=-command], [id$=-result],"
           " [id$=-preds-table], [id^=dataset-preview], [id$=-samples], .studio-log,"
           " .meta-text, .meta-text-center, .progress-text, .progress-level")

WALK_JS = """(skip) => {
  const out = [];
  const seen = new Set();
  const visible = (el) => el && el.checkVisibility && el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true});
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    const s = n.nodeValue.replace(/\\s+/g, ' ').trim();
    if (!s || !el || el.closest('script, style, noscript') || el.closest(skip) || !visible(el)) continue;
    const where = (el.closest('[id]') || el).id || el.tagName;
    const key = where + '|' + s;
    if (!seen.has(key)) { seen.add(key); out.push([where, s]); }
  }
  for (const el of document.querySelectorAll('input, textarea, button, [role=button], [role=tab], a, img, label')) {
    if (!visible(el) || el.closest(skip)) continue;
    for (const a of ['placeholder', 'aria-label', 'title', 'alt']) {
      const v = (el.getAttribute(a) || '').trim();
      const where = ((el.closest('[id]') || el).id || el.tagName) + '@' + a;
      if (v && !seen.has(where + '|' + v)) { seen.add(where + '|' + v); out.push([where, v]); }
    }
  }
  return out;
}"""

SEP = re.compile(r"[\s，。、；：（）()「」“”\"《》【】\[\]{},;:!?…·—–|<>*`~]+")
# a technical token: holds a digit, a path or key separator, or is an acronym / camelCase / CONST name
TECH = re.compile(r".*[\d/\\=_@#$%^&.+].*|[A-Z]{2,}[a-z]?s?|[a-z]+[A-Z]\w*|[A-Z][a-z]+(?:[A-Z][a-z0-9]*)+|[A-Za-z]"
                  r"|-+\w+")
WORD = re.compile(r"[A-Za-z]+(?:['’-][A-Za-z]+)*")
FIELD_KEY = re.compile(r"^[a-z][a-z0-9_.]* · ")  # a form field's help starts with its config key


def english(text: str) -> list[str]:
    text = FIELD_KEY.sub("", text)
    words = [m.group(1) for m in re.finditer(r"\d ?(s|ms|min|h)\b", text)]  # a duration's English units
    for ph in PHRASES:
        text = re.sub(ph, " ", text)
    for chunk in SEP.split(text):
        if not re.search(r"[A-Za-z]", chunk) or TECH.fullmatch(chunk):
            continue
        for w in WORD.findall(chunk):
            if w.lower() not in ALLOWED and not all(p.lower() in ALLOWED or len(p) == 1 for p in w.split("-")) and len(w) > 1:
                words.append(w)
    return words


def findings(page, tab: str) -> list[str]:
    known = KNOWN_ELSEWHERE.get(tab, set())
    out = []
    for where, text in page.evaluate(WALK_JS, SKIP_JS):
        words = english(text)
        if words and text not in known and text not in GRADIO_BUILTIN and not GRADIO_ARIA.match(text):
            out.append(f"[{tab}] {where}: {text[:160]!r} (English: {', '.join(words[:6])})")
    return out


def wait_jobs(ids, timeout=240):
    from core import jobs

    deadline = time.time() + timeout
    while any(jobs.status(j).get("state") in jobs.ACTIVE for j in ids):
        assert time.time() < deadline, [jobs.status(j) for j in ids]
        time.sleep(0.2)


@pytest.fixture(scope="module")
def ws(tmp_path_factory, demo_home):
    """One finished 6-step LoRA run, one run cancelled in the queue, a finished and a stopped eval
    (predictions) job and a base / base+adapter comparison on the run's adapter."""
    import os

    from core import jobs
    from core.models import evaluate
    from core.train import config, runs

    root = tmp_path_factory.mktemp("zh")
    home = link_demo(root / "ws", demo_home)
    old = os.environ.get("PADDLE_STUDIO_HOME")
    os.environ["PADDLE_STUDIO_HOME"] = str(home)
    studio = None
    try:
        cfg = config.load_preset("demo-lora", home)
        flat = {**cfg.to_paddlenlp(), "max_steps": 6, "save_steps": 6, "eval_steps": 1000, "evaluation_strategy": "no",
                "logging_steps": 1}
        small = root / "small.json"
        small.write_text(json.dumps(flat))
        base = home / "models" / "demo-base"
        data = home / "datasets" / "demo"
        # the predictions job trains nothing: it runs beside the training run
        predicted = evaluate.submit_predict(base, data, limit=4, max_new_tokens=8)
        stopped = evaluate.submit_predict(base, data, limit=4, max_new_tokens=8)
        jobs.stop(stopped)
        train = subprocess.Popen([sys.executable, "-m", "core.cli", "train", str(small), "--json"], cwd=ROOT,
                                 env={**os.environ, "PADDLE_STUDIO_WARM": "0"}, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        # the studio starts while the run trains (it follows the workspace; the page opens later), in
        # English: the test switches the page to 中文. No warm spare: it would only load the machine
        studio = Studio(home, root / "studio.log", lang="en", env={"PADDLE_STUDIO_WARM": "0"})
        out, err = train.communicate(timeout=300)
        assert train.returncode == 0, err[-3000:]
        run = json.loads(out)
        adapter = Path(run["output"])
        # a comparison job as the Merge tab starts it: base and base + adapter on the run's dev split
        compared = evaluate.submit_compare(adapter, None, limit=4)
        queued = runs.create(config.load_run_file(small, name="queued"))
        runs.stop(queued)
        wait_jobs([predicted, compared])
        assert jobs.status(compared)["state"] == "succeeded", jobs.read_log(compared)[-2000:]
        yield SimpleNamespace(home=home, adapter=adapter, studio=studio, stopped=stopped, compared=compared,
                              run=Path(run["dir"]).name, queued=queued)
    finally:
        if studio:
            studio.close()
        if old is None:
            os.environ.pop("PADDLE_STUDIO_HOME", None)
        else:
            os.environ["PADDLE_STUDIO_HOME"] = old


def test_every_tab_in_chinese_shows_no_english(ws):
    started = time.time()
    s = ws.studio
    found, took = [], {}
    with playwright.sync_playwright() as p:
        browser = launch_browser(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1600})
        page.goto(s.url)
        # the page comes up in English and switches: what a switch does not redraw stays English
        wait_text(page.locator("#studio-header"), "Paddle LLM Studio")
        page.wait_for_timeout(1500)  # the page's load events (each tab's newest job) answer first
        page.locator("#lang-switch label", has_text="中文").click()
        wait_text(page.locator("#studio-header"), "Paddle 大模型工作室")
        for tab in TABS:
            t0 = time.time()
            page.locator(f"#tab-{tab}-button").click()
            page.wait_for_timeout(2000 if tab in ("merge", "evaluate", "jobs", "runs") else 1000)
            found += findings(page, tab)
            # what a pick shows: a run's page, a job's detail, an adapter's check, a folder's report
            for elem_id, label in PICKS.get(tab, []):
                pick(page, elem_id, label.format(**vars(ws)), timeout=20)
                page.wait_for_timeout(1200)
                found += findings(page, tab)
            if tab == "models":
                page.locator("#models-folder textarea").fill(str(ws.home / "models" / "demo-base"))
                page.locator("#models-inspect").click()
                wait_text(page.locator("#models-report"), "demo-base")
                found += findings(page, tab)
            took[tab] = round(time.time() - t0, 1)
        # the language switch back to English: the walk sees text (a known English string shows)
        page.locator("#lang-switch label", has_text="English").click()
        wait_text(page.locator("#studio-header"), "Paddle LLM Studio")
        page.locator("#tab-jobs-button").click()
        assert any("Stop" in t for _, t in page.evaluate(WALK_JS, SKIP_JS))
        browser.close()
    print(f"studio answered in {s.answered_s:.1f} s; walked {len(TABS)} tabs in {time.time() - started:.1f} s: {took}")
    assert not found, f"{len(found)} English texts in 中文:\n" + "\n".join(found)
