#!/usr/bin/env bash
# The recorder against the real NVML of a GPU machine, briefly. Prepare here
# (no GPU needed), then run on the GPU machine with devcheck/ carried along:
#
#   cargo build -p apron-recorder
#   test_bin=$(cargo test -p apron-tests --test nvml --no-run 2>&1 | grep -o 'target/debug/deps/nvml-[0-9a-f]*' | head -1)
#   mkdir -p devcheck && cp target/debug/apron-recorder devcheck/ && cp "$test_bin" devcheck/nvml-test
#   strip devcheck/* && cp tests/device-check.sh devcheck/run.sh
#   (on the device, with carry ["devcheck"]):  bash devcheck/run.sh
#
# It writes under $OUT: nvidia-smi's view, the ignored real-GPU test's
# output, 20 s of recording (data folder, log, /usr/bin/time figures), and
# summary.txt, which answers at once: the driver version (and so the
# process-list layout the recorder chose), the tick's wall time per GPU,
# whether GPU processes carried identities, and what NVML refused or stalled.
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
T=""; [ -x /usr/bin/time ] && T="/usr/bin/time -v"
$T timeout --preserve-status -s TERM 20 ./apron-recorder --source nvml --data "$OUT/data" --host gpu-check --rotate 10s --health-every 5s > "$OUT/recorder.txt" 2>&1
echo "recorder rc=$?" >> "$OUT/recorder.txt"
[ -n "$load_pid" ] && wait "$load_pid"
find "$OUT/data" -type f | sort >> "$OUT/recorder.txt"
{
  echo "driver (nvidia-smi): $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
  grep -E '^(driver_version|gpus|tick [0-9]+ wall_ms|process_rows|refusals_per_tick):?' "$OUT/nvml-test.txt"
  grep -m1 'NVML opened' "$OUT/recorder.txt"
  grep ' health' "$OUT/recorder.txt" | tail -1
  grep -E 'NVML refuses|not in the host|no /proc entry|not accessible|no answer from NVML' "$OUT/recorder.txt"
} > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
