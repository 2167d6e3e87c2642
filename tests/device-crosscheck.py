"""The recorder's rows against NVML read a second way, on a GPU machine.

Run by tests/device-check.sh there (python3 with nvidia-ml-py and pyarrow,
which the GPU machine's image holds):

    python3 device-crosscheck.py watch SECONDS OUT.jsonl   # pynvml, every 0.25 s
    python3 device-crosscheck.py compare DATA OUT.jsonl    # against the recorder's Parquet
    python3 device-crosscheck.py mig DATA                  # MIG instances, against pynvml's

`compare` pairs each recorder row with the pynvml readings just before and
just after its tick, and checks what must agree: total memory exactly; used
memory, power and the energy counter within what the GPU did between the two
readings; each process and its memory. It prints one line per check and
`crosscheck: ok` or `crosscheck: FAILED`, and exits 1 on a failure.

`mig` lists, through pynvml, each GPU in MIG mode and its MIG devices (UUID,
profile from the name, compute slices, memory) and checks that the
recorder wrote a row for each at its last tick naming that parent, profile
and slices, with that memory total, that the GPU's own row carries the
slices in all and no utilization, and that no process row is on a GPU in
MIG mode itself. It prints `mig: ok`, `mig: FAILED` or `mig: none` (no GPU
in MIG mode).
"""

import bisect
import json
import sys
import time


def watch(seconds, out):
    import pynvml

    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    end = time.time() + seconds
    with open(out, "w") as f:
        while time.time() < end:
            for h in handles:
                row = {"ts_ms": int(time.time() * 1000), "uuid": pynvml.nvmlDeviceGetUUID(h)}
                if isinstance(row["uuid"], bytes):
                    row["uuid"] = row["uuid"].decode()
                # The recorder reads memory as nvmlDeviceGetMemoryInfo_v2
                # does: used without what the driver reserves for itself
                # (about 615 MiB on an H200), so that a GPU nobody uses
                # shows 0. The v1 figure is kept to show the difference.
                mem = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
                row["fb_used"], row["fb_total"], row["fb_reserved"] = mem.used, mem.total, mem.reserved
                row["fb_used_v1"] = pynvml.nvmlDeviceGetMemoryInfo(h).used
                row["power_mw"] = pynvml.nvmlDeviceGetPowerUsage(h)
                row["energy_mj"] = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
                row["procs"] = {
                    str(p.pid): p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)
                }
                f.write(json.dumps(row) + "\n")
            time.sleep(0.25)


def compare(data, watched):
    import pyarrow.dataset as ds

    readings = {}
    for line in open(watched):
        r = json.loads(line)
        readings.setdefault(r["uuid"], []).append(r)
    fmt = "hive"
    gpus = ds.dataset(f"{data}/gpu_samples", format="parquet", partitioning=fmt).to_table().to_pylist()
    procs = ds.dataset(f"{data}/proc_samples", format="parquet", partitioning=fmt).to_table().to_pylist()
    failures = []
    counts = {}

    def check(name, ok, detail):
        counts.setdefault(name, [0, 0])
        counts[name][0] += 1
        if ok:
            counts[name][1] += 1
        else:
            failures.append(f"{name}: {detail}")

    def bracket(uuid, ts_ms):
        rs = readings.get(uuid, [])
        at = bisect.bisect_left([r["ts_ms"] for r in rs], ts_ms)
        # The recorder reads shortly after its tick: the readings around it.
        return rs[max(at - 1, 0) : at + 2]

    def ms(ts):
        return int(ts.timestamp() * 1000)

    for g in gpus:
        near = bracket(g["gpu_uuid"], ms(g["ts"]))
        if len(near) < 2:
            continue
        check("fb_total_bytes", g["fb_total_bytes"] == near[0]["fb_total"], (g["fb_total_bytes"], near[0]["fb_total"]))
        lo = min(r["fb_used"] for r in near)
        hi = max(r["fb_used"] for r in near)
        check("fb_used_bytes", g["fb_used_bytes"] is not None and lo - 2**26 <= g["fb_used_bytes"] <= hi + 2**26,
              (g["ts"], g["fb_used_bytes"], lo, hi))
        lo = min(r["energy_mj"] for r in near)
        hi = max(r["energy_mj"] for r in near)
        check("energy_mj", g["energy_mj"] is not None and lo <= g["energy_mj"] <= hi, (g["ts"], g["energy_mj"], lo, hi))
        lo = min(r["power_mw"] for r in near)
        hi = max(r["power_mw"] for r in near)
        check("power_mw", g["power_mw"] is not None and 0.8 * lo <= g["power_mw"] <= 1.2 * hi,
              (g["ts"], g["power_mw"], lo, hi))
    for p in procs:
        near = bracket(p["gpu_uuid"], ms(p["ts"]))
        if len(near) < 2:
            continue
        seen = [r["procs"].get(str(p["pid"])) for r in near]
        check("process seen by pynvml too", any(s is not None for s in seen), (p["ts"], p["pid"]))
        mems = [s for s in seen if s is not None]
        # Memory is compared where pynvml saw the process all around the
        # tick, not while it was starting (allocating) or ending.
        if len(mems) == len(seen) and p["used_mem_bytes"] is not None:
            check("process used_mem_bytes", min(mems) <= p["used_mem_bytes"] <= max(mems),
                  (p["ts"], p["pid"], p["used_mem_bytes"], mems))
    # Every process pynvml saw for a whole second is in the recorder's rows
    # (on a GPU in MIG mode the recorder puts it on its instance's row:
    # `mig` checks those).
    recorded = {(p["gpu_uuid"], str(p["pid"])) for p in procs}
    partitioned = {g["gpu_uuid"] for g in gpus if g.get("mig_total_slices") is not None}
    for uuid, rs in readings.items():
        if uuid in partitioned:
            continue
        held = {}
        for r in rs:
            for pid in r["procs"]:
                held.setdefault(pid, []).append(r["ts_ms"])
        for pid, at in held.items():
            if max(at) - min(at) >= 2000:
                check("process recorded", (uuid, pid) in recorded, (uuid, pid))
    print(f"crosscheck: {len(gpus)} GPU rows, {len(procs)} process rows, "
          f"{sum(len(r) for r in readings.values())} pynvml readings")
    for name, (n, ok) in counts.items():
        print(f"crosscheck: {name}: {ok}/{n} agree")
    for f in failures[:10]:
        print(f"crosscheck: disagrees: {f}")
    reserved = {r["fb_used_v1"] - r["fb_used"] - r["fb_reserved"] for rs in readings.values() for r in rs}
    print(f"crosscheck: v1 used minus v2 used minus v2 reserved (bytes, per reading): {sorted(reserved)[:5]}")
    ok = not failures and counts.get("fb_used_bytes", [0])[0] > 0
    print("crosscheck: ok" if ok else "crosscheck: FAILED")
    return 0 if ok else 1


def mig(data):
    import pyarrow.dataset as ds
    import pynvml

    pynvml.nvmlInit()
    text = lambda v: v.decode() if isinstance(v, bytes) else v
    want = {}
    parents = {}
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        try:
            current, _ = pynvml.nvmlDeviceGetMigMode(h)
        except pynvml.NVMLError:
            continue
        if current != 1:
            continue
        parent = text(pynvml.nvmlDeviceGetUUID(h))
        parents[parent] = i
        for j in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(h)):
            try:
                m = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
            except pynvml.NVMLError:
                continue
            name = text(pynvml.nvmlDeviceGetName(m))
            attrs = pynvml.nvmlDeviceGetAttributes(m)
            want[text(pynvml.nvmlDeviceGetUUID(m))] = {
                "parent_gpu_uuid": parent,
                "gpu_index": i,
                "mig_profile": name.rsplit("MIG ", 1)[-1].strip() if "MIG " in name else None,
                "mig_slices": attrs.computeInstanceSliceCount,
                "fb_total_bytes": pynvml.nvmlDeviceGetMemoryInfo(m, version=pynvml.nvmlMemory_v2).total,
            }
    if not parents:
        print("mig: none (no GPU in MIG mode here)")
        return 0
    gpus = ds.dataset(f"{data}/gpu_samples", format="parquet", partitioning="hive").to_table().to_pylist()
    procs = ds.dataset(f"{data}/proc_samples", format="parquet", partitioning="hive").to_table().to_pylist()
    last = max(g["ts"] for g in gpus)
    at_last = {g["gpu_uuid"]: g for g in gpus if g["ts"] == last}
    failures = []
    for uuid, w in want.items():
        got = at_last.get(uuid)
        if got is None:
            failures.append(f"no row for {uuid} at the last tick")
            continue
        for key, value in w.items():
            if got[key] != value:
                failures.append(f"{uuid} {key}: recorded {got[key]!r}, pynvml {value!r}")
        print(f"mig: {uuid} {got['mig_profile']} {got['mig_slices']}/{got['mig_total_slices']} slices of "
              f"{got['parent_gpu_uuid']}, sm_active_pct {got['sm_active_pct']}, fb_used {got['fb_used_bytes']}")
    for parent in parents:
        row = at_last.get(parent)
        if row is None or row["mig_total_slices"] is None or row["gpu_util_pct"] is not None:
            failures.append(f"{parent}'s own row: {row and (row['mig_total_slices'], row['gpu_util_pct'])}")
    on_parents = [p for p in procs if p["gpu_uuid"] in parents]
    if on_parents:
        failures.append(f"{len(on_parents)} process rows on a GPU in MIG mode itself")
    extra = [u for u, g in at_last.items() if g.get("parent_gpu_uuid") and u not in want]
    if extra:
        failures.append(f"rows for instances pynvml does not list: {extra}")
    print(f"mig: {len(parents)} GPUs in MIG mode, {len(want)} instances, "
          f"{len([p for p in procs if p['gpu_uuid'] in want])} process rows on instances")
    for f in failures[:10]:
        print(f"mig: disagrees: {f}")
    print("mig: ok" if not failures else "mig: FAILED")
    return 0 if not failures else 1


if __name__ == "__main__":
    if sys.argv[1] == "watch":
        watch(float(sys.argv[2]), sys.argv[3])
    elif sys.argv[1] == "mig":
        sys.exit(mig(sys.argv[2]))
    else:
        sys.exit(compare(sys.argv[2], sys.argv[3]))
