#!/usr/bin/env python3
"""Prints a TCP port for a test's rendezvous: in [20000, 32000), below Linux's ephemeral range (32768 and
up, where an outgoing connection of anything on the host may hold any port), and free on 127.0.0.1 now
(bound and released). Another test may still take it in the moment between; exit 1 when 200 tries found
none free."""
import random
import socket
import sys

for _ in range(200):
    port = random.randrange(20000, 32000)
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
    print(port)
    sys.exit(0)
sys.exit("free_port.py: no free port in [20000, 32000) after 200 tries")
