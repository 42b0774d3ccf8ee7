//! The host side of every guest import: the `codemode` bridge and the few WASI functions the
//! guest links against. Architecture invariant: this is the only module that reads or writes
//! guest memory while the guest runs (frames, logs, WASI buffers), and it treats the guest as
//! a hostile peer. Whole-memory copies happen only between runs of guest code: `run/pause.rs`
//! (pause, restore) and `preinit/` (the pre-initialised snapshot).
//!
//! Every pointer and length is bounds-checked against the guest's exported memory and every
//! frame is size-capped before it is copied out; frames that do not decode are dropped without
//! failing the run; nothing here panics or blocks. After the run has settled, calls, logs,
//! timers and a second `done` are ignored.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use codemode_runtime::code::{FailureCause, FailureKind, RunFailure};
use codemode_runtime::json;
use codemode_runtime::ledger::LogAdmission;
use wasmtime::{Caller, Linker, Memory};

use crate::store::{Outcome, RunState, Stop};
use crate::wire::{self, Done, DoneKind, CALL_ACCEPTED, CALL_IGNORED, TIMER_ARMED, TIMER_REFUSED};

/// Largest `call` frame the host reads (arguments have no ledger cap, but a host must bound
/// what it parses; the in-flight argument budget usually bounds it first).
const MAX_CALL_FRAME: usize = 256 * 1024 * 1024;
/// Most calls in flight at once, and most timers armed at once, per run.
pub const MAX_IN_FLIGHT: usize = 100_000;
pub(crate) const MAX_TIMERS: usize = 100_000;
/// Longest binding namespace or member name a call frame may carry.
const MAX_NAME_BYTES: usize = 4096;
/// Most binding calls one run may make; past it the run fails (a runaway loop, not a program).
pub const MAX_CALLS_PER_RUN: usize = 100_000;

/// Fuel charged per byte the host copies out of or into guest memory on the guest's behalf,
/// per byte of JSON it parses, and per byte of randomness it makes: work a program causes
/// outside wasm is paid from the same compute budget as its own (at `FUEL_PER_MS`, 1 fuel is
/// about 14 ps: copying costs the host about 0.2 ns a byte, parsing 3 ns, randomness 1.5 ns).
pub(crate) const COPY_FUEL_PER_BYTE: u64 = 14;
pub(crate) const PARSE_FUEL_PER_BYTE: u64 = 210;
pub(crate) const RANDOM_FUEL_PER_BYTE: u64 = 105;

/// Charges `bytes × per_byte` fuel before the host does that work; a program that cannot pay
/// stops with its compute budget spent. (Engines without fuel, for measurements, charge
/// nothing.) The wall clock, aborts and settlement are checked here too, not only at fuel
/// yields: a loop of host calls then stops on time whatever setting the fuel does to the
/// countdown to the next yield.
fn charge(caller: &mut Caller<'_, RunState>, bytes: usize, per_byte: u64) -> wasmtime::Result<()> {
    if let Some(stop) = caller.data().must_stop() {
        return Err(wasmtime::Error::new(stop));
    }
    crate::meter::charge(caller, (bytes as u64).saturating_mul(per_byte))
}

const ERRNO_SUCCESS: i32 = 0;
const ERRNO_BADF: i32 = 8;
const ERRNO_FAULT: i32 = 21;
const ERRNO_INVAL: i32 = 28;
const ERRNO_NOSYS: i32 = 52;

fn memory(caller: &Caller<'_, RunState>) -> Option<Memory> {
    caller.data().memory
}

/// Copies `len` bytes at `ptr` out of guest memory, or `None` when out of bounds or over `cap`.
fn read(caller: &Caller<'_, RunState>, ptr: u32, len: u32, cap: usize) -> Option<Vec<u8>> {
    let len = len as usize;
    if len > cap {
        return None;
    }
    let data = memory(caller)?.data(caller);
    let start = ptr as usize;
    let end = start.checked_add(len)?;
    data.get(start..end).map(<[u8]>::to_vec)
}

/// The `len` bytes at `ptr` in guest memory, borrowed in place, with the run's state; `None`
/// when out of bounds. The guest is stopped inside this host call, so the bytes cannot change
/// while they are read.
fn frame_and_state<'a>(
    caller: &'a mut Caller<'_, RunState>,
    ptr: u32,
    len: u32,
) -> Option<(&'a [u8], &'a mut RunState)> {
    let memory = memory(caller)?;
    let (data, state) = memory.data_and_store_mut(caller);
    let start = ptr as usize;
    let end = start.checked_add(len as usize)?;
    let data: &'a [u8] = data;
    let frame = data.get(start..end)?;
    Some((frame, state))
}

fn in_bounds(caller: &Caller<'_, RunState>, ptr: u32, len: u32) -> bool {
    let Some(memory) = memory(caller) else {
        return false;
    };
    (ptr as usize)
        .checked_add(len as usize)
        .is_some_and(|end| end <= memory.data_size(caller))
}

/// Writes `bytes` at `ptr` in guest memory; false when out of bounds.
fn write(caller: &mut Caller<'_, RunState>, ptr: u32, bytes: &[u8]) -> bool {
    let Some(memory) = memory(caller) else {
        return false;
    };
    let data = memory.data_mut(caller);
    let start = ptr as usize;
    match start
        .checked_add(bytes.len())
        .and_then(|end| data.get_mut(start..end))
    {
        Some(slot) => {
            slot.copy_from_slice(bytes);
            true
        }
        None => false,
    }
}

/// Charges one log entry and keeps it; an overflow settles the run and stops the guest.
pub(crate) fn admit_log(state: &mut RunState, text: &str) -> Result<(), Stop> {
    if state.outcome.is_some() {
        return Ok(());
    }
    match state.ledger.admit_log(text) {
        LogAdmission::Whole => {
            state.push_log(text.to_owned());
            Ok(())
        }
        LogAdmission::Prefix(prefix) => {
            state.push_log(prefix.to_owned());
            state.settle_overflow();
            Err(Stop::Settled)
        }
        LogAdmission::Nothing => {
            state.settle_overflow();
            Err(Stop::Settled)
        }
    }
}

fn log_entry_from(caller: &Caller<'_, RunState>, ptr: u32, len: u32) -> Option<String> {
    // A log can only keep what still fits the ledger: every character costs at least one byte,
    // so reading a little more than the remaining budget is enough to find the fitting prefix.
    let remaining = caller
        .data()
        .ledger
        .max()
        .saturating_sub(caller.data().ledger.used());
    let want = (len as u64).min(remaining.saturating_add(8)) as u32;
    let bytes = read(caller, ptr, want, usize::MAX)?;
    Some(text_of(&bytes, want < len))
}

/// UTF-8 text of `bytes` (invalid sequences become U+FFFD). When the bytes were cut short, a
/// character split by the cut is dropped rather than turned into U+FFFD.
fn text_of(bytes: &[u8], cut: bool) -> String {
    let mut end = bytes.len();
    if cut {
        if let Err(error) = std::str::from_utf8(bytes) {
            if error.error_len().is_none() {
                end = error.valid_up_to();
            }
        }
    }
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

fn on_log(mut caller: Caller<'_, RunState>, ptr: u32, len: u32) -> wasmtime::Result<()> {
    if caller.data().outcome.is_some() {
        return Ok(());
    }
    let ledger = &caller.data().ledger;
    let copied = (len as u64).min(ledger.max().saturating_sub(ledger.used()).saturating_add(8));
    charge(&mut caller, copied as usize, COPY_FUEL_PER_BYTE)?;
    let Some(text) = log_entry_from(&caller, ptr, len) else {
        return Ok(());
    };
    admit_log(caller.data_mut(), &text).map_err(wasmtime::Error::new)
}

fn on_call(mut caller: Caller<'_, RunState>, id: u32, ptr: u32, len: u32) -> wasmtime::Result<u32> {
    let state = caller.data();
    if state.outcome.is_some() {
        return Ok(CALL_IGNORED);
    }
    if state.calls_made() >= MAX_CALLS_PER_RUN {
        let failure = RunFailure::new(
            FailureKind::Exception,
            format!("the program made more than {MAX_CALLS_PER_RUN} tool calls in one run"),
        )
        .with_cause(FailureCause::Calls);
        caller.data_mut().settle(Outcome::Failure(failure));
        return Err(wasmtime::Error::new(Stop::Settled));
    }
    if state.in_flight_count() >= MAX_IN_FLIGHT {
        return Ok(CALL_IGNORED);
    }
    // Ids must increase: a reused (or older) id is a duplicate and is ignored. An id is spent by
    // its first use, even when that use is malformed.
    if !caller.data_mut().claim_call_id(id) {
        return Ok(CALL_IGNORED);
    }
    if len as usize > MAX_CALL_FRAME || !in_bounds(&caller, ptr, len) {
        return Ok(CALL_IGNORED);
    }
    // Reading and parsing the frame is work done for the program: paid for before it is done.
    charge(
        &mut caller,
        len as usize,
        COPY_FUEL_PER_BYTE + PARSE_FUEL_PER_BYTE,
    )?;
    // The frame is read where it lies, not copied: the host then holds only the values the
    // arguments become, which the in-flight budget counts.
    let Some((frame, state)) = frame_and_state(&mut caller, ptr, len) else {
        return Ok(CALL_IGNORED);
    };
    let Some(call) = wire::decode_call(frame) else {
        return Ok(CALL_IGNORED);
    };
    if call.global.len() > MAX_NAME_BYTES || call.name.len() > MAX_NAME_BYTES {
        return Ok(CALL_IGNORED);
    }
    // Past a cap the run ends here, as the program made the call: what ran is its record.
    if let Some(message) = state.call_cap_reached(call.name) {
        let failure =
            RunFailure::new(FailureKind::Exception, message).with_cause(FailureCause::Calls);
        state.settle(Outcome::Failure(failure));
        return Err(wasmtime::Error::new(Stop::Settled));
    }
    let too_much = "too much argument data in flight: wait for earlier calls before starting more";
    let Some(binding) = state.binding(call.global, call.name) else {
        let message = format!(
            "unknown binding \"{}.{}\"",
            crate::store::record_name(call.global),
            crate::store::record_name(call.name)
        );
        state.reject_now(id, call.global, call.name, &message);
        return Ok(CALL_ACCEPTED);
    };
    // Arguments are held as values until the call ends: the in-flight budget counts the heap
    // blocks they take (buffers as allocated, growth included), and parsing stops before the
    // next block would pass it.
    match json::parse_within(call.args_json, state.argument_room()) {
        Ok((args, heap)) => state.start_call(id, call.global, call.name, binding, args, heap),
        Err(json::JsonError::TooLarge(_)) => {
            state.reject_now(id, call.global, call.name, too_much);
        }
        Err(_) => state.reject_now(
            id,
            call.global,
            call.name,
            "binding arguments must be lossless JSON",
        ),
    }
    Ok(CALL_ACCEPTED)
}

fn on_timer_start(mut caller: Caller<'_, RunState>, id: u32, delay_ms: f64) -> u32 {
    let state = caller.data_mut();
    if state.outcome.is_some() || state.timer_count() >= MAX_TIMERS {
        return TIMER_REFUSED;
    }
    let delay = if delay_ms.is_finite() && delay_ms > 0.0 {
        Duration::from_secs_f64(delay_ms.min(crate::config::MAX_WALL_MS as f64) / 1000.0)
    } else {
        Duration::ZERO
    };
    state.arm_timer(id, Instant::now() + delay);
    TIMER_ARMED
}

fn on_timer_cancel(mut caller: Caller<'_, RunState>, id: u32) {
    caller.data_mut().cancel_timer(id);
}

fn on_boot_len(caller: Caller<'_, RunState>) -> u32 {
    caller.data().boot.len() as u32
}

/// Copies the front of one host-side buffer (`pick`) into guest memory at `ptr`; returns the
/// bytes copied, 0 when out of bounds.
fn copy_out(
    caller: &mut Caller<'_, RunState>,
    ptr: u32,
    len: u32,
    pick: fn(&mut RunState) -> &mut Vec<u8>,
) -> u32 {
    let buffer = std::mem::take(pick(caller.data_mut()));
    let n = buffer.len().min(len as usize);
    let copied = if write(caller, ptr, &buffer[..n]) {
        n as u32
    } else {
        0
    };
    *pick(caller.data_mut()) = buffer;
    copied
}

fn on_boot_read(mut caller: Caller<'_, RunState>, ptr: u32, len: u32) -> u32 {
    copy_out(&mut caller, ptr, len, |state| &mut state.boot)
}

fn on_reply_read(mut caller: Caller<'_, RunState>, ptr: u32, len: u32) -> u32 {
    copy_out(&mut caller, ptr, len, |state| &mut state.delivery)
}

/// What a completion that is not lossless JSON fails with.
const INVALID_OUTPUT: &str = "program completion must be lossless JSON";

fn on_done(mut caller: Caller<'_, RunState>, ptr: u32, len: u32) -> wasmtime::Result<()> {
    if caller.data().outcome.is_some() {
        return Ok(());
    }
    let max = caller.data().ledger.max();
    // A value or message longer than the whole cap cannot fit; do not copy it to find out. An
    // out-of-bounds frame is dropped like any other malformed frame.
    let cap = usize::try_from(max.saturating_add(64)).unwrap_or(usize::MAX);
    if len as usize > cap {
        if in_bounds(&caller, ptr, len) {
            caller.data_mut().settle_overflow();
        }
        return Ok(());
    }
    if !in_bounds(&caller, ptr, len) {
        return Ok(());
    }
    charge(
        &mut caller,
        len as usize,
        COPY_FUEL_PER_BYTE + PARSE_FUEL_PER_BYTE,
    )?;
    // Read where it lies, like a call frame: the completion's budget is for its value alone.
    let Some((bytes, state)) = frame_and_state(&mut caller, ptr, len) else {
        return Ok(());
    };
    let Some(frame) = wire::decode_done(bytes) else {
        return Ok(());
    };
    let memory_cap = state.memory_cap();
    let invalid = |reason: &str| {
        // The guest may say why (the Python guest names the part JSON cannot carry); the
        // kind and the first words are the host's.
        let message = match reason {
            "" | INVALID_OUTPUT => INVALID_OUTPUT.to_owned(),
            reason => format!("{INVALID_OUTPUT}: {reason}"),
        };
        Outcome::Failure(RunFailure::new(FailureKind::InvalidOutput, message))
    };
    let outcome = match frame {
        Done::Undefined => Outcome::Value(None),
        // The value is held until the run returns: the heap blocks it takes (counted as
        // allocated, growth included) may be no more than the sandbox itself was allowed.
        Done::Value(text) => match json::parse_within(text, memory_cap) {
            Ok((value, _)) if state.ledger.value_fits(&value) => Outcome::Value(Some(value)),
            Ok((value, _)) => {
                json::drop_deep(value);
                state.settle_overflow();
                return Ok(());
            }
            Err(json::JsonError::TooLarge(_)) => Outcome::Failure(
                RunFailure::new(
                    FailureKind::WorkerExit,
                    format!(
                        "memory limit exceeded: the program's result would take more than {} MiB of host memory",
                        memory_cap / (1024 * 1024)
                    ),
                )
                .with_cause(codemode_runtime::code::FailureCause::Memory),
            ),
            Err(_) => invalid(""),
        },
        Done::Failure {
            kind,
            line,
            column,
            message,
        } => match kind {
            DoneKind::Exception => {
                Outcome::Failure(RunFailure::new(FailureKind::Exception, message).at(line, column))
            }
            DoneKind::InvalidOutput => invalid(&message),
            DoneKind::OutputLimit => {
                state.settle_overflow();
                return Ok(());
            }
        },
    };
    state.settle(outcome);
    Ok(())
}

fn on_output_limit(mut caller: Caller<'_, RunState>) {
    caller.data_mut().settle_overflow();
}

// ---- WASI preview 1: the handful of functions the guest links, over an empty world ----------

fn wasi_fd_write(
    mut caller: Caller<'_, RunState>,
    fd: i32,
    iovs: u32,
    iovs_len: u32,
    nwritten: u32,
) -> wasmtime::Result<i32> {
    if fd != 1 && fd != 2 {
        return Ok(ERRNO_BADF);
    }
    if iovs_len > 1024 {
        return Ok(ERRNO_INVAL);
    }
    let Some(table) = read(&caller, iovs, iovs_len.saturating_mul(8), usize::MAX) else {
        return Ok(ERRNO_FAULT);
    };
    let entries: Vec<(u32, u32)> = table
        .chunks_exact(8)
        .map(|e| {
            (
                u32::from_le_bytes([e[0], e[1], e[2], e[3]]),
                u32::from_le_bytes([e[4], e[5], e[6], e[7]]),
            )
        })
        .collect();
    // Every buffer is checked before any is copied, and only what can still fit the ledger
    // is copied (and paid for).
    if entries
        .iter()
        .any(|&(ptr, len)| !in_bounds(&caller, ptr, len))
    {
        return Ok(ERRNO_FAULT);
    }
    let ledger = &caller.data().ledger;
    let limit = ledger.max().saturating_sub(ledger.used()).saturating_add(8);
    let mut plan = Vec::with_capacity(entries.len());
    let (mut planned, mut total, mut cut) = (0u64, 0u32, false);
    for &(ptr, len) in &entries {
        total = total.saturating_add(len);
        let want = (len as u64).min(limit.saturating_sub(planned)) as u32;
        cut |= want < len;
        planned += want as u64;
        plan.push((ptr, want));
    }
    charge(&mut caller, planned as usize, COPY_FUEL_PER_BYTE)?;
    let mut chunk = Vec::with_capacity(planned as usize);
    for (ptr, want) in plan {
        let Some(bytes) = read(&caller, ptr, want, usize::MAX) else {
            return Ok(ERRNO_FAULT);
        };
        chunk.extend_from_slice(&bytes);
    }
    if !write(&mut caller, nwritten, &total.to_le_bytes()) {
        return Ok(ERRNO_FAULT);
    }
    if chunk.is_empty() || caller.data().outcome.is_some() {
        return Ok(ERRNO_SUCCESS);
    }
    let text = text_of(&chunk, cut);
    admit_log(caller.data_mut(), &text).map_err(wasmtime::Error::new)?;
    Ok(ERRNO_SUCCESS)
}

fn wasi_environ_sizes_get(mut caller: Caller<'_, RunState>, count: u32, size: u32) -> i32 {
    if write(&mut caller, count, &0u32.to_le_bytes())
        && write(&mut caller, size, &0u32.to_le_bytes())
    {
        ERRNO_SUCCESS
    } else {
        ERRNO_FAULT
    }
}

fn wasi_environ_get(_caller: Caller<'_, RunState>, _environ: u32, _buf: u32) -> i32 {
    ERRNO_SUCCESS
}

fn wasi_clock_time_get(
    mut caller: Caller<'_, RunState>,
    id: i32,
    _precision: i64,
    out: u32,
) -> i32 {
    let nanos: u64 = match id {
        // Pre-initialisation sees a stopped clock, so the image is the same on every machine.
        _ if caller.data().preinitializing => 0,
        0 => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
        1..=3 => caller.data().started.elapsed().as_nanos() as u64,
        _ => return ERRNO_INVAL,
    };
    if write(&mut caller, out, &nanos.to_le_bytes()) {
        ERRNO_SUCCESS
    } else {
        ERRNO_FAULT
    }
}

fn wasi_random_get(mut caller: Caller<'_, RunState>, buf: u32, len: u32) -> wasmtime::Result<i32> {
    if len > 1024 * 1024 {
        return Ok(ERRNO_INVAL);
    }
    if !in_bounds(&caller, buf, len) {
        return Ok(ERRNO_FAULT);
    }
    charge(&mut caller, len as usize, RANDOM_FUEL_PER_BYTE)?;
    let bytes = caller.data_mut().random_bytes(len as usize);
    Ok(if write(&mut caller, buf, &bytes) {
        ERRNO_SUCCESS
    } else {
        ERRNO_FAULT
    })
}

fn wasi_poll_oneoff(_caller: Caller<'_, RunState>, _a: u32, _b: u32, _c: u32, _d: u32) -> i32 {
    // A sandbox has nothing to poll; blocking waits go through the host's event loop instead.
    ERRNO_NOSYS
}

fn wasi_sched_yield(_caller: Caller<'_, RunState>) -> i32 {
    ERRNO_SUCCESS
}

fn wasi_proc_exit(_caller: Caller<'_, RunState>, code: i32) -> wasmtime::Result<()> {
    Err(wasmtime::Error::new(Stop::Exit(code)))
}

/// A linker with every guest import defined.
pub fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<RunState>> {
    let mut linker = Linker::new(engine);
    define(&mut linker)?;
    Ok(linker)
}

// Every import but the meter's is synchronous (`func_wrap`): `run::alongside_calls` resumes a
// pending guest call in place, which is right only while a guest call can be pending at
// nothing but a yield of the meter (or of an epoch deadline, on the engines that measure it).
fn define(linker: &mut Linker<RunState>) -> wasmtime::Result<()> {
    const M: &str = "codemode";
    let (module, name) = codemode_rewrite::meter::EXHAUSTED_IMPORT;
    linker.func_wrap_async(module, name, |caller, (): ()| {
        Box::new(crate::meter::on_exhausted(caller))
    })?;
    linker.func_wrap(M, "boot_len", on_boot_len)?;
    linker.func_wrap(M, "boot_read", on_boot_read)?;
    linker.func_wrap(M, "reply_read", on_reply_read)?;
    linker.func_wrap(M, "log", on_log)?;
    linker.func_wrap(M, "call", on_call)?;
    linker.func_wrap(M, "timer_start", on_timer_start)?;
    linker.func_wrap(M, "timer_cancel", on_timer_cancel)?;
    linker.func_wrap(M, "done", on_done)?;
    linker.func_wrap(M, "output_limit", on_output_limit)?;
    const W: &str = "wasi_snapshot_preview1";
    linker.func_wrap(W, "fd_write", wasi_fd_write)?;
    linker.func_wrap(W, "environ_sizes_get", wasi_environ_sizes_get)?;
    linker.func_wrap(W, "environ_get", wasi_environ_get)?;
    linker.func_wrap(W, "clock_time_get", wasi_clock_time_get)?;
    linker.func_wrap(W, "random_get", wasi_random_get)?;
    linker.func_wrap(W, "poll_oneoff", wasi_poll_oneoff)?;
    linker.func_wrap(W, "sched_yield", wasi_sched_yield)?;
    linker.func_wrap(W, "proc_exit", wasi_proc_exit)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::text_of;

    #[test]
    fn a_character_split_by_a_cut_is_dropped_not_replaced() {
        let euro = "a€".as_bytes();
        assert_eq!(text_of(&euro[..2], true), "a");
        assert_eq!(text_of(&euro[..2], false), "a\u{FFFD}");
        assert_eq!(text_of(b"ok\xff!", true), "ok\u{FFFD}!");
    }
}
