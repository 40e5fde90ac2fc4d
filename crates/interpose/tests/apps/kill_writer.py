"""Writes a known pattern through a shared mapping and waits to be killed,
run plainly and under `pagepilot run --daemon`: the kernel keeps a killed
program's MAP_SHARED stores (they are in the page cache), and so must
pagepilot (the daemon writes them back).

Page i of FILE (SIZE bytes, created here) ends up as the line
"page %08d written through MAP_SHARED\n" % i repeated and cut at 4096
bytes; a first pass writes a draft pattern over every page first. Prints
"written" when done, then sleeps until killed.

    python3 kill_writer.py FILE SIZE
"""
import mmap
import os
import sys
import time

PAGE = 4096
path, size = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.ftruncate(fd, size)
m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)


def page(i, word):
    line = b"page %08d %s through MAP_SHARED\n" % (i, word)
    return (line * (PAGE // len(line) + 1))[:PAGE]


for word in (b"drafted", b"written"):
    for i in range(size // PAGE):
        m[i * PAGE : (i + 1) * PAGE] = page(i, word)
print("written", flush=True)
time.sleep(600)
