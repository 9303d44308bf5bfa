"""A throwaway certificate authority for the TLS tests, made with the openssl command line
(the `cryptography` package is not a dependency): a CA and a server certificate it signs,
valid for 127.0.0.1 and localhost."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Certificates:
    ca: str  # the CA's certificate (PEM): what a client trusts
    certificate: str  # the server's certificate (PEM), signed by the CA
    key: str  # the server's private key (PEM)


def make_certificates(directory: Path) -> Certificates:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command line is not installed")
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ca_key, ca, key = directory / "ca.key", directory / "ca.pem", directory / "server.key"
    request, certificate = directory / "server.csr", directory / "server.pem"
    extensions = directory / "server.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")

    def run(*arguments: str | Path) -> None:
        subprocess.run([openssl, *map(str, arguments)], check=True, capture_output=True)

    run("req", "-x509", *curve, "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=ca")
    run("req", *curve, "-keyout", key, "-out", request, "-subj", "/CN=127.0.0.1")
    run(
        "x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
        "-out", certificate, "-days", "2", "-extfile", extensions,
    )  # fmt: skip
    return Certificates(str(ca), str(certificate), str(key))
