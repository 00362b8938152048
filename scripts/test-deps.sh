#!/usr/bin/env bash
# make test: install what the tests need from Debian's packages when it is
# missing. runc runs container jobs; the tests that start them need root
# (jobs run as users of their own, in cgroups), so a run as another user
# skips them. curl checks the HTTPS API the way an operator would
# (ca-certificates comes with it). mariadb-server gives the history-store
# tests a real MariaDB (testkit/mariadbtest runs mariadbd in a temp dir;
# the package's own service is not started). iproute2's ip makes the
# network namespace the hostile-tenant suite plays "the world" and the
# cloud's metadata address in. chromium (with chromium-driver, Debian's
# build of its WebDriver) is the real browser the web UI's tests drive
# through the DevTools protocol (chromedp).
#
# axe-core, the accessibility checker the web UI's phone test runs in
# that browser, comes from the npm registry into .tools/axe (npm from
# Debian's packages when the machine has none). Every step is skipped
# when what it installs is there already, so a second run does nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
axe_version=4.14.1
axe_dir=$root/.tools/axe
axe_js=$axe_dir/node_modules/axe-core/axe.min.js

need=()
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v curl >/dev/null 2>&1 || need+=(curl ca-certificates)
command -v mariadb-install-db >/dev/null 2>&1 || need+=(mariadb-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium chromium-driver)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "test-deps: not root, cannot install ${need[*]}: the container tests skip without runc, the TLS test fails without curl, the MariaDB tests without mariadb-server, the network tests without ip and the web UI's browser tests without chromium (and npm for axe-core)" >&2
  else
    echo "test-deps: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
fi

# axe-core at the pinned version, unless it is there already.
if ! grep -qs "\"version\": \"$axe_version\"" "$axe_dir/node_modules/axe-core/package.json" || [ ! -s "$axe_js" ]; then
  if command -v npm >/dev/null 2>&1; then
    echo "test-deps: installing axe-core@$axe_version into .tools/axe"
    mkdir -p "$axe_dir"
    npm install --prefix "$axe_dir" --no-save --no-audit --no-fund --no-package-lock --loglevel=error "axe-core@$axe_version" >/dev/null
  else
    echo "test-deps: no npm, cannot install axe-core: the web UI's phone test fails without it" >&2
  fi
fi
