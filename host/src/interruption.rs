//! How running wasm is interrupted: a choice made when an engine is built, below everything
//! that builds or runs one.

/// How running wasm is interrupted. Both are compiled into the guest's machine code (fuel by
/// rewriting the module, epochs by wasmtime), so each scheme is its own engine and its own
/// compiled module.
///
/// Runs use [`Interruption::Fuel`]: fuel is the compute budget (deterministic, counts only the
/// guest's own work, bulk operations by the byte or element; see `meter`), and a busy guest
/// comes back to the host for more every half millisecond or so of it, where the host enforces
/// the wall clock and aborts. Epoch instrumentation (a check at every function entry and loop
/// header) would do the latter too, at a cost `codemode bench --interruption` measures.
/// The other schemes exist to measure what each mechanism costs; without fuel, nothing
/// enforces the compute budget while wasm runs, and with neither, nothing stops it at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
// Runs only ever use `Fuel`; the other schemes are built by `codemode bench` (feature `bench`).
#[cfg_attr(not(feature = "bench"), allow(dead_code))]
pub enum Interruption {
    /// No instrumentation: nothing stops wasm until it returns to the host.
    None,
    /// Fuel, as every run uses: the compute budget is enforced exactly, and a busy guest comes
    /// back to the host for each slice of it, where the wall clock and aborts are enforced.
    Fuel,
    /// Epochs only: the wall clock and aborts are enforced at every function entry and loop
    /// header; the compute budget is not.
    Epoch,
    /// Both, to measure what epoch checks cost on top of fuel.
    FuelAndEpoch,
}

impl Interruption {
    /// Every scheme, for benchmarks that compare them.
    #[cfg(feature = "bench")]
    pub const ALL: [Interruption; 4] = [
        Interruption::None,
        Interruption::Fuel,
        Interruption::Epoch,
        Interruption::FuelAndEpoch,
    ];

    /// Whether the scheme compiles in the fuel meter.
    pub fn fuel(self) -> bool {
        matches!(self, Interruption::Fuel | Interruption::FuelAndEpoch)
    }

    /// Whether the scheme compiles in epoch interruption.
    pub fn epoch(self) -> bool {
        matches!(self, Interruption::Epoch | Interruption::FuelAndEpoch)
    }

    /// The scheme's short name, which labels it in benchmark reports.
    #[cfg(feature = "bench")]
    pub fn name(self) -> &'static str {
        match self {
            Interruption::None => "none",
            Interruption::Fuel => "fuel",
            Interruption::Epoch => "epoch",
            Interruption::FuelAndEpoch => "both",
        }
    }
}
