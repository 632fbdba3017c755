# report: the HTML report is checked in a real browser (headless Chromium loads report.html
# and the test reads the DOM: python/tests/unit/test_report_html.py).
APT_PACKAGES += chromium
