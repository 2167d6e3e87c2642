//! Device ids as device plugins hand them to the kubelet, and so as the
//! pod-resources API lists them: which GPU (or MIG instance) an id names,
//! and which time-sliced replica of it.
//!
//! NVIDIA's device plugin (k8s-device-plugin, `internal/rm/devices.go`)
//! names a whole GPU by its UUID (`GPU-…`), a MIG instance by its UUID
//! (`MIG-…`), and each of the N replicas of a time-sliced or MPS-shared GPU
//! as `<id>::<replica>` (`NewAnnotatedID`: `fmt.Sprintf("%s::%d", id,
//! replica)`), replicas numbered from 0. Anything else (an index, the old
//! `MIG-GPU-<uuid>/<gi>/<ci>` form, another vendor's ids) names no UUID
//! here: kept as the raw id, never guessed at.

/// What one device id says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceId {
    /// The GPU's or MIG instance's UUID (`GPU-…`, `MIG-…`), as NVML and the
    /// `gpu_uuid` column spell it; `None` when the id names none.
    pub uuid: Option<String>,
    /// The replica of a shared GPU (`::N`), `None` for a device not shared.
    pub replica: Option<u32>,
}

/// Parses a device plugin's device id (see the module's documentation).
/// An id whose replica suffix is not a number names nothing.
pub fn parse_device_id(id: &str) -> DeviceId {
    let (base, replica) = match id.split_once("::") {
        Some((base, replica)) => match replica.parse::<u32>() {
            Ok(r) => (base, Some(r)),
            Err(_) => return DeviceId { uuid: None, replica: None },
        },
        None => (id, None),
    };
    let is_uuid = |prefix: &str| {
        base.strip_prefix(prefix)
            .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
    };
    let uuid = (is_uuid("GPU-") || is_uuid("MIG-")).then(|| base.to_owned());
    DeviceId { uuid, replica }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: &str = "GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763";
    const MIG: &str = "MIG-1c2d3e4f-5a6b-5c7d-8e9f-0a1b2c3d4e5f";

    #[test]
    fn whole_gpus_mig_instances_and_replicas() {
        assert_eq!(parse_device_id(GPU), DeviceId { uuid: Some(GPU.into()), replica: None });
        assert_eq!(parse_device_id(MIG), DeviceId { uuid: Some(MIG.into()), replica: None });
        assert_eq!(
            parse_device_id(&format!("{GPU}::2")),
            DeviceId { uuid: Some(GPU.into()), replica: Some(2) }
        );
        assert_eq!(
            parse_device_id(&format!("{MIG}::0")),
            DeviceId { uuid: Some(MIG.into()), replica: Some(0) }
        );
    }

    #[test]
    fn other_ids_name_no_uuid() {
        let none = DeviceId { uuid: None, replica: None };
        for id in ["0", "", "GPU-", "MIG-GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763/1/0", "gpu0", "GPU-zz"] {
            assert_eq!(parse_device_id(id), none, "{id}");
        }
        assert_eq!(parse_device_id(&format!("{GPU}::x")), none);
        assert_eq!(parse_device_id(&format!("{GPU}::-1")), none);
        assert_eq!(parse_device_id("3::1"), DeviceId { uuid: None, replica: Some(1) });
    }
}
