"""`/docs` in a real headless browser (Debian's Chromium, driven by Selenium through Debian's chromedriver;
both installed by `make browser-fetch`): the page loads from the gateway alone, lists every operation of the
served OpenAPI document, and "Try it out" on `GET /health` gets a 200 with the status."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from tests.e2e.gateway.conftest import GatewayMesh

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WAIT_S = 60


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), "no Chromium: run `make browser-fetch`"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,2000",
    ):
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def test_docs_page_lists_every_operation_and_tries_out_health(
    gateway_mesh: GatewayMesh, browser: WebDriver
) -> None:
    document = httpx.get(f"{gateway_mesh.url}/openapi.json", timeout=30).json()
    expected = {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}
    browser.get(f"{gateway_mesh.url}/docs")
    wait = WebDriverWait(browser, WAIT_S)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".opblock")) >= len(expected))
    shown = {
        (
            block.find_element(By.CSS_SELECTOR, ".opblock-summary-method").text.strip().upper(),
            block.find_element(By.CSS_SELECTOR, ".opblock-summary-path").get_attribute("data-path"),
        )
        for block in browser.find_elements(By.CSS_SELECTOR, ".opblock")
    }
    assert shown == expected
    # No request left the gateway: every script and style the page loaded is the gateway's own.
    sources = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert sources and all(str(s).startswith(gateway_mesh.url) for s in sources), sources

    health = browser.find_element(By.CSS_SELECTOR, "#operations-Health-getHealth")
    health.find_element(By.CSS_SELECTOR, ".opblock-summary-control").click()
    wait.until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, "#operations-Health-getHealth .try-out__btn"))
    ).click()
    wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "#operations-Health-getHealth .execute"))).click()
    status = wait.until(
        ec.visibility_of_element_located(
            (
                By.CSS_SELECTOR,
                "#operations-Health-getHealth .live-responses-table tr.response .response-col_status",
            )
        )
    )
    assert status.text.strip().startswith("200")
    body = health.find_element(
        By.CSS_SELECTOR, ".live-responses-table tr.response .response-col_description pre"
    ).text
    assert '"status"' in body and '"connectionStatus"' in body
