"""A shared mapping used across fork, run plainly and under `pagepilot
run`: the parent maps FILE (MAP_SHARED, read-write), hashes it, marks one
byte in every 16th page, then forks two workers. Each worker hashes the
whole mapping it inherited (the parent's marks included); once both
have (a barrier of pipes), each rewrites its own half in place and
reports in a file; the parent waits for both and hashes the result
through its own mapping.

    python3 fork_workers.py FILE
"""
import hashlib
import mmap
import os
import sys

PAGE = 4096
path = sys.argv[1]
fd = os.open(path, os.O_RDWR)
size = os.fstat(fd).st_size
m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
os.close(fd)
print("parent before", hashlib.sha256(m).hexdigest())
for page in range(0, size // PAGE, 16):
    m[page * PAGE + 7] = page % 251
print("parent marked", hashlib.sha256(m).hexdigest())
sys.stdout.flush()

half = size // 2
ready_r, ready_w = os.pipe()  # workers -> parent: read all
go_r, go_w = os.pipe()  # parent -> workers: write now
workers = []
for w in range(2):
    pid = os.fork()
    if pid == 0:
        try:
            seen = hashlib.sha256(m).hexdigest()
            os.write(ready_w, b"r")
            if os.read(go_r, 1) != b"g":
                raise RuntimeError("no go from the parent")
            table = bytes((b * 5 + 17 + w) % 256 for b in range(256))
            lo = w * half
            for at in range(lo, lo + half, 1 << 20):
                m[at : at + (1 << 20)] = m[at : at + (1 << 20)].translate(table)
            mine = hashlib.sha256(m[lo : lo + half]).hexdigest()
            with open(f"{path}.worker{w}", "w") as out:
                out.write(f"worker {w} saw {seen} wrote {mine}\n")
            os._exit(0)
        except BaseException as e:  # a worker must never return into the parent's code
            os.write(2, f"worker {w}: {e!r}\n".encode())
            os._exit(1)
    workers.append(pid)

ready = b""
while len(ready) < 2:
    got = os.read(ready_r, 2 - len(ready))
    if not got:
        raise RuntimeError("a worker died before reading")
    ready += got
os.write(go_w, b"gg")

for w, pid in enumerate(workers):
    _, status = os.waitpid(pid, 0)
    print("worker", w, "exit", os.waitstatus_to_exitcode(status))
    with open(f"{path}.worker{w}") as report:
        print(report.read(), end="")
print("parent after", hashlib.sha256(m).hexdigest())
for w in range(2):
    print("half", w, hashlib.sha256(m[w * half : (w + 1) * half]).hexdigest())
m.close()
