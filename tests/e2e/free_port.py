"""Prints (or returns) a loopback port nothing listens on, chosen below
the kernel's ephemeral port range.

A port from that range (what binding to port 0 gives) can be taken while
a killed server is down: a client reconnecting to 127.0.0.1:P may be
handed P as its own source port, the connect then succeeds as a TCP
self-connection, and the restarted server finds its port in use. No
client socket is ever given a port below the range."""
import random
import socket


def free_port():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    if low <= 12000:
        low = 32768
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(10000, low)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free loopback port below %d" % low)


if __name__ == "__main__":
    print(free_port())
