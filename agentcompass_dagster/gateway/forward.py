"""The model gateway's forwarder, run inside a task's environment (python3 >= 3.7, standard library only).

    python3 forward.py SOCKET PORT PORT_FILE

Listens on 127.0.0.1:PORT (0: a free port) and pipes every connection, both ways, to the unix socket
SOCKET: under network ``none`` the environment's loopback is all an agent's SDK can reach, and the
gateway's socket, mounted into the environment, is all the forwarder reaches. Once it listens it
writes the port and a newline to PORT_FILE (a file or a FIFO the caller waits on). It imports nothing
of the framework: the host copies this one file into the gateway's directory."""

import socket
import sys
import threading

CHUNK = 65536


def pipe(source, target):
    """Copy ``source`` to ``target`` until EOF, then pass the EOF on (HTTP clients half-close)."""
    try:
        while True:
            data = source.recv(CHUNK)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        try:
            target.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def relay(client, path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError as exc:
        sys.stderr.write("agentcompass forwarder: %s: %s\n" % (path, exc))
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
    back.start()
    pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def main(argv):
    if len(argv) != 4:
        sys.stderr.write("usage: forward.py SOCKET PORT PORT_FILE\n")
        return 2
    path, port, port_file = argv[1], int(argv[2]), argv[3]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    # One write of one line: a reader waiting for the newline never sees half a port.
    with open(port_file, "w") as out:
        out.write("%d\n" % listener.getsockname()[1])
    while True:
        client, _ = listener.accept()
        threading.Thread(target=relay, args=(client, path), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
