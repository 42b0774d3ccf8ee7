//! A paused guest's linear memory, kept as the pages that differ from the pre-initialised
//! image every instance starts from.
//!
//! The runs are `[first page: u32][page count: u32][bytes]…`, little-endian, in ascending
//! order; memory beyond the image's end is compared with zeros (a grown memory starts
//! zeroed). The whole is compressed with zstd.

use sha2::{Digest, Sha256};

/// Diff granularity: the host's page size, so a record holds about what the run dirtied.
pub const PAGE: usize = 4096;

static ZEROS: [u8; PAGE] = [0; PAGE];

/// The memory a fresh instance of the guest starts with, and its digest (which names the
/// build a record can be applied to).
pub struct Image {
    /// The memory's bytes.
    pub bytes: Vec<u8>,
    /// Their SHA-256, in hex.
    pub digest: String,
}

impl Image {
    /// The image of `bytes`, with its digest.
    pub fn new(bytes: Vec<u8>) -> Self {
        let digest = hex(&Sha256::digest(&bytes));
        Self { bytes, digest }
    }
}

/// The bytes `text` spells as lowercase or uppercase hex, two digits each; `None` for anything
/// else.
pub fn unhex(text: &[u8]) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// `bytes` in lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Whether `memory[start..end]` (at most a page) holds what a fresh instance has there.
fn pristine(image: &[u8], memory: &[u8], start: usize, end: usize) -> bool {
    let image_end = image.len().clamp(start, end);
    memory[start..image_end] == *image.get(start..image_end).unwrap_or(&[])
        && memory[image_end..end] == ZEROS[..end - image_end]
}

/// The pages of `memory` that differ from `image`, as runs.
pub fn diff(image: &[u8], memory: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let pages = memory.len().div_ceil(PAGE);
    let bounds = |i: usize| (i * PAGE, ((i + 1) * PAGE).min(memory.len()));
    let mut index = 0;
    while index < pages {
        let (start, end) = bounds(index);
        if pristine(image, memory, start, end) {
            index += 1;
            continue;
        }
        let first = index;
        index += 1;
        while index < pages {
            let (start, end) = bounds(index);
            if pristine(image, memory, start, end) {
                break;
            }
            index += 1;
        }
        let (start, end) = (first * PAGE, (index * PAGE).min(memory.len()));
        out.extend_from_slice(&(first as u32).to_le_bytes());
        out.extend_from_slice(&((index - first) as u32).to_le_bytes());
        out.extend_from_slice(&memory[start..end]);
    }
    out
}

/// Writes `runs` (from [`diff`]) over `memory`, which already holds the image and has the
/// paused run's size. Refuses runs that do not fit it.
pub fn apply(runs: &[u8], memory: &mut [u8]) -> Result<(), String> {
    let mut at = 0;
    let word = |at: usize| -> Option<usize> {
        let bytes: [u8; 4] = runs.get(at..at + 4)?.try_into().ok()?;
        Some(u32::from_le_bytes(bytes) as usize)
    };
    while at < runs.len() {
        let (Some(first), Some(count)) = (word(at), word(at + 4)) else {
            return Err("a memory run is cut short".into());
        };
        at += 8;
        let start = first
            .checked_mul(PAGE)
            .filter(|s| *s < memory.len())
            .ok_or("a memory run starts beyond the memory")?;
        let end = first
            .checked_add(count)
            .and_then(|e| e.checked_mul(PAGE))
            .ok_or("a memory run is too long")?
            .min(memory.len());
        let len = end - start;
        let bytes = runs.get(at..at + len).ok_or("a memory run is cut short")?;
        memory[start..end].copy_from_slice(bytes);
        at += len;
    }
    Ok(())
}

/// zstd at a level that keeps pausing fast (a 10 MB heap compresses in milliseconds).
const LEVEL: i32 = 3;

/// The page runs compressed as a record keeps them.
pub fn compress(runs: &[u8]) -> Result<Vec<u8>, String> {
    zstd::bulk::compress(runs, LEVEL).map_err(|e| format!("compressing the memory: {e}"))
}

/// Decompresses at most `cap` bytes: a record never holds more than the memory budget.
pub fn decompress(blob: &[u8], cap: usize) -> Result<Vec<u8>, String> {
    zstd::bulk::decompress(blob, cap).map_err(|e| format!("decompressing the memory: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changed_pages_travel_and_they_come_back_exactly() {
        let image: Vec<u8> = (0..PAGE * 10 + 100).map(|i| (i % 251) as u8).collect();
        let mut memory = image.clone();
        memory.resize(PAGE * 14, 0);
        memory[PAGE * 2 + 7] ^= 1;
        memory[PAGE * 3] ^= 1;
        memory[PAGE * 10 + 50] ^= 1; // the image's partial last page
        memory[PAGE * 10 + 200] = 9; // past the image's end, within its last page
        memory[PAGE * 13 + 1] = 5; // grown memory
        let runs = diff(&image, &memory);
        assert_eq!(runs.len(), 3 * 8 + 4 * PAGE, "three runs, four pages");
        let mut restored = image.clone();
        restored.resize(memory.len(), 0);
        apply(&runs, &mut restored).unwrap();
        assert_eq!(restored, memory);
        let packed = compress(&runs).unwrap();
        assert_eq!(decompress(&packed, runs.len()).unwrap(), runs);
        assert!(decompress(&packed, runs.len() - 1).is_err());
        assert!(diff(&image, &image).is_empty());
        assert!(apply(&runs[..runs.len() - 1], &mut restored).is_err());
        let mut far = runs.clone();
        far[..4].copy_from_slice(&1000u32.to_le_bytes());
        assert!(apply(&far, &mut restored).is_err());
    }
}
