//! The real source: [`nvml::NvmlSource`] samples this host's GPUs through
//! NVML. The [`apron_store::source::Source`] trait it implements, and the
//! simulated host, live in the store crate.

pub mod nvml;
