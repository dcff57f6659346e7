//! Elastic tabstops with the rules kubectl's output goes through, so `probelet get` and
//! `describe` line up exactly as kubectl's do.
//!
//! Text is cells separated by `\t`; the text after a line's last tab is not a cell and is never
//! padded. A column's width is decided per *block*: the run of consecutive lines that have a
//! cell in that column. A width is the block's widest cell plus the padding, at least the
//! minimum width. With `remember_widths` (kubectl's `get`, for `-w`) widths only ever grow from
//! one flush to the next, so streamed rows stay aligned with the header.

/// A buffer of lines laid out on [`TabWriter::flush`].
#[derive(Debug, Clone)]
pub struct TabWriter {
    min_width: usize,
    padding: usize,
    remember_widths: bool,
    /// The widest each column has been, across flushes (only with `remember_widths`).
    max_widths: Vec<usize>,
    /// Complete lines, split at tabs.
    lines: Vec<Vec<String>>,
    /// Text written after the last newline.
    partial: String,
}

impl TabWriter {
    /// kubectl's `get` tables: minimum width 6, padding 3, widths remembered.
    pub fn for_tables() -> Self {
        Self::new(6, 3, true)
    }

    /// kubectl's `describe`: minimum width 0, padding 2.
    pub fn for_describe() -> Self {
        Self::new(0, 2, false)
    }

    fn new(min_width: usize, padding: usize, remember_widths: bool) -> Self {
        TabWriter {
            min_width,
            padding,
            remember_widths,
            max_widths: Vec::new(),
            lines: Vec::new(),
            partial: String::new(),
        }
    }

    /// Adds text; lines end at `\n`.
    pub fn write(&mut self, text: &str) {
        self.partial.push_str(text);
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            let line = &line[..line.len() - 1];
            self.lines
                .push(line.split('\t').map(str::to_string).collect());
        }
    }

    /// Lays out every buffered line (and any unterminated text) and empties the buffer.
    pub fn flush(&mut self) -> String {
        let trailing = std::mem::take(&mut self.partial);
        let unterminated = !trailing.is_empty();
        if unterminated {
            self.lines
                .push(trailing.split('\t').map(str::to_string).collect());
        }
        let lines = std::mem::take(&mut self.lines);
        let mut out = String::new();
        let mut widths = Vec::new();
        self.format(&lines, 0, lines.len(), &mut widths, &mut out);
        if unterminated && out.ends_with('\n') {
            out.pop();
        }
        out
    }

    /// Lays out `lines[start..end]`, whose columns left of `widths.len()` are decided.
    fn format(
        &mut self,
        lines: &[Vec<String>],
        start: usize,
        end: usize,
        widths: &mut Vec<usize>,
        out: &mut String,
    ) {
        let column = widths.len();
        let mut printed = start;
        let mut this = start;
        while this < end {
            // A line has a cell in `column` when a tab ends it (the last piece is not a cell).
            if column + 1 >= lines[this].len() {
                this += 1;
                continue;
            }
            write_lines(&lines[printed..this], widths, out);
            let block_start = this;
            let mut width = self.min_width;
            while this < end && column + 1 < lines[this].len() {
                width = width.max(cell_width(&lines[this][column]) + self.padding);
                this += 1;
            }
            if self.remember_widths {
                match self.max_widths.get_mut(column) {
                    Some(max) if *max > width => width = *max,
                    Some(max) => *max = width,
                    None => {
                        let known = self.max_widths.len().min(widths.len());
                        self.max_widths.extend_from_slice(&widths[known..]);
                        self.max_widths.push(width);
                    }
                }
            }
            widths.push(width);
            self.format(lines, block_start, this, widths, out);
            widths.pop();
            printed = this;
        }
        write_lines(&lines[printed..end], widths, out);
    }
}

fn write_lines(lines: &[Vec<String>], widths: &[usize], out: &mut String) {
    for line in lines {
        for (j, cell) in line.iter().enumerate() {
            out.push_str(cell);
            if let Some(w) = widths.get(j)
                && j + 1 < line.len()
            {
                let pad = w.saturating_sub(cell_width(cell));
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push('\n');
    }
}

/// Width in characters (not bytes), as terminals show most text.
fn cell_width(cell: &str) -> usize {
    cell.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_to_the_widest_cell_plus_three_with_a_minimum_of_six() {
        let mut w = TabWriter::for_tables();
        w.write("NAME\tREADY\tAGE\nlonger-name\t1/1\t5s\n");
        assert_eq!(
            w.flush(),
            "NAME          READY   AGE\nlonger-name   1/1     5s\n"
        );
        // Remembered widths: a later, narrower row keeps the header's alignment; a wider cell
        // widens its column from then on.
        w.write("a\t0/1\t7s\n");
        assert_eq!(w.flush(), "a             0/1     7s\n");
        w.write("b\t10/10/10\t7s\n");
        assert_eq!(w.flush(), "b             10/10/10   7s\n");
    }

    #[test]
    fn blocks_are_runs_of_lines_with_the_column() {
        let mut w = TabWriter::for_describe();
        w.write("Name:\tdemo\nAnnotations:\t<none>\nIPs:\n  IP:\t1.2.3.4\nConditions:\nType \tTrue \nLong-type \tFalse \n");
        assert_eq!(
            w.flush(),
            "Name:         demo\nAnnotations:  <none>\nIPs:\n  IP:  1.2.3.4\nConditions:\nType        True \nLong-type   False \n"
        );
    }

    #[test]
    fn nested_columns_align_within_their_own_blocks() {
        let mut w = TabWriter::for_describe();
        w.write("a\tb\tc\nlong\tx\nq\tlonger\tz\n");
        assert_eq!(w.flush(), "a     b  c\nlong  x\nq     longer  z\n");
    }
}
