//! The store's data: what a run's wasmtime store holds ([`RunState`]), why the host stops a
//! guest ([`Stop`]), what a run ends with ([`Outcome`]) and its fuel ([`Meter`]). Everything the
//! guest's imports (`crate::bridge`), the meter (`crate::meter`), pre-initialisation and the
//! run's event loop share lives here, below all of them, so that none of them imports another
//! to reach it.

use serde_json::Value;
use wasmtime::Global;

use codemode_runtime::code::RunFailure;

mod state;

pub use state::RunState;
pub(crate) use state::{
    alongside_calls, enforce_memory_budget, record_name, OpenCall, PausingCall, PendingInput,
};
#[cfg(test)]
pub(crate) use state::{MAX_REJECTION_BYTES, RECORD_NAME_BYTES};

/// Why the host stopped a guest; carried through wasmtime as the error of a trap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The run already has its outcome.
    Settled,
    Aborted(String),
    Wall,
    Exit(i32),
    Memory,
    /// What the host holds for the run outside the sandbox (arguments in flight, answers
    /// waiting) passed the run's memory budget.
    HeldMemory,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Settled => f.write_str("run settled"),
            Stop::Aborted(reason) => write!(f, "aborted: {reason}"),
            Stop::Wall => f.write_str("wall-clock ceiling reached"),
            Stop::Exit(code) => write!(f, "guest exited with code {code}"),
            Stop::Memory | Stop::HeldMemory => f.write_str("memory limit exceeded"),
        }
    }
}

impl std::error::Error for Stop {}

pub enum Outcome {
    Value(Option<Value>),
    Failure(RunFailure),
}

/// A run's fuel: the part in the guest's global and the part the host still holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meter {
    /// The guest's fuel global (zero when the guest starts), once the guest is instantiated or
    /// its start function first comes for fuel.
    pub(crate) global: Option<Global>,
    /// Fuel not yet handed to the guest.
    pub(crate) outside: u64,
}

impl Meter {
    /// A meter holding `fuel`, all of it outside the guest until its first check point.
    pub(crate) fn new(fuel: u64) -> Self {
        Self {
            global: None,
            outside: fuel,
        }
    }
}
