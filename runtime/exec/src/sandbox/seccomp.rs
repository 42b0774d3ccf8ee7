//! The seccomp filter for kernels whose Landlock cannot control unix sockets (ABI below 9):
//! creating a unix socket with `socket(2)` fails with `EACCES`, so no command can connect to
//! a Docker, D-Bus or other daemon's socket, wherever it lies. (`socketpair(2)` stays: its
//! sockets connect only to each other.) `io_uring_setup` fails the same way, since a ring
//! could create sockets without passing through the filter.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The filter for this machine's architecture; `Err` says why there is none.
pub fn unix_socket_filter() -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|_| {
        format!(
            "seccomp filters are not built for {}",
            std::env::consts::ARCH
        )
    })?;
    let unix_domain = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        libc::AF_UNIX as u64,
    )
    .map_err(|e| e.to_string())?;
    let unix_socket = SeccompRule::new(vec![unix_domain]).map_err(|e| e.to_string())?;
    // One action for both: a compiled filter ends in its verdict, so two cannot be chained.
    let filter = SeccompFilter::new(
        BTreeMap::from([
            (libc::SYS_socket, vec![unix_socket]),
            (libc::SYS_io_uring_setup, vec![]),
        ]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(filter).map_err(|e| e.to_string())
}
