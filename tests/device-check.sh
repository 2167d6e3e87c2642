#!/usr/bin/env bash
# The recorder against the real NVML of a GPU machine, briefly. Prepare here
# (no GPU needed), then run on the GPU machine with devcheck/ carried along:
#
#   cargo build -p apron-recorder
#   test_bin=$(cargo test -p apron-tests --test nvml --no-run 2>&1 | grep -o 'target/debug/deps/nvml-[0-9a-f]*' | head -1)
#   mkdir -p devcheck && cp target/debug/apron-recorder devcheck/ && cp "$test_bin" devcheck/nvml-test
#   strip devcheck/* && cp tests/device-check.sh devcheck/run.sh
#   cp tests/device-crosscheck.py devcheck/
#   (optional: an earlier build as devcheck/apron-recorder-before, whose
#   CPU per tick is then measured beside this one's)
#   (on the device, with carry ["devcheck"]):  bash devcheck/run.sh
#
# It writes under $OUT (in devcheck.tar.gz, beside summary.txt): nvidia-smi's view, the ignored real-GPU test's
# output, 20 s of recording under a PyTorch load (log, /usr/bin/time
# figures, the data folder as data.tar.gz), the recorder's rows checked
# against pynvml read beside it (device-crosscheck.py), the recorder's CPU
# per tick at 100 ms ticks (all its threads, from /proc), and summary.txt,
# which answers at once: the driver version (and so the process-list layout
# the recorder chose), the tick's wall time per GPU, whether GPU processes
# carried identities, what NVML refused or stalled, whether pynvml agrees,
# and the CPU per tick; and the NVML event types each GPU registered (XID,
# ECC…) and its error counters' first reading. Where a GPU is in MIG mode (as its admin left it:
# this check changes no GPU setting), the recorder's MIG instance rows are
# checked against pynvml's list of MIG devices (`mig:` lines; `mig: none`
# where no GPU is in MIG mode). On a machine of your own, to check MIG from
# scratch first: `sudo nvidia-smi -i 0 -mig 1 && sudo nvidia-smi mig -i 0
# -cgi 3g.40gb,1g.10gb -C` (profiles: `nvidia-smi mig -lgip`), and undo it
# after: `sudo nvidia-smi mig -i 0 -dci && sudo nvidia-smi mig -i 0 -dgi &&
# sudo nvidia-smi -i 0 -mig 0`.
set -u
cd "$(dirname "$0")"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,power.draw,utilization.gpu --format=csv; } > "$OUT/nvidia-smi.txt" 2>&1
timeout 60 ./nvml-test --ignored real_gpus --nocapture > "$OUT/nvml-test.txt" 2>&1; echo "nvml-test rc=$?" >> "$OUT/nvml-test.txt"
load_pid=""
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  python3 -c "
import torch, time
a = torch.randn(8192, 8192, device='cuda'); t = time.time()
while time.time() - t < 22: a = (a @ a).clamp_(-1, 1)
torch.cuda.synchronize()" > "$OUT/load.txt" 2>&1 &
  load_pid=$!
else
  echo "no torch with CUDA here: no GPU process to attribute" > "$OUT/load.txt"
fi
sleep 2
data=$(mktemp -d)/data
python3 device-crosscheck.py watch 21 "$OUT/pynvml.jsonl" > "$OUT/crosscheck.txt" 2>&1 &
watch_pid=$!
T=""; [ -x /usr/bin/time ] && T="/usr/bin/time -v"
$T timeout --preserve-status -s TERM 20 ./apron-recorder --source nvml --data "$data" --host gpu-check --rotate 10s --health-every 5s > "$OUT/recorder.txt" 2>&1
echo "recorder rc=$?" >> "$OUT/recorder.txt"
wait "$watch_pid"
[ -n "$load_pid" ] && wait "$load_pid"
find "$data" -type f | sort >> "$OUT/recorder.txt"
python3 device-crosscheck.py compare "$data" "$OUT/pynvml.jsonl" >> "$OUT/crosscheck.txt" 2>&1
python3 device-crosscheck.py mig "$data" > "$OUT/mig.txt" 2>&1
tar -C "$(dirname "$data")" -czf "$OUT/data.tar.gz" data

# CPU per tick: the sum over the recorder's threads of their time on a CPU
# (schedstat, ns; /proc/PID/stat's clock ticks where there is none), over
# 15 s of 100 ms ticks after a 3 s warm-up.
cpu_ns() {
  local t=0 a f
  for f in /proc/$1/task/*/schedstat; do read -r a _ < "$f" 2>/dev/null && t=$((t + a)); done
  if [ "$t" = 0 ]; then
    for f in /proc/$1/task/*/stat; do
      a=$(sed 's/.*) //' "$f" | awk '{print $12 + $13}') && t=$((t + a * 10000000))
    done
  fi
  echo "$t"
}
for bin in apron-recorder apron-recorder-before; do
  [ -x "./$bin" ] || continue
  "./$bin" --source nvml --data "$(mktemp -d)" --host gpu-check --interval 100ms --health-every 5s > "$OUT/cpu-$bin.txt" 2>&1 &
  pid=$!; sleep 3; a=$(cpu_ns $pid); sleep 15; b=$(cpu_ns $pid)
  hwm=$(awk '/VmHWM/ {print $2, $3}' /proc/$pid/status)
  kill -TERM $pid; wait $pid
  echo "$bin: $(( (b - a) / 150 / 1000 )) µs CPU per tick (all threads, 150 ticks of 100 ms); peak RSS $hwm" >> "$OUT/cpu.txt"
done
# The same recorder on the simulated host of as many GPUs: what NVML adds.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
./apron-recorder --source sim --sim-gpus "${gpus:-1}" --data "$(mktemp -d)" --host sim --interval 100ms > "$OUT/cpu-sim.txt" 2>&1 &
pid=$!; sleep 3; a=$(cpu_ns $pid); sleep 15; b=$(cpu_ns $pid)
hwm=$(awk '/VmHWM/ {print $2, $3}' /proc/$pid/status)
kill -TERM $pid; wait $pid
echo "apron-recorder --source sim: $(( (b - a) / 150 / 1000 )) µs CPU per tick; peak RSS $hwm" >> "$OUT/cpu.txt"
{
  echo "driver (nvidia-smi): $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
  grep -E '^(driver_version|gpus|tick [0-9]+ wall_ms|process_rows|refusals_per_tick):?' "$OUT/nvml-test.txt"
  grep -m1 'NVML opened' "$OUT/recorder.txt"
  # The event set each GPU registered (no fault can be injected here: this
  # checks registration and what the driver supports) and its error
  # counters' first reading (how many read, which groups it refuses).
  grep -E 'NVML events registered|GPU error counters read|waiting for NVML events failed' "$OUT/recorder.txt"
  grep ' health' "$OUT/recorder.txt" | tail -1
  grep -E 'NVML refuses|not in the host|no /proc entry|not accessible|no answer from NVML' "$OUT/recorder.txt"
  grep '^crosscheck' "$OUT/crosscheck.txt"
  grep '^mig' "$OUT/mig.txt"
  cat "$OUT/cpu.txt"
} > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
# What comes back from the GPU machine is a few files: summary.txt, and the
# rest in one archive.
(cd "$OUT" && tar -czf /tmp/devcheck.tar.gz --exclude=summary.txt . && find . -type f ! -name summary.txt -delete \
  && mv /tmp/devcheck.tar.gz .)
