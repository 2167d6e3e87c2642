//! What the codes of `gpu_events.xid` mean and call for: NVIDIA's XID
//! catalogue, kept in one file (`xid/xid.csv`, every row of the
//! catalogue's `Xids` sheet for Ampere and newer; where it came from is in
//! `xid/XID-SOURCES.md`), for `apron events` to name each fault and its
//! action and for `/metrics` to label the last XID as dcgm-exporter does.

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// One XID of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xid {
    /// The code.
    pub code: u32,
    /// NVIDIA's mnemonic (`ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS`).
    pub name: String,
    /// NVIDIA's description (`GPU has fallen off the bus`).
    pub meaning: String,
    /// NVIDIA's immediate action (`RESET_GPU`, `RESTART_APP`, `IGNORE`, …);
    /// empty where the catalogue gives none.
    pub action: String,
    /// Whether the action needs the GPU reset or the node restarted (drain
    /// it); `None` where the catalogue does not tell.
    pub fatal: Option<bool>,
}

const CATALOGUE: &str = include_str!("xid/xid.csv");

/// The catalogue, by code.
pub fn catalogue() -> &'static BTreeMap<u32, Xid> {
    static TABLE: OnceLock<BTreeMap<u32, Xid>> = OnceLock::new();
    TABLE.get_or_init(|| parse(CATALOGUE).unwrap_or_default())
}

/// What code `code` is; `None` for one the catalogue does not list (shown
/// as unknown, never guessed).
pub fn xid(code: u32) -> Option<&'static Xid> {
    catalogue().get(&code)
}

/// Reads the catalogue's CSV; an error names the line.
fn parse(text: &str) -> Result<BTreeMap<u32, Xid>, String> {
    let mut reader = csv::ReaderBuilder::new().from_reader(text.as_bytes());
    let mut out = BTreeMap::new();
    for (k, record) in reader.records().enumerate() {
        let line = k + 2;
        let record = record.map_err(|e| format!("xid.csv:{line}: {e}"))?;
        let field = |i: usize| record.get(i).unwrap_or("").to_owned();
        let code: u32 = field(0).parse().map_err(|_| format!("xid.csv:{line}: {:?} is no code", field(0)))?;
        let fatal = match field(4).as_str() {
            "yes" => Some(true),
            "no" => Some(false),
            "" => None,
            other => return Err(format!("xid.csv:{line}: fatal is {other:?}, not yes, no or empty")),
        };
        let xid = Xid { code, name: field(1), meaning: field(2), action: field(3), fatal };
        if out.insert(code, xid).is_some() {
            return Err(format!("xid.csv:{line}: XID {code} twice"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_reads_whole_and_names_the_faults_that_drain_a_gpu() {
        let table = parse(CATALOGUE).expect("xid.csv reads");
        // Every code from 1 to 172, once (XID-SOURCES.md).
        assert_eq!(table.keys().copied().collect::<Vec<_>>(), (1..=172).collect::<Vec<_>>());
        let fell = xid(79).expect("79");
        assert_eq!(fell.meaning, "GPU has fallen off the bus");
        assert_eq!((fell.action.as_str(), fell.fatal), ("RESTART_BM", Some(true)));
        assert_eq!(xid(48).map(|x| x.fatal), Some(Some(true)), "double-bit ECC");
        assert_eq!(
            xid(94).map(|x| x.action.as_str()),
            Some("RESTART_APP"),
            "contained: the app, not the GPU"
        );
        assert_eq!(xid(999), None);
        assert!(parse("xid,name,meaning,action,fatal\n7,a,b,c,maybe\n").expect_err("bad").contains(":2:"));
    }
}
