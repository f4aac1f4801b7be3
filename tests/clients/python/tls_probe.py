"""Probe a TLS Kafka listener: handshake, then one ApiVersions request.

With TLS 1.3 a server that rejects the client certificate does so after the
client's side of the handshake has finished, so the probe only counts a
listener as accepting when an ApiVersions response comes back.

    tls_probe.py --addr HOST:PORT --ca CA.pem [--cert C.pem --key K.pem]

Prints one JSON line: {"accepted": bool, "stage": "...", "error": "..."}.
"""

import argparse
import json
import socket
import ssl
import struct
import sys


def api_versions_v0(correlation_id):
    client_id = b"tls-probe"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def read_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by peer")
        buf += chunk
    return buf


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--addr", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    host, port = args.addr.rsplit(":", 1)

    context = ssl.create_default_context(cafile=args.ca)
    if args.cert:
        context.load_cert_chain(args.cert, args.key)
    stage = "connect"
    try:
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            stage = "handshake"
            with context.wrap_socket(raw, server_hostname=host) as tls:
                stage = "request"
                tls.sendall(api_versions_v0(7))
                (length,) = struct.unpack(">i", read_exact(tls, 4))
                frame = read_exact(tls, length)
                (correlation_id,) = struct.unpack(">i", frame[:4])
                if correlation_id != 7:
                    raise ValueError(f"correlation id {correlation_id}, expected 7")
        print(json.dumps({"accepted": True, "stage": "done", "error": ""}))
        return 0
    except (OSError, ssl.SSLError, ConnectionError, ValueError) as exc:
        print(json.dumps({"accepted": False, "stage": stage, "error": str(exc)}))
        return 0


if __name__ == "__main__":
    sys.exit(main())
