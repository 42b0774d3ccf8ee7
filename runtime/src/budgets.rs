//! Budgets for a runtime: what one run may spend, checked once when the runtime is built,
//! and the bounds every budget is held to.

use std::time::Duration;

use crate::ledger::MIN_OUTPUT_BYTES;

/// Fuel a guest burns per millisecond of busy time on the reference machine, so that
/// `compute_ms` is a close, and above all deterministic, measure of it. Calibrated on the
/// benchmark workloads (compute, calls, loop and data) of both guests, TypeScript on Boa and
/// Python on Monty, and a busy loop: measured with `codemode bench --json` (and `--lang
/// python`) under each guest's pricing (`codemode_rewrite::meter::Pricing`), they burn within
/// 1.4 times of one another's fuel per millisecond, and this is the middle of that range
/// (geometrically), so that each workload's budget is within 25 % of its busy time.
pub const FUEL_PER_MS: u64 = 73_000_000;

/// Node clamps timers above this; the reference keeps the same ceiling for the wall clock.
pub const MAX_WALL_MS: u64 = 2_147_483_647;

/// The compute budget's ceiling: busy time is spent within the wall clock, so a budget beyond
/// the wall clock's ceiling could never be used.
pub const MAX_COMPUTE_MS: u64 = MAX_WALL_MS;

/// The compute budget by default (one minute of busy time).
pub const DEFAULT_COMPUTE_MS: u64 = 60_000;
/// The wall-clock budget by default (ten minutes).
pub const DEFAULT_WALL_MS: u64 = 600_000;
/// The output cap by default (64 MiB).
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 64 * 1024 * 1024;
/// The output cap's ceiling: JavaScript's largest safe integer.
pub const MAX_OUTPUT_BYTES: u64 = 1 << 53;
/// The sandbox's memory budget by default, in MiB.
pub const DEFAULT_MEMORY_MB: u64 = 512;
/// The memory budget's ceiling, in MiB: all that wasm32 addresses.
pub const MAX_MEMORY_MB: u64 = 4096;
/// The ceiling of the memory all runs in progress may hold at once (`--max-memory-mb`), in MiB.
pub const MAX_MEMORY_CAP_MB: u64 = 1_048_576;
/// `--max-memory-mb` by default where the machine's memory is unknown, in MiB (elsewhere half
/// the machine's memory).
pub const MEMORY_CAP_MB_WHEN_UNKNOWN: u64 = 2048;
/// [`MAX_MEMORY_MB`] in bytes: the largest linear memory any run may have.
pub const MAX_MEMORY_BYTES: u64 = MAX_MEMORY_MB * 1024 * 1024;

/// Budgets of every run of one runtime. Defaults are the design's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budgets {
    /// Busy time a program may spend computing (time waiting on tools is free).
    pub compute_ms: u64,
    /// Wall-clock ceiling for a whole run, waits included.
    pub wall_ms: u64,
    /// Output cap: exact JSON bytes of logs plus value or diagnostic.
    pub max_output_bytes: u64,
    /// Linear memory ceiling of the sandbox.
    pub memory_mb: u64,
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            compute_ms: DEFAULT_COMPUTE_MS,
            wall_ms: DEFAULT_WALL_MS,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            memory_mb: DEFAULT_MEMORY_MB,
        }
    }
}

/// A budget that cannot be used, with the reference's wording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("codemode: config.{key} {problem}")]
pub struct BudgetError {
    /// The budget's configuration key, e.g. `maxWallMs`.
    pub key: &'static str,
    /// What is wrong with its value.
    pub problem: String,
}

impl Budgets {
    /// Checks every budget; the first unusable one is reported.
    pub fn validate(&self) -> Result<(), BudgetError> {
        let positive = |key: &'static str, v: u64| {
            if v == 0 {
                Err(BudgetError {
                    key,
                    problem: format!("must be a positive number, got {v}"),
                })
            } else {
                Ok(())
            }
        };
        positive("computeMs", self.compute_ms)?;
        positive("maxWallMs", self.wall_ms)?;
        positive("memoryMb", self.memory_mb)?;
        let at_most = |key, v: u64, max: u64| {
            if v > max {
                Err(BudgetError {
                    key,
                    problem: format!("must be at most {max}, got {v}"),
                })
            } else {
                Ok(())
            }
        };
        at_most("computeMs", self.compute_ms, MAX_COMPUTE_MS)?;
        at_most("maxWallMs", self.wall_ms, MAX_WALL_MS)?;
        if self.max_output_bytes < MIN_OUTPUT_BYTES || self.max_output_bytes > MAX_OUTPUT_BYTES {
            return Err(BudgetError {
                key: "maxOutputBytes",
                problem: format!(
                    "must be a safe integer of at least {MIN_OUTPUT_BYTES}, got {}",
                    self.max_output_bytes
                ),
            });
        }
        if self.memory_mb > MAX_MEMORY_MB {
            return Err(BudgetError {
                key: "memoryMb",
                problem: format!(
                    "must be at most {MAX_MEMORY_MB} (wasm32 addresses 4 GiB), got {}",
                    self.memory_mb
                ),
            });
        }
        Ok(())
    }

    /// Each of these budgets, but none above `ceiling`'s: what a run asking for `self` gets
    /// from a runtime configured with `ceiling`.
    pub fn within(&self, ceiling: &Budgets) -> Budgets {
        Budgets {
            compute_ms: self.compute_ms.min(ceiling.compute_ms),
            wall_ms: self.wall_ms.min(ceiling.wall_ms),
            max_output_bytes: self.max_output_bytes.min(ceiling.max_output_bytes),
            memory_mb: self.memory_mb.min(ceiling.memory_mb),
        }
    }

    /// The compute budget as fuel, at [`FUEL_PER_MS`].
    pub fn fuel(&self) -> u64 {
        self.compute_ms.saturating_mul(FUEL_PER_MS)
    }

    /// The wall-clock ceiling.
    pub fn wall(&self) -> Duration {
        Duration::from_millis(self.wall_ms)
    }

    /// The linear memory ceiling in bytes.
    pub fn memory_bytes(&self) -> usize {
        (self.memory_mb as usize).saturating_mul(1024 * 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_designs() {
        let b = Budgets::default();
        assert_eq!(b.compute_ms, 60_000);
        assert_eq!(b.wall_ms, 600_000);
        assert_eq!(b.max_output_bytes, 67_108_864);
        assert_eq!(b.memory_mb, 512);
        assert!(b.validate().is_ok());
    }

    #[test]
    fn unusable_budgets_are_named() {
        let bad = Budgets {
            compute_ms: 0,
            ..Budgets::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "codemode: config.computeMs must be a positive number, got 0"
        );
        let wall = Budgets {
            wall_ms: MAX_WALL_MS,
            ..Budgets::default()
        };
        assert!(wall.validate().is_ok());
        let compute = Budgets {
            compute_ms: 1_000_000_000_000,
            ..Budgets::default()
        };
        assert_eq!(
            compute.validate().unwrap_err().to_string(),
            "codemode: config.computeMs must be at most 2147483647, got 1000000000000"
        );
        let wall = Budgets {
            wall_ms: MAX_WALL_MS + 1,
            ..Budgets::default()
        };
        assert!(wall
            .validate()
            .unwrap_err()
            .to_string()
            .contains("at most 2147483647"));
        let out = Budgets {
            max_output_bytes: 3,
            ..Budgets::default()
        };
        assert!(out
            .validate()
            .unwrap_err()
            .to_string()
            .contains("must be a safe integer of at least 4"));
    }
}
