//! A unified line diff (LCS), for `calibrate -o diff`: small inputs (manifests), so the
//! quadratic table is fine and no crate is needed.

/// One line of an edit script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op<'a> {
    Same(&'a str),
    Del(&'a str),
    Add(&'a str),
}

/// The edit script from `a` to `b` by longest common subsequence.
fn script<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Op<'a>> {
    let (n, m) = (a.len(), b.len());
    // lcs[i][j]: length of the LCS of a[i..] and b[j..].
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(n.max(m));
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(Op::Same(a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            // Deletions before insertions, as diff(1) prints a changed line.
            out.push(Op::Del(a[i]));
            i += 1;
        } else {
            out.push(Op::Add(b[j]));
            j += 1;
        }
    }
    out
}

/// A unified diff of `old` and `new` with `context` lines around each change, headed
/// `--- old_name` / `+++ new_name`; empty when they are equal.
pub fn unified(old: &str, new: &str, old_name: &str, new_name: &str, context: usize) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = script(&a, &b);
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| !matches!(o, Op::Same(_)))
        .map(|(i, _)| i)
        .collect();
    if changed.is_empty() {
        return String::new();
    }
    // Group changes whose context overlaps into hunks of op indices [start, end).
    let mut hunks: Vec<(usize, usize)> = Vec::new();
    for &c in &changed {
        let start = c.saturating_sub(context);
        let end = (c + context + 1).min(ops.len());
        match hunks.last_mut() {
            Some(h) if start <= h.1 => h.1 = end,
            _ => hunks.push((start, end)),
        }
    }
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    // Line numbers (1-based) in old and new at each op index.
    let (mut la, mut lb) = (1usize, 1usize);
    let mut pos = Vec::with_capacity(ops.len());
    for o in &ops {
        pos.push((la, lb));
        match o {
            Op::Same(_) => {
                la += 1;
                lb += 1;
            }
            Op::Del(_) => la += 1,
            Op::Add(_) => lb += 1,
        }
    }
    for (start, end) in hunks {
        let slice = &ops[start..end];
        let old_len = slice.iter().filter(|o| !matches!(o, Op::Add(_))).count();
        let new_len = slice.iter().filter(|o| !matches!(o, Op::Del(_))).count();
        let (sa, sb) = pos[start];
        // An empty side is numbered by the line before it, as diff(1) does.
        let sa = if old_len == 0 { sa - 1 } else { sa };
        let sb = if new_len == 0 { sb - 1 } else { sb };
        out.push_str(&format!("@@ -{sa},{old_len} +{sb},{new_len} @@\n"));
        for o in slice {
            let (mark, text) = match o {
                Op::Same(t) => (' ', t),
                Op::Del(t) => ('-', t),
                Op::Add(t) => ('+', t),
            };
            out.push(mark);
            out.push_str(text);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_give_no_diff() {
        assert_eq!(unified("a\nb\n", "a\nb\n", "x", "y", 3), "");
    }

    #[test]
    fn one_changed_line_with_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n";
        assert_eq!(
            unified(old, new, "a", "b", 2),
            "--- a\n+++ b\n@@ -3,5 +3,5 @@\n 3\n 4\n-5\n+five\n 6\n 7\n"
        );
    }

    #[test]
    fn insertion_and_separate_hunks() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\ni\n";
        let new = "a\nX\nb\nc\nd\ne\nf\ng\nh\n";
        let d = unified(old, new, "a", "b", 1);
        assert_eq!(
            d,
            "--- a\n+++ b\n@@ -1,2 +1,3 @@\n a\n+X\n b\n@@ -8,2 +9,1 @@\n h\n-i\n"
        );
    }

    #[test]
    fn pure_insertion_into_empty() {
        assert_eq!(
            unified("", "x\n", "a", "b", 3),
            "--- a\n+++ b\n@@ -0,0 +1,1 @@\n+x\n"
        );
    }
}
