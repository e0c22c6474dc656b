"""A real headless Chromium driven by Selenium (Debian's ``chromium`` and ``chromium-driver``,
which ``.ci/run`` installs): the web view's tests and ``benchmarks/web_view.py`` share it."""

from __future__ import annotations

import shutil


class BrowserMissing(RuntimeError):
    """Chromium or its driver is not installed."""


def headless_chromium(width: int = 1500, height: int = 1900):
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (binary and driver):
        raise BrowserMissing("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    # the driver given explicitly: Selenium would otherwise try to download one
    return webdriver.Chrome(service=Service(driver), options=options)
