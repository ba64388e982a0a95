"""The Train form in headless chromium (issue 35 item 9), one studio and one page for all checks:
it shows only the fields the chosen method reads (at once on a switch, after a language switch and a
reload), a hidden field's value is not sent; "Train DPO on these" leaves no stale preset in the preset
box; a preference dataset of one pair is refused by the live check, with its count."""

import json

import pytest

from tests.browser import Studio, launch_browser, wait_text
from tests.conftest import link_demo
from tests.test_browser_journey import pick

pytestmark = [pytest.mark.browser]
playwright = pytest.importorskip("playwright.sync_api")

PAIR = {"src": ["Which is better?"], "tgt": [], "response": ["this one", "that one"], "sort": [1, 0]}


@pytest.fixture(scope="module")
def studio(tmp_path_factory, demo_home):
    root = tmp_path_factory.mktemp("train-form")
    home = link_demo(root / "ws", demo_home)
    one = home / "datasets" / "one-pair"
    one.mkdir()
    (one / "train.json").write_text(json.dumps(PAIR) + "\n")
    s = Studio(home, root / "studio.log")
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1600})
            page.goto(s.url)
            page.get_by_role("tab", name="Train").click()
            wait_text(page.locator("#train-check"), "No problems", 30)
            yield home, page
            browser.close()
    finally:
        s.close()


def shown(page, *names, timeout=20000):
    for n in names:
        page.locator(f"#cfg-method-{n}").wait_for(state="visible", timeout=timeout)


def hidden(page, *names, timeout=20000):
    for n in names:
        page.locator(f"#cfg-method-{n}").wait_for(state="hidden", timeout=timeout)


def fill_from_chat(page, name: str) -> None:
    """Chat tab: "Train DPO on these" for the preference dataset ``name``; waits for the Train form."""
    page.locator("#tab-chat-button").click()
    if not page.locator("#chat-pref-name textarea").is_visible():  # compare mode shows the preference parts
        pick(page, "chat-compare", "models/demo-base (base)")
    page.locator("#chat-pref-name textarea").fill(name)
    page.locator("#chat-train-dpo").click()
    for _ in range(100):
        if page.locator("#cfg-method-method input").input_value() == "dpo" and \
                page.locator("#cfg-data-dataset_name_or_path input").input_value().endswith(name):
            break
        page.wait_for_timeout(200)
    assert page.locator("#cfg-method-method input").input_value() == "dpo"
    page.locator("#tab-train").wait_for(state="visible", timeout=20000)


def test_the_form_shows_only_the_chosen_methods_fields(studio):
    home, page = studio
    # lora (the demo-lora preset): its rank, no prefix / VeRA / LoKr / ReFT / DPO / KTO fields
    shown(page, "method", "lora_rank")
    hidden(page, "num_prefix_tokens", "vera_rank", "lokr_dim", "reft_position", "reft_rank", "dpo_beta", "kto_beta")
    # a rank set for LoRA, then prefix tuning chosen: its field at once, LoRA's hidden and not sent
    box = page.locator("#cfg-method-lora_rank input[type=number]")
    box.fill("16")
    box.press("Tab")
    pick(page, "cfg-method-method", "prefix")
    shown(page, "num_prefix_tokens")
    hidden(page, "lora_rank", "vera_rank", "dpo_beta")
    page.locator("#train-name textarea, #train-name input").first.fill("form-prefix")
    page.get_by_role("button", name="Save config", exact=True).click()
    wait_text(page.locator("#train-start-msg"), "form-prefix", 20)
    saved = json.loads((home / "configs" / "form-prefix.json").read_text())
    assert saved["prefix_tuning"] is True and saved["lora"] is False
    assert saved["lora_rank"] == 8, saved["lora_rank"]  # the hidden 16 was not sent
    # the language switch keeps what is shown
    page.get_by_label("中文").check()
    wait_text(page.locator("#tab-train"), "高级", 20)
    shown(page, "num_prefix_tokens")
    hidden(page, "lora_rank", "dpo_beta", "kto_beta")
    # a reload shows the preset's method (lora) with its fields only
    page.reload()
    page.locator("#tab-train-button").click()
    wait_text(page.locator("#train-check"), "No problems", 30)
    assert page.locator("#cfg-method-method input").input_value() == "lora"
    shown(page, "lora_rank")
    hidden(page, "num_prefix_tokens", "dpo_beta")


def test_train_dpo_from_chat_leaves_no_stale_preset(studio):
    home, page = studio
    assert page.locator("#train-preset input").input_value() == "demo-lora"
    fill_from_chat(page, "one-pair")
    for _ in range(50):
        if page.locator("#train-preset input").input_value() != "demo-lora":
            break
        page.wait_for_timeout(200)
    assert page.locator("#train-preset input").input_value() == ""
    assert page.locator("#train-preset-desc").inner_text().strip() == ""
    # DPO's fields (LoRA rank: dpo_lora is on), no other method's
    shown(page, "dpo_beta", "lora_rank")
    hidden(page, "num_prefix_tokens", "kto_beta", "reft_rank")


def test_one_preference_pair_is_refused_with_its_count(studio):
    home, page = studio
    if page.locator("#cfg-method-method input").input_value() != "dpo":
        fill_from_chat(page, "one-pair")
    wait_text(page.locator("#train-check"), "holds 1 preference pair(s); DPO is refused on fewer than 8", 30)
