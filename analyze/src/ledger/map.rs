//! The ledger's hash maps: keyed by numbers it made itself, so a fast hash
//! (aHash, already in the build through arrow) without a random seed will do.

use std::hash::BuildHasherDefault;

/// A `HashMap` with aHash.
pub type HashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<ahash::AHasher>>;
