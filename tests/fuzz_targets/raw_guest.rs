//! Target `raw_guest`: a wasm guest whose every import call (which import, pointers, lengths,
//! frame bytes, ordering, calls after `done`) is chosen by the fuzz input.
//!
//! The input becomes a WAT module: `cm_run` runs the first block of operations and
//! `cm_deliver` the next one each time it is called. Before its block, `cm_deliver` reads the
//! delivery and checks it against what the host accepted, logging a marker the target looks
//! for when a reply arrives twice or for a call the host never accepted.

use std::fmt::Write;

use arbitrary::{Result, Unstructured};
use codemode_host::WasmCodeRuntime;
use codemode_wire::{Call, Done, DoneKind};

use super::{fuzz_budgets, Checked};

/// Guest memory: the fuzz input's raw bytes, the prepared frames, the reply buffer, the books.
const RAW: u32 = 0;
const RAW_LEN: usize = 0x1000;
const PREPARED: u32 = 0x1000;
const REPLY: u32 = 0x8000;
const REPLY_LEN: u32 = 0x8000;
const ACCEPTED: u32 = 0x10000;
const REPLIED: u32 = 0x10080;
/// Where a marker is written for the moment it is logged, then erased: no operation can ever
/// find one in memory and log it itself.
const MARK_AT: u32 = 0x10100;
/// Ids the books track; calls use ids below it, floods above it.
const TRACKED_IDS: u32 = 1024;

/// The markers carry a control byte: the host writes every control character in JSON escaped, so
/// no reply (an echoed argument, say) can put one in guest memory, and the raw bytes are
/// cleaned of it.
const DUPLICATE_MARKER: &str = "FUZZ\u{1}DUPLICATE-REPLY";
const UNEXPECTED_MARKER: &str = "FUZZ\u{1}UNEXPECTED-REPLY";
/// The end of the books (bitmaps and the marker's scratch): no operation may write below it
/// and above [`ACCEPTED`].
const BOOKS_END: u32 = MARK_AT + 64;

/// Frames worth reaching quickly: well-formed calls of every kind the host sorts, and
/// malformed ones the fuzzer would take long to find.
fn prepared_frames() -> Vec<Vec<u8>> {
    let call = |global: &str, name: &str, args: &str| {
        Call {
            global,
            name,
            args_json: args.as_bytes(),
        }
        .encode()
    };
    let long_name = "n".repeat(5_000);
    let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
    let done = |d: Done<'_>| d.encode();
    vec![
        call("tools", "echo", "[1]"),
        call("tools", "echo", r#"[{"a":[1,2,{"b":"x\u0000"}],"c":-0}]"#),
        call("tools", "sleep", "[true]"),
        call("tools", "fail", "[]"),
        call("tools", "nope", "[]"),
        call("other", "echo", r#"["\ud800"]"#),
        call("tools", "echo", "[1e400]"),
        call("tools", "echo", "[123456789012345678901234567890]"),
        call("tools", "echo", "[{\"a\":1,\"a\":2}]"),
        call("tools", "echo", "["),
        call("tools", "echo", &deep),
        call("tools", &long_name, "[]"),
        call("tools", "__proto__", "[]"),
        done(Done::Undefined),
        done(Done::Value(br#"{"r":[1,"x"]}"#)),
        done(Done::Value(b"{")),
        done(Done::Value(b"1e999")),
        done(Done::Failure {
            kind: DoneKind::Exception,
            line: 3,
            column: 7,
            message: "Error: boom".into(),
        }),
        done(Done::Failure {
            kind: DoneKind::InvalidOutput,
            line: 0,
            column: 0,
            message: "".into(),
        }),
        done(Done::Failure {
            kind: DoneKind::OutputLimit,
            line: 0,
            column: 0,
            message: "".into(),
        }),
        vec![9, 9, 9],
    ]
}

/// A byte range of guest memory an operation passes to an import.
#[derive(Debug, Clone, Copy)]
struct Range {
    ptr: u32,
    len: u32,
}

#[derive(Debug)]
enum Op {
    Call {
        id: u32,
        frame: Range,
    },
    /// `count` calls with consecutive ids from `first`, all with one frame.
    Flood {
        first: u32,
        count: u32,
        frame: Range,
    },
    Log(Range),
    Done(Range),
    TimerStart {
        id: u32,
        delay: f64,
    },
    TimerCancel(u32),
    ReplyRead(Range),
    BootLen,
    BootRead(Range),
    OutputLimit,
    FdWrite {
        fd: u32,
        iovs: Range,
        count: u32,
    },
    RandomGet(Range),
    ClockTimeGet {
        out: u32,
    },
    ProcExit(u32),
    Grow(u32),
    Spin(u32),
    Trap,
    Return(u32),
}

fn range(u: &mut Unstructured<'_>, prepared: &[(u32, u32)], raw_len: u32) -> Result<Range> {
    Ok(match u.int_in_range(0..=9u8)? {
        0..=5 => {
            let (ptr, len) = prepared[u.choose_index(prepared.len())?];
            Range { ptr, len }
        }
        6..=7 if raw_len > 0 => {
            let start = u.int_in_range(0..=raw_len - 1)?;
            let len = u.int_in_range(0..=raw_len - start)?;
            Range {
                ptr: RAW + start,
                len,
            }
        }
        _ => Range {
            ptr: u.arbitrary()?,
            len: u.arbitrary()?,
        },
    })
}

/// `r` moved clear of the books, for an operation that writes guest memory: a write there would
/// forge the books' own record of what the host did.
fn writable(r: Range) -> Range {
    let end = r.ptr.saturating_add(r.len);
    if end <= ACCEPTED || r.ptr >= BOOKS_END {
        r
    } else if r.ptr < ACCEPTED {
        Range {
            ptr: r.ptr,
            len: ACCEPTED - r.ptr,
        }
    } else {
        Range {
            ptr: BOOKS_END,
            len: r.len,
        }
    }
}

fn op(u: &mut Unstructured<'_>, prepared: &[(u32, u32)], raw_len: u32) -> Result<Op> {
    let r = |u: &mut Unstructured<'_>| range(u, prepared, raw_len);
    Ok(match u.int_in_range(0..=19u8)? {
        0..=4 => Op::Call {
            id: u.int_in_range(0..=TRACKED_IDS - 1)?,
            frame: r(u)?,
        },
        5 => Op::Flood {
            first: TRACKED_IDS + u.int_in_range(0..=1_000_000)?,
            count: u.int_in_range(1..=5_000)?,
            frame: r(u)?,
        },
        6 => Op::Log(r(u)?),
        7 => Op::Done(r(u)?),
        8 => Op::TimerStart {
            id: u.arbitrary()?,
            delay: *u.choose(&[0.0, 1.0, 5.0, -1.0, f64::NAN, f64::INFINITY, 1e300])?,
        },
        9 => Op::TimerCancel(u.arbitrary()?),
        10 => Op::ReplyRead(writable(r(u)?)),
        11 => Op::BootLen,
        12 => Op::BootRead(writable(r(u)?)),
        13 => Op::OutputLimit,
        14 => Op::FdWrite {
            fd: u.int_in_range(0..=3)?,
            iovs: r(u)?,
            count: u.int_in_range(0..=4)?,
        },
        15 => Op::RandomGet(r(u)?),
        16 => Op::ClockTimeGet {
            out: u.arbitrary()?,
        },
        17 => match u.int_in_range(0..=3u8)? {
            0 => Op::ProcExit(u.arbitrary()?),
            1 => Op::Grow(u.int_in_range(0..=2_000)?),
            2 => Op::Trap,
            _ => Op::Spin(u.int_in_range(0..=50_000_000)?),
        },
        _ => Op::Return(u.int_in_range(0..=2)?),
    })
}

fn data_segment(out: &mut String, offset: u32, bytes: &[u8]) {
    let _ = write!(out, "  (data (i32.const {offset}) \"");
    for b in bytes {
        let _ = write!(out, "\\{b:02x}");
    }
    out.push_str("\")\n");
}

fn emit(out: &mut String, op: &Op) {
    let _ = match *op {
        Op::Call { id, frame } => writeln!(
            out,
            "    (if (i32.eqz (call $call (i32.const {id}) (i32.const {}) (i32.const {})))
      (then (call $set (i32.const {ACCEPTED}) (i32.const {id}))))",
            frame.ptr as i32, frame.len as i32
        ),
        Op::Flood {
            first,
            count,
            frame,
        } => writeln!(
            out,
            "    (local.set $i (i32.const 0))
    (block $out (loop $again
      (br_if $out (i32.ge_u (local.get $i) (i32.const {count})))
      (drop (call $call (i32.add (i32.const {first}) (local.get $i)) (i32.const {}) (i32.const {})))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $again)))",
            frame.ptr as i32, frame.len as i32
        ),
        Op::Log(r) => writeln!(
            out,
            "    (call $log (i32.const {}) (i32.const {}))",
            r.ptr as i32, r.len as i32
        ),
        Op::Done(r) => writeln!(
            out,
            "    (call $done (i32.const {}) (i32.const {}))",
            r.ptr as i32, r.len as i32
        ),
        Op::TimerStart { id, delay } => writeln!(
            out,
            "    (drop (call $timer_start (i32.const {}) (f64.const {})))",
            id as i32,
            wat_f64(delay)
        ),
        Op::TimerCancel(id) => writeln!(out, "    (call $timer_cancel (i32.const {}))", id as i32),
        Op::ReplyRead(r) => writeln!(
            out,
            "    (drop (call $reply_read (i32.const {}) (i32.const {})))",
            r.ptr as i32, r.len as i32
        ),
        Op::BootLen => writeln!(out, "    (drop (call $boot_len))"),
        Op::BootRead(r) => writeln!(
            out,
            "    (drop (call $boot_read (i32.const {}) (i32.const {})))",
            r.ptr as i32, r.len as i32
        ),
        Op::OutputLimit => writeln!(out, "    (call $output_limit)"),
        Op::FdWrite { fd, iovs, count } => writeln!(
            out,
            "    (drop (call $fd_write (i32.const {fd}) (i32.const {}) (i32.const {count}) (i32.const {})))",
            iovs.ptr as i32, REPLY as i32
        ),
        Op::RandomGet(r) => writeln!(
            out,
            "    (drop (call $random_get (i32.const {}) (i32.const {})))",
            r.ptr as i32, r.len as i32
        ),
        Op::ClockTimeGet { out: at } => writeln!(
            out,
            "    (drop (call $clock_time_get (i32.const 0) (i64.const 1) (i32.const {})))",
            at as i32
        ),
        Op::ProcExit(code) => writeln!(out, "    (call $proc_exit (i32.const {}))", code as i32),
        Op::Grow(pages) => writeln!(out, "    (drop (memory.grow (i32.const {pages})))"),
        Op::Spin(n) => writeln!(
            out,
            "    (local.set $i (i32.const 0))
    (block $out (loop $again
      (br_if $out (i32.ge_u (local.get $i) (i32.const {n})))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $again)))"
        ),
        Op::Trap => writeln!(out, "    unreachable"),
        Op::Return(status) => writeln!(out, "    (return (i32.const {status}))"),
    };
}

fn wat_f64(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        format!("{v:?}")
    }
}

/// The guest module the input describes, as WAT.
pub fn guest_wat(data: &[u8]) -> Result<String> {
    let mut u = Unstructured::new(data);
    let raw_len = u.int_in_range(0..=RAW_LEN.min(u.len()))?;
    let mut raw = u.bytes(raw_len)?.to_vec();
    // Only the books may log a marker.
    for b in raw.iter_mut().filter(|b| **b == 1) {
        *b = 2;
    }
    let frames = prepared_frames();
    let mut prepared = Vec::new();
    let mut at = PREPARED;
    for f in &frames {
        prepared.push((at, f.len() as u32));
        at += f.len() as u32;
    }
    let blocks: Vec<Vec<Op>> = (0..u.int_in_range(1..=4)?)
        .map(|_| {
            (0..u.int_in_range(0..=12)?)
                .map(|_| op(&mut u, &prepared, raw.len() as u32))
                .collect()
        })
        .collect::<Result<_>>()?;
    let status_after = u.int_in_range(0..=1u32)?;

    let mut out = String::from(
        r#"(module
  (import "codemode" "boot_len" (func $boot_len (result i32)))
  (import "codemode" "boot_read" (func $boot_read (param i32 i32) (result i32)))
  (import "codemode" "reply_read" (func $reply_read (param i32 i32) (result i32)))
  (import "codemode" "log" (func $log (param i32 i32)))
  (import "codemode" "call" (func $call (param i32 i32 i32) (result i32)))
  (import "codemode" "timer_start" (func $timer_start (param i32 f64) (result i32)))
  (import "codemode" "timer_cancel" (func $timer_cancel (param i32)))
  (import "codemode" "done" (func $done (param i32 i32)))
  (import "codemode" "output_limit" (func $output_limit))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock_time_get (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 3)
  (global $block (mut i32) (i32.const 1))
  (func $bit_addr (param $base i32) (param $id i32) (result i32)
    (i32.add (local.get $base) (i32.shr_u (local.get $id) (i32.const 3))))
  (func $bit_mask (param $id i32) (result i32)
    (i32.shl (i32.const 1) (i32.and (local.get $id) (i32.const 7))))
  (func $set (param $base i32) (param $id i32)
    (i32.store8 (call $bit_addr (local.get $base) (local.get $id))
      (i32.or (i32.load8_u (call $bit_addr (local.get $base) (local.get $id)))
              (call $bit_mask (local.get $id)))))
  (func $get (param $base i32) (param $id i32) (result i32)
    (i32.and (i32.load8_u (call $bit_addr (local.get $base) (local.get $id)))
             (call $bit_mask (local.get $id))))
"#,
    );
    data_segment(&mut out, RAW, &raw);
    let mut at = PREPARED;
    for f in &frames {
        data_segment(&mut out, at, f);
        at += f.len() as u32;
    }
    for (name, marker) in [
        ("$duplicate", DUPLICATE_MARKER),
        ("$unexpected", UNEXPECTED_MARKER),
    ] {
        let _ = writeln!(out, "  (func {name}");
        for (i, b) in marker.bytes().enumerate() {
            let _ = writeln!(
                out,
                "    (i32.store8 (i32.const {}) (i32.const {b}))",
                MARK_AT as usize + i
            );
        }
        let _ = writeln!(
            out,
            "    (call $log (i32.const {MARK_AT}) (i32.const {len}))
    (memory.fill (i32.const {MARK_AT}) (i32.const 0) (i32.const {len})))",
            len = marker.len()
        );
    }

    out.push_str("  (func $block0 (result i32) (local $i i32)\n");
    for o in &blocks[0] {
        emit(&mut out, o);
    }
    let _ = writeln!(out, "    (i32.const {status_after}))");
    for (n, block) in blocks.iter().enumerate().skip(1) {
        let _ = writeln!(out, "  (func $block{n} (result i32) (local $i i32)");
        for o in block {
            emit(&mut out, o);
        }
        let _ = writeln!(out, "    (i32.const {status_after}))");
    }
    out.push_str("  (func (export \"cm_run\") (result i32) (call $block0))\n");
    // cm_deliver: read and check the delivery, then run the next block (round robin).
    let _ = write!(
        out,
        r#"  (func (export "cm_deliver") (param $len i32) (result i32) (local $n i32) (local $id i32)
    (local.set $n (call $reply_read (i32.const {REPLY}) (select (local.get $len) (i32.const {REPLY_LEN}) (i32.lt_u (local.get $len) (i32.const {REPLY_LEN})))))
    (if (i32.and (i32.ge_u (local.get $n) (i32.const 5)) (i32.lt_u (i32.load8_u (i32.const {REPLY})) (i32.const 2)))
      (then
        (local.set $id (i32.load (i32.const {reply_id})))
        (if (i32.lt_u (local.get $id) (i32.const {TRACKED_IDS}))
          (then
            (if (i32.eqz (call $get (i32.const {ACCEPTED}) (local.get $id)))
              (then (call $unexpected)))
            (if (call $get (i32.const {REPLIED}) (local.get $id))
              (then (call $duplicate)))
            (call $set (i32.const {REPLIED}) (local.get $id))))))
"#,
        reply_id = REPLY + 1,
    );
    let count = blocks.len();
    if count == 1 {
        out.push_str("    (call $block0))\n");
    } else {
        out.push_str("    (global.set $block (i32.add (global.get $block) (i32.const 1)))\n");
        let _ = writeln!(
            out,
            "    (local.set $n (i32.rem_u (global.get $block) (i32.const {count})))"
        );
        for n in 0..count {
            let _ = writeln!(
                out,
                "    (if (i32.eq (local.get $n) (i32.const {n})) (then (return (call $block{n}))))"
            );
        }
        out.push_str("    (i32.const 0))\n");
    }
    out.push_str(")\n");
    Ok(out)
}

/// Runs the guest the input describes against the real host.
pub fn raw_guest(data: &[u8]) {
    let Ok(wat) = guest_wat(data) else {
        return;
    };
    let bytes = wat::parse_str(&wat).unwrap_or_else(|e| panic!("generated WAT: {e}\n{wat}"));
    let rt = WasmCodeRuntime::with_guest_module(&bytes, fuzz_budgets())
        .unwrap_or_else(|e| panic!("generated guest links: {e}"));
    let checked = Checked::new();
    let result = checked.run(&rt, "return 1");
    for marker in [DUPLICATE_MARKER, UNEXPECTED_MARKER] {
        assert!(
            !result.logs.iter().any(|l| l.contains(marker)),
            "{marker}: {result:?}"
        );
    }
}
