//! A file's UTF-8 text with its line count and, once a read needs it, the table of where its
//! lines begin, kept with the text in the blob cache: a continuation read deep into a big
//! file finds its window by index instead of scanning every newline before it.

use std::sync::OnceLock;

/// UTF-8 text of one blob, its line count and (built on first need) its line table. Lines
/// end after `\n`; a last line without one still counts, and an empty text has no lines.
#[derive(Debug)]
pub struct Text {
    text: Box<str>,
    lines: u64,
    /// Byte offset where line `i + 1` begins; one entry per line. A read of a whole small
    /// file never needs it (see [`Text::tail_from`]), so it is made on the first lookup.
    starts: OnceLock<Box<[u32]>>,
}

impl Text {
    /// The largest text a line table can describe (offsets are `u32`, which halves the
    /// table against `usize`; a blob this big is not served as text anyway).
    pub const MAX_BYTES: usize = u32::MAX as usize;

    /// Counts the lines of `text`; `None` if it is over [`Text::MAX_BYTES`].
    pub fn new(text: String) -> Option<Self> {
        if text.len() > Self::MAX_BYTES {
            return None;
        }
        let bytes = text.as_bytes();
        let newlines = memchr::memchr_iter(b'\n', bytes).count() as u64;
        let lines = newlines + u64::from(bytes.last().is_some_and(|&b| b != b'\n'));
        Some(Self {
            text: text.into_boxed_str(),
            lines,
            starts: OnceLock::new(),
        })
    }

    /// The text (also what `Text` dereferences to).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Number of lines.
    pub fn line_count(&self) -> u64 {
        self.lines
    }

    /// The byte range of line `n` (1-based) including its `\n`; `None` past the last line.
    pub fn line(&self, n: u64) -> Option<std::ops::Range<usize>> {
        let i = usize::try_from(n.checked_sub(1)?).ok()?;
        let starts = self.starts();
        let begin = *starts.get(i)? as usize;
        let end = starts
            .get(i + 1)
            .map_or(self.text.len(), |&next| next as usize);
        Some(begin..end)
    }

    /// Where line `n` (1-based) begins, and the length from there to the end of the text;
    /// `None` past the last line. Line 1 needs no table.
    pub fn tail_from(&self, n: u64) -> Option<(usize, usize)> {
        let begin = match n {
            0 => return None,
            _ if n > self.lines => return None,
            1 => 0,
            n => self.line(n)?.start,
        };
        Some((begin, self.text.len() - begin))
    }

    fn starts(&self) -> &[u32] {
        self.starts.get_or_init(|| {
            let bytes = self.text.as_bytes();
            let mut starts = Vec::with_capacity(usize::try_from(self.lines).unwrap_or(0));
            if !bytes.is_empty() {
                starts.push(0);
            }
            // Offsets fit in u32: the text is at most u32::MAX bytes long.
            starts.extend(
                memchr::memchr_iter(b'\n', bytes)
                    .map(|i| i + 1)
                    .filter(|&begin| begin < bytes.len())
                    .map(|begin| begin as u32),
            );
            starts.into_boxed_slice()
        })
    }

    /// Bytes the text and its line table take or will take once built (what the blob cache
    /// charges for it up front, so building the table later never overruns the bound).
    pub(crate) fn footprint(&self) -> usize {
        let table = usize::try_from(self.lines).unwrap_or(usize::MAX);
        self.text
            .len()
            .saturating_add(table.saturating_mul(std::mem::size_of::<u32>()))
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Text {}

impl std::ops::Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        *self.text == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<&str> {
        let t = Text::new(text.to_string()).expect("small");
        assert!(t.starts.get().is_none(), "the table is built on first use");
        (1..=t.line_count())
            .map(|n| &text[t.line(n).expect("in range")])
            .collect()
    }

    #[test]
    fn r1_lines_end_after_newline_and_a_last_partial_line_counts() {
        assert_eq!(lines(""), Vec::<&str>::new());
        assert_eq!(lines("a"), ["a"]);
        assert_eq!(lines("a\n"), ["a\n"]);
        assert_eq!(lines("a\nb"), ["a\n", "b"]);
        assert_eq!(lines("\n\n"), ["\n", "\n"]);
        assert_eq!(lines("x\r\ny\n"), ["x\r\n", "y\n"]);
        let t = Text::new("a\nb".into()).expect("small");
        assert_eq!(t.line(0), None);
        assert_eq!(t.line(3), None);
        assert_eq!(t.footprint(), 3 + 2 * 4);
        assert_eq!(
            (t.tail_from(1), t.tail_from(2), t.tail_from(3)),
            (Some((0, 3)), Some((2, 1)), None)
        );
        assert_eq!(Text::new(String::new()).expect("empty").tail_from(1), None);
    }
}
