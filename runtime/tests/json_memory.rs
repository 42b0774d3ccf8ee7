//! The JSON parser's count of the host memory it holds (`json::parse_within`,
//! `json::heap_bytes`) checked against what the allocator really hands out: the blocks a parsed
//! value holds never exceed its count, and the allocator's peak during a parse never exceeds the
//! limit the parse was given. Blocks are sized as glibc's malloc sizes them (8-byte header,
//! 16-byte steps, 32-byte minimum, large blocks mapped by the page).
//!
//! This test binary (and only it) runs over a counting allocator, which counts the allocations
//! of the thread that asked for it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use codemode_runtime::json;

struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

/// What glibc's malloc takes for a request of `size` bytes.
fn chunk(size: usize) -> usize {
    if size >= 128 * 1024 {
        (size + 16).div_ceil(4096) * 4096
    } else {
        ((size + 8).div_ceil(16) * 16).max(32)
    }
}

fn counting() -> bool {
    ON.try_with(Cell::get).unwrap_or(false)
}

fn grow(size: usize) {
    let _ = LIVE.try_with(|live| {
        live.set(live.get() + chunk(size));
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
    });
}

fn shrink(size: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(chunk(size))));
}

// SAFETY: every method forwards to `System` with the caller's own arguments, unchanged; the
// counting around it touches only const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counting() {
            grow(layout.size());
        }
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if counting() {
            shrink(layout.size());
        }
        // SAFETY: forwarded unchanged (see the impl).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A moving reallocation holds both blocks until the copy is done.
        if counting() {
            grow(new_size);
        }
        // SAFETY: forwarded unchanged (see the impl).
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if counting() {
            shrink(layout.size());
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Parses `text` within `max`, returning the count, what the value's blocks take and the
/// allocator's peak during the parse.
fn measured(text: &[u8], max: usize) -> Option<(usize, usize, usize, serde_json::Value)> {
    LIVE.with(|l| l.set(0));
    PEAK.with(|p| p.set(0));
    ON.with(|on| on.set(true));
    let parsed = json::parse_within(text, max);
    ON.with(|on| on.set(false));
    let held = LIVE.with(Cell::get);
    let peak = PEAK.with(Cell::get);
    parsed.ok().map(|(value, used)| (used, held, peak, value))
}

fn check(name: &str, text: &str) {
    check_with_slack(name, text, 0);
}

/// The working stack of `json::drop_deep` for a value `depth` deep, which a parse does not
/// count: it frees a value a duplicate key replaced, or what a refused parse had built. It is
/// as deep as that value, so bounded by the nesting limit, never by the text's size (a stack of
/// iterators of about 40 bytes each, both buffers counted while it grows).
fn drop_stack(depth: usize) -> usize {
    if depth < 2 {
        return 0;
    }
    let entries = depth.next_power_of_two();
    chunk(entries * 48) + chunk(entries / 2 * 48)
}

/// [`check`], letting the allocator's peak pass the limit by `slack` bytes.
fn check_with_slack(name: &str, text: &str, slack: usize) {
    let text = text.as_bytes();
    let (used, held, _, value) = measured(text, usize::MAX).expect("parses");
    assert!(
        held <= used,
        "{name}: the value holds {held} bytes, counted {used}"
    );
    // The count is close to what is held, except that entries replaced by a duplicate key
    // stay counted.
    let duplicates = name.contains("duplicate");
    assert!(
        duplicates || used <= 2 * held.max(64),
        "{name}: counted {used} for {held} bytes held"
    );
    // Equal but for duplicate keys, whose replaced entries the count keeps.
    assert!(
        json::heap_bytes(&value) <= used,
        "{name}: heap_bytes within the count"
    );
    json::drop_deep(value);
    // The smallest limit the parse fits in: the allocator never went past it.
    let (mut low, mut high) = (used, used.saturating_mul(4).max(4096));
    assert!(measured(text, high).is_some(), "{name}: fits {high}");
    while low < high {
        let mid = low + (high - low) / 2;
        if measured(text, mid).is_some() {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    let (_, _, peak, value) = measured(text, low).expect("fits its smallest limit");
    assert!(
        peak <= low + slack,
        "{name}: the allocator peaked at {peak} bytes within a limit of {low}"
    );
    json::drop_deep(value);
    if low == 0 {
        // Nothing was allocated (a scalar): there is no smaller limit to refuse.
        return;
    }
    // One byte less is refused before the allocator gets there.
    let before = measured(text, low - 1);
    assert!(before.is_none(), "{name}: refused below its limit");
    assert!(
        PEAK.with(Cell::get) < low + slack,
        "{name}: a refused parse stays below its limit"
    );
}

#[test]
fn counted_memory_bounds_what_the_allocator_hands_out() {
    let small_objects = format!(
        "[{}]",
        (0..20_000)
            .map(|i| format!("{{\"a\":{}}}", i % 10))
            .collect::<Vec<_>>()
            .join(",")
    );
    check("small objects", &small_objects);
    let numbers = format!("[{}0]", "7,".repeat(100_000));
    check("numbers", &numbers);
    let wide = format!(
        "{{{}}}",
        (0..5_000)
            .map(|i| format!("\"key{i}\":[{i},\"v\"]"))
            .collect::<Vec<_>>()
            .join(",")
    );
    check("wide object", &wide);
    for n in [1, 3, 4, 7, 8, 14, 15, 16, 28, 29, 100] {
        let object = format!(
            "[{}]",
            (0..50)
                .map(|_| format!(
                    "{{{}}}",
                    (0..n)
                        .map(|i| format!("\"k{i}\":null"))
                        .collect::<Vec<_>>()
                        .join(",")
                ))
                .collect::<Vec<_>>()
                .join(",")
        );
        check(&format!("objects of {n} keys"), &object);
    }
    check(
        "strings and escapes",
        r#"["", "plain", "a\nb\tc", "\u00e9\u4e2d\ud83d\ude00", "\ud800 lone", "x\\\"y"]"#,
    );
    check_with_slack(
        "duplicate keys",
        r#"{"a":[{"b":[1]},2,3],"b":{},"a":{"c":"d"}}"#,
        drop_stack(3),
    );
    let deep = format!("{}1{}", "[".repeat(4_000), "]".repeat(4_000));
    check_with_slack("deep arrays", &deep, drop_stack(4_000));
    let deep_objects = format!("{}1{}", "{\"k\":".repeat(3_000), "}".repeat(3_000));
    check_with_slack("deep objects", &deep_objects, drop_stack(3_000));
    check("a long string", &format!("\"{}\"", "x".repeat(1 << 20)));
    check("a scalar", "12.5");
}
