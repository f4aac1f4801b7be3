"""A bare TCP relay for scripts/bench: the cheapest proxy there is.

    relay.py LISTEN_PORT:TARGET_PORT [LISTEN_PORT:TARGET_PORT ...]

Listens on each 127.0.0.1:LISTEN_PORT and joins every connection to a new one
to 127.0.0.1:TARGET_PORT, moving bytes both ways with splice(2) through a pipe:
the kernel moves the socket's pages, and nothing is copied, parsed or
buffered in user space. Prints "listening" once every port is bound.

The bench puts it in front of each broker's RELAY listener (cluster.sh,
SLUICE_KAFKA_RELAY_LISTENER=1), which advertises the relay's port, so a client
reaches every broker through it. What the relay costs a consumer is what one
more loopback TCP hop costs, the floor under any proxy's cost.
"""

import fcntl
import os
import socket
import sys
import threading

CHUNK = 1 << 20
F_SETPIPE_SZ = 1031


def pump(src, dst):
    """Moves bytes from src to dst until src ends, then shuts both down."""
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, F_SETPIPE_SZ, CHUNK)
    except OSError:
        pass  # the default pipe size works too, in smaller steps
    try:
        while True:
            n = os.splice(src.fileno(), w, CHUNK)
            if n == 0:
                break
            while n:
                n -= os.splice(r, dst.fileno(), n)
    except OSError:
        pass  # a peer closed or reset: end this connection pair
    finally:
        os.close(r)
        os.close(w)
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(server, target):
    while True:
        client, _ = server.accept()
        try:
            upstream = socket.create_connection(("127.0.0.1", target), timeout=10)
        except OSError as e:
            print(f"relay: cannot reach 127.0.0.1:{target}: {e}", file=sys.stderr, flush=True)
            client.close()
            continue
        upstream.settimeout(None)
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    threads = []
    for pair in sys.argv[1:]:
        listen, target = (int(p) for p in pair.split(":"))
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", listen))
        server.listen(128)
        threads.append(threading.Thread(target=serve, args=(server, target), daemon=True))
    for t in threads:
        t.start()
    print("listening", flush=True)
    for t in threads:
        t.join()


main()
