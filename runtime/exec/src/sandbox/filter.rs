//! The seccomp programs bubblewrap installs just before it executes a command, one per answer:
//! - `EAFNOSUPPORT`: a socket of any family but `AF_UNIX`, `AF_INET` and `AF_INET6` (no
//!   `AF_VSOCK`, whose ports are the host's, no netlink, no packet sockets);
//! - `EPERM`: a file mode with the set-user-id or set-group-id bit (`chmod` and its siblings,
//!   and files created by `open`, `openat`, `creat` and `mknod`), so that no file a command
//!   writes can raise whoever executes it later, outside the sandbox; and the kernel's
//!   keyrings, which no namespace separates;
//! - `ENOSYS`: io_uring, whose rings would make those calls without passing through the
//!   filter, and `openat2`, whose mode sits in a structure a filter cannot read (programs
//!   fall back to `openat`).
//!
//! The programs also refuse every system call made through another architecture's numbers
//! (the architecture check kills the process), and on x86-64 the x32 numbers of each call
//! above are filtered as well, since the architecture check lets them through.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The socket families a command may open.
const FAMILIES: [libc::c_int; 3] = [libc::AF_UNIX, libc::AF_INET, libc::AF_INET6];

/// The bits of a mode that would raise whoever executes the file.
const RAISING_BITS: [u64; 2] = [libc::S_ISUID as u64, libc::S_ISGID as u64];

/// The flags under which `open` and `openat` read their mode at all (`O_TMPFILE` is this bit
/// with `O_DIRECTORY`).
const CREATING_FLAGS: [u64; 2] = [libc::O_CREAT as u64, 0o20_000_000];

type Rules = BTreeMap<i64, Vec<SeccompRule>>;

/// Each program as the bytes `--add-seccomp-fd` reads: `sock_filter` records, native order.
pub(super) fn programs() -> Result<Vec<Vec<u8>>, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|_| {
        format!(
            "seccomp filters are not built for {}",
            std::env::consts::ARCH
        )
    })?;
    [
        (sockets()?, libc::EAFNOSUPPORT),
        (raising_modes_and_keyrings()?, libc::EPERM),
        (unfilterable()?, libc::ENOSYS),
    ]
    .into_iter()
    .map(|(rules, errno)| compile(with_x32(rules), errno, arch))
    .collect()
}

fn compile(rules: Rules, errno: libc::c_int, arch: TargetArch) -> Result<Vec<u8>, String> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program = BpfProgram::try_from(filter).map_err(|e| e.to_string())?;
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for instruction in &program {
        bytes.extend_from_slice(&instruction.code.to_ne_bytes());
        bytes.push(instruction.jt);
        bytes.push(instruction.jf);
        bytes.extend_from_slice(&instruction.k.to_ne_bytes());
    }
    Ok(bytes)
}

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    let len = match op {
        SeccompCmpOp::MaskedEq(_) => SeccompCmpArgLen::Qword,
        _ => SeccompCmpArgLen::Dword,
    };
    SeccompCondition::new(arg, len, op, value).map_err(|e| e.to_string())
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

/// `socket` and `socketpair` of a family outside [`FAMILIES`].
fn sockets() -> Result<Rules, String> {
    let other_family = || -> Result<Vec<SeccompRule>, String> {
        let conditions = FAMILIES
            .iter()
            .map(|&family| condition(0, SeccompCmpOp::Ne, family as u64))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(vec![rule(conditions)?])
    };
    Ok(BTreeMap::from([
        (libc::SYS_socket, other_family()?),
        (libc::SYS_socketpair, other_family()?),
    ]))
}

/// A mode argument at `arg` with a raising bit.
fn raising(arg: u8) -> Result<Vec<SeccompRule>, String> {
    RAISING_BITS
        .iter()
        .map(|&bit| rule(vec![condition(arg, SeccompCmpOp::MaskedEq(bit), bit)?]))
        .collect()
}

/// A creating `flags` argument with a raising bit in its `mode` argument.
fn creating_raising(flags: u8, mode: u8) -> Result<Vec<SeccompRule>, String> {
    let mut rules = Vec::new();
    for creating in CREATING_FLAGS {
        for bit in RAISING_BITS {
            rules.push(rule(vec![
                condition(flags, SeccompCmpOp::MaskedEq(creating), creating)?,
                condition(mode, SeccompCmpOp::MaskedEq(bit), bit)?,
            ])?);
        }
    }
    Ok(rules)
}

fn raising_modes_and_keyrings() -> Result<Rules, String> {
    let mut rules = BTreeMap::from([
        (libc::SYS_fchmod, raising(1)?),
        (libc::SYS_fchmodat, raising(2)?),
        (libc::SYS_fchmodat2, raising(2)?),
        (libc::SYS_openat, creating_raising(2, 3)?),
        (libc::SYS_mknodat, raising(2)?),
        (libc::SYS_keyctl, vec![]),
        (libc::SYS_add_key, vec![]),
        (libc::SYS_request_key, vec![]),
    ]);
    #[cfg(target_arch = "x86_64")]
    {
        rules.insert(libc::SYS_chmod, raising(1)?);
        rules.insert(libc::SYS_open, creating_raising(1, 2)?);
        rules.insert(libc::SYS_creat, raising(1)?);
        rules.insert(libc::SYS_mknod, raising(1)?);
    }
    Ok(rules)
}

fn unfilterable() -> Result<Rules, String> {
    Ok(BTreeMap::from([
        (libc::SYS_io_uring_setup, vec![]),
        (libc::SYS_io_uring_enter, vec![]),
        (libc::SYS_io_uring_register, vec![]),
        (libc::SYS_openat2, vec![]),
    ]))
}

/// On x86-64, the same rules under the x32 numbers.
fn with_x32(rules: Rules) -> Rules {
    if !cfg!(target_arch = "x86_64") {
        return rules;
    }
    const X32: i64 = 0x4000_0000;
    let x32: Vec<(i64, Vec<SeccompRule>)> = rules
        .iter()
        .map(|(number, rules)| (number | X32, rules.clone()))
        .collect();
    let mut all = rules;
    all.extend(x32);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_program_compiles_to_whole_instructions() {
        let programs = programs().expect("programs for this architecture");
        assert_eq!(programs.len(), 3);
        for program in programs {
            assert!(!program.is_empty() && program.len() % 8 == 0);
            // The kernel's limit, and what a pipe takes without blocking.
            assert!(program.len() / 8 <= 4096);
        }
    }
}
