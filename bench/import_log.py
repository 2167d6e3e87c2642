#!/usr/bin/env python3
"""Writes an nvidia-smi --query-gpu log of about SIZE bytes (8 GPUs, one
sample a second, columns as nvidia-smi writes them with units), for
measuring `apron import`'s time and peak RSS on a large file:

    python3 bench/import_log.py 1G /tmp/big.csv
    /usr/bin/time -v apron --data /tmp/d import nvidia-smi /tmp/big.csv --host big
"""
import sys
import time

HEADER = ("timestamp, index, name, uuid, utilization.gpu [%], utilization.memory [%], "
          "memory.used [MiB], memory.total [MiB], power.draw [W], temperature.gpu, clocks.sm [MHz]\n")


def size_of(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def main():
    want, path = size_of(sys.argv[1]), sys.argv[2]
    start = 1_793_577_600  # 2026-11-02 00:00:00 UTC
    uuids = [f"GPU-{g:08x}-aaaa-bbbb-cccc-{g:012x}" for g in range(8)]
    written = 0
    with open(path, "w") as out:
        out.write(HEADER)
        second = 0
        while written < want:
            t = time.gmtime(start + second)
            stamp = time.strftime("%Y/%m/%d %H:%M:%S", t) + ".123"
            lines = []
            for g in range(8):
                util = (second // 60 + g * 7) % 101
                lines.append(f"{stamp}, {g}, NVIDIA H100 80GB HBM3, {uuids[g]}, {util} %, {util // 2} %, "
                             f"{1000 + util * 10} MiB, 81559 MiB, {100 + util * 3}.25 W, {40 + util // 5}, 1980 MHz\n")
            chunk = "".join(lines)
            out.write(chunk)
            written += len(chunk)
            second += 1
    print(f"{path}: {written} bytes, {second} seconds of 8 GPUs, {second * 8} rows")


main()
