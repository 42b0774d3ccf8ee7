//! The fuzz targets (`tests/fuzz_targets/`) on stable Rust: every input of their seed corpora
//! and of the crashes found so far (`fixtures/fuzz/<target>/`), then inputs drawn from a fixed
//! seed, so that CI checks the same properties as `cargo fuzz` on every change.

use std::path::PathBuf;

use codemode_e2e::fuzz_targets;

/// SplitMix64: a fixed seed gives the same inputs on every machine.
struct Inputs(u64);

impl Inputs {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn bytes(&mut self, max_len: usize) -> Vec<u8> {
        let len = (self.next_u64() as usize) % (max_len + 1);
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}

fn fixtures(dir: &str) -> PathBuf {
    codemode_e2e::manifest_dir().join("../fixtures").join(dir)
}

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut seeds = seeds_in(&fixtures("fuzz").join(target));
    if target == "strip_differential" {
        // Every erasure case, as a program to compare (an even first byte: the rest is the
        // program).
        seeds.extend(
            seeds_in(&fixtures("strip"))
                .into_iter()
                .map(|(path, text)| {
                    let mut input = vec![0];
                    input.extend(text);
                    (path, input)
                }),
        );
    }
    if target == "strip" {
        // Every program the other suites run is a seed for the stripper too.
        seeds.extend(seeds_in(&fixtures("programs")));
        seeds.extend(seeds_in(&fixtures("hostile/programs")));
    }
    seeds
}

fn seeds_in(dir: &std::path::Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} has no seeds", dir.display());
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).expect("a readable seed");
            (p, bytes)
        })
        .collect()
}

fn replay(target: &str, check: fn(&[u8]), generated: usize, max_len: usize, seed: u64) {
    for (path, bytes) in corpus(target) {
        eprintln!("{target}: {}", path.display());
        check(&bytes);
    }
    let mut inputs = Inputs(seed);
    for _ in 0..generated {
        check(&inputs.bytes(max_len));
    }
}

#[test]
fn frames() {
    replay("frames", fuzz_targets::frames, 50_000, 256, 1);
}

/// Pieces of TypeScript, so that generated inputs reach the stripper's type erasure rather than
/// stopping at the first byte of noise.
const TOKENS: &[&str] = &[
    "const ",
    "let ",
    "x",
    "y",
    ": ",
    "number",
    "string",
    "<T>",
    "<T,>",
    " as ",
    " satisfies ",
    "!",
    "?",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "<",
    ">",
    "=>",
    " = ",
    ";",
    "\n",
    ",",
    "interface I ",
    "type A = ",
    "enum E ",
    "declare ",
    "abstract ",
    "class C ",
    "private ",
    "readonly ",
    "a: ",
    "return ",
    "await ",
    "tools.x(",
    "'s'",
    "`t${",
    "/re/g",
    "// c\n",
    "/* c */",
    "1",
    "function f",
    "implements ",
    "extends ",
    "keyof ",
    "typeof ",
    "|",
    "&",
    "...",
    "@d ",
    "namespace N ",
    "import ",
    "export ",
    "😀",
    "\r\n",
    "\u{2028}",
];

#[test]
fn strip() {
    replay("strip", fuzz_targets::strip, 1_000, 512, 2);
    let mut inputs = Inputs(20);
    for _ in 0..3_000 {
        let count = inputs.next_u64() % 40;
        let text: String = (0..count)
            .map(|_| TOKENS[(inputs.next_u64() as usize) % TOKENS.len()])
            .collect();
        fuzz_targets::strip(text.as_bytes());
    }
}

#[test]
fn strip_differential() {
    // On a big stack: swc's stripper parses on the calling thread.
    std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(|| {
            replay(
                "strip_differential",
                fuzz_targets::strip_differential,
                500,
                256,
                7,
            );
            // Programs of 1 to 40 pieces (an odd first byte).
            let mut inputs = Inputs(70);
            for _ in 0..3_000 {
                let mut input = vec![1];
                input.extend(inputs.bytes(40));
                fuzz_targets::strip_differential(&input);
            }
        })
        .expect("a thread for the comparison")
        .join()
        .expect("the eraser writes what swc's stripper writes");
}

#[test]
fn raw_guest() {
    replay("raw_guest", fuzz_targets::raw_guest, 300, 2_048, 3);
}

#[test]
fn rewrite() {
    replay("rewrite", fuzz_targets::rewrite, 5_000, 4_096, 5);
}

#[test]
fn programs() {
    replay("programs", fuzz_targets::programs, 400, 512, 4);
}

#[test]
fn python_programs() {
    replay(
        "python_programs",
        fuzz_targets::python_programs,
        400,
        512,
        6,
    );
}
