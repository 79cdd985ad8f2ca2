#!/usr/bin/env bash
# The Debian packages some tests run for real: redis-server, nginx and haproxy (the team gateway
# behind a load balancer, replicas killed mid-call), chromium (MCP Apps views and the gateway's
# status page in a headless browser) and prometheus (scraping the gateway's /metrics). Installs the missing
# ones with apt-get when that works (root or password-less sudo); anywhere else it says so and
# those tests skip with a visible reason.
set -uo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing+=(chromium)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
    echo "apt-get unavailable: not installing ${missing[*]}; their tests will skip"
    exit 0
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    if ! sudo -n true 2>/dev/null; then
        echo "apt-get needs root: not installing ${missing[*]}; their tests will skip"
        exit 0
    fi
    sudo=(sudo -n)
fi
export DEBIAN_FRONTEND=noninteractive
{ "${sudo[@]}" apt-get update -qq \
    && "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >/dev/null 2>&1 \
    || echo "apt-get could not install ${missing[*]}; their tests will skip"
exit 0
