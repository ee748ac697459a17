"""The exported HTML map in a real headless Chromium (Selenium + the OS chromedriver).

Skips, with the reason in the test summary, when Selenium or a Chromium/ChromeDriver pair is
missing (`make test` installs Debian's chromium and chromium-driver when apt is usable). With
KT_UPDATE_SCREENSHOT=1 the run also refreshes the README screenshot (docs/img/export-html.png).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import KT, ROOT, SAMPLE

SCREENSHOT = ROOT / "docs" / "img" / "export-html.png"
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1200,800"]
VISIBLE_CHUNKS = ("return Array.from(document.querySelectorAll('li.chunk'))"
                  ".filter(e => e.checkVisibility()).map(e => e.dataset.id)")


def _find(env: str, *names: str) -> str | None:
    if os.environ.get(env):
        return os.environ[env] if Path(os.environ[env]).exists() else None
    return next((found for name in names if (found := shutil.which(name))), None)


def _kt(*args: object) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWTOLOGY_")}
    env.update(LANCEDB_LOG="error", LANCE_LOG="error", NO_COLOR="1")
    proc = subprocess.run([KT, *map(str, args)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed: pip install -e '.[dev]'")
    chrome = _find("KT_TEST_CHROMIUM", "chromium", "chromium-browser", "google-chrome")
    driver_path = _find("KT_TEST_CHROMEDRIVER", "chromedriver")
    if not chrome or not driver_path:
        pytest.skip("no headless browser: install Chromium and ChromeDriver (Debian: apt-get install chromium "
                    "chromium-driver; `make test` does it when apt is usable)")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = chrome
    for flag in [*CHROME_FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_window_size(1200, 800)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """sample_corpus with the default embedder and the offline build, exported to a folder of its own:
    the page's source links lead from there to the corpus's files."""
    root = tmp_path_factory.mktemp("map-page")
    store = root / "store"
    _kt("ingest", SAMPLE, "--store", store)
    _kt("build", "--store", store)
    _kt("export", "--format", "html", "-o", root / "map.html", "--store", store)
    return root / "map.html", json.loads(_kt("export", "--store", store))


def _summary(driver, path: str):
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, f'li.node[data-path="{path}"] > details > summary')


def _filter_term(doc: dict) -> str:
    """A word of several snippets that names no category and no file, so the expected matches are plain."""
    node_text = " ".join(f"{n['name']} {n['description']}" for n in doc["nodes"]).lower()
    counts: dict[str, int] = {}
    for chunk in doc["chunks"]:
        for word in set(re.findall(r"[a-z]{6,}", f"{chunk['snippet']} {chunk['title']}".lower())):
            counts[word] = counts.get(word, 0) + 1
    files = " ".join(c["file_name"] + " " + c["chunk_id"] for c in doc["chunks"]).lower()
    usable = sorted((-n, w) for w, n in counts.items()
                    if w not in node_text and w not in files and 2 <= n <= len(doc["chunks"]) // 4)
    return usable[0][1]


def test_map_page_in_a_real_browser(browser, page: tuple[Path, dict]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    path, doc = page
    browser.get("about:blank")
    browser.get_log("performance")  # drop the browser's own start-up traffic
    browser.get(path.as_uri())
    assert browser.title == "Knowledge map — default"

    # counts: every top category with its chunk count, in name order
    tops = [n for n in doc["nodes"] if n["level"] == 1]
    shown = [(li.get_attribute("data-path"), li.find_element(By.CSS_SELECTOR, ":scope > details > summary .count").text)
             for li in browser.find_elements(By.CSS_SELECTOR, "#tree > li.node")]
    assert shown == [(n["path"], str(n["chunk_count"])) for n in sorted(tops, key=lambda n: n["name"])]
    assert browser.execute_script(VISIBLE_CHUNKS) == []

    # expand and collapse by clicking
    parent = next(n for n in sorted(tops, key=lambda n: n["name"]) if n["child_count"])
    child = sorted((n for n in doc["nodes"] if n["path"].startswith(parent["path"] + "/") and n["level"] == 2),
                   key=lambda n: n["name"])[0]
    assert not _summary(browser, child["path"]).is_displayed()
    _summary(browser, parent["path"]).click()
    assert _summary(browser, child["path"]).is_displayed()
    _summary(browser, parent["path"]).click()
    assert not _summary(browser, child["path"]).is_displayed()
    browser.find_element(By.ID, "expand-all").click()
    assert sorted(browser.execute_script(VISIBLE_CHUNKS)) == sorted(c["chunk_id"] for c in doc["chunks"])
    browser.find_element(By.ID, "collapse-all").click()
    assert browser.execute_script(VISIBLE_CHUNKS) == []

    # the filter shows exactly the chunks that mention the term, opens their categories, counts them
    term = _filter_term(doc)
    expected = sorted(c["chunk_id"] for c in doc["chunks"] if term in f"{c['snippet']} {c['title']}".lower())
    box = browser.find_element(By.ID, "filter")
    box.send_keys(term.upper())
    status = browser.find_element(By.ID, "filter-status")
    WebDriverWait(browser, 10).until(lambda _: status.text)
    assert sorted(browser.execute_script(VISIBLE_CHUNKS)) == expected
    leaves = {c["path"] for c in doc["chunks"] if c["chunk_id"] in expected}
    assert status.text == f"{len(expected)} chunk{'s' if len(expected) > 1 else ''} in {len(leaves)} " \
                          f"categor{'ies' if len(leaves) > 1 else 'y'}"
    hit_top = next(c["path"] for c in doc["chunks"] if c["chunk_id"] == expected[0]).split("/")[0]
    top_total = next(n["chunk_count"] for n in tops if n["path"] == hit_top)
    in_top = sum(1 for c in doc["chunks"] if c["chunk_id"] in expected and c["path"].split("/")[0] == hit_top)
    assert _summary(browser, hit_top).find_element(By.CSS_SELECTOR, ".count").text == f"{in_top} / {top_total}"
    hidden_top = next((n["path"] for n in tops if not n["path"].startswith(tuple(p.split("/")[0] for p in leaves))), None)
    if hidden_top:
        assert not _summary(browser, hidden_top).is_displayed()
    box.send_keys(Keys.ESCAPE)
    WebDriverWait(browser, 10).until(lambda _: not status.text)
    assert browser.execute_script(VISIBLE_CHUNKS) == []
    assert _summary(browser, hit_top).find_element(By.CSS_SELECTOR, ".count").text == str(top_total)

    # the page fetched nothing: the only request was the page itself
    requests = [json.loads(entry["message"])["message"] for entry in browser.get_log("performance")]
    urls = {m["params"]["request"]["url"] for m in requests if m["method"] == "Network.requestWillBeSent"}
    assert urls <= {path.as_uri()}, urls

    # the README screenshot: one category and its first leaf open
    _summary(browser, parent["path"]).click()
    leaf = child
    while leaf["child_count"]:
        _summary(browser, leaf["path"]).click()
        leaf = sorted((n for n in doc["nodes"] if n["path"].startswith(leaf["path"] + "/")
                       and n["level"] == leaf["level"] + 1), key=lambda n: n["name"])[0]
    _summary(browser, leaf["path"]).click()
    shot = path.with_suffix(".png")
    assert browser.save_screenshot(str(shot)) and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("KT_UPDATE_SCREENSHOT"):
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)

    # a chunk's link opens its source file (a text one, which the browser shows as it is)
    browser.find_element(By.ID, "expand-all").click()
    chunk = next(c for c in doc["chunks"] if c["file_name"].endswith((".md", ".txt", ".rst")))
    link = browser.find_element(By.CSS_SELECTOR, f'li.chunk[data-id="{chunk["chunk_id"]}"] a.src')
    target = (SAMPLE.resolve().parent / chunk["file_name"]).as_uri()
    assert link.get_property("href") == target + (f"#L{chunk['lines'][0]}-L{chunk['lines'][1]}" if chunk["lines"] else "")
    link.click()
    WebDriverWait(browser, 10).until(lambda b: b.current_url.startswith(target))
    source = (SAMPLE.resolve().parent / chunk["file_name"]).read_text(encoding="utf-8")
    assert browser.find_element(By.TAG_NAME, "body").text.strip()[:60] == source.strip()[:60]
