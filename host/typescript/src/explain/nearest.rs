//! The known names closest to a misspelled one.

/// Up to `most` of `names` within a small edit distance of `wanted` (case-insensitive
/// Damerau–Levenshtein, at most a third of the longer name, at least 2), closest first, ties in
/// the names' order. A name that contains the wanted one (or the other way round) counts as
/// close too: `search` for `searchDocs`.
pub(crate) fn nearest<'a>(wanted: &str, names: &'a [String], most: usize) -> Vec<&'a str> {
    // The table below is quadratic in the names' lengths; no tool name is this long.
    if wanted.len() > MAX_COMPARED_BYTES {
        return Vec::new();
    }
    let wanted_lower = wanted.to_lowercase();
    let mut scored: Vec<(usize, usize, &str)> = names
        .iter()
        .enumerate()
        .filter(|(_, name)| name.len() <= MAX_COMPARED_BYTES)
        .filter_map(|(i, name)| {
            let lower = name.to_lowercase();
            let (a, b) = (wanted.chars().count(), name.chars().count());
            let limit = (a.max(b) / 3).max(2);
            let contains = wanted_lower.len() >= 3
                && lower.len() >= 3
                && (lower.contains(&wanted_lower) || wanted_lower.contains(&lower));
            // The distance is at least the difference in length: skip the table when that
            // alone rules the name out.
            if a.abs_diff(b) > limit && !contains {
                return None;
            }
            let distance = distance(&wanted_lower, &lower);
            (distance <= limit || contains).then_some((distance, i, name.as_str()))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(most).map(|(_, _, n)| n).collect()
}

/// Longest name compared, in bytes.
const MAX_COMPARED_BYTES: usize = 256;

/// Optimal string alignment distance: insertions, deletions, substitutions and adjacent
/// transpositions each cost one.
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn misspellings_find_their_names() {
        let known = names(&["search", "read_file", "list_dir", "searchDocs", "echo"]);
        assert_eq!(nearest("serach", &known, 3), vec!["search"]);
        assert_eq!(nearest("Search", &known, 3), vec!["search", "searchDocs"]);
        assert_eq!(nearest("readFile", &known, 3), vec!["read_file"]);
        assert_eq!(nearest("ehco", &known, 3), vec!["echo"]);
        assert!(nearest("frobnicate", &known, 3).is_empty());
        assert!(nearest(&"a".repeat(1 << 20), &known, 3).is_empty());
    }

    #[test]
    fn distance_counts_transpositions_once() {
        assert_eq!(distance("ab", "ba"), 1);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
    }
}
