//! The tests that need the process to themselves (see `tests/Cargo.toml`): the soak measures
//! the resident memory of the whole process, and the soak, the storm and the pool's tests take
//! every one of the 256 run slots of the engine all runtimes in a process share. Any other test
//! beside them would move the measurement or queue for a slot, spending its own wall budget;
//! so they live in this binary, and take turns in it.

mod pool_slots;
mod soak;

/// Held by every test of this binary for its whole length: one at a time.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
