# report: the HTML report is checked in a real browser (headless Chromium loads report.html
# and the test reads the DOM: python/tests/unit/test_report_html.py). The get workload's
# browser client (client_kind = "chromium", python/src/congestlab/traffic/chromium.py) runs it too.
APT_PACKAGES += chromium
