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
set -euo pipefail
need=()
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v curl >/dev/null 2>&1 || need+=(curl ca-certificates)
command -v mariadb-install-db >/dev/null 2>&1 || need+=(mariadb-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium chromium-driver)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "test-deps: not root, cannot install ${need[*]}: the container tests skip without runc, the TLS test fails without curl, the MariaDB tests without mariadb-server, the network tests without ip and the web UI's browser test without chromium" >&2
  exit 0
fi
echo "test-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
