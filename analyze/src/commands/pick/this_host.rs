//! This machine's host name as `apron-recorder` names it when it is given
//! no `--host`: the name `gethostname(2)` returns, which must be able to
//! name a partition folder. `apron pick` ranks this host's GPUs by it.
//!
//! The recorder reads it through `nix`; `apron` links no `nix`, so this
//! module makes the same call through `libc` (the same buffer of 256 bytes,
//! the name cut at its first NUL). `tests/it/pick.rs` checks that both agree.

use std::ffi::{CStr, OsString};
use std::os::unix::ffi::OsStringExt;

/// Why this machine's host name cannot be read or used.
#[derive(Debug, thiserror::Error)]
pub enum ThisHostError {
    /// `gethostname(2)` failed.
    #[error("cannot read this machine's host name")]
    Read(#[source] std::io::Error),
    /// The name cannot name a partition folder, so the recorder would not
    /// have recorded under it either.
    #[error("this machine's host name {0:?} cannot name a data folder (letters, digits, '.', '-', '_')")]
    Invalid(String),
}

/// This machine's host name, as the recorder records under it without
/// `--host`.
pub fn host_name() -> Result<String, ThisHostError> {
    // The longest host name (255 bytes) and its NUL, as nix's buffer.
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length, which is the
    // length passed; gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if rc != 0 {
        return Err(ThisHostError::Read(std::io::Error::last_os_error()));
    }
    // A name that fills the buffer may come without its NUL: cut it at the
    // last byte, as nix does.
    buffer[buffer.len() - 1] = 0;
    let bytes = CStr::from_bytes_until_nul(&buffer).map_or(&[][..], CStr::to_bytes).to_vec();
    let name = OsString::from_vec(bytes).to_string_lossy().into_owned();
    apron_schemas::paths::validate_host(&name).map_err(|_| ThisHostError::Invalid(name.clone()))?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_name_is_the_kernels() {
        // On Linux gethostname(2) reads the UTS node name, which the
        // kernel also shows here.
        let kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("procfs");
        assert_eq!(host_name().expect("a host name"), kernel.trim_end());
    }
}
