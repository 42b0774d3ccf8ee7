//! The compute meter: fuel counted by the guest's own code, in a global the host fills.
//!
//! A run's compute budget is fuel ([`crate::config::FUEL_PER_MS`] to the millisecond). The
//! metered module (`codemode_rewrite::meter`) subtracts each region's cost from its fuel global at
//! the region's check point and, at the check points that test it, calls the host once the
//! global is below zero. The host keeps
//! the rest of the budget *outside* the global and hands it over a slice of [`SLICE`] at a
//! time, so the guest comes back to the host at least every slice: that return is where the
//! wall clock and aborts are checked while a guest computes ([`on_exhausted`]), and where the
//! run's task may give its thread back. What is left is always the global plus what is
//! outside, so the fuel a run burns does not depend on how it was sliced: the same program
//! given the same replies burns the same fuel on any machine.

use wasmtime::{AsContextMut, Caller, Global, Instance, Store, Trap, Val};

use crate::store::{Meter, RunState};

/// Most fuel the guest holds at a time: half a millisecond of compute at `FUEL_PER_MS`, so a
/// guest that only computes comes back to the host about that often (the rate depends on the
/// program), where it is stopped if its wall clock has run out or it was aborted.
pub(crate) const SLICE: u64 = crate::config::FUEL_PER_MS / 2;

/// Finds the fuel global of a freshly instantiated guest, for the meter (if the run has one).
pub(crate) fn attach(store: &mut Store<RunState>, instance: &Instance) {
    let global = instance.get_global(&mut *store, codemode_rewrite::meter::FUEL_EXPORT);
    if let Some(meter) = store.data_mut().meter.as_mut() {
        meter.global = global;
    }
}

/// The run's meter as it stands, if its engine meters.
fn meter(store: &mut impl AsContextMut<Data = RunState>) -> Option<Meter> {
    store.as_context_mut().data().meter
}

/// The value of the fuel global; zero while the host does not know the global yet (the guest
/// has not been instantiated, or its start function is running and has not come for fuel).
fn in_guest(store: &mut impl AsContextMut<Data = RunState>, global: Option<Global>) -> i64 {
    match global.map(|global| global.get(store.as_context_mut())) {
        Some(Val::I64(fuel)) => fuel,
        _ => 0,
    }
}

/// The global plus what is outside it: below zero once the guest has spent past its budget.
fn balance(store: &mut impl AsContextMut<Data = RunState>) -> i128 {
    meter(store).map_or(0, |meter| {
        i128::from(meter.outside) + i128::from(in_guest(store, meter.global))
    })
}

/// Fuel the run has left (none on an unmetered engine). The global may be below zero: a check
/// point that only subtracts, or a host charge, leaves it there until the next test, and a
/// guest that returns to the host before one has spent up to that much past its budget (at
/// most `codemode_rewrite::meter`'s untested limit operators per frame it returns through); what it has
/// left is then none.
pub(crate) fn left(store: &mut impl AsContextMut<Data = RunState>) -> u64 {
    u64::try_from(balance(store).max(0)).unwrap_or(u64::MAX)
}

/// Splits `left` into a slice for the guest and the rest outside it.
fn hand_over(store: &mut impl AsContextMut<Data = RunState>, left: u64) -> wasmtime::Result<()> {
    let slice = left.min(SLICE);
    let mut context = store.as_context_mut();
    let Some(meter) = context.data_mut().meter.as_mut() else {
        return Ok(());
    };
    match meter.global {
        Some(global) => {
            meter.outside = left - slice;
            // `slice` is at most `SLICE`, far below `i64::MAX`.
            global.set(context, Val::I64(slice as i64))
        }
        None => {
            meter.outside = left;
            Ok(())
        }
    }
}

/// Takes `cost` fuel for work the host does on the guest's behalf, before doing it; a run that
/// cannot pay stops with its compute budget spent. Unmetered engines charge nothing. The cost
/// comes off the guest's slice, which may go below zero: the next check point then hands the
/// guest its next slice, and yields, as if the guest had spent it itself (a loop of host calls
/// yields as often as a loop of its own work).
pub(crate) fn charge(
    store: &mut impl AsContextMut<Data = RunState>,
    cost: u64,
) -> wasmtime::Result<()> {
    let Some(meter) = meter(store) else {
        return Ok(());
    };
    let in_guest = in_guest(store, meter.global);
    if i128::from(meter.outside) + i128::from(in_guest) < i128::from(cost) {
        hand_over(store, 0)?;
        return Err(wasmtime::Error::new(Trap::OutOfFuel));
    }
    let mut context = store.as_context_mut();
    match meter.global {
        Some(global) => {
            let cost = i64::try_from(cost).unwrap_or(i64::MAX);
            global.set(&mut context, Val::I64(in_guest.saturating_sub(cost)))
        }
        // Before the host knows the global (a start function calling the host): the cost
        // comes off what is outside, which the balance says covers it.
        None => {
            if let Some(meter) = context.data_mut().meter.as_mut() {
                meter.outside -= cost;
            }
            Ok(())
        }
    }
}

/// The metered guest's call when its global went below zero: the run stops if its budget is
/// spent, and otherwise gets its next slice after a yield to the host (see
/// `run::alongside_calls`, which checks the wall clock and aborts there).
pub(crate) async fn on_exhausted(mut caller: Caller<'_, RunState>) -> wasmtime::Result<()> {
    let Some(meter) = caller.data().meter.as_ref() else {
        // A module that imports the meter's function itself, run unmetered.
        YieldOnce(false).await;
        return Ok(());
    };
    if meter.global.is_none() {
        // A start function, running before the host could look the global up.
        let global = caller
            .get_export(codemode_rewrite::meter::FUEL_EXPORT)
            .and_then(|export| export.into_global());
        let Some(global) = global else {
            return Err(wasmtime::Error::msg(
                "the metered module does not export its fuel global",
            ));
        };
        if let Some(meter) = caller.data_mut().meter.as_mut() {
            meter.global = Some(global);
        }
    }
    let left = balance(&mut caller);
    if left < 0 {
        hand_over(&mut caller, 0)?;
        return Err(wasmtime::Error::new(Trap::OutOfFuel));
    }
    hand_over(&mut caller, u64::try_from(left).unwrap_or(u64::MAX))?;
    YieldOnce(false).await;
    Ok(())
}

/// Pending once (after waking its task), then ready: suspends the guest's fiber so that the
/// future running it returns to the host. The wake is immediate, as wasmtime's own fuel yield
/// made it; `tokio::task::yield_now` would defer it until the scheduler ran out of other
/// work, which would change when a busy guest runs again.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}
