//! The record a paused run is written down as: versioned, self-describing, authenticated.
//!
//! ```text
//! "CMPAUSE\0" | format: u32 | header length: u32 | header (JSON) | memory length: u64 |
//! memory (zstd of the page runs) | HMAC-SHA256 of everything before it (32 bytes)
//! ```
//!
//! Integers are little-endian. A record over [`MAX_RECORD_BYTES`] is refused from its size,
//! unread. The tag is checked before anything else is read, so a record changed by anyone
//! without the key is refused before any of it is used; an authentic header is then held to
//! the caps of a new run ([`Header::check_bounds`]), since only a holder of the key could have
//! written one outside them.

use std::collections::BTreeSet;

use codemode_runtime::code::{BindingRef, CallRecord};
use codemode_runtime::ledger::Ledger;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use codemode_runtime::budgets::MAX_MEMORY_BYTES as MAX_MEMORY;

const MAGIC: &[u8; 8] = b"CMPAUSE\0";
/// Bumped whenever the layout or the header's meaning changes (2: fuel counted by the guest's
/// meter, in its units).
pub const FORMAT: u32 = 2;
const TAG: usize = 32;
/// Magic, format, header length; then the memory's length.
const FRAMING: u64 = 8 + 4 + 4 + 8;

/// The most bytes a record's header (the host's side of the run, as JSON) may take. A run whose
/// header would be larger (logs, pending arguments and call records near their budgets) is not
/// kept: its pause fails.
pub const MAX_HEADER_BYTES: u64 = 1 << 30;

/// The most bytes a record may take, about 5.1 GiB: a header of at most [`MAX_HEADER_BYTES`]
/// and every page of the largest memory a run may have (4 GiB), incompressible. The page runs
/// add 8 bytes per run of pages (at most one per two pages) and zstd at most 1/256 to data it
/// cannot compress, so a 64th more covers both. A store refuses a larger record from its size,
/// before reading it; a pause never writes one.
pub const MAX_RECORD_BYTES: u64 =
    FRAMING + MAX_HEADER_BYTES + MAX_MEMORY + MAX_MEMORY / 64 + TAG as u64;

/// Everything about a paused run except its memory.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// The run's id: the name it is kept and resumed under.
    pub run_id: String,
    /// SHA-256 of the guest module the run was paused by.
    pub guest: String,
    /// SHA-256 of the pre-initialised memory the page runs are relative to.
    pub image: String,
    /// Unix time of the pause, in milliseconds (for people and for expiry policies).
    pub paused_at_ms: u64,
    /// The TypeScript the model wrote, for positions in later failures.
    pub program: String,
    /// The budgets the run was started with.
    pub budgets: SavedBudgets,
    /// Fuel burned before the pause (all segments so far).
    pub fuel_spent: u64,
    /// Wall-clock time the run ran before the pause (time paused excluded), in nanoseconds.
    pub wall_spent_ns: u64,
    /// Linear memory size at the pause.
    pub memory_bytes: u64,
    /// The guest's exported mutable globals.
    pub globals: Vec<SavedGlobal>,
    /// The host's side of the run.
    pub host: HostState,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
/// A run's budgets as a record keeps them (`Budgets`, in the record's own names).
pub struct SavedBudgets {
    /// Compute budget, in milliseconds of fuel.
    pub compute_ms: u64,
    /// Wall-clock budget, in milliseconds.
    pub wall_ms: u64,
    /// Output budget, in ledger bytes.
    pub max_output_bytes: u64,
    /// Memory budget, in MiB.
    pub memory_mb: u64,
}

impl From<&codemode_runtime::budgets::Budgets> for SavedBudgets {
    fn from(b: &codemode_runtime::budgets::Budgets) -> Self {
        Self {
            compute_ms: b.compute_ms,
            wall_ms: b.wall_ms,
            max_output_bytes: b.max_output_bytes,
            memory_mb: b.memory_mb,
        }
    }
}

impl From<&SavedBudgets> for codemode_runtime::budgets::Budgets {
    fn from(b: &SavedBudgets) -> Self {
        Self {
            compute_ms: b.compute_ms,
            wall_ms: b.wall_ms,
            max_output_bytes: b.max_output_bytes,
            memory_mb: b.memory_mb,
        }
    }
}

/// An exported mutable global (see `globals.rs`) and its value's bits.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedGlobal {
    /// The global's export name.
    pub name: String,
    /// Its value.
    pub value: GlobalValue,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
/// A global's value, by its wasm type (floats as their bits, so they round-trip exactly).
pub enum GlobalValue {
    /// An `i32`.
    I32(i32),
    /// An `i64`.
    I64(i64),
    /// An `f32`'s bits.
    F32(u32),
    /// An `f64`'s bits.
    F64(u64),
}

/// The host's side of the run at the pause.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostState {
    /// The id the next call will get.
    pub next_call_id: u64,
    /// The `calls` record so far.
    pub calls: Vec<CallRecord>,
    /// The pausing calls the run waits on, in call order.
    pub pending: Vec<SavedCall>,
    /// The timers still to fire.
    pub timers: Vec<SavedTimer>,
    /// What the run's output has cost so far.
    pub ledger: Ledger,
    /// The log lines so far.
    pub logs: Vec<String>,
    /// The bindings whose calls pause the run.
    pub pause_on: BTreeSet<BindingRef>,
    /// The bindings whose calls wait for an approval.
    #[serde(default)]
    pub approve_on: BTreeSet<BindingRef>,
    /// Approval bindings an answer allowed for the rest of the run: their calls run at once.
    #[serde(default)]
    pub approved: BTreeSet<BindingRef>,
    /// Bindings an answer declined for the rest of the run: their calls fail at once.
    #[serde(default)]
    pub declined: BTreeSet<BindingRef>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
/// A pausing call the run waits on.
pub struct SavedCall {
    /// The call's id, as the guest named it.
    pub id: u32,
    /// Where the call's record is in `calls`.
    pub slot: usize,
    /// What its arguments cost the run's held memory.
    pub argument_bytes: usize,
    /// The namespace the binding is in.
    pub global: String,
    /// The binding's name.
    pub name: String,
    /// The arguments as lossless JSON text (kept as text: they may nest deeper than a
    /// recursive parser allows).
    pub arguments: String,
    /// Waits for an approval rather than a result.
    #[serde(default)]
    pub approval: bool,
    /// Was made, and waits for a person's answers to its questions to be made again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<SavedInput>,
}

/// The questions of a call that needs a person's input, and its tool's state for the call
/// made again; lossless JSON text, like the arguments.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedInput {
    /// The questions by key (MCP form elicitations).
    pub questions: String,
    /// The tool's state, opaque here.
    pub state: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
/// A timer the run had set.
pub struct SavedTimer {
    /// The timer's id, as the guest named it.
    pub id: u32,
    /// Time left when the run paused; it starts counting again at the resume.
    pub remaining_ns: u64,
}

/// The MAC a record and the state's other documents are authenticated with.
pub type HmacSha256 = Hmac<Sha256>;

/// A MAC keyed with `key`.
pub fn mac(key: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length, so this cannot fail.
    <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC accepts keys of any length")
}

/// The record of `header` and the memory's compressed page runs, tagged with `key`.
pub fn encode(header: &Header, memory: &[u8], key: &[u8]) -> Result<Vec<u8>, String> {
    let header = serde_json::to_vec(header).map_err(|e| format!("writing the record: {e}"))?;
    if header.len() as u64 > MAX_HEADER_BYTES {
        return Err(format!(
            "the run's host state (logs, pending calls, call records) takes {} bytes, more than the {MAX_HEADER_BYTES} a paused-run record may hold",
            header.len()
        ));
    }
    let total = FRAMING + header.len() as u64 + memory.len() as u64 + TAG as u64;
    if total > MAX_RECORD_BYTES {
        return Err(format!(
            "the paused run would take {total} bytes, more than the {MAX_RECORD_BYTES} a paused-run record may hold"
        ));
    }
    let header_len =
        u32::try_from(header.len()).map_err(|_| "the run's host state is too large to keep")?;
    let mut out = Vec::with_capacity(8 + 4 + 4 + header.len() + 8 + memory.len() + TAG);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.extend_from_slice(&header_len.to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&(memory.len() as u64).to_le_bytes());
    out.extend_from_slice(memory);
    let mut mac = mac(key);
    mac.update(&out);
    out.extend_from_slice(&mac.finalize().into_bytes());
    Ok(out)
}

/// Why a record cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not a paused-run record at all.
    NotARecord,
    /// Larger than any record codemode writes (its size).
    TooLarge(u64),
    /// Its tag does not verify: written with another key, or changed.
    NotAuthentic,
    /// Written in a format this build does not read.
    Format(u32),
    /// Authentic but unreadable (what was wrong).
    Malformed(String),
    /// Authentic, but holding a value no codemode writes: forged with the key.
    OutOfBounds(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotARecord => f.write_str("it is not a paused-run record"),
            Refusal::TooLarge(bytes) => write!(
                f,
                "it is {bytes} bytes, more than the {MAX_RECORD_BYTES} a paused-run record may hold"
            ),
            Refusal::NotAuthentic => f.write_str(
                "it is not authentic: it was changed after it was written, or written with another state key",
            ),
            Refusal::Format(v) => write!(
                f,
                "it is in record format {v}, and this codemode reads format {FORMAT}; resume it with the codemode that paused it"
            ),
            Refusal::Malformed(why) => write!(f, "it is malformed ({why})"),
            Refusal::OutOfBounds(why) => write!(
                f,
                "it is not authentic: {why}, which codemode never writes; whoever wrote it holds the state key (check who can read the key and write the state store)"
            ),
        }
    }
}

/// The header and the compressed memory of an authentic record.
pub fn decode<'a>(record: &'a [u8], key: &[u8]) -> Result<(Header, &'a [u8]), Refusal> {
    if record.len() as u64 > MAX_RECORD_BYTES {
        return Err(Refusal::TooLarge(record.len() as u64));
    }
    if record.len() < MAGIC.len() + 16 + TAG || &record[..MAGIC.len()] != MAGIC {
        return Err(Refusal::NotARecord);
    }
    let (body, tag) = record.split_at(record.len() - TAG);
    let mut mac = mac(key);
    mac.update(body);
    mac.verify_slice(tag).map_err(|_| Refusal::NotAuthentic)?;
    let word = |at: usize| -> u32 {
        let bytes: [u8; 4] = body[at..at + 4].try_into().unwrap_or_default();
        u32::from_le_bytes(bytes)
    };
    let format = word(8);
    if format != FORMAT {
        return Err(Refusal::Format(format));
    }
    let header_len = word(12) as usize;
    if header_len as u64 > MAX_HEADER_BYTES {
        return Err(Refusal::Malformed("header length".into()));
    }
    let header_end = 16usize
        .checked_add(header_len)
        .filter(|end| end + 8 <= body.len())
        .ok_or_else(|| Refusal::Malformed("header length".into()))?;
    let header: Header = serde_json::from_slice(&body[16..header_end])
        .map_err(|e| Refusal::Malformed(format!("header: {e}")))?;
    let memory_len: [u8; 8] = body[header_end..header_end + 8]
        .try_into()
        .unwrap_or_default();
    let memory = &body[header_end + 8..];
    if u64::from_le_bytes(memory_len) != memory.len() as u64 {
        return Err(Refusal::Malformed("memory length".into()));
    }
    Ok((header, memory))
}

/// What names a record among every record of its run id: its tag, in hex. A claim keeps it
/// with the run's consumed mark.
pub fn identity(record: &[u8]) -> String {
    super::memory::hex(&record[record.len().saturating_sub(TAG)..])
}

impl Header {
    /// Refuses an authentic header holding what no codemode writes: budgets outside the caps
    /// every new run is held to ([`Budgets::validate`](codemode_runtime::budgets::Budgets::validate)),
    /// a memory larger than its budget or not in whole wasm pages, a timer beyond the longest
    /// delay. Checked before anything of the record is restored or used.
    pub fn check_bounds(&self) -> Result<(), Refusal> {
        let budgets = codemode_runtime::budgets::Budgets::from(&self.budgets);
        budgets.validate().map_err(|e| {
            Refusal::OutOfBounds(format!(
                "its budget {} {} (a run's budgets are held to the same caps as a new run's)",
                e.key, e.problem
            ))
        })?;
        let wasm_page = 1u64 << 16;
        if self.memory_bytes > budgets.memory_bytes() as u64
            || !self.memory_bytes.is_multiple_of(wasm_page)
        {
            return Err(Refusal::OutOfBounds(format!(
                "its memory of {} bytes does not fit its budget of {} MiB in whole wasm pages",
                self.memory_bytes, budgets.memory_mb
            )));
        }
        let longest_ns = codemode_runtime::budgets::MAX_WALL_MS.saturating_mul(1_000_000);
        if let Some(timer) = self
            .host
            .timers
            .iter()
            .find(|t| t.remaining_ns > longest_ns)
        {
            return Err(Refusal::OutOfBounds(format!(
                "its timer {} is due in {} ns, beyond the longest delay ({} ms)",
                timer.id,
                timer.remaining_ns,
                codemode_runtime::budgets::MAX_WALL_MS
            )));
        }
        Ok(())
    }
}
