//! Cheap, stateless, portable noise: every per-tick random value is a hash
//! of a key (the GPU's or the process's) and the tick time, so a sensor's
//! reading at time `t` does not depend on which other ticks were sampled,
//! and costs a few integer operations instead of an RNG draw.

/// SplitMix64's finaliser: a bijective 64-bit mixer with good avalanche.
pub(super) const fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The hash of `key` at integer time (or window number) `t`.
pub(super) fn at(key: u64, t: i64) -> u64 {
    mix(key ^ (t as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

/// Lane `lane` (0–3) of `h` as a uniform value in [0, 1).
pub(super) fn unit(h: u64, lane: u32) -> f32 {
    ((h >> (lane * 16)) & 0xFFFF) as f32 * (1.0 / 65_536.0)
}

/// Smooth value noise in [-1, 1]: random knots every `period_ms`, eased
/// between, so readings wander instead of jumping every tick.
pub(super) fn smooth(key: u64, t: i64, period_ms: i64) -> f32 {
    let k = t.div_euclid(period_ms);
    let f = t.rem_euclid(period_ms) as f32 / period_ms as f32;
    let a = unit(at(key, k), 0);
    let b = unit(at(key, k + 1), 0);
    let s = f * f * (3.0 - 2.0 * f);
    (a + (b - a) * s) * 2.0 - 1.0
}

/// Whether the window of `window_ms` around `t` is one of the `share` (0–1)
/// of windows picked by `key`: rare episodes (stalls, bursts) that last a
/// whole window.
pub(super) fn in_window(key: u64, t: i64, window_ms: i64, share: f32) -> bool {
    unit(at(key, t.div_euclid(window_ms)), 1) < share
}

/// FNV-1a of a string: a stable hash (unlike `std`'s randomised hasher).
pub(super) fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_and_smooth_stay_in_range() {
        for t in (0..200_000).step_by(997) {
            let h = at(42, t);
            for lane in 0..4 {
                let u = unit(h, lane);
                assert!((0.0..1.0).contains(&u));
            }
            let s = smooth(7, t, 30_000);
            assert!((-1.0..=1.0).contains(&s), "{s}");
        }
    }

    #[test]
    fn smooth_is_continuous() {
        let mut prev = smooth(9, 0, 10_000);
        for t in (1_000..100_000).step_by(1_000) {
            let s = smooth(9, t, 10_000);
            assert!((s - prev).abs() < 0.35, "jump at {t}: {prev} -> {s}");
            prev = s;
        }
    }
}
