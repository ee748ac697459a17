"""How big the exported HTML map gets and how fast it opens and filters in headless Chromium.

``python -m benchmarks.export_page STORE [TERM]`` renders the store's default collection with
``KnowledgeBase.export_tree(fmt="html")``, writes it to a temporary file, opens it in headless
Chromium through Selenium (Debian's chromium + chromedriver) and prints: render seconds, page
bytes, seconds until the page is loaded, and seconds until the filter has applied TERM (median of
5 runs each). Run it on a built store, e.g. after
``kt ingest ../shared/bench-data/scifact/corpus.jsonl --embedder hash --store /tmp/sci && kt build --store /tmp/sci``.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

RUNS = 5


def main(argv: list[str]) -> None:
    store, term = argv[0], argv[1] if len(argv) > 1 else "cell"
    from knowtology_cli.kb import KnowledgeBase

    kb = KnowledgeBase.open(store)
    renders = []
    for _ in range(RUNS):
        started = time.perf_counter()
        result = kb.export_tree(fmt="html")
        renders.append(time.perf_counter() - started)
    page = Path(tempfile.mkdtemp()) / "map.html"
    page.write_text(result.text, encoding="utf-8")

    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = Options()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 f"--user-data-dir={tempfile.mkdtemp()}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    loads, filters, status = [], [], ""
    try:
        for _ in range(RUNS):
            started = time.perf_counter()
            driver.get(page.as_uri())
            loads.append(time.perf_counter() - started)
            started = time.perf_counter()
            filters.append(driver.execute_async_script(
                "const [term, done] = arguments; const box = document.getElementById('filter');"
                "const t0 = performance.now(); box.value = term; box.dispatchEvent(new Event('input'));"
                "requestAnimationFrame(() => setTimeout(() => done((performance.now() - t0) / 1000)));", term))
            status = driver.find_element(By.ID, "filter-status").text
    finally:
        driver.quit()
    print(f"collection {result.collection}: {result.nodes} categories, {result.chunks} chunks")
    print(f"render {statistics.median(renders):.2f} s, page {page.stat().st_size / 1e6:.2f} MB")
    print(f"load {statistics.median(loads):.2f} s, filter {term!r} {statistics.median(filters):.3f} s ({status})")


if __name__ == "__main__":
    main(sys.argv[1:])
