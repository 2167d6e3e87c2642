//! `apron zombies`' arguments: the stretch's thresholds and `--commands`.

use clap::Args;

use crate::cli::flag_groups::{HeldIdleArgs, PeriodArgs, parse_starved_pcie, parse_wait};

/// `apron zombies [--min-idle 10m] [--min-mem 256] [--starved-pcie 100]
/// [--commands [--wait 30s]] [period]`.
#[derive(Debug, Clone, Args)]
pub struct ZombiesArgs {
    /// The stretch's least length and memory held.
    #[command(flatten)]
    pub held: HeldIdleArgs,

    /// PCIe traffic, MiB/s in and out, at or above which the GPU's mean
    /// over the stretch makes a process starved of data, not a zombie
    /// (default: `[zombie] starved_pcie_mib_per_s`, 100; 0: none is).
    #[arg(long, value_name = "MIB_PER_S", value_parser = parse_starved_pcie)]
    pub starved_pcie: Option<u64>,

    /// Print, instead of the list, a shell script that stops the zombies
    /// idle now, host by host, most memory-minutes first: a notice to the
    /// owner, TERM, a wait, KILL if still there (a Kubernetes pod is
    /// deleted, a Slurm job cancelled). Each host's part first re-checks
    /// that the pid is still the process recorded, that it is in its pod or
    /// job by its cgroup, and that its GPUs have been idle for --min-idle by
    /// the recorder's newest data there. apron itself sends no signal.
    #[arg(long)]
    pub commands: bool,

    /// With --commands: print the commands even for a period that ended
    /// more than 10 minutes ago (each host still re-checks, before it acts,
    /// that the process is idle now).
    #[arg(long, requires = "commands")]
    pub any_period: bool,

    /// With --commands: how long a process gets between TERM and KILL (a
    /// pod's grace period), whole seconds, up to 1h.
    #[arg(long, value_name = "DURATION", value_parser = parse_wait, requires = "commands")]
    pub wait: Option<std::time::Duration>,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}
