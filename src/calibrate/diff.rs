//! A unified line diff, for `calibrate -o diff`. A calibrated manifest differs from its
//! source in a few lines, so the script is Myers' O((N+M)·D) shortest edit, after the common
//! head and tail are set aside: linear in the manifest's length for the few changes calibrate
//! makes. Memory is bounded by construction: past [`MAX_EDITS`] the differing middle is
//! written as removed then added (a correct diff, only not the shortest), so a 20,000-line
//! manifest never needs the n×m table of the textbook LCS (1.6 GB).

/// The most edits (removed plus added lines, between the common head and tail) searched for a
/// shortest script; the search keeps about `MAX_EDITS²` positions (8 MB at 1,000).
const MAX_EDITS: usize = 1_000;

/// One line of an edit script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op<'a> {
    Same(&'a str),
    Del(&'a str),
    Add(&'a str),
}

/// The edit script from `a` to `b`, deletions before insertions in each change, as diff(1)
/// prints a changed line.
fn script<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Op<'a>> {
    let head = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (mid_a, mid_b) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let mut out = Vec::with_capacity(a.len().max(b.len()) + mid_a.len().min(mid_b.len()));
    out.extend(a[..head].iter().map(|l| Op::Same(l)));
    match shortest_edit(mid_a, mid_b, MAX_EDITS) {
        Some(ops) => out.extend(ops),
        None => {
            out.extend(mid_a.iter().map(|l| Op::Del(l)));
            out.extend(mid_b.iter().map(|l| Op::Add(l)));
        }
    }
    out.extend(a[a.len() - tail..].iter().map(|l| Op::Same(l)));
    deletions_first(&mut out);
    out
}

/// Myers' greedy shortest edit script from `a` to `b`, or `None` when it needs more than
/// `max_edits` edits. `trace[d]` holds, for each diagonal k = x − y in −d..=d (index k + d),
/// the furthest x reached with d edits.
fn shortest_edit<'a>(a: &[&'a str], b: &[&'a str], max_edits: usize) -> Option<Vec<Op<'a>>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let max = max_edits.min(a.len() + b.len()) as isize;
    let mut trace: Vec<Vec<isize>> = Vec::new();
    for d in 0..=max {
        let mut v = vec![0isize; (2 * d + 1) as usize];
        for k in (-d..=d).step_by(2) {
            let mut x = match trace.last() {
                None => 0,
                Some(prev) => {
                    let at = |k: isize| prev[(k + d - 1) as usize];
                    if k == -d || (k != d && at(k - 1) < at(k + 1)) {
                        at(k + 1)
                    } else {
                        at(k - 1) + 1
                    }
                }
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[(k + d) as usize] = x;
            if x >= n && y >= m {
                trace.push(v);
                return Some(backtrack(&trace, a, b));
            }
        }
        trace.push(v);
    }
    None
}

/// The script that [`shortest_edit`]'s `trace` found, walked back from the end.
fn backtrack<'a>(trace: &[Vec<isize>], a: &[&'a str], b: &[&'a str]) -> Vec<Op<'a>> {
    let (mut x, mut y) = (a.len() as isize, b.len() as isize);
    let mut ops = Vec::with_capacity(a.len() + b.len());
    for d in (1..trace.len() as isize).rev() {
        let prev = &trace[(d - 1) as usize];
        let at = |k: isize| prev[(k + d - 1) as usize];
        let k = x - y;
        let prev_k = if k == -d || (k != d && at(k - 1) < at(k + 1)) {
            k + 1
        } else {
            k - 1
        };
        let prev_x = at(prev_k);
        let prev_y = prev_x - prev_k;
        while x > prev_x && y > prev_y {
            ops.push(Op::Same(a[(x - 1) as usize]));
            x -= 1;
            y -= 1;
        }
        if prev_k == k + 1 {
            ops.push(Op::Add(b[(y - 1) as usize]));
            y -= 1;
        } else {
            ops.push(Op::Del(a[(x - 1) as usize]));
            x -= 1;
        }
    }
    // d = 0: the common run from the start.
    while x > 0 {
        ops.push(Op::Same(a[(x - 1) as usize]));
        x -= 1;
    }
    ops.reverse();
    ops
}

/// Puts each run of changes in the order diff(1) prints it: its deletions, then its
/// insertions (the same edit).
fn deletions_first(ops: &mut [Op<'_>]) {
    for run in ops.split_mut(|o| matches!(o, Op::Same(_))) {
        run.sort_by_key(|o| matches!(o, Op::Add(_)));
    }
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

    /// A 20,000-line manifest with two changes far apart: linear work, and the hunks of
    /// those changes alone (the n×m table needed 1.6 GB here).
    #[test]
    fn i49_7_a_20k_line_manifest_diffs_in_linear_time() {
        let old: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        let new = old
            .replace("line 100\n", "line 100 changed\n")
            .replace("line 19900\n", "line 19900\nline inserted\n");
        let d = unified(&old, &new, "a", "b", 1);
        assert_eq!(
            d,
            "--- a\n+++ b\n@@ -100,3 +100,3 @@\n line 99\n-line 100\n+line 100 changed\n line 101\n\
             @@ -19901,2 +19901,3 @@\n line 19900\n+line inserted\n line 19901\n"
        );
    }

    /// Changes throughout the text (past [`MAX_EDITS`]) still give a correct diff: the
    /// differing middle removed then added.
    #[test]
    fn i49_7_past_the_edit_bound_the_middle_is_replaced() {
        let old: String = (0..1_200).map(|i| format!("{i}\n")).collect();
        let new: String = (0..1_200).map(|i| format!("{i}x\n")).collect();
        let d = unified(&old, &new, "a", "b", 0);
        assert!(
            d.starts_with("--- a\n+++ b\n@@ -1,1200 +1,1200 @@\n-0\n-1\n"),
            "{}",
            &d[..40]
        );
        assert_eq!(d.lines().filter(|l| l.starts_with('-')).count(), 1_201);
        assert_eq!(d.lines().filter(|l| l.starts_with('+')).count(), 1_201);
    }

    /// Myers finds the shortest script where one exists within the bound.
    #[test]
    fn i49_7_interleaved_changes_are_shortest() {
        let ops = script(
            &["a", "b", "c", "a", "b", "b", "a"],
            &["c", "b", "a", "b", "a", "c"],
        );
        let edits = ops.iter().filter(|o| !matches!(o, Op::Same(_))).count();
        assert_eq!(edits, 5);
    }
}
