//! NVML calls that `nvml-wrapper` makes in a way real drivers break, made
//! here through the symbols it loaded (`Nvml::lib`), with the layout and
//! the buffer protocol each driver really has:
//!
//! - the process lists (compute, graphics, MPS clients), in the entry
//!   layout of the driver's version ([`ProcessCall`]): `nvml-wrapper` reads
//!   24-byte entries, which scrambles the 32-byte ones of 535.43–535.86 and
//!   overruns its buffer, and has no answer for 535.98's missing `_v3`;
//! - per-process utilization, surviving a sample count that grows between
//!   the count query and the query that fills the buffer (`nvml-wrapper`
//!   turns that into an error, which would read as "no sample", a 0);
//! - the queries `nvml-wrapper` does not wrap: a GPU's row remapping, and
//!   the two MIG ones: a MIG device's GPU
//!   instance id (GPM samples an instance by it) and a GPU's
//!   GPU-instance profiles (their largest says how many slices it has).
//!
//! Every other call goes through `nvml-wrapper`'s safe API.

use std::ffi::c_uint;

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::driver::ProcessCall;
use super::process_util::UtilSample;

/// `nvmlReturn_t` codes this module acts on.
const SUCCESS: c_uint = 0;
const ERROR_NOT_FOUND: c_uint = 6;
const ERROR_INSUFFICIENT_SIZE: c_uint = 7;
/// `NVML_VALUE_NOT_AVAILABLE` as an unsigned long long.
const VALUE_NOT_AVAILABLE: u64 = u64::MAX;
/// Tries of a list query whose length grew between the count and the fill.
const FILL_TRIES: usize = 3;

/// `nvmlProcessInfo_t` (v2, 24 bytes), filled by `_v2` and by `_v3` on
/// every driver but 535.43–535.86.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct ProcessInfo {
    pid: c_uint,
    used_gpu_memory: u64,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

/// The 32-byte `nvmlProcessInfo_t` of nvml.h at 535.43–535.86.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct ProcessInfoWide {
    pid: c_uint,
    used_gpu_memory: u64,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
    used_gpu_cc_protected_memory: u64,
}

/// `nvmlProcessUtilizationSample_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct ProcessUtilizationSample {
    pid: c_uint,
    time_stamp: u64,
    sm_util: c_uint,
    mem_util: c_uint,
    enc_util: c_uint,
    dec_util: c_uint,
}

/// `nvmlGpuInstanceProfileInfo_t` (v1).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct GpuInstanceProfileInfo {
    id: c_uint,
    is_p2p_supported: c_uint,
    slice_count: c_uint,
    instance_count: c_uint,
    multiprocessor_count: c_uint,
    copy_engine_count: c_uint,
    decoder_count: c_uint,
    encoder_count: c_uint,
    jpeg_count: c_uint,
    ofa_count: c_uint,
    memory_size_mb: u64,
}

/// `NVML_GPU_INSTANCE_PROFILE_COUNT` in the header `nvml-wrapper` was built
/// from; a profile id a driver does not know is refused, and skipped.
const GPU_INSTANCE_PROFILES: c_uint = 17;

// The driver writes these layouts into our buffers: a size mistake would
// corrupt memory, so it must not compile.
const _: () = {
    assert!(size_of::<GpuInstanceProfileInfo>() == 48);
    assert!(size_of::<ProcessInfo>() == 24);
    assert!(size_of::<ProcessInfoWide>() == 32);
    assert!(size_of::<ProcessUtilizationSample>() == 32);
};

/// The buffers NVML fills, kept by a GPU's worker from tick to tick so
/// that a steady tick's lists allocate nothing.
#[derive(Debug, Default)]
pub(super) struct Buffers {
    narrow: Vec<ProcessInfo>,
    wide: Vec<ProcessInfoWide>,
    util: Vec<ProcessUtilizationSample>,
}

/// Which process list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ProcessList {
    /// Processes with a compute context.
    Compute,
    /// Processes with a graphics context.
    Graphics,
    /// MPS clients (their server is on the compute list).
    Mps,
}

impl ProcessList {
    /// The name for logs and refusal counts.
    pub(super) fn name(self) -> &'static str {
        match self {
            ProcessList::Compute => "compute processes",
            ProcessList::Graphics => "graphics processes",
            ProcessList::Mps => "MPS client processes",
        }
    }
}

/// One process list of `device` into `out` (emptied first): (pid, used GPU
/// memory in bytes, `None` where NVML does not give it), read with `call`,
/// the layout of the driver's version, through `buffers`.
pub(super) fn process_list(
    nvml: &Nvml,
    device: &Device<'_>,
    list: ProcessList,
    call: ProcessCall,
    buffers: &mut Buffers,
    out: &mut Vec<(u32, Option<u64>)>,
) -> Result<(), NvmlError> {
    out.clear();
    let lib = nvml.lib();
    // `_v2` and `_v3` take the same pointer type; what the driver writes
    // through it is what `call` says.
    let sym = match (list, call) {
        (ProcessList::Compute, ProcessCall::V2) => lib.nvmlDeviceGetComputeRunningProcesses_v2.as_ref(),
        (ProcessList::Compute, _) => lib.nvmlDeviceGetComputeRunningProcesses_v3.as_ref(),
        (ProcessList::Graphics, ProcessCall::V2) => lib.nvmlDeviceGetGraphicsRunningProcesses_v2.as_ref(),
        (ProcessList::Graphics, _) => lib.nvmlDeviceGetGraphicsRunningProcesses_v3.as_ref(),
        (ProcessList::Mps, ProcessCall::V2) => lib.nvmlDeviceGetMPSComputeRunningProcesses_v2.as_ref(),
        (ProcessList::Mps, _) => lib.nvmlDeviceGetMPSComputeRunningProcesses_v3.as_ref(),
    };
    let sym = nvml_wrapper::error::nvml_sym(sym)?;
    // SAFETY: the raw handle is only handed back to NVML, while `device`
    // (and the NVML it came from) is alive.
    let handle = unsafe { device.handle() };
    let call_with = |count: &mut c_uint, buf: *mut u8| {
        // SAFETY: `fill` passes either a null buffer or one of `*count`
        // entries of the type it was asked for, which is the layout this
        // driver version fills (chosen by `call` below).
        unsafe { sym(handle, count, buf.cast()) }
    };
    let known = |used: u64| (used != VALUE_NOT_AVAILABLE).then_some(used);
    match call {
        ProcessCall::V3Wide => {
            fill(&mut buffers.wide, call_with)?;
            out.extend(buffers.wide.iter().map(|e| (e.pid, known(e.used_gpu_memory))));
        }
        ProcessCall::V3 | ProcessCall::V2 => {
            fill(&mut buffers.narrow, call_with)?;
            out.extend(buffers.narrow.iter().map(|e| (e.pid, known(e.used_gpu_memory))));
        }
    }
    Ok(())
}

/// The per-process utilization samples of `device` newer than `since_us`
/// (NVML's `lastSeenTimeStamp`, µs) into `out` (emptied first), through
/// `buffers`. `Err(NotFound)` is NVML's way of saying there is none.
pub(super) fn process_utilization(
    nvml: &Nvml,
    device: &Device<'_>,
    since_us: u64,
    buffers: &mut Buffers,
    out: &mut Vec<UtilSample>,
) -> Result<(), NvmlError> {
    out.clear();
    let sym = nvml_wrapper::error::nvml_sym(nvml.lib().nvmlDeviceGetProcessUtilization.as_ref())?;
    // SAFETY: as in `process_list`.
    let handle = unsafe { device.handle() };
    let call_with = |count: &mut c_uint, buf: *mut u8| {
        // SAFETY: `fill` passes either a null buffer or one of `*count`
        // `ProcessUtilizationSample`s, the header's layout.
        unsafe { sym(handle, buf.cast(), count, since_us) }
    };
    fill(&mut buffers.util, call_with)?;
    out.extend(buffers.util.iter().map(|s| UtilSample {
        pid: s.pid,
        timestamp_us: s.time_stamp,
        sm_util: s.sm_util,
        mem_util: s.mem_util,
    }));
    Ok(())
}

/// The GPU instance id of MIG device `device` (`nvmlDeviceGetGpuInstanceId`):
/// what `nvmlGpmMigSampleGet` on its parent takes.
pub(super) fn gpu_instance_id(nvml: &Nvml, device: &Device<'_>) -> Result<u32, NvmlError> {
    let sym = nvml_wrapper::error::nvml_sym(nvml.lib().nvmlDeviceGetGpuInstanceId.as_ref())?;
    let mut id: c_uint = 0;
    // SAFETY: the handle is only handed back to NVML while `device` is
    // alive; `id` is the one `unsigned int` the call writes.
    nvml_wrapper::error::nvml_try(unsafe { sym(device.handle(), &mut id) })?;
    Ok(id)
}

/// Whether an error from a basic query (utilization, memory) means the GPU
/// as a whole cannot be sampled, rather than that this one metric is not
/// available (not supported, not permitted, not in this driver).
pub fn is_device_failure(error: &NvmlError) -> bool {
    !matches!(
        error,
        NvmlError::NotSupported
            | NvmlError::NoPermission
            | NvmlError::FailedToLoadSymbol(_)
            | NvmlError::FunctionNotFound
            | NvmlError::NotFound
            | NvmlError::NoData
    )
}

/// GPU `device`'s row remapping (`nvmlDeviceGetRemappedRows`, Ampere and
/// newer), which `nvml-wrapper` does not wrap: rows remapped for
/// correctable and for uncorrectable errors, whether a remapping waits for
/// a reset, whether one failed.
pub(super) fn remapped_rows(nvml: &Nvml, device: &Device<'_>) -> Result<[u32; 4], NvmlError> {
    let sym = nvml_wrapper::error::nvml_sym(nvml.lib().nvmlDeviceGetRemappedRows.as_ref())?;
    let [mut corr, mut unc, mut pending, mut failure]: [c_uint; 4] = [0; 4];
    // SAFETY: the handle is only handed back to NVML while `device` is
    // alive; each pointer is one `unsigned int` the call writes.
    nvml_wrapper::error::nvml_try(unsafe {
        sym(device.handle(), &mut corr, &mut unc, &mut pending, &mut failure)
    })?;
    Ok([corr, unc, pending, failure])
}

/// How many compute slices GPU `device` has for MIG: the largest slice
/// count of its GPU-instance profiles (7 on A100 and H100, 4 on A30);
/// `None` when NVML gives no profile.
pub(super) fn mig_total_slices(nvml: &Nvml, device: &Device<'_>) -> Option<u32> {
    let sym = nvml_wrapper::error::nvml_sym(nvml.lib().nvmlDeviceGetGpuInstanceProfileInfo.as_ref()).ok()?;
    // SAFETY: as in `gpu_instance_id`.
    let handle = unsafe { device.handle() };
    (0..GPU_INSTANCE_PROFILES)
        .filter_map(|profile| {
            let mut info = GpuInstanceProfileInfo::default();
            // SAFETY: `info` is the v1 struct the call fills (its size is
            // checked above); a profile this GPU lacks answers an error.
            let code = unsafe { sym(handle, profile, (&raw mut info).cast()) };
            (code == SUCCESS && info.slice_count > 0).then_some(info.slice_count)
        })
        .max()
}

/// NVML's list protocol, into `buf` (emptied first, its allocation kept): a
/// call with no buffer says how many entries there are (`INSUFFICIENT_SIZE`,
/// or success when there are none), then a call fills a buffer. The list
/// may grow in between: the buffer has headroom, and a fill that still does
/// not fit is retried at the size NVML then gives, a few times.
fn fill<T: Copy + Default>(
    buf: &mut Vec<T>,
    mut call: impl FnMut(&mut c_uint, *mut u8) -> c_uint,
) -> Result<(), NvmlError> {
    buf.clear();
    let mut count: c_uint = 0;
    match call(&mut count, std::ptr::null_mut()) {
        SUCCESS => return Ok(()),
        ERROR_INSUFFICIENT_SIZE => {}
        code => return Err(NvmlError::from(code)),
    }
    for _ in 0..FILL_TRIES {
        let room = count.saturating_add(count / 4 + 4);
        buf.clear();
        buf.resize(room as usize, T::default());
        let mut filled = room;
        match call(&mut filled, buf.as_mut_ptr().cast()) {
            SUCCESS => {
                buf.truncate((filled as usize).min(buf.len()));
                return Ok(());
            }
            ERROR_INSUFFICIENT_SIZE => count = filled,
            // The samples aged out between the two calls.
            ERROR_NOT_FOUND => {
                buf.clear();
                return Ok(());
            }
            code => {
                buf.clear();
                return Err(NvmlError::from(code));
            }
        }
    }
    buf.clear();
    Err(NvmlError::InsufficientSize(Some(count as usize)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list of `sizes[i]` entries at the i-th call (the first is the
    /// count query).
    fn growing(sizes: Vec<c_uint>) -> impl FnMut(&mut c_uint, *mut u8) -> c_uint {
        let mut calls = 0;
        move |count: &mut c_uint, buf: *mut u8| {
            let n = sizes[calls.min(sizes.len() - 1)];
            calls += 1;
            let room = *count;
            *count = n;
            if n == 0 {
                SUCCESS
            } else if buf.is_null() || room < n {
                ERROR_INSUFFICIENT_SIZE
            } else {
                SUCCESS
            }
        }
    }

    #[test]
    fn a_list_that_grows_between_the_calls_is_read_whole() {
        let mut buf = Vec::<ProcessInfo>::new();
        // 2 at the count, 40 at the fill: one retry.
        fill(&mut buf, growing(vec![2, 40, 40])).expect("read on the retry");
        assert_eq!(buf.len(), 40);
        fill(&mut buf, growing(vec![0])).expect("empty");
        assert_eq!(buf.len(), 0);
        // Headroom absorbs a little growth without a retry.
        fill(&mut buf, growing(vec![8, 10])).expect("fits");
        assert_eq!(buf.len(), 10);
    }

    #[test]
    fn a_refilled_buffer_keeps_its_allocation() {
        let mut buf = Vec::<ProcessInfo>::new();
        fill(&mut buf, growing(vec![16, 16])).expect("fits");
        let (at, room) = (buf.as_ptr(), buf.capacity());
        fill(&mut buf, growing(vec![12, 12])).expect("fits");
        assert_eq!((buf.len(), buf.as_ptr(), buf.capacity()), (12, at, room));
    }

    #[test]
    fn a_list_that_keeps_growing_gives_up() {
        let mut buf = Vec::<ProcessInfo>::new();
        let error = fill(&mut buf, growing(vec![1, 100, 1_000, 10_000, 100_000])).expect_err("never fits");
        assert!(matches!(error, NvmlError::InsufficientSize(Some(_))), "{error:?}");
        assert!(buf.is_empty());
    }
}
