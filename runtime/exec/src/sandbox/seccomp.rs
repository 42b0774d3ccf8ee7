//! The seccomp filter, for what Landlock and namespaces leave open on this kernel:
//! - below Landlock ABI 9, creating a unix socket with `socket(2)` fails with `EACCES`, so no
//!   command can connect to a Docker, D-Bus or other daemon's socket, wherever it lies
//!   (`socketpair(2)` stays: its sockets connect only to each other);
//! - without a network namespace of its own, creating an IP or packet socket fails the same
//!   way, so UDP and raw protocols are cut where Landlock only cuts TCP.
//!
//! With any of these, `io_uring_setup` fails too, since a ring could create sockets without
//! passing through the filter. On x86-64 the x32 numbers of both calls are filtered as well:
//! the architecture check lets them through.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// What the filter must refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refuse {
    pub unix_sockets: bool,
    pub ip_sockets: bool,
}

/// The filter for this machine's architecture, `None` when nothing needs refusing; `Err` says
/// why there is none.
pub fn filter(refuse: Refuse) -> Result<Option<BpfProgram>, String> {
    let mut domains = Vec::new();
    if refuse.unix_sockets {
        domains.push(libc::AF_UNIX);
    }
    if refuse.ip_sockets {
        domains.extend([libc::AF_INET, libc::AF_INET6, libc::AF_PACKET]);
    }
    if domains.is_empty() {
        return Ok(None);
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|_| {
        format!(
            "seccomp filters are not built for {}",
            std::env::consts::ARCH
        )
    })?;
    let socket_rules = domains
        .into_iter()
        .map(|domain| {
            let condition =
                SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, domain as u64)
                    .map_err(|e| e.to_string())?;
            SeccompRule::new(vec![condition]).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut rules = BTreeMap::from([
        (libc::SYS_socket, socket_rules.clone()),
        (libc::SYS_io_uring_setup, vec![]),
    ]);
    if cfg!(target_arch = "x86_64") {
        const X32: i64 = 0x4000_0000;
        rules.insert(libc::SYS_socket | X32, socket_rules);
        rules.insert(libc::SYS_io_uring_setup | X32, vec![]);
    }
    // One action for everything: a compiled filter ends in its verdict, so two cannot be
    // chained.
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(filter)
        .map(Some)
        .map_err(|e| e.to_string())
}
