"""A "browser" for tests: GET the URL given as the last argument and follow every redirect.

Authorization servers in the tests approve at once and redirect to the loopback callback, so
following redirects completes the sign-in. Exits 0 when the last response is a success.
Set as ``BROWSER`` through a one-line wrapper script (``webbrowser`` runs one executable).
"""

from __future__ import annotations

import sys
import urllib.request


def main() -> int:
    url = sys.argv[-1]
    with urllib.request.urlopen(url, timeout=30) as response:  # follows redirects
        return 0 if 200 <= response.status < 300 else 1


if __name__ == "__main__":
    sys.exit(main())
