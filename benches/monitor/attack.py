#!/usr/bin/env python3
"""Issue 28 item 13: probe lateness of `probelet monitor` under reloads and status-page storms.

    attack.py BINARY reload N      # N TCP targets (period 10 s); 3 reloads 2 s apart, 1 % changed
    attack.py BINARY storm N C     # N TCP targets (period 10 s); C concurrent GET / at once
    attack.py BINARY idle N        # the same window with neither: the machine's own lateness

Prints one JSON line: the probes started in the window and how many were > 100 ms and > 1 s
late (from the monitor's own lateness histogram, read before and after the window).
Loopback only: the targets are a listener this script holds (it accepts and closes).
"""
import json, os, selectors, signal, socket, subprocess, sys, tempfile, threading, time, urllib.request

binary, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
target = socket.socket(); target.bind(("127.0.0.1", 0)); target.listen(4096)
tport = target.getsockname()[1]
def accept():
    while True:
        c, _ = target.accept(); c.close()
threading.Thread(target=accept, daemon=True).start()

def targets(changed):
    out = ["targets:"]
    for i in range(n):
        extra = ", timeoutSeconds: 2" if i < changed else ""
        out.append(f"- name: t{i:06}\n  probe: {{tcpSocket: {{port: {tport}}}, periodSeconds: 10{extra}}}")
    return "\n".join(out) + "\n"

d = tempfile.mkdtemp(); path = os.path.join(d, "t.yaml")
open(path, "w").write(targets(0))
p = subprocess.Popen(["sh", "-c", 'ulimit -n 65536; exec "$0" "$@"', binary, "monitor", path, "-o", "json",
                      "--listen", "127.0.0.1:0", "--seed", "1", "--max-connections", "4096"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
for line in p.stdout:
    if b'"Listening"' in line:
        port = int(json.loads(line)["address"].rsplit(":", 1)[1]); break
threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()

def lateness():
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=120).read().decode()
    v = {}
    for l in text.splitlines():
        for key in ('le="0.1"', 'le="1"'):
            if l.startswith("probelet_monitor_probe_lateness_seconds_bucket{" + key + "}"):
                v[key] = float(l.split()[-1])
        if l.startswith("probelet_monitor_probe_lateness_seconds_count"):
            v["all"] = float(l.split()[-1])
    return v

time.sleep(12)  # every target started once
a = lateness(); t0 = time.time()
if mode == "reload":
    for r in range(3):
        open(path, "w").write(targets(n // 100 if r % 2 == 0 else 0))
        p.send_signal(signal.SIGHUP)
        time.sleep(2)
    time.sleep(1)
elif mode == "idle":
    time.sleep(7)
else:
    c = int(sys.argv[4]); sel = selectors.DefaultSelector(); got = {}
    for i in range(c):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        s.setblocking(False); sel.register(s, selectors.EVENT_READ); got[s] = 0
    done, total = 0, 0
    while done < c and time.time() - t0 < 300:
        for key, _ in sel.select(timeout=1):
            try: b = key.fileobj.recv(1 << 20)
            except BlockingIOError: continue
            except ConnectionResetError: b = b""
            if b: total += len(b)
            else: sel.unregister(key.fileobj); key.fileobj.close(); done += 1
    time.sleep(1)
b = lateness(); wall = time.time() - t0
all_ = b["all"] - a["all"]
print(json.dumps({"mode": mode, "targets": n, "binary": binary, "window_s": round(wall, 1), "probes": all_,
                  "late_100ms": round((all_ - (b['le="0.1"'] - a['le="0.1"'])) / all_, 4),
                  "late_1s": round((all_ - (b['le="1"'] - a['le="1"'])) / all_, 4),
                  **({"clients": int(sys.argv[4]), "answered": done, "bytes": total} if mode == "storm" else {})}), flush=True)
p.kill(); p.wait()
