//! The budget and limit tables of the docs, checked against the constants the code enforces:
//! GUIDE.md's "Budgets and limits" is the one table of defaults, ranges and fixed limits, and
//! SECURITY.md's "Budgets (per run)" repeats the defaults. A constant changed without its row,
//! or a row added, renamed or changed without the code, fails here.

use std::collections::BTreeMap;

use codemode_runtime::ledger::MIN_OUTPUT_BYTES;
use codemode_runtime::run_code::DEFAULT_MAX_PARALLEL_SUB_CALLS;

use crate::bridge::{
    COPY_FUEL_PER_BYTE, MAX_CALLS_PER_RUN, MAX_TIMERS, PARSE_FUEL_PER_BYTE, RANDOM_FUEL_PER_BYTE,
};
use crate::config::{
    DEFAULT_COMPUTE_MS, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MEMORY_MB, DEFAULT_WALL_MS, FUEL_PER_MS,
    MAX_COMPUTE_MS, MAX_MEMORY_CAP_MB, MAX_MEMORY_MB, MAX_OUTPUT_BYTES, MAX_WALL_MS,
    MEMORY_CAP_MB_WHEN_UNKNOWN,
};
use crate::engine::MAX_CONCURRENT_RUNS;
use crate::store::{MAX_REJECTION_BYTES, RECORD_NAME_BYTES};
use crate::strip::{
    MAX_ANGLE_TRIES, MAX_LABEL_PAIRS, MAX_NESTED_TYPE_ARGUMENT_TRIES, MAX_NESTING,
    MAX_PROGRAM_BYTES, MAX_SPECULATIVE_ANGLES,
};

const MIB: u64 = 1024 * 1024;

/// What a row of GUIDE.md's tables must state: a flag's default (or a fixed limit's value) and,
/// for a flag, the lowest and highest value it accepts.
struct Documented {
    value: u64,
    accepted: Option<(u64, u64)>,
}

/// The guest's stack, which the build script links the guest with.
fn guest_stack_bytes() -> u64 {
    env!("CODEMODE_GUEST_STACK_BYTES")
        .parse()
        .expect("the build script's stack size")
}

fn doc(name: &str) -> String {
    let path = crate::manifest_dir().join("..").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text under `heading` (a whole line, `## …`) up to the next heading of that level.
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no `{heading}` heading"))
        + heading.len()
        + 2;
    let end = text[start..]
        .find("\n## ")
        .map_or(text.len(), |i| start + i);
    &text[start..end]
}

/// Every body row of every table in `text`, keyed by its first cell, as its cells.
fn rows(text: &str) -> BTreeMap<String, Vec<String>> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut rows = BTreeMap::new();
    for (i, line) in lines.iter().enumerate() {
        let separator = |l: &str| l.starts_with("|-") || l.starts_with("| -");
        let header = lines.get(i + 1).is_some_and(|next| separator(next));
        if !line.starts_with('|') || separator(line) || header {
            continue;
        }
        let cells: Vec<String> = line
            .trim_matches('|')
            .split('|')
            .map(|cell| cell.trim().to_owned())
            .collect();
        let key = cells[0].clone();
        assert!(
            rows.insert(key.clone(), cells).is_none(),
            "two rows for {key}"
        );
    }
    rows
}

/// The first quantity a cell states: digits with thousands commas, optionally `^exponent`,
/// optionally followed by a unit (`KiB`, `MiB`, `GiB`, `bytes`, `s`). Sizes are in bytes,
/// durations in ms; a bare number is what it is.
fn quantity(cell: &str) -> u64 {
    let from = cell
        .find(|c: char| c.is_ascii_digit())
        .unwrap_or_else(|| panic!("no number in `{cell}`"));
    let rest = &cell[from..];
    let digits_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ','))
        .unwrap_or(rest.len());
    let mut value: u64 = rest[..digits_end]
        .replace(',', "")
        .parse()
        .unwrap_or_else(|e| panic!("`{cell}`: {e}"));
    let mut rest = &rest[digits_end..];
    if let Some(exponent) = rest.strip_prefix('^') {
        let end = exponent
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(exponent.len());
        value = value.pow(exponent[..end].parse().expect("an exponent"));
        rest = &exponent[end..];
    }
    let unit = rest
        .trim_start()
        .split([' ', ',', ')'])
        .next()
        .unwrap_or("");
    let scale = match unit {
        "KiB" => 1024,
        "MiB" => MIB,
        "GiB" => 1024 * MIB,
        "s" => 1000,
        _ => 1,
    };
    value * scale
}

/// `A to B` as the two quantities.
fn range(cell: &str) -> (u64, u64) {
    let (low, high) = cell
        .split_once(" to ")
        .unwrap_or_else(|| panic!("`{cell}` is not `A to B`"));
    (quantity(low), quantity(high))
}

/// Checks that the rows are exactly the expected keys, and returns the mismatches found by
/// `check` for each.
fn compare<T>(
    rows: &BTreeMap<String, Vec<String>>,
    expected: &[(&str, T)],
    mut check: impl FnMut(&str, &[String], &T) -> Vec<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for key in rows.keys() {
        if !expected.iter().any(|(k, _)| k == key) {
            problems.push(format!("a row the test does not know: {key}"));
        }
    }
    for (key, want) in expected {
        match rows.get(*key) {
            None => problems.push(format!("no row for {key}")),
            Some(cells) => problems.extend(check(key, cells, want)),
        }
    }
    problems
}

#[test]
fn the_guide_s_budget_and_limit_tables_match_the_code() {
    let guide = doc("GUIDE.md");
    let rows = rows(section(&guide, "## Budgets and limits"));

    // Flags: default, lowest and highest accepted value. The lowest is 1 where the code refuses
    // zero (`Budgets::validate`, clap's ranges). `--max-memory-mb`'s default is half the
    // machine's memory; the number its cell states is the one used where that is unknown.
    let flags: [(&str, (u64, u64, u64)); 6] = [
        ("`--compute-ms`", (DEFAULT_COMPUTE_MS, 1, MAX_COMPUTE_MS)),
        ("`--wall-ms`", (DEFAULT_WALL_MS, 1, MAX_WALL_MS)),
        (
            "`--max-output-bytes`",
            (DEFAULT_MAX_OUTPUT_BYTES, MIN_OUTPUT_BYTES, MAX_OUTPUT_BYTES),
        ),
        ("`--memory-mb`", (DEFAULT_MEMORY_MB, 1, MAX_MEMORY_MB)),
        (
            "`--max-memory-mb`",
            (MEMORY_CAP_MB_WHEN_UNKNOWN, 1, MAX_MEMORY_CAP_MB),
        ),
        (
            "`--max-parallel`",
            (DEFAULT_MAX_PARALLEL_SUB_CALLS as u64, 1, u32::MAX as u64),
        ),
    ];
    // Fixed limits and rates: the quantity in the second column.
    let stack = guest_stack_bytes();
    let fixed: [(&str, u64); 18] = [
        ("fuel per ms of `--compute-ms`", FUEL_PER_MS),
        (
            "fuel a computing guest holds between visits to the host",
            crate::meter::SLICE,
        ),
        (
            "fuel per byte the host copies for the program",
            COPY_FUEL_PER_BYTE,
        ),
        ("fuel per byte of JSON the host parses", PARSE_FUEL_PER_BYTE),
        ("fuel per byte of randomness", RANDOM_FUEL_PER_BYTE),
        ("the guest's stack", stack),
        ("program text", MAX_PROGRAM_BYTES as u64),
        ("brackets nested in a program", MAX_NESTING as u64),
        (
            "pairs of a label inside a label of the same name",
            MAX_LABEL_PAIRS as u64,
        ),
        (
            "`<T>` assertions and generic arrows open at once",
            MAX_SPECULATIVE_ANGLES as u64,
        ),
        (
            "`<` open around nested brackets",
            MAX_NESTED_TYPE_ARGUMENT_TRIES as u64,
        ),
        (
            "both, nested, the latter counting two",
            MAX_ANGLE_TRIES as u64,
        ),
        ("tool calls in one run", MAX_CALLS_PER_RUN as u64),
        ("timers armed", MAX_TIMERS as u64),
        (
            "levels a value crossing the boundary nests",
            codemode_runtime::json::MAX_DEPTH as u64,
        ),
        (
            "a tool's error message, as the program gets it",
            MAX_REJECTION_BYTES as u64,
        ),
        ("a name in a call record", RECORD_NAME_BYTES as u64),
        ("runs alive at once per process", MAX_CONCURRENT_RUNS as u64),
    ];
    let mut expected: Vec<(&str, Documented)> = flags
        .iter()
        .map(|&(key, (value, low, high))| {
            let accepted = Some((low, high));
            (key, Documented { value, accepted })
        })
        .collect();
    expected.extend(fixed.iter().map(|&(key, value)| {
        let accepted = None;
        (key, Documented { value, accepted })
    }));

    let problems = compare(&rows, &expected, |key, cells, want| {
        let mut problems = Vec::new();
        let (value, stated) = (want.value, quantity(&cells[1]));
        if stated != value {
            problems.push(format!("{key}: the table says {stated}, the code {value}"));
        }
        if let Some((low, high)) = want.accepted {
            let stated = range(&cells[2]);
            if stated != (low, high) {
                problems.push(format!(
                    "{key}: the table accepts {} to {}, the code {low} to {high}",
                    stated.0, stated.1
                ));
            }
        }
        problems
    });
    assert!(
        problems.is_empty(),
        "GUIDE.md's budgets and limits disagree with the code:\n{}",
        problems.join("\n")
    );
}

#[test]
fn security_s_budget_defaults_match_the_code() {
    let security = doc("SECURITY.md");
    let rows = rows(section(&security, "## Budgets (per run)"));
    let stack = guest_stack_bytes();
    // Durations in ms, sizes in bytes.
    let expected: [(&str, u64); 5] = [
        ("compute", DEFAULT_COMPUTE_MS),
        ("wall clock", DEFAULT_WALL_MS),
        ("memory", DEFAULT_MEMORY_MB * MIB),
        ("output", DEFAULT_MAX_OUTPUT_BYTES),
        ("stack", stack),
    ];
    let problems = compare(&rows, &expected, |key, cells, value| {
        let stated = quantity(&cells[1]);
        if stated == *value {
            Vec::new()
        } else {
            vec![format!("{key}: the table says {stated}, the code {value}")]
        }
    });
    assert!(
        problems.is_empty(),
        "SECURITY.md's budget defaults disagree with the code:\n{}",
        problems.join("\n")
    );
}

#[test]
fn quantities_read_as_the_tables_write_them() {
    assert_eq!(quantity("67108864 (64 MiB)"), 67_108_864);
    assert_eq!(quantity("2,147,483,647"), 2_147_483_647);
    assert_eq!(quantity("2^53"), 1 << 53);
    assert_eq!(quantity("8 MiB guest stack"), 8 * MIB);
    assert_eq!(quantity("64 KiB"), 64 * 1024);
    assert_eq!(quantity("60 s"), 60_000);
    assert_eq!(quantity("128 bytes"), 128);
    assert_eq!(range("1 to 4,294,967,295"), (1, 4_294_967_295));
}
