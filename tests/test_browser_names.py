"""Output names and stale results in a real chromium against one real studio (issue 35, items 4
and 5). A suggested name fills the name box only while the box is empty or still holds the last
suggestion: a typed name survives a later pick (Merge adapter, Quantize model/preset, Models
folder); what a job writes is what the box shows; an upstream PTQ file's output_dir names its
result. Evaluate while the merge it would compare is still running says so instead of silently
leaving "merged" out; a new Quantize job clears the last job's report while it runs."""

import json
import time
from types import SimpleNamespace

import pytest

from tests.browser import Studio, launch_browser, wait_text
from tests.conftest import link_demo
from tests.test_browser_journey import pick

pytestmark = [pytest.mark.browser, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")


def make_lora(base: str, out) -> None:
    """A finished run's LoRA adapter on the demo model (as tests/test_serve.py's lora_dir)."""
    import paddle
    from paddlenlp.peft import LoRAConfig, LoRAModel
    from paddlenlp.transformers import AutoModelForCausalLM

    paddle.seed(7)
    model = AutoModelForCausalLM.from_pretrained(base, dtype="float32")
    lm = LoRAModel(model, LoRAConfig(target_modules=[".*q_proj.*", ".*v_proj.*"], r=4, lora_alpha=8,
                                     merge_weights=False, base_model_name_or_path=base))
    for n, p in lm.model.named_parameters():
        if "lora_B" in n:
            p.set_value(paddle.randn(p.shape) * 0.5)
    lm.save_pretrained(str(out))
    (out / "studio_model.json").write_text(json.dumps({"base": base}))  # the marker: training finished


@pytest.fixture(scope="module")
def ui(tmp_path_factory, demo_home):
    root = tmp_path_factory.mktemp("names")
    home = link_demo(root / "ws", demo_home)
    make_lora(str(home / "models" / "demo-base"), home / "runs" / "lora-run" / "output")
    s = Studio(home, root / "studio.log")
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            yield SimpleNamespace(home=home, root=root, studio=s, browser=browser)
            browser.close()
    finally:
        s.close()


def open_tab(ui, tab: str):
    page = ui.browser.new_page(viewport={"width": 1280, "height": 1400})
    page.goto(ui.studio.url)
    page.locator(f"#tab-{tab}-button").click()
    return page


def box(page, elem_id: str) -> str:
    return page.locator(f"#{elem_id} textarea").input_value()


def wait_box(page, elem_id: str, want: str, timeout: float = 20) -> None:
    deadline = time.time() + timeout
    while box(page, elem_id) != want and time.time() < deadline:
        time.sleep(0.1)
    assert box(page, elem_id) == want


def settle(page, seconds: float = 2.5) -> None:
    """Time for a pick's change handler to answer (it answers in well under a second)."""
    page.wait_for_timeout(int(seconds * 1000))


def test_merge_keeps_a_typed_name_and_evaluate_waits_for_the_merge(ui):
    page = open_tab(ui, "merge")
    page.locator("#merge-name textarea").fill("my-merged")
    pick(page, "merge-adapter", "runs/lora-run/output (lora)")
    settle(page)
    assert box(page, "merge-name") == "my-merged"  # the adapter's "lora-run-merged" does not overwrite it
    page.locator("#merge-btn").click()
    wait_text(page.locator("#merge-msg"), "Merging into", 30)
    page.locator("#eval-btn").click()  # the merge it would compare is still running
    note = wait_text(page.locator("#merge-note"), "still running", 30)
    assert "my-merged" in note
    assert "Merged into" not in page.locator("#merge-msg").inner_text()
    wait_text(page.locator("#merge-job-status"), "succeeded", 180)
    wait_text(page.locator("#merge-msg"), "Merged into", 30)
    assert (ui.home / "models" / "my-merged" / "config.json").is_file()
    assert not (ui.home / "models" / "lora-run-merged").exists()
    page.close()


def test_quantize_names_and_a_new_job_clears_the_old_report(ui):
    page = open_tab(ui, "quantize")
    page.get_by_label("Dev records to score").fill("2")
    pick(page, "quant-data", "demo")  # the base model records no training data
    pick(page, "quant-model", "models/demo-base (base)")  # the first model, picked already: no change
    pick(page, "quant-preset", "wint4")
    wait_box(page, "quant-name", "demo-base-wint4")  # a suggestion fills an empty box
    page.locator("#quant-name textarea").fill("my-q")
    pick(page, "quant-preset", "wint8")
    settle(page)
    assert box(page, "quant-name") == "my-q"  # a typed name survives a preset pick
    page.locator("#quant-run").click()
    wait_text(page.locator("#quant-job-status"), "succeeded", 240)
    wait_text(page.locator("#quant-report"), "smaller", 30)
    assert (ui.home / "models" / "my-q" / "config.json").is_file()
    assert box(page, "quant-name") == "my-q"
    # an emptied box takes the next suggestion again; then a pick and a click at once: the job
    # writes what the box shows once the click answers, and the last report goes while it runs
    page.locator("#quant-name textarea").fill("")
    pick(page, "quant-preset", "wint4-g64")
    wait_box(page, "quant-name", "demo-base-wint4-g64")
    pick(page, "quant-preset", "wint8")
    page.locator("#quant-run").click()
    page.wait_for_function("() => !document.querySelector('#quant-report').innerText.trim()"
                           " && !document.querySelector('#quant-plot-size .js-plotly-plot')", timeout=15000)
    assert "succeeded" not in page.locator("#quant-job-status").inner_text()
    wait_text(page.locator("#quant-job-status"), "succeeded", 240)
    wait_text(page.locator("#quant-report"), "demo-base-wint8", 30)
    assert box(page, "quant-name") == "demo-base-wint8"
    assert (ui.home / "models" / "demo-base-wint8" / "config.json").is_file()
    assert not (ui.home / "models" / "demo-base-wint4-g64").exists()
    page.close()


def test_quantize_config_file_names_its_output(ui):
    cfg = ui.root / "ptq_argument.json"
    cfg.write_text(json.dumps({"model_name_or_path": "demo-base", "dataset_name_or_path": "demo", "do_ptq": True,
                               "quant_type": "weight_only_int8", "ptq_step": 1, "output_dir": "./checkpoints/up_ckpts"}))
    page = open_tab(ui, "quantize")
    page.get_by_label("Dev records to score").fill("2")
    pick(page, "quant-preset", "wint4")
    wait_box(page, "quant-name", "demo-base-wint4")  # the auto-filled name...
    page.locator("#quant-from-config").get_by_text("Or start from a PaddleNLP").click()
    page.locator("#quant-config-file input[type=file]").set_input_files(str(cfg))
    plan = wait_text(page.locator("#quant-config-plan"), "Runs as:", 30)
    assert "output model up_ckpts" in plan  # ...does not override the file's output_dir
    wait_box(page, "quant-name", "up_ckpts")
    page.locator("#quant-name textarea").fill("up-typed")  # a name typed after the upload wins
    page.locator("#quant-config-start").click()
    wait_text(page.locator("#quant-job-status"), "up-typed", 30)  # the new job (the last one shows on load)
    wait_text(page.locator("#quant-job-status"), "succeeded", 240)
    assert (ui.home / "models" / "up-typed" / "config.json").is_file()
    assert box(page, "quant-name") == "up-typed"
    page.close()


def test_models_import_keeps_a_typed_name(ui):
    page = open_tab(ui, "models")
    folder = page.locator("#models-folder textarea")
    folder.fill(str(ui.root / "downloads" / "hfqwen"))
    folder.blur()
    wait_box(page, "models-name", "hfqwen")  # the folder's name fills an empty box
    page.locator("#models-name textarea").fill("my-qwen")
    folder.fill(str(ui.root / "downloads" / "Qwen2-other"))
    folder.blur()
    settle(page)
    assert box(page, "models-name") == "my-qwen"
    page.close()
