# SPDX-License-Identifier: MIT
"""A private CA and a server certificate signed by it, made with openssl, for the tests
that run HTTPS (test_auth.py, agents/test_agent_security.py). Standard library only."""

import os
import subprocess


def make_test_ca(directory, names=("IP:127.0.0.1", "DNS:localhost")):
    """Writes ca.crt, server.crt and server.key into directory, the certificate valid for
    the subjectAltName entries in names; returns (ca, certificate, key) paths."""
    ca_key, ca_crt = os.path.join(directory, "ca.key"), os.path.join(directory, "ca.crt")
    key, csr, crt = (os.path.join(directory, n) for n in ("server.key", "server.csr", "server.crt"))
    ext = os.path.join(directory, "san.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\n" % ",".join(names))

    def run(*argv):
        subprocess.run(argv, check=True, capture_output=True, timeout=60)

    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key,
        "-out", ca_crt, "-days", "2", "-subj", "/CN=axctl test CA")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
        "-subj", "/CN=localhost")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key,
        "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext)
    return ca_crt, crt, key
