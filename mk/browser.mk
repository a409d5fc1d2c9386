# A headless browser for the gateway's /docs test (tests/e2e/test_e2e_gateway_docs.py): Debian's Chromium and
# its matching chromedriver, installed with apt-get when missing. Included by the top-level Makefile;
# `make test` depends on `browser-fetch`. We run as root on CI and on the developers' machines (Debian with
# its package registry reachable); anywhere else install the two packages by hand and the target is a no-op.
#   make browser-fetch   install chromium + chromium-driver (no-op when /usr/bin/chromium and chromedriver exist)

BROWSER_BIN  ?= /usr/bin/chromium
BROWSER_DRV  ?= /usr/bin/chromedriver
BROWSER_PKGS := chromium chromium-driver

.PHONY: browser-fetch

browser-fetch: ## Install Debian's Chromium and chromedriver for the /docs browser test (apt-get, when missing)
	@if [ -x $(BROWSER_BIN) ] && [ -x $(BROWSER_DRV) ]; then exit 0; fi; \
	command -v apt-get >/dev/null || { echo "no apt-get: install $(BROWSER_PKGS) by hand" >&2; exit 1; }; \
	if [ "$$(id -u)" != 0 ]; then echo "installing $(BROWSER_PKGS) needs root (apt-get)" >&2; exit 1; fi; \
	echo "installing $(BROWSER_PKGS) (apt-get)"; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(BROWSER_PKGS) >/dev/null
