"""The example MCP app served over ``https://`` on 127.0.0.1, with a test certificate.

Run as a script (``python tests/support/https_app.py CERTFILE KEYFILE``), it serves
``examples/app_server.py``'s app (the official SDK's server: ``echo``, ``slow`` … tools)
through the library's :class:`bridge.appserver.AppServer` on a free port, with uvicorn's
TLS (``ssl_certfile``/``ssl_keyfile``), no token, and prints one line on stdout once it
listens: ``LISTENING https://127.0.0.1:<port>/mcp``. Logs go to stderr.

From a test: :func:`make_certificate` writes a self-signed certificate for the IP address
127.0.0.1 (a subjectAltName, as RFC 6125 / RFC 2818 §3.1 require for an IP in the URL)
with the ``openssl`` command, and :func:`launch_https_app` starts the script.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

if __name__ == "__main__":  # (run as a script: tests/ is not on sys.path then)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.apps import REPO_ROOT, AppServer, start_listening_app

SCRIPT = Path(__file__).resolve()

OPENSSL_TIMEOUT = 30.0
"""Seconds the ``openssl`` command gets to make a key and certificate."""


CERTIFICATE_CONFIG = """\
[req]
prompt = no
distinguished_name = subject
x509_extensions = extensions
[subject]
CN = 127.0.0.1
[extensions]
subjectAltName = IP:127.0.0.1
basicConstraints = critical, CA:TRUE
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
"""
"""openssl's ``req`` configuration of the test certificate: self-signed (its own CA) for
the IP address 127.0.0.1."""


def make_certificate(folder: Path) -> tuple[Path, Path] | None:
    """A self-signed certificate and its unencrypted key for ``127.0.0.1`` (IP SAN), valid
    two days, written to ``folder`` as ``cert.pem`` and ``key.pem`` (PEM); ``None`` when no
    ``openssl`` command is installed (some Windows machines). The certificate is its own CA, so a
    client trusts it with ``SSL_CERT_FILE=cert.pem`` (httpx reads that variable).

    Raises:
        subprocess.CalledProcessError, subprocess.TimeoutExpired: openssl failed.
    """
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    cert, key, config = folder / "cert.pem", folder / "key.pem", folder / "openssl.cnf"
    # A configuration of its own: the extensions do not depend on the installed openssl.cnf
    # (LibreSSL on macOS, Git's openssl on Windows), and Python 3.13's strict verification
    # (VERIFY_X509_STRICT) finds the key identifiers it wants.
    config.write_text(CERTIFICATE_CONFIG, encoding="ascii")
    subprocess.run(
        [
            openssl, "req", "-x509", "-config", str(config), "-newkey", "rsa:2048", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", "2",
        ],
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=OPENSSL_TIMEOUT,
    )
    return cert, key


def launch_https_app(certfile: Path, keyfile: Path, *, log_path: Path) -> AppServer:
    """Start this script and wait (at most ``LISTEN_TIMEOUT`` seconds) for it to listen.

    Raises:
        RuntimeError: it exited or printed no LISTENING line in time; the message has its stderr.
    """
    return start_listening_app(
        [sys.executable, str(SCRIPT), str(certfile), str(keyfile)], log_path=log_path, scheme="https", what="the https app"
    )


def main(argv: list[str]) -> int:
    import logging

    from bridge.appserver import AppServer as Serving

    sys.path.insert(0, str(REPO_ROOT / "examples"))
    from app_server import build_app

    certfile, keyfile = argv
    logging.basicConfig(level="INFO", stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")

    def listening(server: Serving) -> None:
        assert server.url is not None and server.url.startswith("http://")
        sys.stdout.write(f"LISTENING https://{server.url.removeprefix('http://')}\n")
        sys.stdout.flush()
        sys.stdout = sys.stderr  # nothing else on stdout: the parent stops reading it

    server = Serving(
        build_app(),
        require_token=False,
        on_listening=listening,
        log_level="info",
        access_log=True,
        uvicorn_options={"ssl_certfile": certfile, "ssl_keyfile": keyfile},
    )
    return server.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
